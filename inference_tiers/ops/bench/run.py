"""Targets and the run: which endpoint bench measures, with which engine, at every load level of the spec."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.config import Config

from inference_tiers.ops.bench import aiperf, native
from inference_tiers.ops.bench.metrics import TOKENIZER, Pricing, Record, level_figures
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

    @property
    def python(self) -> Path:
        """The tool venv's python (next to aiperf), which has the ``tokenizers`` package aiperf depends on."""
        return self.aiperf.parent / "python"

    def unit(self, unit: str) -> str:
        """A record unit as a target's results name it: the tokenizer is named, so two are not confused."""
        return f"tokenizer {self.tokenizer.name}" if unit == TOKENIZER else f"server {unit}"


def _base_url(url: str) -> str:
    # aiperf appends /v1/chat/completions to --url (endpoint type chat).
    return url.rstrip("/").removesuffix("/v1")


# No retries inside a measurement: a throttle or a 5xx retried by botocore would read as latency, not as an error
# (botocore 1.44.8 botocore/config.py: ``total_max_attempts`` counts the first attempt, 1 = never retried; its
# ``max_attempts`` counts retries only).
MEASURE_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1})


def _sender(target: Target, clients: Clients | None, model: str | None) -> native.Send:
    if clients is None:
        raise ValueError(f"target {target.name}: {target.kind} needs AWS credentials and a Region")
    if target.kind == "sagemaker":
        runtime = clients.client("sagemaker-runtime", config=MEASURE_CONFIG)
        return native.sagemaker_sender(runtime, str(target.endpoint), target.component, model)
    if target.role_arn:
        credentials = clients.client("sts").assume_role(
            RoleArn=target.role_arn, RoleSessionName="inference-tiers-bench"
        )["Credentials"]
        clients = clients.with_credentials(credentials)
    runtime = clients.client("bedrock-runtime", config=MEASURE_CONFIG)
    return native.bedrock_sender(runtime, str(target.model_id), target.guardrail)


@dataclass(frozen=True)
class _AiperfRun:
    target: Target
    spec: WorkloadSpec
    level: float
    model: str
    engine: Engine
    artifacts: Path
    seed: int

    def records(self, server_tokens: bool) -> list[Record]:
        command = aiperf.aiperf_command(
            self.engine.aiperf,
            _base_url(str(self.target.url)),
            self.model,
            self.spec,
            self.level,
            tokenizer=self.engine.tokenizer,
            artifact_dir=self.artifacts,
            seed=self.seed,
            api_key=self.engine.api_key,
            server_tokens=server_tokens,
        )
        return aiperf.run_aiperf(command, self.artifacts, timeout=self.engine.timeout_s)


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
    server_tokens = True
    for index, level in enumerate(spec.load.levels):
        records: list[Record]
        if target.kind == "openai":
            if not model:
                raise ValueError(f"target {target.name}: pass --model or set 'model' in the workload spec")
            artifacts = work_dir / "aiperf" / target.name / f"{spec.load.mode}-{level:g}"
            aiperf_run = _AiperfRun(target, spec, level, model, engine, artifacts, SEED + index)
            records = aiperf_run.records(server_tokens)
            if not aiperf.counted(records):
                # The server reports no usage: this level again, and the next ones, counted by the tokenizer.
                server_tokens = False
                records = aiperf_run.records(server_tokens)
        else:
            count = native.tokenizer_count(engine.python, engine.tokenizer)
            records = native.run_level(_sender(target, clients, model), spec, level, SEED + index, count)
        levels.append(level_figures(level, records, spec.slo, target.pricing))
    pricing = None if target.pricing is None else vars(target.pricing)
    units = {
        engine.unit(u)
        for figures in levels
        if figures["token_unit"]
        for u in figures["token_unit"].split("+")
    }
    return {
        "name": target.name,
        "kind": target.kind,
        "tier": target.tier,
        "engine": "aiperf" if target.kind == "openai" else "inference-tiers (boto3)",
        # One unit per target; a mix (a server reporting usage for some requests only) is never ranked.
        "token_unit": " + ".join(sorted(units)) or None,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pricing": pricing,
        "levels": levels,
    }
