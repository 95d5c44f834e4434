"""Does prefill/decode disaggregation pay? KV transfer time against prefill time, for one prompt.

Disaggregation moves each prompt's KV cache from a prefill node to a decode node. It pays when

1. the transfer is a small share of the prefill it follows (at most ``max_transfer_share``, 10% by default), so
   time to first token barely grows; Mooncake measured 4.2% of TTFT at 32K over RoCE with vLLM, and
2. prefill is long enough (``min_prefill_seconds``, 0.5 s by default) that running it next to decode would
   stall the decode streams on that GPU for many token intervals; short prompts lose more to the extra hop and
   the second pool than they gain.

Both thresholds are this library's rule of thumb, not measurements; pass your own to ``check``.

Bandwidth: the measured Mooncake Transfer Engine figure over EFA is the practical ceiling (p5.48xlarge GPU to
GPU 388.9 GB/s, p5en.48xlarge 365.7 GB/s; other EFA instances: their line rate scaled by p5's measured
388.9/400 efficiency) and TCP is the floor (9.5 GB/s, Mooncake's iperf3 baseline with 8 streams, PR #1509, or
the instance's line rate when lower). EFA figures: Mooncake docs/source/design/transfer-engine/efa_transport.md.

Prefill FLOPs: ``2 x active parameters x tokens`` for the linear layers plus ``2 x layers x tokens^2 x
attention width`` for causal attention (QK^T and AV, halved by the causal mask); time at ``mfu`` of the
replica's peak dense BF16 throughput (40% by default; 30-50% is typical for long prefills).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from inference_tiers.instance_types import GpuInstanceType
from inference_tiers.ops.gpus import peak_bf16_tflops
from inference_tiers.ops.kv_cache import kv_bytes_per_token
from inference_tiers.ops.models import ModelArchitecture

Network = Literal["auto", "efa", "tcp"]
NETWORKS = ("auto", "efa", "tcp")

# Mooncake transfer_engine_bench, GPU to GPU writes (Mooncake docs/source/design/transfer-engine/efa_transport.md).
MEASURED_EFA_BYTES_PER_S = {"p5.48xlarge": 388.9e9, "p5en.48xlarge": 365.7e9}
EFA_EFFICIENCY = 388.9 / 400.0
TCP_FLOOR_BYTES_PER_S = 9.5e9
DEFAULT_MFU = 0.4
DEFAULT_MAX_TRANSFER_SHARE = 0.10
DEFAULT_MIN_PREFILL_SECONDS = 0.5


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    network: Literal["efa", "tcp"]
    basis: str


def transfer_bandwidth(instance: GpuInstanceType, network: Network = "auto") -> Bandwidth:
    """The KV transfer bandwidth between two ``instance`` nodes over ``network`` (auto: EFA when present)."""
    line_rate = instance.network_gbps * 1e9 / 8
    if network == "efa" and not instance.supports_efa:
        raise ValueError(
            f"--network efa: {instance.name} has no EFA interface; use tcp or an EFA instance type"
        )
    if network == "tcp" or (network == "auto" and not instance.supports_efa):
        if line_rate < TCP_FLOOR_BYTES_PER_S:
            return Bandwidth(line_rate, "tcp", f"TCP at the {instance.network_gbps} Gbps line rate")
        return Bandwidth(TCP_FLOOR_BYTES_PER_S, "tcp", "TCP floor: Mooncake's iperf3 baseline, 9.5 GB/s")
    measured = MEASURED_EFA_BYTES_PER_S.get(instance.name)
    if measured is not None:
        return Bandwidth(measured, "efa", f"Mooncake over EFA measured on {instance.name}")
    return Bandwidth(
        line_rate * EFA_EFFICIENCY,
        "efa",
        f"EFA {instance.network_gbps} Gbps line rate x p5's measured Mooncake efficiency (97%)",
    )


def prefill_flops(model: ModelArchitecture, tokens: int) -> float:
    linear = 2 * model.active_params_b * 1e9 * tokens
    attention = 2 * model.layers * tokens**2 * model.attention_dim
    return linear + attention


def prefill_seconds(
    model: ModelArchitecture, tokens: int, instance: GpuInstanceType, tp: int, mfu: float
) -> float:
    """Estimated prefill time of one prompt on one replica of ``tp`` GPUs at ``mfu`` of their peak."""
    peak = peak_bf16_tflops(instance.gpu_model) * 1e12 * tp
    return prefill_flops(model, tokens) / (peak * mfu)


@dataclass(frozen=True)
class DisaggregationCheck:
    context_tokens: int
    kv_bytes: int
    bandwidth: Bandwidth
    transfer_seconds: float
    prefill_seconds: float
    pays: bool
    reason: str

    @property
    def transfer_share(self) -> float:
        return self.transfer_seconds / self.prefill_seconds


def check(
    model: ModelArchitecture,
    *,
    kv_dtype: str,
    context_tokens: int,
    instance: GpuInstanceType,
    tp: int | None = None,
    network: Network = "auto",
    mfu: float = DEFAULT_MFU,
    max_transfer_share: float = DEFAULT_MAX_TRANSFER_SHARE,
    min_prefill_seconds: float = DEFAULT_MIN_PREFILL_SECONDS,
) -> DisaggregationCheck:
    if not 0 < mfu <= 1:
        raise ValueError(f"--mfu {mfu}: expected a fraction in (0, 1]")
    tp = tp or instance.gpus
    bandwidth = transfer_bandwidth(instance, network)
    kv_bytes = kv_bytes_per_token(model, kv_dtype) * context_tokens
    transfer = kv_bytes / bandwidth.bytes_per_s
    prefill = prefill_seconds(model, context_tokens, instance, tp, mfu)
    share = transfer / prefill
    if share > max_transfer_share:
        pays = False
        reason = (
            f"moving the KV cache ({transfer:.3g} s over {bandwidth.network}) would add {share:.0%} to a "
            f"{prefill:.3g} s prefill (limit {max_transfer_share:.0%}): keep prefill and decode together"
            + ("" if bandwidth.network == "efa" else " or use an EFA instance type")
        )
    elif prefill < min_prefill_seconds:
        pays = False
        reason = (
            f"prefill takes only {prefill:.3g} s (under {min_prefill_seconds:g} s), too short to stall "
            f"decode for long: chunked prefill on one pool is simpler"
        )
    else:
        pays = True
        reason = (
            f"the transfer ({transfer:.3g} s over {bandwidth.network}) is {share:.1%} of a {prefill:.3g} s "
            f"prefill that would otherwise stall colocated decode streams"
        )
    return DisaggregationCheck(context_tokens, kv_bytes, bandwidth, transfer, prefill, pays, reason)
