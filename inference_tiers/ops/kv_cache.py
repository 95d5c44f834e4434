"""KV-cache sizing: bytes per token, per request, per GPU under tensor parallelism, and concurrency.

``bytes_per_token = 2 (K and V) x layers x kv_heads x head_dim x bytes_per_element``. Under tensor parallelism
of degree ``tp`` each GPU holds ``ceil(kv_heads / tp)`` of the KV heads (heads are replicated, not split, once
``tp`` exceeds the KV head count). Anchors: Llama-3-70B in bf16 is 320 KiB per token, 40 GiB at 128K;
Qwen3-8B at 32K is 4.5 GiB, which matches Mooncake's measured 4.50 GB transfer (Mooncake
docs/source/performance/vllm/vllm-v1-pd-performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inference_tiers.instance_types import GpuInstanceType
from inference_tiers.ops.models import ModelArchitecture

GIB = 1024**3
DTYPE_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int4": 0.5}
KV_DTYPES = ("bf16", "fp16", "fp8", "fp32")
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int4")
# vLLM's default --gpu-memory-utilization: the share of each GPU it plans for weights, activations and KV.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def kv_bytes_per_token(model: ModelArchitecture, kv_dtype: str) -> int:
    return int(2 * model.layers * model.kv_heads * model.head_dim * DTYPE_BYTES[kv_dtype])


def check_tp(model: ModelArchitecture, tp: int) -> None:
    """vLLM refuses a tensor-parallel degree that does not divide the attention heads: "Total number of
    attention heads (N) must be divisible by tensor parallel size (T)" (vllm-project/vllm v0.10.1,
    vllm/config/__init__.py, ModelConfig.verify_with_parallel_config)."""
    if model.attention_heads % tp:
        accepted = [d for d in range(1, model.attention_heads + 1) if model.attention_heads % d == 0]
        raise ValueError(
            f"--tp {tp}: {model.name} has {model.attention_heads} attention heads, which vLLM splits evenly "
            f"across the GPUs; expected a divisor: {', '.join(map(str, accepted))}"
        )


def kv_share_per_gpu(model: ModelArchitecture, tp: int) -> float:
    """The fraction of one request's KV cache that each of ``tp`` GPUs holds."""
    return math.ceil(model.kv_heads / tp) / model.kv_heads


@dataclass(frozen=True)
class KvSizing:
    """KV-cache and memory budget for one model on one instance type."""

    model: str
    kv_dtype: str
    context_tokens: int
    bytes_per_token: int
    bytes_per_request: int
    instance_type: str
    tp: int
    bytes_per_request_per_gpu: int
    weights_bytes_per_gpu: int
    usable_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    replicas_per_instance: int
    concurrent_requests_per_replica: int

    @property
    def concurrent_requests_per_instance(self) -> int:
        return self.concurrent_requests_per_replica * self.replicas_per_instance

    @property
    def fits(self) -> bool:
        """Weights plus one full-context request fit on the instance."""
        return self.concurrent_requests_per_replica >= 1


def size_kv(
    model: ModelArchitecture,
    *,
    kv_dtype: str,
    context_tokens: int,
    instance: GpuInstanceType,
    tp: int | None = None,
    weight_dtype: str = "bf16",
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
) -> KvSizing:
    """Size the KV cache of ``model`` at ``context_tokens`` on ``instance`` with ``tp`` GPUs per replica."""
    tp = tp or instance.gpus
    if tp < 1 or tp > instance.gpus:
        raise ValueError(f"--tp {tp}: expected 1 to {instance.gpus} (the GPUs of {instance.name})")
    check_tp(model, tp)
    if context_tokens < 1:
        raise ValueError(f"context length {context_tokens}: expected a positive number of tokens")
    per_token = kv_bytes_per_token(model, kv_dtype)
    per_request = per_token * context_tokens
    per_request_per_gpu = math.ceil(per_request * kv_share_per_gpu(model, tp))
    weights_per_gpu = math.ceil(model.params_b * 1e9 * DTYPE_BYTES[weight_dtype] / tp)
    usable = int(instance.gpu_memory_bytes * gpu_memory_utilization)
    budget = max(0, usable - weights_per_gpu)
    return KvSizing(
        model=model.name,
        kv_dtype=kv_dtype,
        context_tokens=context_tokens,
        bytes_per_token=per_token,
        bytes_per_request=per_request,
        instance_type=instance.name,
        tp=tp,
        bytes_per_request_per_gpu=per_request_per_gpu,
        weights_bytes_per_gpu=weights_per_gpu,
        usable_bytes_per_gpu=usable,
        kv_budget_bytes_per_gpu=budget,
        replicas_per_instance=instance.gpus // tp,
        concurrent_requests_per_replica=budget // per_request_per_gpu,
    )
