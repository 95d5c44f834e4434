"""A typed builder for the HyperPod Inference Operator's ``InferenceEndpointConfig`` (API version v1).

:class:`InferenceEndpoint` describes one model served by vLLM on HyperPod nodes; every cross-field rule the
operator would only discover after minutes of deployment (tensor parallelism larger than the node, a health
check path vLLM does not serve, metrics scraped from a port the worker does not listen on) is a ``ValueError``
when the object is created. :func:`render_inference_endpoint_config` turns it into the manifest, which the tests
validate against the operator's CRD schema. Field names and defaults: ``spec.versions[v1]`` of the CRD in
``aws/sagemaker-hyperpod-cli`` (``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from inference_tiers.config import PINNED_IMAGE_DESCRIPTION, PINNED_IMAGE_PATTERN
from inference_tiers.instance_types import GpuInstanceType, gpu_instance_type
from inference_tiers.k8s.allocatable import Resources, node_allocatable
from inference_tiers.k8s.inference_gateway_lora import (
    LAUNCHER_ADAPTER_DIR,
    vllm_lora_args,
    vllm_lora_launcher,
)
from inference_tiers.k8s.inference_gateway_lora import (
    LoraServing as LoraServing,  # re-exported: the InferenceEndpoint's lora input
)
from inference_tiers.validation import Args

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
    # The HyperPod dependency chart's own pins (sagemaker-hyperpod-cli 011ca927 Chart.yaml), not the
    # disaggregated tier's (k8s/disaggregated.py).
    "aws-efa-k8s-device-plugin (HyperPod dependency chart pin 0.5.20)": Resources(
        cpu_millicores=10, memory_mib=20
    ),
    "nvidia-device-plugin (HyperPod dependency chart pin 0.16.1: none)": Resources(),
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
    """The bucket holding the weights."""
    region: str
    """The bucket's Region."""
    location: str
    """The prefix of the weights in the bucket (``modelLocation``)."""
    prefetch: bool = False
    """Copy the weights to host memory before the server loads them (faster start for models that fit)."""

    def __post_init__(self) -> None:
        args = Args("S3ModelSource")
        args.text("bucket_name", self.bucket_name, max_length=63)
        args.text(
            "region", self.region, pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", description="an AWS Region name"
        )
        args.text("location", self.location, max_length=1024)
        args.boolean("prefetch", self.prefetch)

    def render(self) -> dict[str, Any]:
        """The CRD's ``modelSourceConfig``."""
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
        args = Args("FsxModelSource")
        args.text(
            "file_system_id",
            self.file_system_id,
            pattern=r"fs-[0-9a-f]{8,21}",
            description="an FSx file system id like fs-0123456789abcdef0",
        )
        args.text("location", self.location, max_length=1024)
        for name in ("dns_name", "mount_name"):
            if getattr(self, name) is not None:
                args.text(name, getattr(self, name))

    def render(self) -> dict[str, Any]:
        storage = {"fileSystemId": self.file_system_id}
        if self.dns_name:
            storage["dnsName"] = self.dns_name
        if self.mount_name:
            storage["mountName"] = self.mount_name
        return {"modelSourceType": "fsx", "fsxStorage": storage, "modelLocation": self.location}


ModelSource = S3ModelSource | FsxModelSource

# The label the operator requires on a ServiceAccount named in spec.kubernetes.serviceAccountName
# (reference tier3-hyperpod.md, InferenceEndpointConfig v1 "kubernetes").
USER_ASSIGNABLE_LABEL = "sagemaker.amazonaws.com/user-assignable"
# Flags the LoRA input renders itself: the same flags in worker.extra_args would contradict it.
_LORA_FLAGS = ("--enable-lora", "--max-loras", "--max-lora-rank", "--lora-modules")


@dataclass(frozen=True)
class VllmWorker:
    """The vLLM OpenAI-compatible server as the operator's model container."""

    image: str
    """Pinned image, e.g. ``vllm/vllm-openai:v0.10.1``."""
    tensor_parallel_size: int
    """GPUs one replica shards the model over (``--tensor-parallel-size``), 1-64."""
    max_model_len: int | None = None
    """Context length the server accepts (``--max-model-len``); None: the model's own."""
    port: int = 8000
    """The port the server listens on (API and ``/metrics``)."""
    extra_args: tuple[str, ...] = ()
    """Further vLLM flags, appended after the ones rendered here."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of the model container."""

    # Routes vLLM's OpenAI server (vllm.entrypoints.openai.api_server) serves.
    HEALTH_PATHS: ClassVar[tuple[str, ...]] = ("/health",)
    """Health-check paths vLLM's OpenAI server serves."""
    METRICS_PATH: ClassVar[str] = "/metrics"
    """The path of vLLM's Prometheus metrics."""
    INVOCATION_PATHS: ClassVar[tuple[str, ...]] = ("v1/chat/completions", "v1/completions")
    """Invocation paths vLLM's OpenAI server serves."""

    def __post_init__(self) -> None:
        args = Args("VllmWorker")
        args.text(
            "image",
            self.image,
            pattern=PINNED_IMAGE_PATTERN,
            max_length=512,
            description=PINNED_IMAGE_DESCRIPTION,
        )
        args.integer("tensor_parallel_size", self.tensor_parallel_size, minimum=1, maximum=64)
        if self.max_model_len is not None:
            args.integer("max_model_len", self.max_model_len, minimum=1)
        args.integer("port", self.port, minimum=1, maximum=65535)
        args.sequence("extra_args", self.extra_args, lambda name, v: args.text(name, v))
        args.mapping(
            "environment",
            self.environment,
            lambda name, v: args.text(name, v, min_length=0),
            key_pattern=r"[A-Za-z_][A-Za-z0-9_]*",
        )

    def args(self, served_model_name: str) -> list[str]:
        """The server's command-line arguments, serving the model as ``served_model_name``."""
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
        args = Args("RequestLimits")
        args.integer("max_concurrent_requests", self.max_concurrent_requests, minimum=1)
        args.integer("max_queue_size", self.max_queue_size, minimum=0)
        args.integer("overflow_status_code", self.overflow_status_code, minimum=400, maximum=599)

    def render(self) -> dict[str, Any]:
        return {
            "maxConcurrentRequests": self.max_concurrent_requests,
            "maxQueueSize": self.max_queue_size,
            "overflowStatusCode": self.overflow_status_code,
        }


THIS_ENDPOINT = "<registered endpoint name>"
"""A dimension value the rendering replaces with the endpoint's registered name (suffixed with routing)."""


@dataclass(frozen=True)
class CloudWatchTrigger:
    """Scale on a CloudWatch metric (KEDA ``aws-cloudwatch`` scaler, credentials from the KEDA role)."""

    name: str
    """The trigger's name, unique within the endpoint's triggers."""
    namespace: str
    """The metric's CloudWatch namespace."""
    metric_name: str
    """The metric's name."""
    dimensions: Mapping[str, str]
    """The metric's dimensions (name -> value), at most 30."""
    target_value: float
    """The value per replica that KEDA holds, more than 0."""
    statistic: str = "Sum"
    """Sum, Average, Minimum, Maximum or SampleCount."""
    period_seconds: int = 60
    """The metric's period, 1-86400 s."""
    activation_target_value: float | None = None
    """Scale from 0 to 1 once the metric exceeds this (KEDA's activation; only with ``min_replicas`` 0).
    None: the CRD's default (0), and the key is not rendered."""
    collection_seconds: int | None = None
    """How far back each query looks (``metricCollectionStartTime``), at least ``period_seconds``.
    None: the CRD's default (300 s), and the key is not rendered."""

    def __post_init__(self) -> None:
        args = Args("CloudWatchTrigger")
        args.text("name", self.name, allow_token=False)
        args.text("namespace", self.namespace, max_length=255)
        args.text("metric_name", self.metric_name, max_length=255)
        args.mapping("dimensions", self.dimensions, lambda name, v: args.text(name, v), max_items=30)
        args.number("target_value", self.target_value, minimum=0, exclusive_minimum=True)
        args.one_of("statistic", self.statistic, ("Sum", "Average", "Minimum", "Maximum", "SampleCount"))
        args.integer("period_seconds", self.period_seconds, minimum=1, maximum=86400)
        if self.activation_target_value is not None:
            args.number("activation_target_value", self.activation_target_value, minimum=0)
        if self.collection_seconds is not None:
            args.integer("collection_seconds", self.collection_seconds, minimum=1, maximum=86400)
            if self.collection_seconds < self.period_seconds:
                raise args.error(
                    "collection_seconds",
                    self.collection_seconds,
                    f"at least period_seconds ({self.period_seconds}): each query must span one whole period",
                )

    @classmethod
    def sagemaker_invocations(cls, endpoint_name: str | None, target_per_replica: float) -> CloudWatchTrigger:
        """Invocations per minute of the registered SageMaker endpoint, averaged over the replicas.

        ``endpoint_name`` None: the endpoint this trigger scales, under the name it registers (with routing,
        ``endpoint_name`` plus the creation suffix, which exists only once the endpoint is built)."""
        return cls(
            name="sagemaker-invocations",
            namespace="AWS/SageMaker",
            metric_name="Invocations",
            dimensions={"EndpointName": endpoint_name or THIS_ENDPOINT, "VariantName": "AllTraffic"},
            target_value=target_per_replica,
        )

    def render(self) -> dict[str, Any]:
        """One entry of the CRD's ``cloudWatchTriggerList``."""
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
                **(
                    {"activationTargetValue": self.activation_target_value}
                    if self.activation_target_value is not None
                    else {}
                ),
                **(
                    {"metricCollectionStartTime": self.collection_seconds}
                    if self.collection_seconds is not None
                    else {}
                ),
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
    metric_type: str = "Average"
    """``Average``: the query's value divided by the replicas is held at the target (a sum over pods);
    ``Value``: the query's value itself is (a mean over pods, or a fraction)."""

    def __post_init__(self) -> None:
        args = Args("PrometheusTrigger")
        args.text("server_address", self.server_address, pattern=r"https://\S+", description="an https URL")
        args.text("query", self.query, allow_token=False)
        args.number("target_value", self.target_value, minimum=0, exclusive_minimum=True)
        args.text("name", self.name, allow_token=False)
        args.one_of("metric_type", self.metric_type, ("Average", "Value"))

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
                "metricType": self.metric_type,
            }
        }


@dataclass(frozen=True)
class AutoScaling:
    """Replica autoscaling (``spec.autoScalingSpec``; the operator creates a KEDA ScaledObject).

    ``trigger``: one trigger, or a tuple of triggers (its Prometheus ones in ``prometheusTriggerList``, its
    CloudWatch ones in ``cloudWatchTriggerList``; HPA follows the one that asks for the most replicas, and from
    zero any trigger above its activation value wakes the endpoint).
    """

    min_replicas: int
    """The fewest replicas, 0 (scale to zero) up to ``max_replicas``."""
    max_replicas: int
    """The most replicas, at least 1."""
    trigger: CloudWatchTrigger | PrometheusTrigger | tuple[CloudWatchTrigger | PrometheusTrigger, ...]
    polling_interval_seconds: int = 30
    """How often KEDA queries the triggers, at least 1 s."""
    cooldown_seconds: int = 300
    """How long KEDA waits after the last active trigger before scaling to ``min_replicas`` 0."""
    scale_down_stabilization_seconds: int = 300
    """The HPA's scale-down stabilization window, at least 1 s."""

    def __post_init__(self) -> None:
        args = Args("AutoScaling")
        args.integer("min_replicas", self.min_replicas, minimum=0)
        args.integer("max_replicas", self.max_replicas, minimum=1)
        if self.min_replicas > self.max_replicas:
            raise args.error("min_replicas", self.min_replicas, f"at most max_replicas ({self.max_replicas})")
        if isinstance(self.trigger, tuple):

            def one(param: str, value: Any) -> CloudWatchTrigger | PrometheusTrigger:
                if not isinstance(value, CloudWatchTrigger | PrometheusTrigger):
                    raise args.error(param, value, "a CloudWatchTrigger or a PrometheusTrigger")
                return value

            # At most 100 in all keeps each of the two lists within the CRD's maxItems (100).
            triggers = args.sequence("trigger", self.trigger, one, min_items=1, max_items=100)
            names = [t.name for t in triggers]
            for index, name in enumerate(names):
                if names.index(name) != index:
                    raise args.error(f"trigger[{index}].name", name, "a name unique among the triggers")
        elif not isinstance(self.trigger, CloudWatchTrigger | PrometheusTrigger):
            raise args.error(
                "trigger",
                self.trigger,
                "a CloudWatchTrigger, a PrometheusTrigger or a tuple of them",
            )
        if self.min_replicas > 0:
            for index, trigger in enumerate(self.triggers):
                if isinstance(trigger, CloudWatchTrigger) and trigger.activation_target_value is not None:
                    raise args.error(
                        f"trigger[{index}].activation_target_value",
                        trigger.activation_target_value,
                        f"None when min_replicas is {self.min_replicas}: activation only wakes an endpoint "
                        "from 0 (the operator ignores it otherwise)",
                    )
        for name in ("polling_interval_seconds", "cooldown_seconds", "scale_down_stabilization_seconds"):
            args.integer(name, getattr(self, name), minimum=1)

    @property
    def triggers(self) -> tuple[CloudWatchTrigger | PrometheusTrigger, ...]:
        """``trigger`` as a tuple."""
        return self.trigger if isinstance(self.trigger, tuple) else (self.trigger,)

    def render(self) -> dict[str, Any]:
        """The CRD's ``autoScalingSpec``."""
        if isinstance(self.trigger, tuple):
            lists = {
                key: [t.render()[item] for t in self.trigger if isinstance(t, kind)]
                for key, item, kind in (
                    ("prometheusTriggerList", "prometheusTrigger", PrometheusTrigger),
                    ("cloudWatchTriggerList", "cloudWatchTrigger", CloudWatchTrigger),
                )
            }
            triggers = {key: value for key, value in lists.items() if value}
        else:
            triggers = self.trigger.render()
        return {
            "minReplicaCount": self.min_replicas,
            "maxReplicaCount": self.max_replicas,
            "pollingInterval": self.polling_interval_seconds,
            "cooldownPeriod": self.cooldown_seconds,
            "scaleDownStabilizationTime": self.scale_down_stabilization_seconds,
            **triggers,
        }


# KV caching and intelligent routing "currently support only vLLM-based inference containers" (AWS DG,
# sagemaker-hyperpod-model-deployment-caching-routing); the operator's KV layer is LMCache, which the AWS
# samples get from lmcache/vllm-openai (aws/sagemaker-hyperpod-cli@011ca927, helm_chart/HyperPodHelmChart/charts/
# inference-operator/config/samples/v1_llama31_8b_kv_cache_l1_l2.yaml) and the DPD page from the AWS vLLM
# DLC (public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1). Repository suffixes, so that
# an ECR pull-through or private mirror of the same image passes.
LMCACHE_IMAGE_REPOSITORIES = ("lmcache/vllm-openai", "deep-learning-containers/vllm")
# CRD v1 spec.kvCacheSpec.l2CacheSpec.l2CacheBackend pattern (?i)redis|tieredstorage.
L2_BACKENDS = ("tieredstorage", "redis")
# CRD v1 spec.intelligentRoutingSpec.routingStrategy enum; prefixaware is the CRD default.
ROUTING_STRATEGIES = ("prefixaware", "kvaware", "session", "roundrobin")
# Prefill/decode (pdSpec) instance types (AWS DG sagemaker-hyperpod-model-deployment-dpd; field-scan §1.3).
PD_INSTANCE_TYPES = (
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.p6-b300.48xlarge",
)
# ElastiCache endpoints (always inside a VPC) as LMCache's Redis connector parses them: rediss:// is TLS
# (LMCache/LMCache lmcache/v1/storage_backend/connector/redis_adapter.py@0e65d2fc, can_parse).
ELASTICACHE_URL = r"rediss://[a-z0-9.-]+\.cache\.amazonaws\.com(\.cn)?:[0-9]{1,5}"
# The cache the stack creates is TLS-only, so a plain redis:// URL would never connect.
ELASTICACHE_URL_ACCEPTED = "rediss://<ElastiCache endpoint>:<port> (TLS only: plain redis:// is refused)"


def image_repository(image: str) -> str:
    """The repository of ``image`` without its tag or digest (``lmcache/vllm-openai:v0.3.7`` -> ``lmcache/vllm-openai``)."""
    head, _, last = image.split("@", 1)[0].rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def serves_lmcache(image: str) -> bool:
    return image_repository(image).endswith(LMCACHE_IMAGE_REPOSITORIES)


def serves_vllm(image: str) -> bool:
    return "vllm" in image_repository(image).rsplit("/", 1)[-1]


@dataclass(frozen=True)
class KvCache:
    """The operator's KV cache (``spec.kvCacheSpec``): L1 offload to CPU memory, and an optional L2 tier.

    ``tieredstorage``: the HyperPod cluster's managed tiered storage daemon (``TieredStorageConfig``), which
    takes ``tiered_storage_memory_percent`` of every node's memory. ``redis``: an ElastiCache (Valkey or Redis
    OSS) cluster inside the HyperPod cluster's VPC, reached over TLS at ``redis_url``.
    """

    l1: bool = True
    """Offload KV cache to CPU memory (``enableL1Cache``)."""
    l2_backend: str | None = None
    """The L2 tier: ``tieredstorage``, ``redis`` or None (no L2)."""
    redis_url: str | None = None
    """``rediss://<ElastiCache endpoint>:<port>``; only with ``l2_backend`` redis."""
    tiered_storage_memory_percent: int | None = None
    """The cluster's ``InstanceMemoryAllocationPercentage``; only (and required) with tieredstorage."""

    def __post_init__(self) -> None:
        args = Args("KvCache")
        args.boolean("l1", self.l1)
        if self.l2_backend is not None:
            args.one_of("l2_backend", self.l2_backend, L2_BACKENDS)
        elif not self.l1:
            raise args.error("l1", self.l1, "True, or an l2_backend: a KvCache with neither caches nothing")
        if self.l2_backend == "redis":
            if self.redis_url is None:
                raise args.error(
                    "redis_url", None, "the URL of the ElastiCache cluster when l2_backend is redis"
                )
            args.text(
                "redis_url",
                self.redis_url,
                pattern=ELASTICACHE_URL,
                description=f"{ELASTICACHE_URL_ACCEPTED}, inside the VPC; never an outside cache",
            )
        elif self.redis_url is not None:
            raise args.error("redis_url", self.redis_url, "None unless l2_backend is redis")
        if self.l2_backend == "tieredstorage":
            if self.tiered_storage_memory_percent is None:
                raise args.error(
                    "tiered_storage_memory_percent",
                    None,
                    "the cluster's TieredStorageConfig memory share (1-100) when l2_backend is tieredstorage",
                )
            # ClusterTieredStorageConfig.InstanceMemoryAllocationPercentage: 0-100 (botocore sagemaker
            # service-2.json 1.44.8); 0 would leave the L2 tier without memory.
            args.integer(
                "tiered_storage_memory_percent", self.tiered_storage_memory_percent, minimum=1, maximum=100
            )
        elif self.tiered_storage_memory_percent is not None:
            raise args.error(
                "tiered_storage_memory_percent",
                self.tiered_storage_memory_percent,
                "None unless l2_backend is tieredstorage",
            )

    @property
    def reserved_memory_percent(self) -> int:
        """The share of node memory the tiered storage daemon holds (0 without it)."""
        return self.tiered_storage_memory_percent or 0

    def render(self) -> dict[str, Any]:
        """The CRD's ``kvCacheSpec``."""
        spec: dict[str, Any] = {"enableL1Cache": self.l1, "enableL2Cache": self.l2_backend is not None}
        if self.l2_backend is not None:
            # The docs: l2CacheLocalUrl is not needed for tieredstorage (the daemon is on every node).
            spec["l2CacheSpec"] = {
                "l2CacheBackend": self.l2_backend,
                **({"l2CacheLocalUrl": self.redis_url} if self.redis_url else {}),
            }
        return spec


@dataclass(frozen=True)
class IntelligentRouting:
    """The operator's router in front of the model pods (``spec.intelligentRoutingSpec``).

    Accepted only when an endpoint is created (CRD: "Adding this configuration to an existing deployment will be
    rejected"; "Once set, the enabled field cannot be modified"): :func:`render_inference_endpoint_config` names
    the resource after it, so a change creates a new endpoint instead of an update the operator rejects.
    """

    strategy: str = "prefixaware"
    """The router's strategy, one of :data:`ROUTING_STRATEGIES`."""

    def __post_init__(self) -> None:
        Args("IntelligentRouting").one_of("strategy", self.strategy, ROUTING_STRATEGIES)

    def render(self) -> dict[str, Any]:
        """The CRD's ``intelligentRoutingSpec``."""
        return {"enabled": True, "routingStrategy": self.strategy}


def creation_suffix(routing: IntelligentRouting | None) -> str:
    """``-<8 hex>`` from the creation-only fields (empty without them): part of every name they must renew."""
    if routing is None:
        return ""
    digest = hashlib.sha256(json.dumps(routing.render(), sort_keys=True).encode()).hexdigest()
    return f"-{digest[:8]}"


CREATION_SUFFIX_LENGTH = 9


@dataclass(frozen=True)
class PdRole:
    """One role of prefill/decode disaggregation: its pods, their tensor parallelism and their autoscaling."""

    tensor_parallel_size: int
    replicas: int = 1
    autoscaling: AutoScaling | None = None

    def __post_init__(self) -> None:
        args = Args("PdRole")
        args.integer("tensor_parallel_size", self.tensor_parallel_size, minimum=1, maximum=64)
        args.integer("replicas", self.replicas, minimum=1)
        if self.autoscaling is not None:
            args.instance("autoscaling", self.autoscaling, AutoScaling, "an AutoScaling")


@dataclass(frozen=True)
class PrefillDecode:
    """Disaggregated prefill and decode (``spec.pdSpec``): KV moves from prefill to decode pods over EFA.

    ``routing_threshold``: requests with at least this many input tokens are prefilled remotely; shorter ones
    are prefilled by the decode pod (CRD default 4096; 0 always disaggregates).
    """

    prefill: PdRole
    decode: PdRole
    routing_threshold: int = 4096

    def __post_init__(self) -> None:
        args = Args("PrefillDecode")
        args.instance("prefill", self.prefill, PdRole, "a PdRole")
        args.instance("decode", self.decode, PdRole, "a PdRole")
        args.integer("routing_threshold", self.routing_threshold, minimum=0, maximum=2**31 - 1)


@dataclass(frozen=True)
class InferenceEndpoint:
    """One model on HyperPod: what :func:`render_inference_endpoint_config` turns into the custom resource."""

    name: str
    """metadata.name, spec.modelName and vLLM's served model name."""
    instance_types: tuple[str, ...]
    """``ml.`` instance types; one is ``spec.instanceType``, several are a priority list (``spec.instanceTypes``)."""
    model_source: ModelSource
    """Where the weights are: an :class:`S3ModelSource` or an ``FsxModelSource``."""
    worker: VllmWorker
    """The model server."""
    namespace: str = "default"
    """The Kubernetes namespace of the resource."""
    endpoint_name: str | None = None
    """Register a SageMaker endpoint of this name (callers use InvokeEndpoint); None: load balancer only."""
    replicas: int = 1
    """Replicas while no ``autoscaling`` is set."""
    invocation_path: str = "v1/chat/completions"
    """The path the registered endpoint invokes."""
    health_check_path: str = "/health"
    """The path the operator's health check calls."""
    metrics_port: int | None = None
    """Port the operator scrapes the model's metrics from; None: the worker's port (where vLLM serves them)."""
    request_limits: RequestLimits | None = None
    """Concurrency limit and queue of the operator's sidecar; None: none."""
    autoscaling: AutoScaling | None = None
    """Replica autoscaling; None: ``replicas`` fixed."""
    max_deploy_time_seconds: int = 3600
    """How long the operator waits for a deployment before it fails it."""
    threads_per_core: int = 1
    """Threads per core of the instance group (``HyperPodInstanceGroup.threads_per_core``): 1 halves the CPUs
    the node exposes, and the CPU request follows."""
    lora: LoraServing | None = None
    """LoRA adapters the worker serves beside the base model; None: the base model only."""
    kv_cache: KvCache | None = None
    """The operator's KV cache (LMCache images only); None: no kvCacheSpec."""
    routing: IntelligentRouting | None = None
    """The operator's intelligent routing (vLLM images only); None: off. Creation-only: a change renames the
    resource (and the registered endpoint) with :func:`creation_suffix`, which deploys a new one."""
    prefill_decode: PrefillDecode | None = None
    """Disaggregated prefill/decode over EFA (LMCache images, :data:`PD_INSTANCE_TYPES`); None: off."""

    def __post_init__(self) -> None:
        args = Args("InferenceEndpoint")
        args.text(
            "name",
            self.name,
            pattern=_K8S_NAME.pattern,
            description="1-50 lowercase letters, digits and '-', starting and ending with a letter or digit",
            allow_token=False,
        )
        types = args.sequence(
            "instance_types",
            self.instance_types,
            lambda n, v: args.text(n, v, allow_token=False),
            min_items=1,
        )
        if not isinstance(self.model_source, S3ModelSource | FsxModelSource):
            raise args.error("model_source", self.model_source, "an S3ModelSource or an FsxModelSource")
        args.instance("worker", self.worker, VllmWorker, "a VllmWorker")
        args.text(
            "namespace", self.namespace, pattern=_K8S_NAME.pattern, description="a Kubernetes namespace"
        )
        for index, instance_type in enumerate(types):
            try:
                gpus = gpu_instance_type(instance_type, key="instance_types", sagemaker=True).gpus
            except ValueError as error:
                raise args.error(
                    f"instance_types[{index}]", instance_type, str(error).split("expected ")[-1]
                ) from None
            if self.worker.tensor_parallel_size > gpus:
                raise args.error(
                    "worker.tensor_parallel_size",
                    self.worker.tensor_parallel_size,
                    f"1 to {gpus}: {instance_type} has {gpus} GPUs (one replica runs on one node)",
                )
        if self.health_check_path not in self.worker.HEALTH_PATHS:
            raise args.error(
                "health_check_path",
                self.health_check_path,
                f"one of {', '.join(self.worker.HEALTH_PATHS)} (where the vLLM worker serves health checks)",
            )
        if self.metrics_port is not None and self.metrics_port != self.worker.port:
            raise args.error(
                "metrics_port",
                self.metrics_port,
                f"{self.worker.port} or unset: vLLM serves {self.worker.METRICS_PATH} on its invocation port",
            )
        if self.invocation_path not in self.worker.INVOCATION_PATHS:
            raise args.error(
                "invocation_path",
                self.invocation_path,
                f"one of {', '.join(self.worker.INVOCATION_PATHS)} (routes of the vLLM worker)",
            )
        if self.endpoint_name is not None:
            args.text(
                "endpoint_name",
                self.endpoint_name,
                pattern=_ENDPOINT_NAME.pattern,
                description="a SageMaker endpoint name (letters, digits and '-', at most 63 characters)",
                allow_token=False,
            )
        args.integer("replicas", self.replicas, minimum=1)
        if self.request_limits is not None:
            args.instance("request_limits", self.request_limits, RequestLimits, "a RequestLimits")
        if self.autoscaling is not None:
            args.instance("autoscaling", self.autoscaling, AutoScaling, "an AutoScaling")
        args.integer("max_deploy_time_seconds", self.max_deploy_time_seconds, minimum=60, maximum=86400)
        trigger = self.autoscaling.trigger if self.autoscaling else None
        if (
            isinstance(trigger, CloudWatchTrigger)
            and trigger.namespace == "AWS/SageMaker"
            and self.endpoint_name is None
        ):
            raise args.error(
                "autoscaling",
                trigger.name,
                "a Prometheus trigger, or endpoint_name set: a CloudWatch trigger on AWS/SageMaker metrics needs "
                "a registered SageMaker endpoint (the metrics exist only for one)",
            )
        if (
            isinstance(trigger, CloudWatchTrigger)
            and self.routing is not None
            and trigger.dimensions.get("EndpointName") == self.endpoint_name
        ):
            raise args.error(
                "autoscaling",
                trigger.name,
                f"a trigger on the registered name {self.registered_endpoint_name} (routing renames the endpoint): "
                "CloudWatchTrigger.sagemaker_invocations(None, ...) watches it",
            )
        args.one_of("threads_per_core", self.threads_per_core, (1, 2))
        if self.lora is not None:
            self._check_lora(args)
        self._check_operator_features(args, types)
        for instance_type in types:
            facts = gpu_instance_type(instance_type, key="instance_types", sagemaker=True)
            share = model_pod_share(
                facts, self.worker.tensor_parallel_size, self.threads_per_core, self.reserved_memory_percent
            )
            if share.cpu_millicores < 1000 or share.memory_mib < 1024:
                raise args.error(
                    "threads_per_core",
                    self.threads_per_core,
                    f"a setting that leaves a model pod at least 1 CPU and 1 GiB: {instance_type} with "
                    f"threads_per_core={self.threads_per_core} leaves one of tensor_parallel_size "
                    f"{self.worker.tensor_parallel_size} {share.cpu_millicores}m CPU and {share.memory_mib} MiB "
                    "after kubelet, the system DaemonSets and the tiered storage share "
                    f"({self.reserved_memory_percent} %); use threads_per_core=2, a larger tensor parallelism, "
                    "a smaller tiered_storage_memory_percent or a larger instance type",
                )

    def _check_operator_features(self, args: Args, types: Sequence[str]) -> None:
        """KV cache, intelligent routing and prefill/decode: what the operator rejects or silently ignores."""
        image = self.worker.image
        lmcache = (
            f"an image of {' or '.join(LMCACHE_IMAGE_REPOSITORIES)} (the operator's KV layer is LMCache)"
        )
        if self.kv_cache is not None:
            args.instance("kv_cache", self.kv_cache, KvCache, "a KvCache")
            if not serves_lmcache(image):
                raise args.error("worker.image", image, f"{lmcache} when kv_cache is set")
        if self.routing is not None:
            args.instance("routing", self.routing, IntelligentRouting, "an IntelligentRouting")
            if not serves_vllm(image):
                raise args.error("worker.image", image, "a vLLM image when routing is set (vLLM-based only)")
            limit = 50 - CREATION_SUFFIX_LENGTH
            if len(self.name) > limit:
                raise args.error(
                    "name",
                    self.name,
                    f"at most {limit} characters when routing is set "
                    f"(the resource name adds {CREATION_SUFFIX_LENGTH})",
                )
            if self.endpoint_name is not None and len(self.endpoint_name) > 63 - CREATION_SUFFIX_LENGTH:
                raise args.error(
                    "endpoint_name",
                    self.endpoint_name,
                    f"at most {63 - CREATION_SUFFIX_LENGTH} characters when routing is set (the registered "
                    f"name adds {CREATION_SUFFIX_LENGTH})",
                )
        if self.prefill_decode is not None:
            pd = args.instance("prefill_decode", self.prefill_decode, PrefillDecode, "a PrefillDecode")
            if self.autoscaling is not None:
                # Prefill and decode are two Deployments: each scales with its own pdSpec.autoScalingSpec.
                raise args.error(
                    "autoscaling",
                    self.autoscaling.min_replicas,
                    "None when prefill_decode is set (each PdRole has its own autoscaling)",
                )
            if not serves_lmcache(image):
                raise args.error("worker.image", image, f"{lmcache} when prefill_decode is set")
            for index, instance_type in enumerate(types):
                if instance_type not in PD_INSTANCE_TYPES:
                    raise args.error(
                        f"instance_types[{index}]",
                        instance_type,
                        f"one of {', '.join(PD_INSTANCE_TYPES)} when prefill_decode is set",
                    )
                gpus = gpu_instance_type(instance_type, key="instance_types", sagemaker=True).gpus
                for role in ("prefill", "decode"):
                    tp = getattr(pd, role).tensor_parallel_size
                    if tp > gpus:
                        raise args.error(
                            f"prefill_decode.{role}.tensor_parallel_size",
                            tp,
                            f"1 to {gpus}: {instance_type} has {gpus} GPUs",
                        )

    @property
    def reserved_memory_percent(self) -> int:
        """The share of node memory the KV cache's tiered storage daemon holds (0 without it)."""
        return self.kv_cache.reserved_memory_percent if self.kv_cache else 0

    @property
    def resource_name(self) -> str:
        """metadata.name and spec.modelName: the name plus the creation-only fields' suffix."""
        return self.name + creation_suffix(self.routing)

    @property
    def registered_endpoint_name(self) -> str | None:
        """The SageMaker endpoint name, renewed with the resource (two resources cannot register one name)."""
        return self.endpoint_name + creation_suffix(self.routing) if self.endpoint_name else None

    def _check_lora(self, args: Args) -> None:
        lora = args.instance("lora", self.lora, LoraServing, "a LoraServing")
        lora.check_base_model(args, self.name, "the endpoint's")
        for flag in _LORA_FLAGS:
            if any(arg == flag or arg.startswith(f"{flag}=") for arg in self.worker.extra_args):
                raise args.error(
                    "worker.extra_args",
                    list(self.worker.extra_args),
                    f"no {flag} when lora is set (the lora input renders the LoRA flags)",
                )

    @property
    def service_account_name(self) -> str | None:
        """The ServiceAccount the model pods run as (LoRA only: its role reads the adapters); None: default."""
        return f"{self.name}-lora" if self.lora else None

    def resources(self, tp: int | None = None, efa: bool = False) -> dict[str, Any]:
        """GPUs = tensor parallelism; CPU and memory: this pod's share of what the smallest candidate node
        leaves after kubelet's reservations, the system DaemonSets and the operator's own containers.

        A node of ``g`` GPUs runs ``g // tp`` such pods, so each gets ``tp / g`` of that remainder: CPUs from
        the cores and threads the instance group really runs (``threads_per_core``), never the nominal vCPUs.
        """
        tp = tp or self.worker.tensor_parallel_size
        facts = [gpu_instance_type(t, key="instance_types", sagemaker=True) for t in self.instance_types]
        shares = [model_pod_share(f, tp, self.threads_per_core, self.reserved_memory_percent) for f in facts]
        cpu_cores = min(s.cpu_millicores for s in shares) // 1000
        memory_gib = min(s.memory_mib for s in shares) // 1024
        devices = {"nvidia.com/gpu": str(tp)}
        if efa:
            # The pod's share of the node's EFA devices (KV moves between roles over EFA RDMA).
            devices["vpc.amazonaws.com/efa"] = str(
                min(max(1, f.efa_interfaces * tp // f.gpus) for f in facts)
            )
        return {
            "requests": {"cpu": str(cpu_cores), "memory": f"{memory_gib}Gi", **devices},
            "limits": devices,
        }


def hyperpod_node_available(
    instance: GpuInstanceType, threads_per_core: int, tiered_storage_percent: int = 0
) -> Resources:
    """What model pods may request on one HyperPod node: allocatable minus the system DaemonSets and the
    tiered storage daemon's share of the instance's memory (``InstanceMemoryAllocationPercentage``)."""
    allocatable = node_allocatable(instance, threads_per_core=threads_per_core)
    reserved = sum(HYPERPOD_NODE_DAEMONSETS.values(), Resources())
    tiered = instance.memory_gib * 1024 * tiered_storage_percent // 100
    return Resources(
        cpu_millicores=allocatable.cpu_millicores - reserved.cpu_millicores,
        memory_mib=allocatable.memory_mib - reserved.memory_mib - tiered,
        hugepages_2mi_mib=allocatable.hugepages_2mi_mib - reserved.hugepages_2mi_mib,
        gpus=allocatable.gpus,
        efa=allocatable.efa,
    )


def model_pod_share(
    instance: GpuInstanceType, tp: int, threads_per_core: int, tiered_storage_percent: int = 0
) -> Resources:
    """CPU and memory one model container of ``tp`` GPUs may request so that ``gpus // tp`` pods, each with
    the operator's injected containers, fit one node (GPU, EFA and huge pages are not part of the share)."""
    available = hyperpod_node_available(instance, threads_per_core, tiered_storage_percent)
    return Resources(
        cpu_millicores=available.cpu_millicores * tp // instance.gpus - OPERATOR_POD_OVERHEAD.cpu_millicores,
        memory_mib=available.memory_mib * tp // instance.gpus - OPERATOR_POD_OVERHEAD.memory_mib,
    )


def render_inference_endpoint_config(endpoint: InferenceEndpoint) -> dict[str, Any]:
    """The ``InferenceEndpointConfig`` manifest for ``endpoint`` (a plain dict; tokens pass through)."""
    worker = endpoint.worker
    lora = endpoint.lora
    worker_spec: dict[str, Any] = {
        "image": worker.image,
        "args": worker.args(endpoint.name),
        "modelInvocationPort": {"containerPort": worker.port, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT_PATH},
        "resources": endpoint.resources(),
    }
    if lora:
        worker_spec["command"] = vllm_lora_launcher(lora.adapters, lora.region)
        worker_spec["args"] += vllm_lora_args(
            lora.adapters, max_lora_rank=lora.max_lora_rank, directory=LAUNCHER_ADAPTER_DIR
        )
    if worker.environment:
        worker_spec["environmentVariables"] = [{"name": k, "value": v} for k, v in worker.environment.items()]
    if endpoint.request_limits:
        worker_spec["requestLimits"] = endpoint.request_limits.render()

    spec: dict[str, Any] = {
        "modelName": endpoint.resource_name,
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
    if endpoint.registered_endpoint_name:
        spec["endpointName"] = endpoint.registered_endpoint_name
    if endpoint.autoscaling:
        spec["autoScalingSpec"] = endpoint.autoscaling.render()
    if endpoint.service_account_name:
        spec["kubernetes"] = {"serviceAccountName": endpoint.service_account_name}
    if endpoint.kv_cache:
        spec["kvCacheSpec"] = endpoint.kv_cache.render()
    if endpoint.routing:
        spec["intelligentRoutingSpec"] = endpoint.routing.render()
    if endpoint.prefill_decode:
        spec["pdSpec"] = _render_pd(endpoint, endpoint.prefill_decode)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": endpoint.resource_name, "namespace": endpoint.namespace},
        "spec": _this_endpoint(spec, endpoint.registered_endpoint_name),
    }


def _this_endpoint(value: Any, name: str | None) -> Any:
    """``value`` with every :data:`THIS_ENDPOINT` replaced by ``name`` (the triggers' dimensions)."""
    if isinstance(value, dict):
        return {k: _this_endpoint(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_this_endpoint(v, name) for v in value]
    return name if value == THIS_ENDPOINT else value


def _render_pd(endpoint: InferenceEndpoint, pd: PrefillDecode) -> dict[str, Any]:
    """``spec.pdSpec``: each role's pods (their args are appended to the worker's and override its flags)."""

    def role(spec: PdRole) -> dict[str, Any]:
        return {
            "replicas": spec.replicas,
            "args": ["--tensor-parallel-size", str(spec.tensor_parallel_size)],
            "resources": endpoint.resources(spec.tensor_parallel_size, efa=True),
        }

    scaling = {
        key: spec.autoscaling.render()
        for key, spec in (("prefillAutoScaling", pd.prefill), ("decodingAutoScaling", pd.decode))
        if spec.autoscaling
    }
    return {
        "prefillSpec": role(pd.prefill),
        "decodingSpec": role(pd.decode),
        "routingThreshold": pd.routing_threshold,
        **({"autoScalingSpec": scaling} if scaling else {}),
    }
