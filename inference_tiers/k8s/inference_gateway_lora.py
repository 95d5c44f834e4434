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
from dataclasses import dataclass
from typing import Any

from inference_tiers.config import ConfigError
from inference_tiers.k8s.inference_gateway import ADAPTER_DIR, LoraAdapter
from inference_tiers.k8s.inference_gateway_settings import LORA_RANKS, InferenceGatewaySettings
from inference_tiers.validation import Args, ArgumentError, is_token

# The AWS CLI image the LoRA init container syncs the adapters with (AWS's own ECR Public repository, which
# carries the CLI's release tags; pinned to one release).
LORA_INIT_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.22.35"
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


@dataclass(frozen=True)
class LoraServing:
    """LoRA adapters vLLM serves beside the base model, each under its name (the request's ``model``), read
    from S3 with the pods' service account (a role that may read only these prefixes, ``LoraAdapterReader``).

    HyperPod's worker fetches them itself (:func:`vllm_lora_launcher`); the disaggregated pods get them from
    :func:`lora_init_container`.

    :param adapters: 1-64 adapters, unique names, each a literal ``s3://bucket/prefix/`` (its folder).
    :param region: Region of the adapter buckets (a deploy-time token is fine).
    :param max_lora_rank: vLLM's ``--max-lora-rank``, one of its ranks. Default 16.
    """

    adapters: tuple[LoraAdapter, ...]
    region: str
    max_lora_rank: int = 16

    def __post_init__(self) -> None:
        args = Args("LoraServing")
        adapters = args.sequence(
            "adapters",
            self.adapters,
            lambda n, v: args.instance(n, v, LoraAdapter, "a LoraAdapter"),
            min_items=1,
            max_items=64,
        )
        names: list[str] = []
        for index, adapter in enumerate(adapters):
            if is_token(adapter.s3_uri):
                raise args.error(
                    f"adapters[{index}].s3_uri",
                    adapter.s3_uri,
                    "an s3://bucket/prefix URI known at synth time: the bucket and prefix are written into the "
                    "worker's command and its IAM policy (a deploy-time token cannot be split into them)",
                )
            if not adapter_prefix(adapter):
                raise args.error(
                    f"adapters[{index}].s3_uri",
                    adapter.s3_uri,
                    "an s3://bucket/prefix URI with a prefix (the adapter's folder): the role may read only "
                    "that folder, never a whole bucket",
                )
            if adapter.name in names:
                raise args.error(f"adapters[{index}].name", adapter.name, "a name unique among the adapters")
            names.append(adapter.name)
        args.text(
            "region", self.region, pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", description="an AWS Region name"
        )
        args.one_of("max_lora_rank", self.max_lora_rank, LORA_RANKS)

    def check_base_model(self, args: Args, base_model: str, base: str) -> None:
        """Refuse (naming ``args``' owner) an adapter named ``base_model``, which vLLM serves as the base model;
        ``base`` says where that name comes from, for the message."""
        for index, adapter in enumerate(self.adapters):
            if adapter.name == base_model:
                raise args.error(
                    f"lora.adapters[{index}].name",
                    adapter.name,
                    f"a name other than {base} ({base_model}), which vLLM serves as the base model",
                )

    @property
    def buckets(self) -> dict[str, list[str]]:
        """Bucket name to the adapter prefixes in it (in the adapters' order, each once)."""
        prefixes: dict[str, list[str]] = {}
        for adapter in self.adapters:
            bucket = prefixes.setdefault(adapter.bucket, [])
            if adapter_prefix(adapter) not in bucket:
                bucket.append(adapter_prefix(adapter))
        return prefixes


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


def lora_init_container(
    adapters: Sequence[LoraAdapter], image: str, region: str | None = None
) -> dict[str, Any]:
    """Copies every adapter folder from S3 into the shared ``adapters`` volume before vLLM starts.

    ``region``: the buckets' Region (``AWS_REGION``; EKS Pod Identity gives credentials, not a Region).
    """
    script = " && ".join(
        f'aws s3 sync --only-show-errors "s3://{adapter.bucket}/{adapter_prefix(adapter)}" '
        f'"{adapter_path(adapter)}"'
        for adapter in adapters
    )
    return {
        "name": "lora-adapters",
        "image": image,
        "command": ["sh", "-ec", script],
        **({"env": [{"name": "AWS_REGION", "value": region}]} if region is not None else {}),
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


def lora_service_account(namespace: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The ServiceAccount pods read their adapters as (no token automounted: EKS Pod Identity projects its own
    token for the credentials it serves)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata,
        "automountServiceAccountToken": False,
    }


def lora_from_settings(
    key: str, settings: InferenceGatewaySettings | None, region: str
) -> LoraServing | None:
    """The tier's ``<key>.lora_adapters`` and ``max_lora_rank`` as a :class:`LoraServing` (None without adapters).

    A rule the setting's parser does not know (an adapter URI without a folder) is a ``ConfigError`` naming
    the adapter's key, like every other bad context value.
    """
    if settings is None or not settings.lora_adapters:
        return None
    try:
        return LoraServing(settings.lora_adapters, region=region, max_lora_rank=settings.max_lora_rank)
    except ArgumentError as error:
        index = error.param.removeprefix("adapters[").partition("]")[0]
        name = settings.lora_adapters[int(index)].name if index.isdigit() else ""
        raise ConfigError(
            f"{key}.lora_adapters.{name}" if name else key, error.value, error.accepted
        ) from None
