"""The Kubernetes workload of the disaggregated tier, rendered as plain dicts (no constructs, testable alone).

vLLM prefill and decode pools joined by vLLM's point-to-point ``MooncakeConnector`` over EFA, vllm-router in
front (Kubernetes service discovery of both pools), an internal load balancer, and optionally a
``mooncake_master`` for the shared KV pool (``MooncakeStoreConnector`` through ``MultiConnector``).

Facts behind the choices (ports, environment, flags) are in docs/disaggregated.md. Every vLLM and router
flag used here is checked by the tests against the flag lists of the pinned versions.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, Literal, TypeVar

from inference_tiers.config import PINNED_IMAGE_DESCRIPTION, PINNED_IMAGE_PATTERN
from inference_tiers.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType
from inference_tiers.k8s.allocatable import Resources
from inference_tiers.k8s.inference_gateway import ADAPTER_DIR
from inference_tiers.k8s.inference_gateway_lora import (
    LORA_INIT_IMAGE,
    LoraServing,
    lora_init_container,
    lora_service_account,
    vllm_lora_args,
)
from inference_tiers.ops.models import context_limit
from inference_tiers.validation import Args, is_token

T = TypeVar("T")

Manifest = dict[str, Any]
Role = Literal["prefill", "decode"]
ROLES: tuple[Role, Role] = ("prefill", "decode")
# The instance types the pods can run on: one pod per node takes every EFA device of the instance.
EFA_INSTANCE_TYPES = tuple(name for name, facts in GPU_INSTANCE_TYPES.items() if facts.supports_efa)

# Ports. 8998 is vLLM's default Mooncake bootstrap port (VLLM_MOONCAKE_BOOTSTRAP_PORT); the router reads it
# from the pod annotation below. 30000/29000 are vllm-router's defaults; 50051/9003 are mooncake_master's.
VLLM_PORT = 8000
BOOTSTRAP_PORT = 8998
ROUTER_PORT = 30000
ROUTER_METRICS_PORT = 29000
LOAD_BALANCER_PORT = 80
MASTER_RPC_PORT = 50051
MASTER_METRICS_PORT = 9003

BOOTSTRAP_PORT_ANNOTATION = "vllm.ai/bootstrap-port"  # read by vllm-router 0.1.17 service discovery
COMPONENT_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
GPU_TAINT_KEY = "nvidia.com/gpu"
# The label the EFA node-group construct (efa_node_group.py) puts on its nodes.
DEFAULT_GPU_NODE_LABELS: Mapping[str, str] = {"inference-tiers/node-pool": "gpu-efa"}
# The AWS EFA docs and samples request 5120Mi of 2 MiB huge pages per EFA pod (libfabric bounce buffers);
# the AL2023 NVIDIA AMI pre-allocates 5128 of them per node.
HUGEPAGES_2MI = "5120Mi"
SHM_GIB_MAX = 64
# The DaemonSets that run on every GPU node of this tier, with their requests at the pinned versions (what
# the scheduler subtracts before a vLLM pod fits): the EKS add-ons of EksCluster, the device-plugin charts of
# GpuDevicePlugins, the amazon-cloudwatch-observability v6.2.0 add-on of DisaggregatedMonitoring, and the EFA
# exporter of ClusterExporters (inference_tiers.k8s.efa_exporter.REQUESTS; a test keeps the two equal).
GPU_NODE_DAEMONSETS: Mapping[str, Resources] = {
    "aws-node (vpc-cni chart 1.23.1: 25m; aws-eks-nodeagent: none)": Resources(cpu_millicores=25),
    "kube-proxy (EKS add-on; 100m as deployed, not read from a pinned source)": Resources(cpu_millicores=100),
    "eks-pod-identity-agent (chart: none)": Resources(),
    "aws-efa-k8s-device-plugin (chart v0.5.30)": Resources(cpu_millicores=10, memory_mib=20),
    "nvidia-device-plugin (chart 0.19.3: none)": Resources(),
    "cloudwatch-agent (chart 6.2.0)": Resources(cpu_millicores=250, memory_mib=128),
    "fluent-bit (chart 6.2.0)": Resources(cpu_millicores=50, memory_mib=25),
    "dcgm-exporter (chart 6.2.0, GPU nodes)": Resources(cpu_millicores=250, memory_mib=128),
    "node-exporter (chart 6.2.0)": Resources(cpu_millicores=50, memory_mib=30),
    "efa-exporter (inference_tiers.k8s.efa_exporter)": Resources(cpu_millicores=10, memory_mib=32),
}
KV_STORE_CONFIG_PATH = "/etc/mooncake/mooncake.json"
MODEL_CACHE_PATH = "/models"

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


def is_label_map(labels: object) -> bool:
    """Whether ``labels`` maps valid Kubernetes label keys to valid label values (strings)."""
    return isinstance(labels, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) and _LABEL_KEY.fullmatch(k) and _LABEL_VALUE.fullmatch(v)
        for k, v in labels.items()
    )


def image_reference(args: Args, param: str, value: Any) -> str:
    """A pinned container image (tag other than latest, or a digest), or a deploy-time token such as
    ``repository.repository_uri_for_tag(...)`` or a ``DockerImageAsset``'s ``image_uri`` (passed on unparsed)."""
    return args.text(
        param, value, pattern=PINNED_IMAGE_PATTERN, max_length=512, description=PINNED_IMAGE_DESCRIPTION
    )


def _ipv4_cidr(args: Args, param: str, value: Any) -> str:
    cidr = args.text(param, value, description="an IPv4 CIDR block such as 10.0.0.0/16")
    if is_token(cidr):
        return cidr
    try:
        ipaddress.IPv4Network(cidr)
    except ValueError:
        raise args.error(
            param, cidr, "an IPv4 CIDR block such as 10.0.0.0/16 (network address, no host bits)"
        ) from None
    return cidr


def _optional(value: Any, check: Callable[[Any], T]) -> T | None:
    return None if value is None else check(value)


@dataclass(frozen=True)
class DisaggregatedWorkloadSpec:
    """Everything the manifests depend on, validated on creation: a wrong value is an ``ArgumentError`` (a
    ``ValueError``) naming ``owner`` (the class, or the construct that builds the spec), the field, the value
    and what is accepted. Deploy-time tokens are accepted for the model id, the images, the CIDRs, the Secret
    name and the ``extra_env`` values, and never parsed."""

    model_id: str
    """Hugging Face model id (``meta-llama/Llama-3.3-70B-Instruct``) or a path vLLM can load."""
    instance_type: str
    """EC2 instance type of the GPU nodes (must support EFA): sizes TP, EFA devices, memory and CPU."""
    vllm_image: str
    router_image: str
    prefill_replicas: int = 1
    decode_replicas: int = 1
    tensor_parallel_size: int | None = None
    """Default: every GPU of the node."""
    max_model_len: int | None = None
    """Default: the model's own context length."""
    name: str = "vllm-pd"
    namespace: str = "inference"
    enable_kv_store: bool = False
    kv_store_segment_gib_per_rank: int = 32
    """DRAM each GPU rank contributes to the shared Mooncake pool (``global_segment_size``; TP8 => 8x)."""
    hf_token_secret_name: str | None = "hf-token"
    """Secret (key ``token``) giving HF_TOKEN for gated models; optional at runtime. None: no token."""
    gpu_node_labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GPU_NODE_LABELS))
    router_replicas: int = 1
    allowed_cidrs: Sequence[str] = ("10.0.0.0/8",)
    """Client CIDRs the internal load balancer admits (loadBalancerSourceRanges)."""
    startup_timeout_minutes: int = 60
    """How long a vLLM pod may take to download, load, compile and register its KV cache with EFA."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """More environment for the vLLM pods, e.g. Mooncake's registration tuning on p5
    (``MC_EFA_NIC_SELECTION=local``, ``MC_MAX_CONCURRENT_REG_MR=16``). Cannot replace the variables set here."""
    efa_devices: int | None = None
    """EFA devices each vLLM pod requests: what the GPU node group attaches. Default: all of the instance's."""
    lora: LoraServing | None = None
    """LoRA adapters every prefill and decode pod loads (the router may pair any two); None: base model only."""
    lora_init_image: str = LORA_INIT_IMAGE
    """Image of the init container that copies the adapters from S3 (``aws s3 sync``); only with ``lora``."""
    owner: InitVar[str] = "DisaggregatedWorkloadSpec"
    """The name error messages start with (the construct that builds this spec from its own arguments)."""

    def __post_init__(self, owner: str) -> None:
        args = Args(owner)
        self._set(
            "model_id",
            args.text(
                "model_id",
                self.model_id,
                pattern=r"\S+",
                max_length=512,
                description="a Hugging Face model id or model path without spaces",
            ),
        )
        self._set("instance_type", args.one_of("instance_type", self.instance_type, EFA_INSTANCE_TYPES))
        facts = self.instance
        if self.tensor_parallel_size is not None:
            divisors = [d for d in range(1, facts.gpus + 1) if facts.gpus % d == 0]
            accepted = f"a divisor of the {facts.gpus} GPUs of {facts.name}: {divisors}, or None for all"
            tp = self.tensor_parallel_size
            if isinstance(tp, bool) or not isinstance(tp, int) or tp not in divisors:
                raise args.error("tensor_parallel_size", tp, accepted)
        for param, low, high in (
            ("prefill_replicas", 1, 64),
            ("decode_replicas", 1, 64),
            ("router_replicas", 1, 10),
            ("startup_timeout_minutes", 10, 240),
            ("kv_store_segment_gib_per_rank", 1, 1024),
        ):
            args.integer(param, getattr(self, param), minimum=low, maximum=high)
        _optional(
            self.max_model_len, lambda v: args.integer("max_model_len", v, minimum=256, maximum=10_485_760)
        )
        beyond = context_limit(self.model_id, self.max_model_len)
        if beyond is not None:
            raise args.error("max_model_len", self.max_model_len, beyond)
        _optional(
            self.efa_devices,
            lambda v: args.integer("efa_devices", v, minimum=1, maximum=facts.efa_interfaces),
        )
        for param in ("name", "namespace"):
            args.text(
                param,
                getattr(self, param),
                pattern=_DNS_LABEL.pattern,
                allow_token=False,
                description="a DNS label: lowercase letters, digits and '-', starting with a letter, "
                "1-40 characters",
            )
        for param in ("vllm_image", "router_image"):
            image_reference(args, param, getattr(self, param))
        _optional(
            self.hf_token_secret_name,
            lambda v: args.text(
                "hf_token_secret_name",
                v,
                pattern=_DNS_SUBDOMAIN.pattern,
                description="a Kubernetes Secret name (DNS subdomain, 1-253 characters) or None",
            ),
        )
        args.boolean("enable_kv_store", self.enable_kv_store)
        labels = args.mapping(
            "gpu_node_labels",
            self.gpu_node_labels,
            lambda p, v: args.text(
                p,
                v,
                pattern=_LABEL_VALUE.pattern,
                min_length=0,
                allow_token=False,
                description="a Kubernetes label value",
            ),
            key_pattern=_LABEL_KEY.pattern,
        )
        if not labels:
            raise args.error("gpu_node_labels", labels, "at least one node label (the EFA node group's)")
        self._set("gpu_node_labels", labels)
        cidrs = self.allowed_cidrs
        if not is_token(cidrs):
            cidrs = args.sequence("allowed_cidrs", cidrs, lambda p, v: _ipv4_cidr(args, p, v), min_items=1)
        self._set("allowed_cidrs", tuple(cidrs))
        managed = {e["name"] for role in ROLES for e in _vllm_env(self, role, extra=False)}
        managed |= {"MOONCAKE_CONFIG_PATH", "HF_TOKEN"}
        env = args.mapping(
            "extra_env",
            self.extra_env,
            lambda p, v: args.text(p, v, min_length=0, description="a string"),
            key_pattern=_ENV_NAME.pattern,
        )
        for key in env:
            if key in managed:
                raise args.error(
                    "extra_env key", key, f"a variable other than those set here: {sorted(managed)}"
                )
        self._set("extra_env", env)
        if self.lora is not None:
            lora = args.instance("lora", self.lora, LoraServing, "a LoraServing")
            lora.check_base_model(args, self.model_id, "model_id")
        image_reference(args, "lora_init_image", self.lora_init_image)
        if self.enable_kv_store:
            pool = self.kv_store_segment_gib_per_rank * self.tp
            budget = self.memory_gib // 2
            if pool > budget:
                raise args.error(
                    "kv_store_segment_gib_per_rank",
                    self.kv_store_segment_gib_per_rank,
                    f"at most {budget // self.tp} GiB per rank: {self.tp} ranks must fit in half of the "
                    f"pod's {self.memory_gib} GiB memory limit on {facts.name}",
                )

    def _set(self, name: str, value: Any) -> None:
        """Store the checked (normalized) value of a field of this frozen dataclass."""
        object.__setattr__(self, name, value)

    @property
    def instance(self) -> GpuInstanceType:
        return GPU_INSTANCE_TYPES[self.instance_type]

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size or self.instance.gpus

    @property
    def efa(self) -> int:
        """EFA devices per vLLM pod."""
        return self.efa_devices or self.instance.efa_interfaces

    @property
    def memory_gib(self) -> int:
        """Memory request and limit of a vLLM pod: 3/4 of the node, the rest for the OS and daemon sets."""
        return self.instance.memory_gib * 3 // 4

    @property
    def cpu(self) -> int:
        return self.instance.vcpus * 3 // 4

    @property
    def shm_gib(self) -> int:
        return min(SHM_GIB_MAX, self.instance.memory_gib // 16)

    def resource_name(self, component: str) -> str:
        return f"{self.name}-{component}"

    @property
    def lora_service_account(self) -> str | None:
        """The ServiceAccount the vLLM pods run as to read their adapters (LoRA only); None: the default."""
        return self.resource_name("vllm-lora") if self.lora else None

    def selector_labels(self, component: str) -> dict[str, str]:
        return {"app.kubernetes.io/name": "vllm", INSTANCE_LABEL: self.name, COMPONENT_LABEL: component}

    def labels(self, component: str) -> dict[str, str]:
        return {**self.selector_labels(component), "app.kubernetes.io/part-of": "inference-tiers"}


# ---------------------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------------------


def kv_transfer_config(role: Role, *, kv_store: bool) -> dict[str, Any]:
    """``--kv-transfer-config`` for one role.

    P2P: ``MooncakeConnector`` as ``kv_producer`` (prefill pushes KV) or ``kv_consumer`` (decode), over EFA
    (``mooncake_protocol`` defaults to ``rdma``, which fails on EFA). With the shared pool, ``MultiConnector``
    wraps it together with ``MooncakeStoreConnector`` (``kv_both`` on prefill, ``kv_consumer`` on decode).
    """
    kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
    p2p = {
        "kv_connector": "MooncakeConnector",
        "kv_role": kv_role,
        "kv_connector_extra_config": {"mooncake_protocol": "efa"},
    }
    if not kv_store:
        return p2p
    store_role = "kv_both" if role == "prefill" else "kv_consumer"
    return {
        "kv_connector": "MultiConnector",
        "kv_role": kv_role,
        "kv_connector_extra_config": {
            "connectors": [p2p, {"kv_connector": "MooncakeStoreConnector", "kv_role": store_role}]
        },
    }


def vllm_serve_args(spec: DisaggregatedWorkloadSpec, role: Role) -> list[str]:
    """Arguments after ``vllm`` for one role (``serve <model> --flag value ...``)."""
    args = [
        "serve",
        spec.model_id,
        "--host",
        "0.0.0.0",
        "--port",
        str(VLLM_PORT),
        "--tensor-parallel-size",
        str(spec.tp),
        "--kv-transfer-config",
        json.dumps(kv_transfer_config(role, kv_store=spec.enable_kv_store), separators=(",", ":")),
    ]
    if spec.max_model_len is not None:
        args += ["--max-model-len", str(spec.max_model_len)]
    if spec.lora:
        args += vllm_lora_args(spec.lora.adapters, max_lora_rank=spec.lora.max_lora_rank)
    return args


def _selector_args(labels: Mapping[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in labels.items()]


def router_args(spec: DisaggregatedWorkloadSpec) -> list[str]:
    """Arguments of the ``vllm-router`` 0.1.17 launcher (the Python CLI that ``pip install`` provides).

    Service discovery finds ready prefill and decode pods by label in this namespace and reads each
    prefill's Mooncake bootstrap port from its ``vllm.ai/bootstrap-port`` annotation; ``--kv-connector
    mooncake`` makes the router query that bootstrap server for the engine id (push-based protocol).
    Metrics bind 0.0.0.0 so the scraper can reach them (the default is 127.0.0.1).
    """
    return [
        "--vllm-pd-disaggregation",
        "--kv-connector",
        "mooncake",
        "--service-discovery",
        "--service-discovery-namespace",
        spec.namespace,
        "--service-discovery-port",
        str(VLLM_PORT),
        "--prefill-selector",
        *_selector_args(spec.selector_labels("prefill")),
        "--decode-selector",
        *_selector_args(spec.selector_labels("decode")),
        # Prefill: prefer the pod that already holds the prompt prefix; decode: least loaded of two.
        "--prefill-policy",
        "cache_aware",
        "--decode-policy",
        "power_of_two",
        "--host",
        "0.0.0.0",
        "--port",
        str(ROUTER_PORT),
        "--prometheus-host",
        "0.0.0.0",
        "--prometheus-port",
        str(ROUTER_METRICS_PORT),
    ]


def kv_store_config(spec: DisaggregatedWorkloadSpec) -> dict[str, Any]:
    """``MOONCAKE_CONFIG_PATH`` JSON read by ``MooncakeStoreConnector`` (embedded mode, EFA transport)."""
    return {
        "mode": "embedded",
        "metadata_server": "P2PHANDSHAKE",
        "master_server_address": f"{spec.resource_name('mooncake-master')}.{spec.namespace}.svc:{MASTER_RPC_PORT}",
        "global_segment_size": f"{spec.kv_store_segment_gib_per_rank}GB",
        "local_buffer_size": "4GB",
        "protocol": "efa",
        "device_name": "",
    }


# ---------------------------------------------------------------------------------------------------------
# Manifests
# ---------------------------------------------------------------------------------------------------------


def _metadata(spec: DisaggregatedWorkloadSpec, component: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": spec.resource_name(component),
        "namespace": spec.namespace,
        "labels": spec.labels(component),
        **extra,
    }


def _restricted_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def http_probe(path: str, port: str, *, period: int, timeout: int, failures: int) -> dict[str, Any]:
    """An HTTP GET probe of ``path`` on the named ``port``."""
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def _efa_env() -> list[dict[str, Any]]:
    return [
        # Mooncake advertises this address to its peer; on a pod with 33 interfaces get_ip() can pick an
        # unreachable one (vllm#42023), so pin it to the pod IP.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # libfabric: use the EFA provider with device RDMA (hardware-offloaded one-sided writes).
        {"name": "FI_PROVIDER", "value": "efa"},
        {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
    ]


def _vllm_env(spec: DisaggregatedWorkloadSpec, role: Role, *, extra: bool = True) -> list[dict[str, Any]]:
    env = [*_efa_env(), {"name": "HF_HOME", "value": f"{MODEL_CACHE_PATH}/hf"}]
    if role == "prefill":
        env.append({"name": "VLLM_MOONCAKE_BOOTSTRAP_PORT", "value": str(BOOTSTRAP_PORT)})
    if spec.hf_token_secret_name is not None:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {"name": spec.hf_token_secret_name, "key": "token", "optional": True}
                },
            }
        )
    if spec.enable_kv_store:
        env.append({"name": "MOONCAKE_CONFIG_PATH", "value": KV_STORE_CONFIG_PATH})
    if extra:
        env += [{"name": k, "value": v} for k, v in sorted(spec.extra_env.items())]
    return env


def _gpu_container(spec: DisaggregatedWorkloadSpec, name: str) -> dict[str, Any]:
    """The parts every EFA GPU container shares: image, devices, memory, pinned-memory capability, /dev/shm."""
    resources = {
        "nvidia.com/gpu": str(spec.tp),
        "vpc.amazonaws.com/efa": str(spec.efa),
        "hugepages-2Mi": HUGEPAGES_2MI,
        "memory": f"{spec.memory_gib}Gi",
    }
    return {
        "name": name,
        "image": spec.vllm_image,
        "resources": {"requests": {**resources, "cpu": str(spec.cpu)}, "limits": resources},
        # Registering GPU memory with every EFA device pins it: IPC_LOCK lifts the locked-memory limit.
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["IPC_LOCK"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _gpu_pod_spec(
    spec: DisaggregatedWorkloadSpec, container: dict[str, Any], *, exclusive_with: list[str]
) -> dict[str, Any]:
    """Pod spec on the EFA GPU nodes, never on a node that runs a pod of the ``exclusive_with`` components."""
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {"node.kubernetes.io/instance-type": spec.instance.name, **spec.gpu_node_labels},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "app.kubernetes.io/name", "operator": "In", "values": ["vllm"]},
                                {"key": INSTANCE_LABEL, "operator": "In", "values": [spec.name]},
                                {"key": COMPONENT_LABEL, "operator": "In", "values": exclusive_with},
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        "containers": [container],
        # NCCL and vLLM's worker processes exchange tensors through /dev/shm; the container default is 64 MiB.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.shm_gib}Gi"}}],
    }


def _vllm_deployment(spec: DisaggregatedWorkloadSpec, role: Role) -> Manifest:
    ports = [{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}]
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(VLLM_PORT),
        "prometheus.io/path": "/metrics",
    }
    if role == "prefill":
        ports.append({"name": "bootstrap", "containerPort": BOOTSTRAP_PORT, "protocol": "TCP"})
        annotations[BOOTSTRAP_PORT_ANNOTATION] = str(BOOTSTRAP_PORT)
    container = {
        **_gpu_container(spec, "vllm"),
        "command": ["vllm"],
        "args": vllm_serve_args(spec, role),
        "env": _vllm_env(spec, role),
        "ports": ports,
        # The API server answers only once the weights are loaded and the KV cache is registered with every
        # EFA device (minutes for a 70B model; 116 s for registration alone on p5, Mooncake #3219).
        "startupProbe": http_probe(
            "/health", "http", period=10, timeout=5, failures=spec.startup_timeout_minutes * 6
        ),
        "readinessProbe": http_probe("/v1/models", "http", period=10, timeout=5, failures=3),
        "livenessProbe": http_probe("/health", "http", period=30, timeout=10, failures=5),
    }
    # One vLLM pod per node across both roles: no same-host P/D transfer over EFA (no hardware loopback, and
    # libfabric's SHM path segfaults on GPU buffers, libfabric#12328).
    pod = _gpu_pod_spec(spec, container, exclusive_with=list(ROLES))
    pod["terminationGracePeriodSeconds"] = 120
    # Model weights: on the node's NVMe RAID0 (kubelet's root lives there on the GPU nodes).
    container["volumeMounts"].append({"name": "models", "mountPath": MODEL_CACHE_PATH})
    pod["volumes"].append({"name": "models", "emptyDir": {}})
    if spec.lora:
        # Both roles hold every adapter: the router pairs any prefill with any decode pod, and the decode pod
        # continues the KV cache its prefill computed with the adapter the request names.
        pod["serviceAccountName"] = spec.lora_service_account
        pod["initContainers"] = [
            lora_init_container(spec.lora.adapters, spec.lora_init_image, spec.lora.region)
        ]
        container["volumeMounts"].append({"name": "adapters", "mountPath": ADAPTER_DIR, "readOnly": True})
        pod["volumes"].append({"name": "adapters", "emptyDir": {}})
    if spec.enable_kv_store:
        container["volumeMounts"].append(
            {"name": "mooncake-config", "mountPath": "/etc/mooncake", "readOnly": True}
        )
        pod["volumes"].append(
            {"name": "mooncake-config", "configMap": {"name": spec.resource_name("mooncake-config")}}
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(spec, role),
        "spec": {
            "replicas": spec.prefill_replicas if role == "prefill" else spec.decode_replicas,
            "selector": {"matchLabels": spec.selector_labels(role)},
            # The node group is sized to the pools: a surge pod would only wait for a node.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": spec.labels(role), "annotations": annotations}, "spec": pod},
        },
    }


def render_transfer_benchmark(spec: DisaggregatedWorkloadSpec) -> list[Manifest]:
    """Two idle pods on two GPU nodes, with the vLLM pods' devices and EFA environment, for
    ``transfer_engine_bench`` (scale the vLLM Deployments to 0 first: GPUs and EFA devices are exclusive).
    Not applied by the construct; see docs/disaggregated.md."""
    pods = []
    for side in ("target", "initiator"):
        container = {**_gpu_container(spec, "bench"), "command": ["sleep", "infinity"], "env": _efa_env()}
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _metadata(spec, f"transfer-bench-{side}")
                | {"labels": spec.labels("transfer-bench")},
                "spec": _gpu_pod_spec(spec, container, exclusive_with=["transfer-bench"]),
            }
        )
    return pods


def _router_manifests(spec: DisaggregatedWorkloadSpec) -> list[Manifest]:
    name = spec.resource_name("router")
    meta = _metadata(spec, "router")
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        # Discovery lists and watches pods in this namespace only (--service-discovery-namespace).
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": spec.namespace}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": spec.router_replicas,
            "selector": {"matchLabels": spec.selector_labels("router")},
            "template": {
                "metadata": {
                    "labels": spec.labels("router"),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(ROUTER_METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "serviceAccountName": name,
                    "enableServiceLinks": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001},
                    "containers": [
                        {
                            "name": "router",
                            "image": spec.router_image,
                            "command": ["vllm-router"],
                            "args": router_args(spec),
                            "ports": [
                                {"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"},
                                {"name": "metrics", "containerPort": ROUTER_METRICS_PORT, "protocol": "TCP"},
                            ],
                            "resources": {
                                "requests": {"cpu": "2", "memory": "4Gi"},
                                "limits": {"memory": "4Gi"},
                            },
                            "securityContext": _restricted_security_context(),
                            "readinessProbe": http_probe("/health", "http", period=10, timeout=5, failures=3),
                            "livenessProbe": http_probe("/health", "http", period=20, timeout=5, failures=3),
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            **meta,
            # Internal NLB from the AWS cloud controller that EKS runs (no extra controller needed). Both
            # scheme annotations are set so the load balancer stays internal if the AWS Load Balancer
            # Controller (which reads the second one) takes the Service over.
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": spec.selector_labels("router"),
            "ports": [{"name": "http", "port": LOAD_BALANCER_PORT, "targetPort": "http", "protocol": "TCP"}],
            "loadBalancerSourceRanges": list(spec.allowed_cidrs),
        },
    }
    return [service_account, role, binding, deployment, service]


def _kv_store_manifests(spec: DisaggregatedWorkloadSpec) -> list[Manifest]:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(spec, "mooncake-config"),
        "data": {"mooncake.json": json.dumps(kv_store_config(spec), indent=2)},
    }
    labels = spec.selector_labels("mooncake-master")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(spec, "mooncake-master"),
        "spec": {
            # One master: HA needs etcd, which this tier does not deploy.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": spec.labels("mooncake-master"),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(MASTER_METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    # On a GPU node, next to a vLLM pod: the image (tens of GB) is already there and the NVMe
                    # RAID0 holds it; the small system nodes' root volumes would not. It needs no GPU or EFA.
                    "nodeSelector": {
                        "node.kubernetes.io/instance-type": spec.instance.name,
                        **spec.gpu_node_labels,
                    },
                    "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "master",
                            # The Mooncake wheel in the vLLM image ships the mooncake_master binary.
                            "image": spec.vllm_image,
                            "command": ["mooncake_master"],
                            "args": [
                                f"--rpc_port={MASTER_RPC_PORT}",
                                f"--metrics_port={MASTER_METRICS_PORT}",
                            ],
                            "ports": [
                                {"name": "rpc", "containerPort": MASTER_RPC_PORT, "protocol": "TCP"},
                                {"name": "metrics", "containerPort": MASTER_METRICS_PORT, "protocol": "TCP"},
                            ],
                            "resources": {
                                "requests": {"cpu": "2", "memory": "8Gi"},
                                "limits": {"memory": "8Gi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "readinessProbe": {"tcpSocket": {"port": "rpc"}, "periodSeconds": 10},
                            "livenessProbe": http_probe(
                                "/health", "metrics", period=20, timeout=5, failures=3
                            ),
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, "mooncake-master"),
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [
                {"name": "rpc", "port": MASTER_RPC_PORT, "targetPort": "rpc", "protocol": "TCP"},
                {"name": "metrics", "port": MASTER_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }
    return [config_map, deployment, service]


def render_namespace(spec: DisaggregatedWorkloadSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": spec.namespace, "labels": {"app.kubernetes.io/part-of": "inference-tiers"}},
    }


def render_workload(spec: DisaggregatedWorkloadSpec) -> list[Manifest]:
    """Every namespaced manifest, in apply order (config and store before the pods that read them)."""
    manifests = _kv_store_manifests(spec) if spec.enable_kv_store else []
    if spec.lora_service_account:
        manifests.append(lora_service_account(spec.namespace, spec.lora_service_account))
    manifests += [_vllm_deployment(spec, role) for role in ROLES]
    return manifests + _router_manifests(spec)


def render(spec: DisaggregatedWorkloadSpec) -> list[Manifest]:
    """The namespace followed by the workload."""
    return [render_namespace(spec), *render_workload(spec)]
