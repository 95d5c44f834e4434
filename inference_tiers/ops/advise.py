"""``inference-tiers advise``: recommend a tier from the decision path the library encodes (offline).

The path (docs/inference-tiers-command.md, "advise"): foundation models -> ``bedrock``. Own, fine-tuned or open
weights -> ``sagemaker``, unless the team already runs EKS with steady traffic (``hyperpod``), or prompts are long
enough and the network fast enough that prefill/decode disaggregation pays, or the model does not fit one node
(``disaggregated``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from inference_tiers.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType, find_gpu_instance_type
from inference_tiers.ops import disaggregation
from inference_tiers.ops.kv_cache import KvSizing, size_kv
from inference_tiers.ops.models import ModelArchitecture
from inference_tiers.ops.pricing import PriceTable

ModelSource = Literal["foundation", "own", "open"]
Traffic = Literal["steady", "spiky", "intermittent"]
MODEL_SOURCES = ("foundation", "own", "open")
TRAFFIC_SHAPES = ("steady", "spiky", "intermittent")

# The disaggregated tier's node groups: p5, p5e, p5en (32 or 16 EFA interfaces per node).
DISAGGREGATED_FAMILY = "p5"

NEXT_TIER: dict[str, tuple[str | None, str]] = {
    "bedrock": (
        "sagemaker",
        "when you need your own or fine-tuned weights, or an open model Bedrock does not host",
    ),
    "sagemaker": ("hyperpod", "when traffic is steady and high and your platform team runs EKS"),
    "hyperpod": ("disaggregated", "when prompts grow long enough that prefill/decode disaggregation pays"),
    "disaggregated": (None, "this is the top tier: grow by adding prefill or decode nodes"),
}


@dataclass(frozen=True)
class Workload:
    model_source: ModelSource
    runs_eks: bool
    concurrency: int
    traffic: Traffic
    input_tokens: int
    output_tokens: int

    @property
    def context_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Deployment:
    instance_type: str
    instances: int
    hourly_usd: float | None
    price_basis: str


@dataclass(frozen=True)
class Advice:
    tier: str
    reasons: list[str]
    next_tier: str | None
    next_when: str
    sizing: KvSizing | None = None
    disaggregation: disaggregation.DisaggregationCheck | None = None
    deployment: Deployment | None = None
    notes: list[str] = field(default_factory=list)


def choose_instance(
    model: ModelArchitecture,
    *,
    kv_dtype: str,
    weight_dtype: str,
    context_tokens: int,
    prices: PriceTable,
    tp: int | None = None,
) -> GpuInstanceType | None:
    """The cheapest known instance type (by the price table) where the weights and one full request fit, at
    tensor-parallel degree ``tp`` (default: every GPU of each type; types with fewer GPUs than ``tp`` skipped)."""
    candidates = []
    for instance in GPU_INSTANCE_TYPES.values():
        if tp is not None and tp > instance.gpus:
            continue
        price = prices.hourly(instance.name)
        sizing = size_kv(
            model,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            context_tokens=context_tokens,
            instance=instance,
            tp=tp,
        )
        if price is not None and sizing.fits:
            candidates.append((price[0], instance.name, instance))
    return min(candidates)[2] if candidates else None


def advise(
    workload: Workload,
    model: ModelArchitecture | None,
    *,
    prices: PriceTable,
    instance_type: str | None = None,
    tp: int | None = None,
    kv_dtype: str = "bf16",
    weight_dtype: str = "bf16",
    network: disaggregation.Network = "auto",
    mfu: float = disaggregation.DEFAULT_MFU,
) -> Advice:
    if workload.model_source == "foundation":
        tier = "bedrock"
        next_tier, next_when = NEXT_TIER[tier]
        return Advice(
            tier,
            [
                "a foundation model Bedrock hosts: no GPUs, containers or scaling to operate",
                "the guardrail is enforced in IAM and invocations are logged and tagged per application",
                "billed per token, so there is no hourly instance cost to estimate here",
            ],
            next_tier,
            next_when,
        )
    if model is None:
        raise ValueError("--model or --hf-config: own or open models need an architecture to size")

    notes: list[str] = []
    if model.max_context and workload.context_tokens > model.max_context:
        notes.append(
            f"{workload.context_tokens} tokens exceed {model.name}'s {model.max_context}-token context"
        )
    if instance_type:
        instance = find_gpu_instance_type(instance_type)
        if instance is None:
            raise ValueError(
                f"--instance-type {instance_type!r}: expected one of {', '.join(GPU_INSTANCE_TYPES)}"
            )
    else:
        instance = choose_instance(
            model,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            context_tokens=workload.context_tokens,
            prices=prices,
            tp=tp,
        )
    if instance is None:
        # Nothing in the table holds the weights plus one request: multi-node serving on whole EFA nodes.
        tier = "disaggregated"
        next_tier, next_when = NEXT_TIER[tier]
        return Advice(
            tier,
            [
                f"{model.name} ({model.params_b:g}B parameters, {weight_dtype}) plus one {workload.context_tokens}-token "
                "request does not fit any single instance type in the table",
                "it needs whole nodes joined over EFA (multi-node tensor/pipeline parallelism), which only the "
                "EKS + EFA node-group tier deploys",
            ],
            next_tier,
            next_when,
            notes=notes + ["try --weight-dtype fp8 or --kv-dtype fp8 to fit one node"],
        )

    sizing = size_kv(
        model,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        context_tokens=workload.context_tokens,
        instance=instance,
        tp=tp,
    )
    check = disaggregation.check(
        model,
        kv_dtype=kv_dtype,
        context_tokens=workload.input_tokens,
        instance=instance,
        tp=sizing.tp,
        network=network,
        mfu=mfu,
    )
    reasons: list[str] = [f"own or open weights ({workload.model_source}): you choose the container and GPUs"]
    if not sizing.fits:
        tier = "disaggregated"
        reasons.append(
            f"{model.name} plus one {workload.context_tokens}-token request does not fit "
            f"{instance.name} at TP{sizing.tp}: it needs more than one node"
        )
    elif check.pays:
        tier = "disaggregated"
        reasons.append(f"{workload.input_tokens}-token prompts: disaggregation pays, {check.reason}")
    elif workload.runs_eks and workload.traffic == "steady":
        tier = "hyperpod"
        reasons.append(
            f"your team runs EKS and traffic is steady ({workload.concurrency} concurrent requests): "
            "HyperPod keeps a warm, resilient node pool with KEDA autoscaling"
        )
        reasons.append(f"disaggregation does not pay yet: {check.reason}")
    else:
        tier = "sagemaker"
        reasons.append(
            "a managed endpoint: no Kubernetes to run"
            + (", scales to zero between bursts" if workload.traffic == "intermittent" else "")
        )
        if workload.traffic == "steady" and not workload.runs_eks:
            reasons.append("steady traffic would suit HyperPod, but your team does not run EKS")
        reasons.append(f"disaggregation does not pay: {check.reason}")

    per_instance = sizing.concurrent_requests_per_instance
    instances = math.ceil(workload.concurrency / per_instance) if per_instance else 1
    if tier == "disaggregated":
        instances += 1  # at least one prefill node next to the decode nodes that hold the KV caches
        if not instance.name.startswith(DISAGGREGATED_FAMILY):
            notes.append(
                f"the disaggregated tier deploys p5-family nodes with every EFA interface; these figures are for "
                f"{instance.name}: rerun with --instance-type p5.48xlarge to size the tier as deployed"
            )
    # SageMaker endpoints and HyperPod clusters run ml.* instances; the disaggregated tier runs EC2 nodes.
    name = f"ml.{instance.name}" if tier in ("sagemaker", "hyperpod") else instance.name
    price = prices.hourly(name)
    deployment = Deployment(
        instance_type=name,
        instances=instances,
        hourly_usd=round(price[0] * instances, 2) if price else None,
        price_basis=price[1] if price else f"no price for {name} in the table (pass --prices FILE)",
    )
    reasons.append(
        f"the KV budget of one {instance.name} (TP{sizing.tp}) holds {per_instance} concurrent "
        f"{workload.context_tokens}-token requests: {instances} instance(s) for {workload.concurrency}"
    )
    next_tier, next_when = NEXT_TIER[tier]
    return Advice(tier, reasons, next_tier, next_when, sizing, check, deployment, notes)
