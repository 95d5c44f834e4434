"""``advise --measured results.json``: decide from measurements instead of the sizing formula.

At the target load (in the spec's load unit: concurrent requests or requests/s) each target is judged at its
smallest measured level at or above that load (never interpolated: a load it was not measured at is not vouched
for). Of the targets that meet every SLO there, the cheapest per 1M *good* tokens wins. Then, walking the
measured levels upwards, the first level where the next tier in the project's order (bedrock, sagemaker,
hyperpod, disaggregated; explicit targets after them, in the order measured) meets the SLOs and either the chosen
target misses them or the next tier is cheaper per good token is the load at which the next tier pays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inference_tiers.config import TIER_ORDER
from inference_tiers.ops.bench.report import check_token_units


def load_results(path: Path) -> dict[str, Any]:
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"--measured {path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"--measured {path}: not JSON ({error.msg}); expected bench's results.json"
        ) from None
    if (
        not isinstance(results, dict)
        or not isinstance(results.get("targets"), list)
        or not results["targets"]
    ):
        raise ValueError(f"--measured {path}: expected bench's results.json with at least one target")
    return results


def _at(target: dict[str, Any], load: float) -> dict[str, Any] | None:
    levels = sorted((f for f in target["levels"] if f["level"] >= load), key=lambda f: f["level"])
    return levels[0] if levels else None


def _order(target: dict[str, Any]) -> int:
    tier = target.get("tier")
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


def _pays(chosen: dict[str, Any], other: dict[str, Any], load: float) -> float | None:
    """The first measured level >= load where ``other`` meets the SLOs and beats ``chosen``."""
    for level in sorted({f["level"] for f in other["levels"] if f["level"] >= load}):
        theirs, ours = _at(other, level), _at(chosen, level)
        if theirs is None or not theirs["meets_slo"]:
            continue
        if ours is None or not ours["meets_slo"]:
            return float(level)
        if (theirs["usd_per_1m_good_tokens"] or float("inf")) < (
            ours["usd_per_1m_good_tokens"] or float("inf")
        ):
            return float(level)
    return None


def advise_measured(results: dict[str, Any], load: float) -> dict[str, Any]:
    """The cheapest target meeting the SLOs at ``load``, every target's standing, and where the next tier pays."""
    check_token_units(results["targets"])
    targets = sorted(results["targets"], key=_order)
    standing = []
    for target in targets:
        figures = _at(target, load)
        standing.append(
            {
                "target": target["name"],
                "tier": target.get("tier"),
                "level": None if figures is None else figures["level"],
                "meets_slo": bool(figures and figures["meets_slo"]),
                "usd_per_1m_good_tokens": None if figures is None else figures["usd_per_1m_good_tokens"],
            }
        )
    fits = [s for s in standing if s["meets_slo"] and s["usd_per_1m_good_tokens"] is not None]
    best = min(fits, key=lambda s: s["usd_per_1m_good_tokens"]) if fits else None
    advice: dict[str, Any] = {
        "load": load,
        "load_mode": results["workload"]["load"]["mode"],
        "slo": results["workload"]["slo"],
        "targets": standing,
        "choice": None if best is None else best["target"],
        "next": None,
        "next_pays_at": None,
    }
    if best is not None:
        index = [t["name"] for t in targets].index(best["target"])
        if index + 1 < len(targets):
            chosen, following = targets[index], targets[index + 1]
            advice["next"] = following["name"]
            advice["next_pays_at"] = _pays(chosen, following, load)
    return advice


def render_measured(advice: dict[str, Any]) -> str:
    unit = "concurrent requests" if advice["load_mode"] == "concurrency" else "requests/s"
    lines = [f"target load: {advice['load']:g} {unit}; SLO: {advice['slo']}"]
    for s in advice["targets"]:
        if s["level"] is None:
            lines.append(f"  {s['target']}: not measured at or above this load")
        else:
            cost = s["usd_per_1m_good_tokens"]
            cost_text = "no good tokens" if cost is None else f"${cost:,.2f}/1M good tokens"
            verdict = "meets the SLOs" if s["meets_slo"] else "misses the SLOs"
            lines.append(f"  {s['target']} (measured at {s['level']:g}): {verdict}, {cost_text}")
    if advice["choice"] is None:
        lines.append("choice: none of the measured targets meets the SLOs at this load")
        return "\n".join(lines)
    lines.append(f"choice: {advice['choice']} (cheapest per good token among those meeting the SLOs)")
    if advice["next"] is not None:
        pays = advice["next_pays_at"]
        lines.append(
            f"next: {advice['next']} pays from {pays:g} {unit}"
            if pays is not None
            else f"next: {advice['next']} does not pay at any measured load"
        )
    return "\n".join(lines)
