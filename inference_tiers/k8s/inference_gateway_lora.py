"""LoRA adapters on vLLM for the inference gateway: the serve flags and the init container that fetches them.

Every pod of a pool loads every adapter (``--lora-modules name=path``), and the Endpoint Picker's
``lora-affinity-scorer`` prefers the pods that already hold the adapter a request names in ``model`` (vLLM
reports them in ``vllm:lora_requests_info``), so a request for an adapter goes where it is warm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference_tiers.k8s.inference_gateway import ADAPTER_DIR, LoraAdapter


def vllm_lora_args(adapters: Sequence[LoraAdapter], *, max_lora_rank: int = 16) -> list[str]:
    """vLLM flags that serve ``adapters`` under their names (checked against the pinned vLLM's flags)."""
    if not adapters:
        return []
    return [
        "--enable-lora",
        "--max-loras",
        str(len(adapters)),
        "--max-lora-rank",
        str(max_lora_rank),
        "--lora-modules",
        *(f"{adapter.name}={adapter.local_path}" for adapter in adapters),
    ]


def lora_init_container(adapters: Sequence[LoraAdapter], image: str) -> dict[str, Any]:
    """Copies every adapter from S3 into the shared ``adapters`` volume before vLLM starts."""
    script = " && ".join(
        f'aws s3 sync --only-show-errors "{adapter.s3_uri}" "{adapter.local_path}"' for adapter in adapters
    )
    return {
        "name": "lora-adapters",
        "image": image,
        "command": ["sh", "-ec", script],
        "volumeMounts": [{"name": "adapters", "mountPath": ADAPTER_DIR}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
