"""Output for the ``inference-tiers`` command: aligned text tables for people, ``--json`` for scripts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from inference_tiers.config import AccountRequirements
from inference_tiers.ops.advise import Advice
from inference_tiers.ops.checks import CheckResult
from inference_tiers.ops.kv_cache import GIB

KIB = 1024
MIB = 1024 * KIB


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts, including the properties that carry derived figures."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in dir(type(value)):
            if isinstance(getattr(type(value), name, None), property):
                data[name] = to_jsonable(getattr(value, name))
        return data
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def dumps(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, sort_keys=False)


def _size(num_bytes: float) -> str:
    if num_bytes >= GIB:
        return f"{num_bytes / GIB:.2f} GiB"
    if num_bytes >= MIB:
        return f"{num_bytes / MIB:.0f} MiB"
    return f"{num_bytes / KIB:.0f} KiB"


def render_advice(advice: Advice) -> str:
    lines = [f"Recommended tier: {advice.tier}", ""]
    lines += [f"  - {reason}" for reason in advice.reasons]
    lines.append("")
    if advice.next_tier:
        lines.append(f"Next tier: {advice.next_tier}, {advice.next_when}.")
    else:
        lines.append(f"Next tier: none, {advice.next_when}.")
    rows: list[list[str]] = []
    if advice.sizing:
        s = advice.sizing
        rows += [
            ["KV cache per token", f"{_size(s.bytes_per_token)} ({s.kv_dtype})"],
            [f"KV cache per request ({s.context_tokens} tokens)", _size(s.bytes_per_request)],
            [f"KV per request per GPU (TP{s.tp})", _size(s.bytes_per_request_per_gpu)],
            ["weights per GPU", _size(s.weights_bytes_per_gpu)],
            ["KV budget per GPU (90% of memory - weights)", _size(s.kv_budget_bytes_per_gpu)],
            [
                f"full-context requests the KV budget holds per {s.instance_type}",
                str(s.concurrent_requests_per_instance),
            ],
        ]
    if advice.disaggregation:
        d = advice.disaggregation
        rows += [
            [
                f"KV transfer ({d.context_tokens}-token prompt)",
                f"{d.transfer_seconds * 1000:.1f} ms at {d.bandwidth.bytes_per_s / 1e9:.1f} GB/s ({d.bandwidth.basis})",
            ],
            ["estimated prefill", f"{d.prefill_seconds * 1000:.0f} ms"],
            ["disaggregation pays", "yes" if d.pays else "no"],
        ]
    if advice.requests_per_second is not None:
        rows.append(["request rate at this concurrency", f"{advice.requests_per_second:.2f}/s"])
    if advice.deployment:
        dep = advice.deployment
        cost = f"${dep.hourly_usd:,.2f}/h" if dep.hourly_usd is not None else "unknown"
        roles = f" ({dep.prefill_instances} prefill)" if dep.prefill_instances else ""
        rows.append(["deployment", f"{dep.instances} x {dep.instance_type}{roles}"])
        if dep.min_instances == 0:
            rows.append(["idle", "scales to zero: no instance cost between bursts"])
        rows.append(
            [
                "hourly cost" + (" while serving" if dep.min_instances == 0 else ""),
                f"{cost} ({dep.price_basis})",
            ]
        )
    if rows:
        lines += ["", table(["figure", "value"], rows)]
    if advice.hyperpod_features:
        features = [
            [f.name, "on" if f.enabled else "off", f.setting, f.why] for f in advice.hyperpod_features
        ]
        lines += ["", table(["HyperPod operator feature", "advice", "setting", "why"], features)]
    lines += [f"Note: {note}" for note in advice.notes]
    return "\n".join(lines)


def describe_requirements(req: AccountRequirements) -> str:
    parts = [f"{n.count} x {n.instance_type} ({n.service})" for n in req.instances]
    parts += [
        f"{label} {value}"
        for label, value in (
            ("Bedrock model", req.bedrock_model_id),
            ("inference profile", req.bedrock_inference_profile_id),
            ("Kubernetes", req.kubernetes_version),
        )
        if value
    ]
    if req.eks_addons:
        parts.append(f"{len(req.eks_addons)} pinned EKS add-ons")
    if req.images:
        parts.append(f"{len(req.images)} container image{'s' if len(req.images) > 1 else ''}")
    parts += [f"reservation {rid}" for rid in req.capacity_reservation_ids]
    parts += [f"AZ {az}" for az in req.availability_zone_ids]
    return ", ".join(parts) or "nothing account-specific"


def render_checks(results: Sequence[CheckResult], *, latency: bool = False) -> str:
    headers = ["status", "check", "detail", "fix"]
    if latency:
        headers = ["status", "step", "ttft ms", "total ms", "detail", "fix"]
    rows = []
    for r in results:
        row = [r.status.upper(), r.check]
        if latency:
            row += [
                "-" if r.ttft_ms is None else f"{r.ttft_ms:.0f}",
                "-" if r.total_ms is None else f"{r.total_ms:.0f}",
            ]
        rows.append([*row, r.detail, r.fix])
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "warn", "fail")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    return table(headers, rows) + f"\n\n{summary}"
