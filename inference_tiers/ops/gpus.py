"""Peak dense BF16 tensor throughput per GPU model (TFLOPS, without 2:4 sparsity), for prefill estimates.

Sources (checked 2026-12-02):
- H100 SXM: 989.4 (NVIDIA Hopper whitepaper figures, tabulated at glennklockwood.com/garden/processors/h100;
  NVIDIA's datasheet lists 1,979 "with sparsity", half of which is the dense figure). H200 has the same
  GH100 compute (more and faster memory only), so the same figure.
- A100: 312 (datasheet "624 TFLOPS BF16 with sparsity"; 311.87 computed from clocks at hmc-tech.com).
- L40S: 362.05 (L40S datasheet: "BFLOAT16 Tensor Core 362.05 | 733*", * = with sparsity).
- L4: 121 (L4 datasheet: 242 TFLOPS FP16/BF16 tensor with sparsity).
- A10G: 125 is the A10 datasheet figure. AWS's A10G is a variant with lower tensor throughput than the A10
  (baseten.co, "NVIDIA A10 vs A10G"), so prefill estimates on g5 are optimistic; no AWS figure was found.
"""

from __future__ import annotations

PEAK_BF16_TFLOPS: dict[str, float] = {
    "H100": 989.4,
    "H200": 989.4,
    "A100": 312.0,
    "L40S": 362.05,
    "L4": 121.0,
    "A10G": 125.0,
}


def peak_bf16_tflops(gpu_model: str) -> float:
    try:
        return PEAK_BF16_TFLOPS[gpu_model]
    except KeyError:
        raise ValueError(
            f"GPU model {gpu_model!r}: no peak figure; known: {', '.join(PEAK_BF16_TFLOPS)}"
        ) from None
