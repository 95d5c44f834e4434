"""LoRA adapters on vLLM for the inference gateway: the serve flags, and two ways to put the files in the pod.

Every pod of a pool loads every adapter (``--lora-modules name=path``), and the Endpoint Picker's
``lora-affinity-scorer`` prefers the pods that already hold the adapter a request names in ``model`` (vLLM
reports them in ``vllm:lora_requests_info``), so a request for an adapter goes where it is warm.

Where the pod spec is ours (a Deployment), :func:`lora_init_container` copies the adapters into a volume the
vLLM container also mounts. Where it is not (the HyperPod operator's ``InferenceEndpointConfig``, whose
``spec.worker`` has no ``volumeMounts``: the CRD's ``spec.kubernetes.volumes`` "can be referenced by init
containers"), :func:`vllm_lora_launcher` makes the vLLM container fetch them itself before ``vllm serve``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from inference_tiers.k8s.inference_gateway import ADAPTER_DIR, LoraAdapter

# Where the launcher writes the adapters: inside the container's own writable layer, which every image has
# (the vLLM image runs as root, but /tmp is writable for any user).
LAUNCHER_ADAPTER_DIR = "/tmp/lora-adapters"


def adapter_path(adapter: LoraAdapter, directory: str = ADAPTER_DIR) -> str:
    """The adapter's folder in the pod (``org/name`` becomes ``org--name``: one folder per adapter)."""
    return f"{directory}/{adapter.name.replace('/', '--')}"


def adapter_prefix(adapter: LoraAdapter) -> str:
    """The adapter's key prefix as a folder (``sql-lora/``), so that ``sql-lora-v2/`` is never read with it."""
    key = adapter.s3_uri.removeprefix("s3://").partition("/")[2].strip("/")
    return f"{key}/" if key else ""


def vllm_lora_args(
    adapters: Sequence[LoraAdapter], *, max_lora_rank: int = 16, directory: str = ADAPTER_DIR
) -> list[str]:
    """vLLM flags that serve ``adapters`` under their names from ``directory`` (checked against the pinned
    vLLM's flags)."""
    if not adapters:
        return []
    return [
        "--enable-lora",
        "--max-loras",
        str(len(adapters)),
        "--max-lora-rank",
        str(max_lora_rank),
        "--lora-modules",
        *(f"{adapter.name}={adapter_path(adapter, directory)}" for adapter in adapters),
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


# Run as ``python3 -c LAUNCHER <vllm serve args>``: boto3 (in every vllm/vllm-openai image: its Dockerfile
# installs it for the Run:ai model streamer) copies each adapter prefix with the pod's service-account
# credentials, refuses an empty prefix (vLLM would fail later with a less clear error) and any key that would
# land outside its folder, then replaces itself with ``vllm serve`` so vLLM is the container's process.
_LAUNCHER = """\
import json, os, sys
import boto3
s3 = boto3.client("s3", region_name={region})
for bucket, prefix, folder in json.loads({adapters}):
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if key.endswith("/"):
                continue
            path = os.path.normpath(os.path.join(folder, key[len(prefix):]))
            if not path.startswith(folder + os.sep):
                sys.exit(f"LoRA adapter key s3://{{bucket}}/{{key}} leaves {{folder}}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            s3.download_file(bucket, key, path)
            count += 1
    if not count:
        sys.exit(f"no LoRA adapter files under s3://{{bucket}}/{{prefix}}")
    print(f"LoRA adapter s3://{{bucket}}/{{prefix}}: {{count}} files in {{folder}}", flush=True)
os.execvp("vllm", ["vllm", "serve", *sys.argv[1:]])
"""


def vllm_lora_launcher(adapters: Sequence[LoraAdapter], region: str) -> list[str]:
    """The vLLM container's ``command``: fetch ``adapters`` into :data:`LAUNCHER_ADAPTER_DIR`, then run
    ``vllm serve`` with the container's ``args``.

    ``region``: the adapter buckets' Region (may be a deploy-time token: it is only text in the script).
    """
    plan = [[a.bucket, adapter_prefix(a), adapter_path(a, LAUNCHER_ADAPTER_DIR)] for a in adapters]
    script = _LAUNCHER.format(region=json.dumps(region), adapters=json.dumps(json.dumps(plan)))
    return ["python3", "-c", script]
