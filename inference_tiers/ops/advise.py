"""``inference-tiers advise``: recommend a tier from the decision path the library encodes (offline).

The path (docs/inference-tiers-command.md, "advise"): foundation models -> ``bedrock``. Own, fine-tuned or open
weights -> ``sagemaker`` (scaled to zero when traffic is intermittent), unless the model does not fit one node
(``disaggregated``), the team already runs EKS with steady traffic (``hyperpod``, with the operator's routing, KV
tiers and prefill/decode where they pay), or prompts are long enough and the network fast enough that
prefill/decode disaggregation pays (``disaggregated``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from inference_tiers.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType, find_gpu_instance_type
from inference_tiers.ops import disaggregation
from inference_tiers.ops.hyperpod_features import HyperPodFeature, hyperpod_features
from inference_tiers.ops.kv_cache import KvSizing, check_tp, size_kv
from inference_tiers.ops.models import ModelArchitecture
from inference_tiers.ops.pricing import PriceTable

ModelSource = Literal["foundation", "own", "open"]
Traffic = Literal["steady", "spiky", "intermittent"]
Shape = Literal["chat", "rag", "reasoning", "agentic"]
MODEL_SOURCES = ("foundation", "own", "open")
TRAFFIC_SHAPES = ("steady", "spiky", "intermittent")
SHAPES = ("chat", "rag", "reasoning", "agentic")

# The disaggregated tier's node groups: p5, p5e, p5en (32 or 16 EFA interfaces per node).
DISAGGREGATED_FAMILY = "p5"
# An interactive inter-token latency target: 50 ms is 20 tokens/s per stream, faster than people read.
DEFAULT_ITL_SECONDS = 0.05
# Prefill nodes are sized to run at most this busy, leaving headroom for bursts (queueing grows sharply above it).
PREFILL_TARGET_UTILIZATION = 0.8

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
    shape: Shape = "chat"
    prefix_reuse: float = 0.0
    """Share of each prompt already in a KV cache: a shared document (rag) or the earlier turns (agentic)."""
    itl_seconds: float = DEFAULT_ITL_SECONDS
    """Time per output token each stream is served at; with the prefill it sets how long a request lasts."""

    def __post_init__(self) -> None:
        if not 0 <= self.prefix_reuse < 1:
            raise ValueError(f"--prefix-reuse {self.prefix_reuse}: expected a share in [0, 1)")

    @property
    def context_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def prefill_tokens(self) -> int:
        """The prompt tokens a replica computes: those not already cached."""
        return max(1, math.ceil(self.input_tokens * (1 - self.prefix_reuse)))

    def requests_per_second(self, prefill_seconds: float) -> float:
        """Little's law: ``concurrency`` streams, each lasting its prefill plus one ITL per output token."""
        return self.concurrency / (prefill_seconds + self.output_tokens * self.itl_seconds)


@dataclass(frozen=True)
class Deployment:
    instance_type: str
    instances: int
    hourly_usd: float | None
    price_basis: str
    min_instances: int
    """0: the endpoint scales to zero between bursts; the hourly figure is then the cost while serving."""
    prefill_instances: int = 0
    """Of ``instances``, how many run prefill (disaggregated); the rest hold the KV caches and decode."""


@dataclass(frozen=True)
class Candidate:
    """One way to serve the concurrency: an instance type at a tensor-parallel degree, and how many."""

    instance: GpuInstanceType
    sizing: KvSizing
    instances: int
    hourly_usd: float


@dataclass(frozen=True)
class Advice:
    tier: str
    reasons: list[str]
    next_tier: str | None
    next_when: str
    sizing: KvSizing | None = None
    disaggregation: disaggregation.DisaggregationCheck | None = None
    deployment: Deployment | None = None
    requests_per_second: float | None = None
    hyperpod_features: list[HyperPodFeature] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def tp_degrees(model: ModelArchitecture, instance: GpuInstanceType) -> list[int]:
    """The tensor-parallel degrees vLLM accepts for ``model`` on ``instance``: divisors of its GPU count that
    also divide the attention heads."""
    return [
        t for t in range(1, instance.gpus + 1) if instance.gpus % t == 0 and model.attention_heads % t == 0
    ]


def choose_instance(
    model: ModelArchitecture,
    *,
    kv_dtype: str,
    weight_dtype: str,
    context_tokens: int,
    concurrency: int,
    prices: PriceTable,
    tp: int | None = None,
) -> Candidate | None:
    """The cheapest way in the price table to hold ``concurrency`` full-context requests: every instance type
    and tensor-parallel degree where the weights and one request fit, ranked by the hourly cost of as many
    instances as the concurrency needs (not by the price of one instance)."""
    candidates = []
    for instance in GPU_INSTANCE_TYPES.values():
        price = prices.hourly(instance.name)
        if price is None:
            continue
        degrees = [tp] if tp is not None else tp_degrees(model, instance)
        for degree in degrees:
            if degree > instance.gpus:
                continue
            sizing = size_kv(
                model,
                kv_dtype=kv_dtype,
                weight_dtype=weight_dtype,
                context_tokens=context_tokens,
                instance=instance,
                tp=degree,
            )
            if sizing.fits:
                count = math.ceil(concurrency / sizing.concurrent_requests_per_instance)
                candidates.append(Candidate(instance, sizing, count, count * price[0]))
    return min(candidates, key=lambda c: (c.hourly_usd, c.instances, c.instance.name), default=None)


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
    if model.max_context and workload.context_tokens > model.max_context:
        # vLLM refuses a --max-model-len above the model's max_position_embeddings (_get_and_verify_max_len).
        raise ValueError(
            f"--input-tokens {workload.input_tokens} + --output-tokens {workload.output_tokens} = "
            f"{workload.context_tokens} tokens: {model.name} has {model.max_context} positions; expected at most "
            f"{model.max_context} in all"
        )
    if tp is not None:
        check_tp(model, tp)

    if instance_type:
        instance = find_gpu_instance_type(instance_type)
        if instance is None:
            raise ValueError(
                f"--instance-type {instance_type!r}: expected one of {', '.join(GPU_INSTANCE_TYPES)}"
            )
        tp = tp or max(tp_degrees(model, instance))
    else:
        best = choose_instance(
            model,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            context_tokens=workload.context_tokens,
            concurrency=workload.concurrency,
            prices=prices,
            tp=tp,
        )
        if best is None:
            # Nothing in the table holds the weights plus one request: multi-node serving on whole EFA nodes.
            tier = "disaggregated"
            next_tier, next_when = NEXT_TIER[tier]
            return Advice(
                tier,
                [
                    f"{model.name} ({model.params_b:g}B parameters, {weight_dtype}) plus one "
                    f"{workload.context_tokens}-token request does not fit any single instance type in the table",
                    "it needs whole nodes joined over EFA (multi-node tensor/pipeline parallelism), which only "
                    "the EKS + EFA node-group tier deploys",
                ],
                next_tier,
                next_when,
                notes=["try --weight-dtype fp8 or --kv-dtype fp8 to fit one node"],
            )
        instance, tp = best.instance, best.sizing.tp

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
        context_tokens=workload.prefill_tokens,
        instance=instance,
        tp=sizing.tp,
        network=network,
        mfu=mfu,
    )
    rate = workload.requests_per_second(check.prefill_seconds)
    reasons: list[str] = [f"own or open weights ({workload.model_source}): you choose the container and GPUs"]
    notes: list[str] = []
    features: list[HyperPodFeature] = []
    if workload.prefix_reuse:
        reasons.append(
            f"{workload.prefix_reuse:.0%} of each prompt is reused from a cache: {workload.prefill_tokens} of "
            f"{workload.input_tokens} tokens are prefilled"
        )
    if not sizing.fits:
        tier = "disaggregated"
        reasons.append(
            f"{model.name} plus one {workload.context_tokens}-token request does not fit "
            f"{instance.name} at TP{sizing.tp}: it needs more than one node"
        )
    elif workload.traffic == "intermittent":
        tier = "sagemaker"
        reasons.append(
            "intermittent traffic: a SageMaker endpoint whose inference components scale to zero between "
            "bursts, so idle hours cost nothing (the EKS tiers keep nodes running)"
        )
        if check.pays:
            notes.append(
                f"at sustained load disaggregation would pay ({check.reason}); it runs whole p5 nodes around "
                "the clock, which intermittent traffic does not repay"
            )
    elif workload.runs_eks and workload.traffic == "steady":
        tier = "hyperpod"
        features = hyperpod_features(workload, model, instance, check, rate)
        pd = features[-1]
        reasons.append(
            f"your team runs EKS and traffic is steady ({workload.concurrency} concurrent requests): "
            "HyperPod keeps a warm, resilient node pool with KEDA autoscaling"
        )
        if pd.enabled:
            reasons.append(f"the operator's own prefill/decode (pdSpec) pays: {pd.why}")
        elif check.pays:
            tier, features = "disaggregated", []
            reasons.append(
                f"{workload.prefill_tokens}-token prefills: disaggregation pays ({check.reason}), but HyperPod's "
                f"pdSpec does not fit ({pd.why}): the EKS + EFA tier with Mooncake does"
            )
        else:
            reasons.append(f"disaggregation does not pay yet: {check.reason}")
    elif check.pays:
        tier = "disaggregated"
        reasons.append(f"{workload.prefill_tokens}-token prefills: disaggregation pays, {check.reason}")
    else:
        tier = "sagemaker"
        reasons.append("a managed endpoint: no Kubernetes to run")
        if workload.traffic == "steady" and not workload.runs_eks:
            reasons.append("steady traffic would suit HyperPod, but your team does not run EKS")
        reasons.append(f"disaggregation does not pay: {check.reason}")

    per_instance = sizing.concurrent_requests_per_instance
    instances = math.ceil(workload.concurrency / per_instance) if per_instance else 1
    prefill_instances = 0
    if tier == "disaggregated" or (features and features[-1].enabled):
        prefill_instances = prefill_nodes(check.prefill_seconds, rate, sizing.replicas_per_instance)
        reasons.append(
            f"{rate:.2f} requests/s (Little's law at {workload.itl_seconds * 1000:g} ms per output token) of "
            f"{check.prefill_seconds:.3g} s prefills keep {prefill_instances} prefill node(s) at most "
            f"{PREFILL_TARGET_UTILIZATION:.0%} busy"
        )
        instances += prefill_instances
    if tier == "disaggregated" and not instance.name.startswith(DISAGGREGATED_FAMILY):
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
        min_instances=0 if tier == "sagemaker" and workload.traffic == "intermittent" else instances,
        prefill_instances=prefill_instances,
    )
    reasons.append(
        f"the KV budget of one {instance.name} (TP{sizing.tp}) holds {per_instance} concurrent "
        f"{workload.context_tokens}-token requests: {instances - prefill_instances} instance(s) for "
        f"{workload.concurrency}"
    )
    next_tier, next_when = NEXT_TIER[tier]
    return Advice(tier, reasons, next_tier, next_when, sizing, check, deployment, rate, features, notes)


def prefill_nodes(prefill_seconds: float, requests_per_second: float, replicas_per_node: int) -> int:
    """Prefill nodes for ``requests_per_second`` prompts of ``prefill_seconds`` each, ``replicas_per_node``
    prefill replicas per node, each node at most PREFILL_TARGET_UTILIZATION busy."""
    busy = requests_per_second * prefill_seconds / replicas_per_node
    return max(1, math.ceil(busy / PREFILL_TARGET_UTILIZATION))
