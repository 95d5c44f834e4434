"""Targets and the run: which endpoint bench measures, with which engine, at every load level of the spec."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference_tiers.ops.bench import aiperf, native
from inference_tiers.ops.bench.metrics import Pricing, Record, level_figures
from inference_tiers.ops.bench.workload import WorkloadSpec
from inference_tiers.ops.checks import Clients
from inference_tiers.ops.smoke import StackError, stack_outputs

# Each level draws its prompts with its own seed (SEED + its index): the same prompts at every level would be
# served from the prefix cache the previous level filled, and later levels would look faster than they are.
SEED = 7


@dataclass(frozen=True)
class Target:
    """One endpoint: an OpenAI-compatible ``url``, a SageMaker ``endpoint`` (and inference ``component``), or a
    Bedrock ``model_id`` (with the tier's ``guardrail`` and application ``role_arn`` when it comes from one)."""

    name: str
    kind: str
    tier: str | None = None
    url: str | None = None
    endpoint: str | None = None
    component: str | None = None
    model_id: str | None = None
    role_arn: str | None = None
    guardrail: dict[str, str] = field(default_factory=dict)
    pricing: Pricing | None = None


def _output(outputs: dict[str, str], stack: str, key: str) -> str:
    if not outputs.get(key):
        raise StackError(f"stack {stack} has no output {key} (has: {', '.join(sorted(outputs)) or 'none'})")
    return outputs[key]


def target_from_stack(clients: Clients, tier: str, stack: str, pricing: Pricing | None) -> Target:
    """The target a deployed tier exposes, from its stack outputs (the ones ``smoke`` uses)."""
    outputs = stack_outputs(clients, stack)
    if tier == "bedrock":
        guardrail = {
            "guardrailIdentifier": _output(outputs, stack, "GuardrailId"),
            "guardrailVersion": _output(outputs, stack, "GuardrailVersion"),
        }
        return Target(
            tier,
            "bedrock",
            tier,
            model_id=_output(outputs, stack, "ModelId"),
            role_arn=_output(outputs, stack, "ApplicationRoleArn"),
            guardrail=guardrail,
            pricing=pricing,
        )
    if tier == "sagemaker":
        endpoint = _output(outputs, stack, "EndpointName")
        component = outputs.get("InferenceComponentName")
        return Target(tier, "sagemaker", tier, endpoint=endpoint, component=component, pricing=pricing)
    if tier == "disaggregated":
        return Target(tier, "openai", tier, url=_output(outputs, stack, "RouterEndpoint"), pricing=pricing)
    if tier == "hyperpod":
        if outputs.get("InvokeUrl"):
            return Target(tier, "openai", tier, url=outputs["InvokeUrl"], pricing=pricing)
        endpoint = _output(outputs, stack, "SageMakerEndpointName")
        return Target(tier, "sagemaker", tier, endpoint=endpoint, pricing=pricing)
    raise StackError(
        f"bench --tier {tier}: this tier serves no model endpoint bench can reach from its outputs; pass the "
        "endpoint explicitly (--url with --api-key for the gateway, from inside its VPC)"
    )


@dataclass(frozen=True)
class Engine:
    """Where the aiperf tool venv and the offline tokenizer are (tools/bench/setup.sh installs both)."""

    aiperf: Path
    tokenizer: Path
    timeout_s: float = 3600.0
    api_key: str | None = None


def _base_url(url: str) -> str:
    # aiperf appends /v1/chat/completions to --url (endpoint type chat).
    return url.rstrip("/").removesuffix("/v1")


def _sender(target: Target, clients: Clients | None, model: str | None) -> native.Send:
    if clients is None:
        raise ValueError(f"target {target.name}: {target.kind} needs AWS credentials and a Region")
    if target.kind == "sagemaker":
        runtime = clients.client("sagemaker-runtime")
        return native.sagemaker_sender(runtime, str(target.endpoint), target.component, model)
    if target.role_arn:
        credentials = clients.client("sts").assume_role(
            RoleArn=target.role_arn, RoleSessionName="inference-tiers-bench"
        )["Credentials"]
        clients = clients.with_credentials(credentials)
    return native.bedrock_sender(clients.client("bedrock-runtime"), str(target.model_id), target.guardrail)


def run_bench(
    target: Target,
    spec: WorkloadSpec,
    *,
    work_dir: Path,
    engine: Engine,
    clients: Clients | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Measure ``target`` at every load level of ``spec``; the target's entry of the results file."""
    model = model or spec.model
    levels = []
    for index, level in enumerate(spec.load.levels):
        records: list[Record]
        if target.kind == "openai":
            if not model:
                raise ValueError(f"target {target.name}: pass --model or set 'model' in the workload spec")
            artifacts = work_dir / "aiperf" / target.name / f"{spec.load.mode}-{level:g}"
            command = aiperf.aiperf_command(
                engine.aiperf,
                _base_url(str(target.url)),
                model,
                spec,
                level,
                tokenizer=engine.tokenizer,
                artifact_dir=artifacts,
                seed=SEED + index,
                api_key=engine.api_key,
            )
            records = aiperf.run_aiperf(command, artifacts, timeout=engine.timeout_s)
        else:
            records = native.run_level(_sender(target, clients, model), spec, level, SEED + index)
        levels.append(level_figures(level, records, spec.slo, target.pricing))
    pricing = None if target.pricing is None else vars(target.pricing)
    return {
        "name": target.name,
        "kind": target.kind,
        "tier": target.tier,
        "engine": "aiperf" if target.kind == "openai" else "inference-tiers (boto3)",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pricing": pricing,
        "levels": levels,
    }
