"""Which of the HyperPod Inference Operator's own features pay for a workload: intelligent routing, the L1/L2
KV cache tiers and prefill/decode (``pdSpec``).

Sources (../shared/reference/field-scan-2026-12.md §1):
- Routing strategies and KV tiers: AWS, "Intelligent routing and KV caching",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html
  (prefixaware sends a shared prefix to one instance; session keeps a user session on one instance; L1 offloads
  KV to CPU memory and is on by default; L2 is tieredstorage or redis). AWS reports up to 40% lower TTFT for long
  prompts and multi-turn chat, without a methodology, so the thresholds below are this library's rules of thumb.
- Prefill/decode: AWS, "Disaggregated prefill/decode",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html: it helps only with
  dense models of 70B parameters or more, prompts of at least 4,000 tokens, at least 2 requests/s sustained and
  at least 256 output tokens, on p5, p5e, p5en, p6-b200 and p6-b300.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from inference_tiers.instance_types import GpuInstanceType
from inference_tiers.ops.disaggregation import DisaggregationCheck
from inference_tiers.ops.models import ModelArchitecture

if TYPE_CHECKING:
    from inference_tiers.ops.advise import Workload

PD_INSTANCE_FAMILIES = ("p5", "p5e", "p5en", "p6-b200", "p6-b300")
PD_MIN_PARAMS_B = 70
PD_MIN_INPUT_TOKENS = 4000
PD_MIN_REQUESTS_PER_SECOND = 2
PD_MIN_OUTPUT_TOKENS = 256
# Past half of each prompt reused, keeping prefixes after their request ends (L2) saves most of the prefill.
L2_MIN_PREFIX_REUSE = 0.5


@dataclass(frozen=True)
class HyperPodFeature:
    name: str
    enabled: bool
    setting: str
    """What to set on the InferenceEndpointConfig (docs/hyperpod.md names the tier's settings for it)."""
    why: str


def _routing(workload: Workload) -> HyperPodFeature:
    if workload.shape == "agentic":
        return HyperPodFeature(
            "intelligent routing",
            True,
            "intelligentRoutingSpec.routingStrategy: session",
            "each agent session's turns append to its own history: keeping the session on one replica finds its "
            "prefix in that replica's cache (creation-only: a change deploys a new endpoint)",
        )
    if workload.shape == "rag" or workload.prefix_reuse:
        return HyperPodFeature(
            "intelligent routing",
            True,
            "intelligentRoutingSpec.routingStrategy: prefixaware",
            "prompts share prefixes (a document, a system prompt): sending a prefix to the replica that "
            "computed it skips its prefill (creation-only: a change deploys a new endpoint)",
        )
    return HyperPodFeature(
        "intelligent routing",
        False,
        "intelligentRoutingSpec: off",
        "no reused prefixes: routing on the KV cache has nothing to find",
    )


def _kv_tiers(workload: Workload) -> list[HyperPodFeature]:
    reuse = workload.prefix_reuse or (1.0 if workload.shape in ("rag", "agentic") else 0.0)
    l1 = HyperPodFeature(
        "L1 KV cache (CPU offload)",
        bool(reuse),
        "kvCacheSpec.enableL1Cache: true (the operator's default)"
        if reuse
        else "kvCacheSpec.enableL1Cache: false",
        "prefixes evicted from GPU memory are reloaded from host memory instead of recomputed"
        if reuse
        else "nothing is reused: the operator's default (on) costs host memory only",
    )
    l2_pays = workload.shape == "agentic" or reuse >= L2_MIN_PREFIX_REUSE
    l2 = HyperPodFeature(
        "L2 KV cache",
        l2_pays,
        "kvCacheSpec.enableL2Cache: true, l2CacheSpec.l2CacheBackend: tieredstorage"
        if l2_pays
        else "kvCacheSpec.enableL2Cache: false",
        "reused prefixes outlive their requests (sessions pause between turns, documents recur): a cluster-wide "
        "tier keeps them for every replica"
        if l2_pays
        else f"less than {L2_MIN_PREFIX_REUSE:.0%} of each prompt is reused",
    )
    return [l1, l2]


def _prefill_decode(
    workload: Workload, model: ModelArchitecture, instance: GpuInstanceType, rate: float
) -> HyperPodFeature:
    family = instance.name.split(".")[0]
    criteria = [
        (
            model.active_params_b == model.params_b,
            f"{model.name} is dense"
            if model.active_params_b == model.params_b
            else f"{model.name} is a mixture of experts, not dense",
        ),
        (model.params_b >= PD_MIN_PARAMS_B, f"{model.params_b:g}B parameters (at least {PD_MIN_PARAMS_B}B)"),
        (
            workload.prefill_tokens >= PD_MIN_INPUT_TOKENS,
            f"{workload.prefill_tokens} prefilled tokens (at least {PD_MIN_INPUT_TOKENS})",
        ),
        (
            rate >= PD_MIN_REQUESTS_PER_SECOND,
            f"{rate:.2f} requests/s (at least {PD_MIN_REQUESTS_PER_SECOND})",
        ),
        (
            workload.output_tokens >= PD_MIN_OUTPUT_TOKENS,
            f"{workload.output_tokens} output tokens (at least {PD_MIN_OUTPUT_TOKENS})",
        ),
        (family in PD_INSTANCE_FAMILIES, f"{instance.name} ({', '.join(PD_INSTANCE_FAMILIES)} supported)"),
    ]
    met = all(ok for ok, _ in criteria)
    failed = [text for ok, text in criteria if not ok]
    return HyperPodFeature(
        "prefill/decode",
        met,
        "pdSpec (prefill and decode roles, EFA)" if met else "pdSpec: off",
        "; ".join(text for _, text in criteria) if met else "AWS's guidance is not met: " + "; ".join(failed),
    )


def hyperpod_features(
    workload: Workload,
    model: ModelArchitecture,
    instance: GpuInstanceType,
    check: DisaggregationCheck,
    rate: float,
) -> list[HyperPodFeature]:
    """The operator features for ``workload``: routing, L1, L2, and prefill/decode when AWS's guidance holds
    and moving the KV cache is cheap against the prefill (``check``)."""
    pd = _prefill_decode(workload, model, instance, rate)
    if pd.enabled and not check.pays:
        pd = HyperPodFeature(
            "prefill/decode", False, "pdSpec: off", f"AWS's guidance holds, but {check.reason}"
        )
    return [_routing(workload), *_kv_tiers(workload), pd]
