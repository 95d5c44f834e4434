"""The platform's elastic inference pool, rendered as plain dicts (no constructs, testable alone).

GPU nodes come from one Karpenter ``EC2NodeClass`` and ``NodePool`` (tainted ``nvidia.com/gpu``, on-demand by
default, limited by GPU count), only while vLLM pods ask for them; vLLM runs as one Deployment whose pods KEDA
scales on the queue (from zero, woken by the Endpoint Picker's request counter), behind the project's
inference gateway (:mod:`inference_tiers.k8s.inference_gateway`: prefix-cache and LoRA-aware routing). LiteLLM
reaches the gateway's in-cluster Service; nothing else may (:func:`pool_network_policies`).

Why each choice:

- Consolidation only ``WhenEmpty``: a busy GPU node is never drained to pack pods tighter, and the vLLM pods
  carry ``karpenter.sh/do-not-disrupt: "true"`` so drift and expiry wait for KEDA to scale them in (the
  annotation "prevents Karpenter from voluntarily disrupting" the pod's node: kubernetes-sigs/karpenter
  ``pkg/apis/v1/labels.go``, ``DoNotDisruptAnnotationKey``, the core module of provider v1.14.1). Scale-in is
  KEDA's, after its 10-minute stabilisation; Karpenter then removes the empty node, at most
  ``terminationGracePeriod`` after an expiry that waits for the pods.
- Requirements use Karpenter's well-known labels (aws/karpenter-provider-aws v1.14.1 ``pkg/apis/v1/labels.go``:
  ``instance-family`` :150, ``instance-gpu-manufacturer`` :161, registered as well known at :33-52).
- The AL2023 alias resolves to the NVIDIA variant for GPU instance types (driver and container toolkit); the
  NVIDIA device plugin (``GpuDevicePlugins``) advertises ``nvidia.com/gpu``.
- Weights are downloaded from Hugging Face into the pod's ``emptyDir`` on the node's root volume (sized by
  ``root_volume_gib``), through the VPC's NAT.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inference_tiers.config import ConfigError
from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.k8s.disaggregated import http_probe
from inference_tiers.k8s.inference_gateway import (
    ADAPTER_DIR,
    EPP_METRICS_PORT,
    GATEWAY_PORT,
    MODEL_NAME_PATTERN,
    VLLM_PORT,
    LoraAdapter,
    ModelPool,
    PoolScaling,
)
from inference_tiers.k8s.inference_gateway_lora import LORA_INIT_IMAGE, lora_init_container, vllm_lora_args
from inference_tiers.k8s.inference_gateway_scaling import ScaledTarget
from inference_tiers.k8s.inference_gateway_settings import (
    LORA_RANKS,
    json_object,
    known_keys,
    lora_adapter,
    pool_scaling,
)
from inference_tiers.k8s.network_peers import network_policy, pods_egress, pods_peer
from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.k8s.sandbox_nodes import NODE_POOL_LABEL
from inference_tiers.validation import Args, ArgumentError

Manifest = dict[str, Any]

# The vLLM release the disaggregated tier's image is built on (assets/disaggregated/vllm/Dockerfile): the flags
# below are checked against the same list (tests/data/disaggregated/vllm-serve-flags.txt).
VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
GPU_NODE_POOL = "gpu"
GPU_TAINT: Mapping[str, str] = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION: Mapping[str, str] = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# Istio labels every pod of the proxy it deploys for a Gateway with the Gateway's name (istio/istio
# manifests/charts/istio-control/istio-discovery/files/kube-gateway.yaml, the Deployment's pod template labels);
# the pods listen on the listener port itself (the template sets net.ipv4.ip_unprivileged_port_start=0).
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
# The proxy's own Prometheus endpoint (same template: prometheus.io/port 15020 on the pod).
ISTIO_METRICS_PORT = 15020
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
GPU_FAMILIES = tuple(sorted({name.split(".")[0] for name in GPU_INSTANCE_TYPES}))
DEFAULT_GPU_FAMILIES = ("g6e", "g6")
CAPACITY_TYPES = ("on-demand", "spot")
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?")
_HF_MODEL_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_AMI_ALIAS = r"al2023@(latest|v[0-9]{8})"


@dataclass(frozen=True)
class GpuPoolSpec:
    """The pool's nodes, model and scaling; every field is checked (``ArgumentError`` naming ``owner``).

    :param model_id: the Hugging Face model vLLM serves, ``org/name``.
    :param served_model_name: the name clients send as ``model`` (LiteLLM registers it under that name).
    :param gpus_per_replica: GPUs per vLLM pod (tensor parallelism), 1, 2, 4 or 8.
    :param scaling: replicas; ``min_replicas`` 0 scales to zero (the first request after idle waits for a node).
    :param instance_families: GPU instance families Karpenter may launch. Default: g6e, g6.
    :param capacity_types: ``on-demand`` and/or ``spot``. Default: on-demand.
    :param max_gpus: NodePool limit on the GPUs of all pool nodes together.
    :param max_model_len: vLLM's ``--max-model-len``.
    :param root_volume_gib: each node's root volume (image and weights).
    :param consolidate_after_minutes: how long a node must be empty before Karpenter removes it.
    :param hf_token_secret: a Secret in the pool's namespace with key ``token`` (gated models). Default: none.
    :param lora_adapters: LoRA adapters every pod loads from S3 (each served under its name: the Endpoint Picker
        then also scores LoRA affinity). Default: none.
    :param max_lora_rank: vLLM's ``--max-lora-rank``, one of its ranks. Default 16.
    :param vllm_image: the vLLM image. Default: ``VLLM_IMAGE``.
    :param ami_alias: ``al2023@latest`` or a pinned ``al2023@vYYYYMMDD``.
    :param namespace: the pool's namespace (vLLM, the Endpoint Picker, the gateway's proxy).
    """

    model_id: str
    served_model_name: str
    gpus_per_replica: int = 1
    scaling: PoolScaling = field(default_factory=lambda: PoolScaling(min_replicas=0, max_replicas=4))
    instance_families: Sequence[str] = DEFAULT_GPU_FAMILIES
    capacity_types: Sequence[str] = ("on-demand",)
    max_gpus: int = 8
    max_model_len: int = 8192
    root_volume_gib: int = 200
    consolidate_after_minutes: int = 10
    hf_token_secret: str | None = None
    lora_adapters: Sequence[LoraAdapter] = ()
    max_lora_rank: int = 16
    vllm_image: str = VLLM_IMAGE
    ami_alias: str = "al2023@latest"
    namespace: str = "inference-pool"
    owner: str = "GpuPoolSpec"

    def __post_init__(self) -> None:
        args = Args(self.owner)
        args.text(
            "model_id", self.model_id, pattern=_HF_MODEL_ID, description="a Hugging Face model id org/name"
        )
        args.text("served_model_name", self.served_model_name, pattern=MODEL_NAME_PATTERN, allow_token=False)
        args.one_of("gpus_per_replica", self.gpus_per_replica, (1, 2, 4, 8))
        args.instance("scaling", self.scaling, PoolScaling)
        args.sequence(
            "instance_families",
            self.instance_families,
            lambda name, value: args.one_of(name, value, GPU_FAMILIES),
            min_items=1,
            unique=True,
        )
        args.sequence(
            "capacity_types",
            self.capacity_types,
            lambda name, value: args.one_of(name, value, CAPACITY_TYPES),
            min_items=1,
            unique=True,
        )
        args.integer("max_gpus", self.max_gpus, minimum=self.gpus_per_replica, maximum=10_000)
        args.integer("max_model_len", self.max_model_len, minimum=256, maximum=1_048_576)
        args.integer("root_volume_gib", self.root_volume_gib, minimum=100, maximum=16_384)
        args.integer("consolidate_after_minutes", self.consolidate_after_minutes, minimum=1, maximum=1440)
        if self.hf_token_secret is not None:
            args.text("hf_token_secret", self.hf_token_secret, pattern=_NAME.pattern, allow_token=False)
        adapters = args.sequence(
            "lora_adapters", self.lora_adapters, lambda n, v: args.instance(n, v, LoraAdapter), max_items=64
        )
        object.__setattr__(self, "lora_adapters", tuple(adapters))
        args.one_of("max_lora_rank", self.max_lora_rank, LORA_RANKS)
        args.text(
            "vllm_image", self.vllm_image, pattern=r"\S+(:[^\s:@]+|@sha256:[0-9a-f]{64})", allow_token=False
        )
        args.text("ami_alias", self.ami_alias, pattern=_AMI_ALIAS, allow_token=False)
        args.text("namespace", self.namespace, pattern=_NAME.pattern, allow_token=False)
        names = [adapter.name for adapter in adapters]
        for index, name in enumerate(names):
            if name == self.served_model_name or names.index(name) != index:
                raise args.error(
                    f"lora_adapters[{index}].name",
                    name,
                    "a name unique among the adapters and the served model",
                )
        if self.scaling.max_replicas * self.gpus_per_replica > self.max_gpus:
            raise args.error(
                "max_gpus",
                self.max_gpus,
                f"at least scaling.max_replicas x gpus_per_replica "
                f"({self.scaling.max_replicas} x {self.gpus_per_replica}): the NodePool limit would strand "
                "replicas Pending",
            )

    @property
    def name(self) -> str:
        """The prefix of the pool's objects (Deployment, InferencePool, EPP, NodePool)."""
        return "vllm"

    def served_names(self) -> list[str]:
        """The model names the pool answers to: the served model, then each LoRA adapter."""
        return [self.served_model_name, *(adapter.name for adapter in self.lora_adapters)]

    def pod_labels(self) -> dict[str, str]:
        """The vLLM pods' labels: the InferencePool and the Deployment select them."""
        return {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": self.namespace}

    def model_pool(self) -> ModelPool:
        """The InferencePool (and Endpoint Picker) the inference gateway routes to."""
        return ModelPool(
            name=self.name,
            namespace=self.namespace,
            selector=self.pod_labels(),
            model_name=self.served_model_name,
            adapters=tuple(self.lora_adapters),
        )

    def quota_need(self) -> tuple[str, int]:
        """For ``preflight``: the smallest size of the first family that fits a replica, and as many of them as
        the NodePool's GPU limit lets Karpenter launch (the on-demand quota counts their vCPUs)."""
        family = self.instance_families[0]
        sizes = [t for t in GPU_INSTANCE_TYPES.values() if t.name.split(".")[0] == family]
        fitting = sorted(
            (t for t in sizes if t.gpus >= self.gpus_per_replica), key=lambda t: (t.gpus, t.vcpus)
        )
        if not fitting:
            raise Args(self.owner).error(
                "instance_families[0]", family, f"a family with {self.gpus_per_replica} GPUs in one instance"
            )
        smallest = fitting[0]
        return smallest.name, -(-self.max_gpus // smallest.gpus)

    def scaled_target(self) -> ScaledTarget:
        """What KEDA scales: the Deployment, on the vLLM series of this served model in this namespace."""
        return ScaledTarget(
            self.name, {"namespace": self.namespace, "model_name": self.served_model_name}, self.scaling
        )


def gpu_node_pool(spec: GpuPoolSpec) -> Manifest:
    """The NodePool (``karpenter.sh/v1``): tainted NVIDIA nodes of the families, limited by GPU count."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": GPU_NODE_POOL},
        "spec": {
            "template": {
                "metadata": {"labels": {NODE_POOL_LABEL: GPU_NODE_POOL}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": GPU_NODE_POOL,
                    },
                    "taints": [dict(GPU_TAINT)],
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": list(spec.instance_families),
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-gpu-manufacturer",
                            "operator": "In",
                            "values": ["nvidia"],
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": list(spec.capacity_types),
                        },
                    ],
                    # Expiry waits for the pods (do-not-disrupt) at most this long after the node is due.
                    "expireAfter": "720h",
                    "terminationGracePeriod": "1h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": f"{spec.consolidate_after_minutes}m",
                "budgets": [{"nodes": "10%"}],
            },
            "limits": {"nvidia.com/gpu": str(spec.max_gpus)},
        },
    }


def vllm_serve_args(spec: GpuPoolSpec) -> list[str]:
    """``vllm serve`` arguments: the model under its served name, prefix caching on (the EPP's prefix scorer
    sends a shared prefix where it is cached)."""
    return [
        "serve",
        spec.model_id,
        "--served-model-name",
        spec.served_model_name,
        "--port",
        str(VLLM_PORT),
        "--tensor-parallel-size",
        str(spec.gpus_per_replica),
        "--max-model-len",
        str(spec.max_model_len),
        "--enable-prefix-caching",
        *vllm_lora_args(spec.lora_adapters, max_lora_rank=spec.max_lora_rank),
    ]


LORA_SERVICE_ACCOUNT = "vllm"
"""The vLLM pods' ServiceAccount with LoRA adapters (its Pod Identity role may read only their folders)."""


def vllm_deployment(spec: GpuPoolSpec, region: str = "") -> Manifest:
    """The vLLM Deployment; KEDA owns its replica count (none is set here, so a redeploy does not reset it).
    With LoRA adapters an init container copies them from S3 (``region``: the buckets' Region) into a volume
    vLLM loads them from, as :data:`LORA_SERVICE_ACCOUNT`."""
    gpus = str(spec.gpus_per_replica)
    env: list[dict[str, Any]] = [{"name": "HF_HOME", "value": "/models/hf"}]
    if spec.hf_token_secret:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": spec.hf_token_secret, "key": "token"}},
            }
        )
    container: dict[str, Any] = {
        "name": "vllm",
        "image": spec.vllm_image,
        "command": ["vllm"],
        "args": vllm_serve_args(spec),
        "env": env,
        "ports": [{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # Weights download and load: up to 30 minutes before the first health answer.
        "startupProbe": http_probe("/health", "http", period=10, timeout=5, failures=180),
        "readinessProbe": http_probe("/health", "http", period=10, timeout=5, failures=3),
        "livenessProbe": http_probe("/health", "http", period=30, timeout=5, failures=5),
        "volumeMounts": [
            {"name": "models", "mountPath": "/models"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {NODE_POOL_LABEL: GPU_NODE_POOL},
        "tolerations": [dict(GPU_TOLERATION)],
        # In-flight generations finish before the pod goes (the route's timeout is 600 s).
        "terminationGracePeriodSeconds": 600,
        "containers": [container],
        "volumes": [
            {"name": "models", "emptyDir": {}},
            # Tensor-parallel workers exchange tensors through /dev/shm (64 MiB by default).
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
        ],
    }
    if spec.lora_adapters:
        pod["serviceAccountName"] = LORA_SERVICE_ACCOUNT
        pod["initContainers"] = [lora_init_container(spec.lora_adapters, LORA_INIT_IMAGE, region)]
        container["volumeMounts"].append({"name": "adapters", "mountPath": ADAPTER_DIR, "readOnly": True})
        pod["volumes"].append({"name": "adapters", "emptyDir": {}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": spec.pod_labels()},
        "spec": {
            "selector": {"matchLabels": spec.pod_labels()},
            "template": {
                "metadata": {
                    "labels": spec.pod_labels(),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(VLLM_PORT),
                        "prometheus.io/path": "/metrics",
                        DO_NOT_DISRUPT: "true",
                    },
                },
                "spec": pod,
            },
        },
    }


def namespace(spec: GpuPoolSpec) -> Manifest:
    """The pool's namespace, held to the ``baseline`` Pod Security Standard (vLLM's image runs as root)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": spec.namespace,
            "labels": {"pod-security.kubernetes.io/enforce": "baseline"},
        },
    }


def pool_network_policies(
    spec: GpuPoolSpec, *, gateway_name: str, litellm: GatewayEndpoint, scraper_cidrs: Sequence[str]
) -> list[Manifest]:
    """Who may reach the pool: its own pods (gateway proxy -> EPP -> vLLM), LiteLLM's proxy pods on the gateway
    port, and the metrics scraper on the metrics ports. Tenants, sandboxes and the VPC (the gateway's NLB
    included) may not: every request goes through LiteLLM and its per-tenant keys. And LiteLLM's pods may reach
    the pool's gateway: a policy of its own, added to the proxy's (NetworkPolicies add up), so that the proxy's
    own policy is the same with or without a pool."""
    same_namespace: dict[str, Any] = {"podSelector": {}}
    litellm_pods = pods_peer(litellm.namespace, litellm.pod_labels)
    gateway_pods = {GATEWAY_NAME_LABEL: gateway_name}
    metrics_ports = [VLLM_PORT, EPP_METRICS_PORT, ISTIO_METRICS_PORT]
    return [
        # Every pod of the pool (an empty selector).
        network_policy(
            spec.namespace,
            "inference-pool",
            {},
            ingress=[
                {"from": [same_namespace]},
                {
                    "from": [{"ipBlock": {"cidr": cidr}} for cidr in scraper_cidrs],
                    "ports": [{"protocol": "TCP", "port": port} for port in metrics_ports],
                },
            ],
        ),
        network_policy(
            spec.namespace,
            "inference-pool-gateway",
            gateway_pods,
            ingress=[{"from": [litellm_pods], "ports": [{"protocol": "TCP", "port": GATEWAY_PORT}]}],
        ),
        network_policy(
            litellm.namespace,
            "litellm-to-inference-pool",
            litellm.pod_labels,
            egress=[pods_egress(spec.namespace, gateway_pods, GATEWAY_PORT)],
        ),
    ]


def litellm_models(spec: GpuPoolSpec, base_url: str) -> list[dict[str, Any]]:
    """The pool as LiteLLM models, one per served name (the model, each LoRA adapter: the request's ``model``
    picks the adapter in vLLM and the Endpoint Picker), each a body of LiteLLM 1.104.0's ``Deployment`` (what
    ``/model/new`` reads): the served name through the pool's gateway at ``base_url`` (its ``/v1``), ``hosted_vllm/`` as for the project's other OpenAI-compatible
    models. vLLM runs without ``--api-key`` (only the gateway may reach it), so the key sent is a placeholder;
    sent at all because, without one, LiteLLM has sent other environment keys (litellm#50218). The id (which
    ``/model/{id}/update`` addresses) is also its ``base_model``: a name no cost-map key has, so a call is priced
    by an entry of its own, at $0, with no rate-less entry to walk (docs/gateway.md, "Proxy overhead")."""
    return [
        {
            "model_name": name,
            "litellm_params": {
                "model": f"hosted_vllm/{name}",
                "api_base": base_url,
                "api_key": "no-key",
            },
            "model_info": {"id": f"{name}#pool", "base_model": f"{name}#pool"},
        }
        for name in spec.served_names()
    ]


POOL_ENTRIES = (
    "model_id",
    "served_model_name",
    "gpus_per_replica",
    "scaling",
    "instance_families",
    "capacity_types",
    "max_gpus",
    "max_model_len",
    "root_volume_gib",
    "consolidate_after_minutes",
    "hf_token_secret",
    "lora_adapters",
    "max_lora_rank",
)


def parse_pool(key: str, raw: Any) -> GpuPoolSpec:
    """The context object at ``key`` (``{"model_id": "Qwen/Qwen3-8B", "served_model_name": "qwen3-8b", "scaling":
    {"min_replicas": 0, "max_replicas": 4}, ...}``) as a GpuPoolSpec; ``ConfigError`` naming ``<key>.<entry>``."""
    value = json_object(key, raw, "a JSON object with entries " + ", ".join(POOL_ENTRIES))
    known_keys(key, value, POOL_ENTRIES)
    for required in ("model_id", "served_model_name"):
        if required not in value:
            raise ConfigError(f"{key}.{required}", None, "a value (this entry is required)")
    entries = dict(value)
    adapters = entries.get("lora_adapters", {})
    if not isinstance(adapters, Mapping):
        raise ConfigError(f"{key}.lora_adapters", adapters, "a JSON object of adapter name -> s3:// URI")
    entries["lora_adapters"] = [lora_adapter(f"{key}.lora_adapters", n, uri) for n, uri in adapters.items()]
    if "scaling" in entries:
        entries["scaling"] = pool_scaling(f"{key}.scaling", entries["scaling"])
    try:
        return GpuPoolSpec(**entries, owner=key)
    except ArgumentError as error:
        raise ConfigError(f"{key}.{error.param}", error.value, error.accepted) from None
