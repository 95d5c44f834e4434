"""A typed builder for the HyperPod Inference Operator's ``InferenceEndpointConfig`` (API version v1).

:class:`InferenceEndpoint` describes one model served by vLLM on HyperPod nodes; every cross-field rule the
operator would only discover after minutes of deployment (tensor parallelism larger than the node, a health
check path vLLM does not serve, metrics scraped from a port the worker does not listen on) is a ``ValueError``
when the object is created. :func:`render_inference_endpoint_config` turns it into the manifest, which the tests
validate against the operator's CRD schema. Field names and defaults: ``spec.versions[v1]`` of the CRD in
``aws/sagemaker-hyperpod-cli`` (``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from inference_tiers.instance_types import GpuInstanceType, gpu_instance_type
from inference_tiers.k8s.allocatable import Resources, node_allocatable

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
KIND = "InferenceEndpointConfig"
MODEL_MOUNT_PATH = "/opt/ml/model"
# RFC 1123 label: the operator derives Deployment, Service and Ingress names from metadata.name.
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?")
# SageMaker endpoint names (CreateEndpoint).
_ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
# What the DaemonSets on every HyperPod GPU node request, taken off the node's allocatable before model pods
# share the rest. Figures marked "budget" are allowances, not requests read from a pinned chart: the HyperPod
# dependency chart, the CSI node plugins and the observability add-on publish no requests for these builds.
HYPERPOD_NODE_DAEMONSETS: Mapping[str, Resources] = {
    "aws-node (vpc-cni chart 1.23.1: 25m; aws-eks-nodeagent: none)": Resources(cpu_millicores=25),
    "kube-proxy (EKS add-on; 100m as deployed)": Resources(cpu_millicores=100),
    "eks-pod-identity-agent (chart: none)": Resources(),
    "aws-efa-k8s-device-plugin (chart v0.5.30)": Resources(cpu_millicores=10, memory_mib=20),
    "nvidia-device-plugin (chart 0.19.3: none)": Resources(),
    "health-monitoring-agent (HyperPod dependency chart; budget)": Resources(
        cpu_millicores=250, memory_mib=256
    ),
    "s3-csi-node (Mountpoint for S3 add-on; budget)": Resources(cpu_millicores=100, memory_mib=128),
    "fsx-csi-node (FSx CSI add-on; budget)": Resources(cpu_millicores=100, memory_mib=128),
    "observability collectors (node, DCGM and EFA exporters, OTel; budget)": Resources(
        cpu_millicores=600, memory_mib=768
    ),
}
# The operator adds containers of its own to each model pod (the request-limit proxy, the metrics sidecar).
OPERATOR_POD_OVERHEAD = Resources(cpu_millicores=250, memory_mib=256)
"""Budget for the containers the operator injects into every model pod (not read from a pinned source)."""


@dataclass(frozen=True)
class S3ModelSource:
    """Weights under ``s3://bucket_name/location``, mounted read-only by the Mountpoint for S3 CSI driver."""

    bucket_name: str
    region: str
    location: str
    prefetch: bool = False
    """Copy the weights to host memory before the server loads them (faster start for models that fit)."""

    def render(self) -> dict[str, Any]:
        return {
            "modelSourceType": "s3",
            "s3Storage": {"bucketName": self.bucket_name, "region": self.region},
            "modelLocation": self.location,
            "prefetchEnabled": self.prefetch,
        }


@dataclass(frozen=True)
class FsxModelSource:
    """Weights in directory ``location`` of an existing FSx for Lustre file system (FSx CSI static volume)."""

    file_system_id: str
    location: str
    dns_name: str | None = None
    mount_name: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"fs-[0-9a-f]{8,21}", self.file_system_id):
            raise ValueError(
                f"file_system_id: got {self.file_system_id!r}; expected an FSx file system id like fs-0123456789abcdef0"
            )

    def render(self) -> dict[str, Any]:
        storage = {"fileSystemId": self.file_system_id}
        if self.dns_name:
            storage["dnsName"] = self.dns_name
        if self.mount_name:
            storage["mountName"] = self.mount_name
        return {"modelSourceType": "fsx", "fsxStorage": storage, "modelLocation": self.location}


ModelSource = S3ModelSource | FsxModelSource


@dataclass(frozen=True)
class VllmWorker:
    """The vLLM OpenAI-compatible server as the operator's model container."""

    image: str
    """Pinned image, e.g. ``vllm/vllm-openai:v0.10.1``."""
    tensor_parallel_size: int
    max_model_len: int | None = None
    port: int = 8000
    extra_args: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)

    # Routes vLLM's OpenAI server (vllm.entrypoints.openai.api_server) serves.
    HEALTH_PATHS: ClassVar[tuple[str, ...]] = ("/health",)
    METRICS_PATH: ClassVar[str] = "/metrics"
    INVOCATION_PATHS: ClassVar[tuple[str, ...]] = ("v1/chat/completions", "v1/completions")

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"worker port: got {self.port}; expected 1-65535")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size: got {self.tensor_parallel_size}; expected 1 or more")
        if ":" not in self.image.rsplit("/", 1)[-1] and "@sha256:" not in self.image:
            raise ValueError(f"worker image: got {self.image!r}; expected a pinned tag or digest (name:tag)")

    def args(self, served_model_name: str) -> list[str]:
        args = [
            "--model", MODEL_MOUNT_PATH,
            "--served-model-name", served_model_name,
            "--port", str(self.port),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
        ]  # fmt: skip
        if self.max_model_len is not None:
            args += ["--max-model-len", str(self.max_model_len)]
        return args + list(self.extra_args)


@dataclass(frozen=True)
class RequestLimits:
    """Concurrency limit and queue of the operator's nginx sidecar (fail fast with 429 when saturated)."""

    max_concurrent_requests: int
    max_queue_size: int = 0
    overflow_status_code: int = 429

    def __post_init__(self) -> None:
        if self.max_concurrent_requests < 1 or self.max_queue_size < 0:
            raise ValueError(
                f"request limits: got max_concurrent_requests={self.max_concurrent_requests}, "
                f"max_queue_size={self.max_queue_size}; expected at least 1 and at least 0"
            )
        if not 400 <= self.overflow_status_code <= 599:
            raise ValueError(f"overflow_status_code: got {self.overflow_status_code}; expected 400-599")

    def render(self) -> dict[str, Any]:
        return {
            "maxConcurrentRequests": self.max_concurrent_requests,
            "maxQueueSize": self.max_queue_size,
            "overflowStatusCode": self.overflow_status_code,
        }


@dataclass(frozen=True)
class CloudWatchTrigger:
    """Scale on a CloudWatch metric (KEDA ``aws-cloudwatch`` scaler, credentials from the KEDA role)."""

    name: str
    namespace: str
    metric_name: str
    dimensions: Mapping[str, str]
    target_value: float
    statistic: str = "Sum"
    period_seconds: int = 60

    @classmethod
    def sagemaker_invocations(cls, endpoint_name: str, target_per_replica: float) -> CloudWatchTrigger:
        """Invocations per minute of the registered SageMaker endpoint, averaged over the replicas."""
        return cls(
            name="sagemaker-invocations",
            namespace="AWS/SageMaker",
            metric_name="Invocations",
            dimensions={"EndpointName": endpoint_name, "VariantName": "AllTraffic"},
            target_value=target_per_replica,
        )

    def render(self) -> dict[str, Any]:
        return {
            "cloudWatchTrigger": {
                "name": self.name,
                "namespace": self.namespace,
                "metricName": self.metric_name,
                "dimensions": [{"name": k, "value": v} for k, v in self.dimensions.items()],
                "metricStat": self.statistic,
                "metricType": "Average",
                "metricCollectionPeriod": self.period_seconds,
                "targetValue": self.target_value,
                "minValue": 0,
            }
        }


@dataclass(frozen=True)
class PrometheusTrigger:
    """Scale on a PromQL query against an Amazon Managed Prometheus workspace (KEDA ``prometheus`` scaler)."""

    server_address: str
    """``https://aps-workspaces.<region>.amazonaws.com/workspaces/<ws-id>`` (no trailing path)."""
    query: str
    target_value: float
    name: str = "prometheus"

    @classmethod
    def concurrent_requests(
        cls, server_address: str, model_name: str, target_per_replica: float
    ) -> PrometheusTrigger:
        """In-flight requests counted by the operator's sidecar metric ``model_concurrent_requests``."""
        return cls(
            server_address=server_address,
            query=f'sum(model_concurrent_requests{{model_name="{model_name}"}})',
            target_value=target_per_replica,
            name="concurrent-requests",
        )

    def render(self) -> dict[str, Any]:
        return {
            "prometheusTrigger": {
                "name": self.name,
                "serverAddress": self.server_address,
                "query": self.query,
                "targetValue": self.target_value,
                "metricType": "Average",
            }
        }


@dataclass(frozen=True)
class AutoScaling:
    """Replica autoscaling (``spec.autoScalingSpec``; the operator creates a KEDA ScaledObject)."""

    min_replicas: int
    max_replicas: int
    trigger: CloudWatchTrigger | PrometheusTrigger
    polling_interval_seconds: int = 30
    cooldown_seconds: int = 300
    scale_down_stabilization_seconds: int = 300

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(
                f"autoscaling: got min_replicas={self.min_replicas}, max_replicas={self.max_replicas}; "
                "expected 0 <= min_replicas <= max_replicas and max_replicas >= 1"
            )

    def render(self) -> dict[str, Any]:
        return {
            "minReplicaCount": self.min_replicas,
            "maxReplicaCount": self.max_replicas,
            "pollingInterval": self.polling_interval_seconds,
            "cooldownPeriod": self.cooldown_seconds,
            "scaleDownStabilizationTime": self.scale_down_stabilization_seconds,
            **self.trigger.render(),
        }


@dataclass(frozen=True)
class InferenceEndpoint:
    """One model on HyperPod: what :func:`render_inference_endpoint_config` turns into the custom resource."""

    name: str
    """metadata.name, spec.modelName and vLLM's served model name."""
    instance_types: tuple[str, ...]
    """``ml.`` instance types; one is ``spec.instanceType``, several are a priority list (``spec.instanceTypes``)."""
    model_source: ModelSource
    worker: VllmWorker
    namespace: str = "default"
    endpoint_name: str | None = None
    """Register a SageMaker endpoint of this name (callers use InvokeEndpoint); None: load balancer only."""
    replicas: int = 1
    invocation_path: str = "v1/chat/completions"
    health_check_path: str = "/health"
    metrics_port: int | None = None
    """Port the operator scrapes the model's metrics from; None: the worker's port (where vLLM serves them)."""
    request_limits: RequestLimits | None = None
    autoscaling: AutoScaling | None = None
    max_deploy_time_seconds: int = 3600
    threads_per_core: int = 1
    """Threads per core of the instance group (``HyperPodInstanceGroup.threads_per_core``): 1 halves the CPUs
    the node exposes, and the CPU request follows."""

    def __post_init__(self) -> None:
        if not _K8S_NAME.fullmatch(self.name):
            raise ValueError(
                f"endpoint name: got {self.name!r}; expected 1-50 lowercase letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        if not self.instance_types:
            raise ValueError("instance_types: got an empty list; expected at least one ml. instance type")
        for instance_type in self.instance_types:
            gpus = gpu_instance_type(instance_type, key="instance_types", sagemaker=True).gpus
            if self.worker.tensor_parallel_size > gpus:
                raise ValueError(
                    f"tensor_parallel_size: got {self.worker.tensor_parallel_size}; {instance_type} has {gpus} "
                    f"GPUs, so expected 1 to {gpus} (one replica runs on one node)"
                )
        if self.health_check_path not in self.worker.HEALTH_PATHS:
            raise ValueError(
                f"health_check_path: got {self.health_check_path!r}; the vLLM worker serves health checks on "
                f"{', '.join(self.worker.HEALTH_PATHS)}"
            )
        if self.metrics_port is not None and self.metrics_port != self.worker.port:
            raise ValueError(
                f"metrics_port: got {self.metrics_port}; vLLM serves {self.worker.METRICS_PATH} on its "
                f"invocation port, so expected {self.worker.port} (or leave it unset)"
            )
        if self.invocation_path not in self.worker.INVOCATION_PATHS:
            raise ValueError(
                f"invocation_path: got {self.invocation_path!r}; expected one of "
                f"{', '.join(self.worker.INVOCATION_PATHS)} (routes of the vLLM worker)"
            )
        if self.endpoint_name is not None and not _ENDPOINT_NAME.fullmatch(self.endpoint_name):
            raise ValueError(
                f"endpoint_name: got {self.endpoint_name!r}; expected a SageMaker endpoint name "
                "(letters, digits and '-', at most 63 characters)"
            )
        trigger = self.autoscaling.trigger if self.autoscaling else None
        if (
            isinstance(trigger, CloudWatchTrigger)
            and trigger.namespace == "AWS/SageMaker"
            and self.endpoint_name is None
        ):
            raise ValueError(
                "autoscaling: a CloudWatch trigger on AWS/SageMaker metrics needs endpoint_name (the "
                "metrics exist only for a registered SageMaker endpoint); set endpoint_name or use a "
                "Prometheus trigger"
            )
        if self.replicas < 1:
            raise ValueError(f"replicas: got {self.replicas}; expected 1 or more")
        if self.threads_per_core not in (1, 2):
            raise ValueError(f"threads_per_core: got {self.threads_per_core!r}; expected 1 or 2")
        for instance_type in self.instance_types:
            facts = gpu_instance_type(instance_type, key="instance_types", sagemaker=True)
            share = model_pod_share(facts, self.worker.tensor_parallel_size, self.threads_per_core)
            if share.cpu_millicores < 1000 or share.memory_mib < 1024:
                raise ValueError(
                    f"instance_types: {instance_type} with threads_per_core={self.threads_per_core} leaves a "
                    f"model pod of tensor_parallel_size {self.worker.tensor_parallel_size} "
                    f"{share.cpu_millicores}m CPU and {share.memory_mib} MiB after kubelet and the system "
                    "DaemonSets; expected at least 1 CPU and 1 GiB: use threads_per_core=2, a larger tensor "
                    "parallelism or a larger instance type"
                )

    def resources(self) -> dict[str, Any]:
        """GPUs = tensor parallelism; CPU and memory: this pod's share of what the smallest candidate node
        leaves after kubelet's reservations, the system DaemonSets and the operator's own containers.

        A node of ``g`` GPUs runs ``g // tp`` such pods, so each gets ``tp / g`` of that remainder: CPUs from
        the cores and threads the instance group really runs (``threads_per_core``), never the nominal vCPUs.
        """
        tp = self.worker.tensor_parallel_size
        shares = [
            model_pod_share(
                gpu_instance_type(t, key="instance_types", sagemaker=True), tp, self.threads_per_core
            )
            for t in self.instance_types
        ]
        cpu_cores = min(s.cpu_millicores for s in shares) // 1000
        memory_gib = min(s.memory_mib for s in shares) // 1024
        gpu = str(tp)
        return {
            "requests": {"cpu": str(cpu_cores), "memory": f"{memory_gib}Gi", "nvidia.com/gpu": gpu},
            "limits": {"nvidia.com/gpu": gpu},
        }


def hyperpod_node_available(instance: GpuInstanceType, threads_per_core: int) -> Resources:
    """What model pods may request on one HyperPod node: allocatable minus the system DaemonSets."""
    allocatable = node_allocatable(instance, threads_per_core=threads_per_core)
    reserved = sum(HYPERPOD_NODE_DAEMONSETS.values(), Resources())
    return Resources(
        cpu_millicores=allocatable.cpu_millicores - reserved.cpu_millicores,
        memory_mib=allocatable.memory_mib - reserved.memory_mib,
        hugepages_2mi_mib=allocatable.hugepages_2mi_mib - reserved.hugepages_2mi_mib,
        gpus=allocatable.gpus,
        efa=allocatable.efa,
    )


def model_pod_share(instance: GpuInstanceType, tp: int, threads_per_core: int) -> Resources:
    """CPU and memory one model container of ``tp`` GPUs may request so that ``gpus // tp`` pods, each with
    the operator's injected containers, fit one node (GPU, EFA and huge pages are not part of the share)."""
    available = hyperpod_node_available(instance, threads_per_core)
    return Resources(
        cpu_millicores=available.cpu_millicores * tp // instance.gpus - OPERATOR_POD_OVERHEAD.cpu_millicores,
        memory_mib=available.memory_mib * tp // instance.gpus - OPERATOR_POD_OVERHEAD.memory_mib,
    )


def render_inference_endpoint_config(endpoint: InferenceEndpoint) -> dict[str, Any]:
    """The ``InferenceEndpointConfig`` manifest for ``endpoint`` (a plain dict; tokens pass through)."""
    worker = endpoint.worker
    worker_spec: dict[str, Any] = {
        "image": worker.image,
        "args": worker.args(endpoint.name),
        "modelInvocationPort": {"containerPort": worker.port, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT_PATH},
        "resources": endpoint.resources(),
    }
    if worker.environment:
        worker_spec["environmentVariables"] = [{"name": k, "value": v} for k, v in worker.environment.items()]
    if endpoint.request_limits:
        worker_spec["requestLimits"] = endpoint.request_limits.render()

    spec: dict[str, Any] = {
        "modelName": endpoint.name,
        "invocationEndpoint": endpoint.invocation_path,
        "replicas": endpoint.replicas,
        "maxDeployTimeInSeconds": endpoint.max_deploy_time_seconds,
        "modelSourceConfig": endpoint.model_source.render(),
        "worker": worker_spec,
        # vLLM answers health checks on /health; the CRD default /ping would mark every target unhealthy.
        "loadBalancer": {"healthCheckPath": endpoint.health_check_path},
        "metrics": {
            "enabled": True,
            "modelMetrics": {"path": worker.METRICS_PATH, "port": endpoint.metrics_port or worker.port},
        },
    }
    if len(endpoint.instance_types) == 1:
        spec["instanceType"] = endpoint.instance_types[0]
    else:
        spec["instanceTypes"] = list(endpoint.instance_types)
    if endpoint.endpoint_name:
        spec["endpointName"] = endpoint.endpoint_name
    if endpoint.autoscaling:
        spec["autoScalingSpec"] = endpoint.autoscaling.render()
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": endpoint.name, "namespace": endpoint.namespace},
        "spec": spec,
    }
