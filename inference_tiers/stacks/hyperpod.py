"""Tier ``hyperpod``: SageMaker HyperPod on EKS serving a model through the HyperPod Inference Operator.

One stack, ``InferenceTiers-HyperPod``, composed in the order HyperPod needs: network (VPC, HyperPod subnet in
a secondary CIDR by AZ ID, S3 endpoint, EFA security group) -> EKS control plane (``EksCluster``) -> HyperPod
dependency Helm chart -> ``AWS::SageMaker::Cluster`` (lifecycle scripts, execution role) -> node barrier ->
inference operator add-on and its prerequisites -> ``InferenceEndpointConfig``; plus observability (AMP).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    AddonFeature,
    AddonPin,
    ConfigError,
    ImageNeed,
    InstanceNeed,
    TierSpec,
    addon_pins,
    boolean,
    choice,
    integer,
    ipv4_cidr,
    items,
    number,
    optional,
    pinned_image,
    setting,
    text,
)
from inference_tiers.constructs.common.console import dashboard_url
from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.storage import access_logs_bucket, private_bucket
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    DEFAULT_SYSTEM_NODE_COUNT,
    DEFAULT_SYSTEM_NODE_INSTANCE_TYPE,
    KUBERNETES_VERSION,
    admin_principal_arn_setting,
    as_cluster_ref,
    public_endpoint_cidrs_setting,
)
from inference_tiers.constructs.eks.hyperpod_gateway import (
    SCALE_TO_ZERO_COOLDOWN_SECONDS,
    add_hyperpod_gateway,
    queue_triggers,
)
from inference_tiers.constructs.eks.inference_gateway import InferenceGateway
from inference_tiers.constructs.eks.tier_base import EksTierBase
from inference_tiers.constructs.hyperpod.cluster import (
    DEEP_HEALTH_CHECKS,
    HyperPodCluster,
    HyperPodInstanceGroup,
)
from inference_tiers.constructs.hyperpod.dependencies import HyperPodDependencyChart
from inference_tiers.constructs.hyperpod.inference_operator import (
    DEFAULT_ADDON_VERSIONS as OPERATOR_ADDON_VERSIONS,
)
from inference_tiers.constructs.hyperpod.inference_operator import (
    INFERENCE_ADDON,
    OPERATOR_ADDON_BUILDS,
    OPERATOR_FEATURE_MINIMUMS,
    HyperPodInferenceOperator,
    field_feature,
    field_refusal,
    fields_missing_from,
)
from inference_tiers.constructs.hyperpod.kv_cache import HyperPodKvCacheStore
from inference_tiers.constructs.hyperpod.model_endpoint import HyperPodModelEndpoint
from inference_tiers.constructs.hyperpod.network import HyperPodNetwork, hyperpod_ips_per_instance
from inference_tiers.constructs.hyperpod.observability import (
    OBSERVABILITY_ADDON,
    OBSERVABILITY_ADDON_VERSION,
    HyperPodObservability,
)
from inference_tiers.instance_types import GPU_INSTANCE_TYPES, SAGEMAKER_PREFIX, GpuInstanceType, ml_gpu_type
from inference_tiers.k8s.hyperpod_inference import (
    CREATION_SUFFIX_LENGTH,
    ELASTICACHE_URL,
    ELASTICACHE_URL_ACCEPTED,
    L2_BACKENDS,
    LMCACHE_IMAGE_REPOSITORIES,
    PD_INSTANCE_TYPES,
    ROUTING_STRATEGIES,
    AutoScaling,
    CloudWatchTrigger,
    FsxModelSource,
    InferenceEndpoint,
    IntelligentRouting,
    KvCache,
    LoraServing,
    ModelSource,
    PdRole,
    PrefillDecode,
    PrometheusTrigger,
    RequestLimits,
    S3ModelSource,
    VllmWorker,
    creation_suffix,
    model_pod_share,
    serves_lmcache,
    serves_vllm,
)
from inference_tiers.k8s.inference_gateway import DNS_LABEL, EPP_IMAGE
from inference_tiers.k8s.inference_gateway_lora import adapter_prefix
from inference_tiers.k8s.inference_gateway_settings import (
    InferenceGatewaySettings,
    inference_gateway_setting,
)
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-HyperPod"
_K8S_NAME = r"[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?"


@dataclass(frozen=True)
class HyperPodSettings:
    """Settings of the ``hyperpod`` tier (context keys ``hyperpod.<field>``; defaults in cdk.json)."""

    availability_zone_id: str = setting(
        text(r"[a-z]{2,4}[0-9]+-az[0-9]+", description="an Availability Zone ID such as usw2-az2"),
        "AZ ID of the HyperPod subnet: where the instance capacity (or training plan) is",
    )
    # /16 (the largest VPC AWS allows) to /18 (the smallest that holds two public /24 and two private /20).
    vpc_cidr: str = setting(ipv4_cidr(16, 18), "primary VPC CIDR (EKS and load-balancer subnets)")
    hyperpod_subnet_cidr: str = setting(
        ipv4_cidr(16, 28),
        "secondary VPC CIDR used whole as the HyperPod subnet (81 IPs per ml.p5.48xlarge)",
    )
    instance_type: str = setting(ml_gpu_type, "instance type of the HyperPod instance group")
    instance_count: int = setting(integer(1, 64), "instances in the HyperPod instance group")
    threads_per_core: int = setting(integer(1, 2), "threads per CPU core (1 disables hyperthreading)")
    ebs_volume_gb: int = setting(integer(100, 16384), "secondary EBS volume per instance (/opt/sagemaker)")
    deep_health_checks: tuple[str, ...] = setting(
        items(choice(*DEEP_HEALTH_CHECKS), max_items=2), "deep health checks run when an instance starts"
    )
    training_plan_arn: str | None = setting(
        optional(text(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[\w-]+")),
        "SageMaker training plan providing the capacity; null: on-demand",
    )
    dependency_chart_dir: str | None = setting(
        optional(text(description="a directory path")),
        "HyperPod dependency Helm chart packaged by fetch-dependency-chart.sh; null: not packaged yet "
        "(synth works, deploy is blocked)",
    )
    admin_principal_arn: str | None = admin_principal_arn_setting()
    public_endpoint_cidrs: tuple[str, ...] = public_endpoint_cidrs_setting()
    model_name: str = setting(
        text(_K8S_NAME, description="a Kubernetes name (lowercase letters, digits, '-')", max_length=50),
        "name of the InferenceEndpointConfig, the SageMaker model and vLLM's served model",
    )
    model_source: str = setting(choice("s3", "fsx"), "where the weights are: s3 or fsx")
    model_bucket_name: str | None = setting(
        optional(
            text(
                r"(?!\d+\.\d+\.\d+\.\d+$)(?!.*(\.\.|\.-|-\.))[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]",
                description="an S3 bucket name: 3-63 lowercase letters, digits, '.' and '-', no '..', '.-' or "
                "'-.', not an IP address",
            )
        ),
        "existing bucket with the weights; null: the stack creates one",
    )
    model_location: str = setting(text(max_length=1024), "S3 prefix or FSx directory of the weights")
    fsx_file_system_id: str | None = setting(
        optional(text(r"fs-[0-9a-f]{8,21}", description="an FSx file system id")),
        "FSx for Lustre file system with the weights (model_source fsx)",
    )
    vllm_image: str = setting(pinned_image(), "vLLM image (a pinned tag or digest)")
    tensor_parallel_size: int | None = setting(
        optional(integer(1, 8)), "vLLM tensor parallelism; null: every GPU of the instance"
    )
    max_model_len: int = setting(integer(512, 1048576), "vLLM --max-model-len")
    endpoint_name: str | None = setting(
        optional(text(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", description="a SageMaker endpoint name")),
        "register a SageMaker endpoint of this name; null: load balancer only",
    )
    instance_type_priority: tuple[str, ...] = setting(
        items(ml_gpu_type, max_items=8),
        "instance types in order of preference (spec.instanceTypes); empty: instance_type",
    )
    min_replicas: int = setting(integer(0, 64), "autoscaling minimum replicas")
    max_replicas: int = setting(integer(1, 64), "autoscaling maximum replicas")
    scaling_metric: str = setting(
        choice("cloudwatch", "prometheus"),
        "cloudwatch: SageMaker Invocations per replica; prometheus: in-flight requests from AMP",
    )
    scaling_target: float = setting(number(1, 100000), "target value of the scaling metric per replica")
    operator_addon_version: str = setting(
        choice(*OPERATOR_ADDON_BUILDS),
        "amazon-sagemaker-hyperpod-inference build; its operator's CRD bounds the fields the endpoint may set",
    )
    max_concurrent_requests: int | None = setting(
        optional(integer(1, 10000)),
        "per-pod concurrency limit of the operator's sidecar (spec.worker.requestLimits); null: none",
    )
    max_queue_size: int = setting(
        integer(0, 10000), "per-pod queue beyond the concurrency limit (with max_concurrent_requests)"
    )
    observability: bool = setting(boolean(), "install the HyperPod observability add-on with AMP")
    grafana: bool = setting(
        boolean(), "also create an Amazon Managed Grafana workspace (IAM Identity Center)"
    )
    inference_gateway: InferenceGatewaySettings | None = setting(
        inference_gateway_setting(("model",)),
        "opt-in Istio inference gateway whose Endpoint Picker routes to the model's pods, and scaling on vLLM's "
        "queue and KV cache (docs/inference-gateway.md); null: off",
    )
    kv_cache_l1: bool = setting(
        boolean(), "operator KV cache: offload KV blocks to CPU memory (L1); needs an LMCache image"
    )
    kv_cache_l2: str | None = setting(
        optional(choice(*L2_BACKENDS)),
        "operator L2 KV cache: tieredstorage (the cluster's TieredStorageConfig) or redis (ElastiCache Valkey "
        "in the cluster's VPC); null: none",
    )
    tiered_storage_memory_percent: int | None = setting(
        optional(integer(1, 100)),
        "share of every instance's memory the cluster's tiered storage holds (kv_cache_l2 tieredstorage only)",
    )
    kv_cache_redis_url: str | None = setting(
        optional(text(ELASTICACHE_URL, description=ELASTICACHE_URL_ACCEPTED)),
        "an existing ElastiCache in the cluster's VPC (kv_cache_l2 redis only); null: the stack creates one",
    )
    routing_strategy: str | None = setting(
        optional(choice(*ROUTING_STRATEGIES)),
        "operator intelligent routing (creation-only: a change deploys a new endpoint); null: off",
    )
    prefill_decode: bool = setting(
        boolean(), "operator disaggregated prefill/decode over EFA (pdSpec; p5-class types, LMCache image)"
    )
    prefill_tensor_parallel_size: int | None = setting(
        optional(integer(1, 8)), "tensor parallelism of the prefill pods; null: every GPU of the instance"
    )
    decode_tensor_parallel_size: int | None = setting(
        optional(integer(1, 8)), "tensor parallelism of the decode pods; null: every GPU of the instance"
    )
    prefill_max_replicas: int = setting(integer(1, 64), "autoscaling maximum of the prefill pods")
    decode_max_replicas: int = setting(integer(1, 64), "autoscaling maximum of the decode pods")
    pd_routing_threshold: int = setting(
        integer(0, 1048576),
        "input tokens from which a request is prefilled remotely (shorter ones: by the decode pod); 0: always",
    )

    def __post_init__(self) -> None:
        self._check_inference_gateway()
        self._check_operator_features()
        self._check_prefill_decode()
        self._check_operator_fields()
        gpus = self.instance.gpus
        if self.tensor_parallel_size is not None and self.tensor_parallel_size > gpus:
            raise ConfigError(
                "hyperpod.tensor_parallel_size",
                self.tensor_parallel_size,
                f"at most {gpus}, the GPUs of one {self.instance_type} (or null for all of them)",
            )
        for instance_type in self.instance_type_priority:
            if instance_type != self.instance_type:
                raise ConfigError(
                    "hyperpod.instance_type_priority",
                    list(self.instance_type_priority),
                    f"instance types of the instance groups only ({self.instance_type}); "
                    f"{instance_type} is not in any instance group",
                )
        if self.model_source == "fsx" and self.fsx_file_system_id is None:
            raise ConfigError(
                "hyperpod.fsx_file_system_id", None, "an FSx file system id when model_source is fsx"
            )
        if self.scaling_metric == "cloudwatch" and self.endpoint_name is None:
            raise ConfigError(
                "hyperpod.scaling_metric",
                self.scaling_metric,
                "prometheus when endpoint_name is null (SageMaker metrics exist only for a registered endpoint)",
            )
        if self.scaling_metric == "prometheus" and not self.observability:
            raise ConfigError(
                "hyperpod.scaling_metric",
                self.scaling_metric,
                "cloudwatch when observability is false (no AMP)",
            )
        if self.min_replicas > self.max_replicas:
            raise ConfigError(
                "hyperpod.min_replicas", self.min_replicas, f"at most max_replicas ({self.max_replicas})"
            )

    def _check_inference_gateway(self) -> None:
        """What the gateway needs from the other keys (checked first: it explains the others' errors)."""
        gateway = self.inference_gateway
        if gateway is None:
            return
        key = "hyperpod.inference_gateway"
        if not self.observability:
            raise ConfigError(
                "hyperpod.observability",
                self.observability,
                f"true when {key} is set: its queue and KV-cache triggers read vLLM's series from the AMP "
                "workspace the observability add-on writes",
            )
        if self.scaling_metric != "prometheus":
            raise ConfigError(
                "hyperpod.scaling_metric",
                self.scaling_metric,
                f"prometheus when {key} is set: the gateway's scaling is Prometheus triggers on AMP, beside "
                "the in-flight trigger (scaling_target); cloudwatch scales on the registered SageMaker "
                "endpoint's invocations, which requests through the gateway never make",
            )
        if not DNS_LABEL.fullmatch(self.model_name):
            raise ConfigError(
                "hyperpod.model_name",
                self.model_name,
                f"at most 40 characters starting with a letter when {key} is set (the InferencePool and its "
                "Endpoint Picker are named after it)",
            )
        pool = gateway.pools["model"]
        for adapter in gateway.lora_adapters:
            if adapter.name == self.model_name:
                raise ConfigError(
                    f"{key}.lora_adapters",
                    adapter.name,
                    f"adapter names other than hyperpod.model_name ({self.model_name}), which names the base model",
                )
            if not adapter_prefix(adapter):
                raise ConfigError(
                    f"{key}.lora_adapters.{adapter.name}",
                    adapter.s3_uri,
                    "an s3://bucket/prefix URI with a prefix (the adapter's folder): the model pods' role may "
                    "read only that folder, never a whole bucket",
                )
        for bound in ("min_replicas", "max_replicas"):
            if getattr(pool, bound) != getattr(self, bound):
                raise ConfigError(
                    f"{key}.pools.model.{bound}",
                    getattr(pool, bound),
                    f"{getattr(self, bound)}, equal to hyperpod.{bound}: both bound the one ScaledObject the "
                    "operator creates (set both keys to the same value)",
                )

    def _operator_fields(self) -> dict[str, str]:
        """The InferenceEndpointConfig fields of OPERATOR_FIELD_MINIMUMS these settings render, with their keys."""
        chosen = {
            "spec.worker.requestLimits": "hyperpod.max_concurrent_requests"
            if self.max_concurrent_requests is not None
            else None,
            "spec.kubernetes.serviceAccountName": "hyperpod.inference_gateway.lora_adapters"
            if self.inference_gateway is not None and self.inference_gateway.lora_adapters
            else None,
            "spec.pdSpec": "hyperpod.prefill_decode" if self.prefill_decode else None,
            "spec.autoScalingSpec.prometheusTrigger": "hyperpod.scaling_metric"
            if self.scaling_metric == "prometheus" and not self.prefill_decode
            else None,
        }
        chosen["spec.autoScalingSpec.prometheusTriggerList"] = (
            chosen["spec.autoScalingSpec.prometheusTrigger"] if self.inference_gateway else None
        )
        return {field: key for field, key in chosen.items() if key}

    def _check_operator_fields(self) -> None:
        """Every field rendered must be in the pinned add-on build's CRD (kubectl rejects unknown fields)."""
        fields = self._operator_fields()
        for field in fields_missing_from(self.operator_addon_version, list(fields)):
            key = fields[field]
            raise ConfigError(
                key,
                getattr(self, key.split(".")[1]),
                f"{field_refusal(self.operator_addon_version, field)} (hyperpod.operator_addon_version)",
            )

    def _check_prefill_decode(self) -> None:
        """Prefill/decode: the instance types AWS supports, an LMCache image, roles that fit the node."""
        if not self.prefill_decode:
            return
        for key, value in (
            ("instance_type", self.instance_type),
            *(("instance_type_priority", t) for t in self.instance_type_priority),
        ):
            if value not in PD_INSTANCE_TYPES:
                raise ConfigError(
                    f"hyperpod.{key}",
                    value,
                    f"one of {', '.join(PD_INSTANCE_TYPES)} when prefill_decode is true (AWS DPD instance types)",
                )
        if not serves_lmcache(self.vllm_image):
            raise ConfigError(
                "hyperpod.vllm_image",
                self.vllm_image,
                f"an image of {' or '.join(LMCACHE_IMAGE_REPOSITORIES)} when prefill_decode is true (the "
                "operator moves KV with LMCache and NIXL)",
            )
        if self.inference_gateway is not None:
            raise ConfigError(
                "hyperpod.prefill_decode",
                self.prefill_decode,
                "false when hyperpod.inference_gateway is set: its Endpoint Picker would send whole requests to "
                "prefill or decode pods, past the operator's prefill/decode router",
            )
        # Every DPD instance type has 8 GPUs, the most the tensor parallelism keys accept.
        for role in ("prefill", "decode"):
            bound = getattr(self, f"{role}_max_replicas")
            if bound < self.min_replicas:
                raise ConfigError(
                    f"hyperpod.{role}_max_replicas", bound, f"at least min_replicas ({self.min_replicas})"
                )

    def _check_operator_features(self) -> None:
        """KV cache and intelligent routing: what the operator rejects or silently ignores."""
        l2 = self.kv_cache_l2
        if (self.kv_cache_l1 or l2) and not serves_lmcache(self.vllm_image):
            key = "hyperpod.kv_cache_l1" if self.kv_cache_l1 else "hyperpod.kv_cache_l2"
            raise ConfigError(
                "hyperpod.vllm_image",
                self.vllm_image,
                f"an image of {' or '.join(LMCACHE_IMAGE_REPOSITORIES)} when {key} is set (the operator's KV "
                "cache is LMCache)",
            )
        percent = self.tiered_storage_memory_percent
        if (l2 == "tieredstorage") != (percent is not None):
            raise ConfigError(
                "hyperpod.tiered_storage_memory_percent",
                percent,
                "1-100 when kv_cache_l2 is tieredstorage (the cluster's TieredStorageConfig backs it), else null",
            )
        if self.kv_cache_redis_url is not None and l2 != "redis":
            raise ConfigError(
                "hyperpod.kv_cache_redis_url", self.kv_cache_redis_url, "null unless kv_cache_l2 is redis"
            )
        if percent is not None:
            share = model_pod_share(self.instance, self.tensor_parallel, self.threads_per_core, percent)
            if share.memory_mib < 1024:
                raise ConfigError(
                    "hyperpod.tiered_storage_memory_percent",
                    percent,
                    f"a share that leaves each model pod at least 1 GiB on {self.instance_type} "
                    f"({share.memory_mib} MiB left)",
                )
        if self.routing_strategy is None:
            return
        if self.inference_gateway is not None:
            raise ConfigError(
                "hyperpod.routing_strategy",
                self.routing_strategy,
                "null when hyperpod.inference_gateway is set: the gateway's Endpoint Picker sends its requests "
                "to the model pods itself, past the operator's router, which would route only the load "
                "balancer's traffic",
            )
        if not serves_vllm(self.vllm_image):
            raise ConfigError(
                "hyperpod.vllm_image", self.vllm_image, "a vLLM image when routing_strategy is set"
            )
        for key, value, limit in (
            ("model_name", self.model_name, 50),
            ("endpoint_name", self.endpoint_name, 63),
        ):
            if value is not None and len(value) > limit - CREATION_SUFFIX_LENGTH:
                raise ConfigError(
                    f"hyperpod.{key}",
                    value,
                    f"at most {limit - CREATION_SUFFIX_LENGTH} characters when routing_strategy is set (the "
                    "deployed name gets a suffix from the creation-only fields)",
                )

    @property
    def routing(self) -> IntelligentRouting | None:
        return IntelligentRouting(self.routing_strategy) if self.routing_strategy else None

    @property
    def registered_endpoint_name(self) -> str | None:
        """The SageMaker endpoint name as deployed (renewed with the creation-only fields)."""
        return self.endpoint_name + creation_suffix(self.routing) if self.endpoint_name else None

    @property
    def instance(self) -> GpuInstanceType:
        return GPU_INSTANCE_TYPES[self.instance_type.removeprefix(SAGEMAKER_PREFIX)]

    @property
    def tensor_parallel(self) -> int:
        return self.tensor_parallel_size or self.instance.gpus

    def _addon_features(self) -> tuple[AddonFeature, ...]:
        """The operator features these settings turn on, for preflight's add-on check."""
        kv_key = "hyperpod.kv_cache_l1" if self.kv_cache_l1 else "hyperpod.kv_cache_l2"
        chosen = {
            "the KV cache (kvCacheSpec)": kv_key if self.kv_cache_l1 or self.kv_cache_l2 else None,
            "intelligent routing (intelligentRoutingSpec)": "hyperpod.routing_strategy"
            if self.routing_strategy
            else None,
        }
        chosen |= {field_feature(field): key for field, key in self._operator_fields().items()}
        return tuple(
            AddonFeature(INFERENCE_ADDON, feature, key, *OPERATOR_FEATURE_MINIMUMS[feature])
            for feature, key in chosen.items()
            if key
        )

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(
                InstanceNeed("sagemaker-hyperpod", self.instance_type, self.instance_count),
                InstanceNeed("ec2", DEFAULT_SYSTEM_NODE_INSTANCE_TYPE, DEFAULT_SYSTEM_NODE_COUNT),
            ),
            kubernetes_version=KUBERNETES_VERSION,
            capacity_reservation_ids=(self.training_plan_arn,) if self.training_plan_arn else (),
            availability_zone_ids=(self.availability_zone_id,),
            eks_addons=(
                *addon_pins(
                    DEFAULT_ADDON_VERSIONS.by_name(),
                    "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
                ),
                *addon_pins(
                    {n: v for n, v in OPERATOR_ADDON_VERSIONS.items() if n != INFERENCE_ADDON},
                    "inference_tiers.constructs.hyperpod.inference_operator:DEFAULT_ADDON_VERSIONS",
                ),
                AddonPin(INFERENCE_ADDON, self.operator_addon_version, "hyperpod.operator_addon_version"),
                *(
                    addon_pins(
                        {OBSERVABILITY_ADDON: OBSERVABILITY_ADDON_VERSION},
                        "inference_tiers.constructs.hyperpod.observability:OBSERVABILITY_ADDON_VERSION",
                    )
                    if self.observability
                    else ()
                ),
            ),
            addon_features=self._addon_features(),
            images=(
                ImageNeed(self.vllm_image, "hyperpod.vllm_image"),
                *(
                    (ImageNeed(EPP_IMAGE, "inference_tiers.k8s.inference_gateway:EPP_IMAGE"),)
                    if self.inference_gateway is not None
                    else ()
                ),
            ),
        )


class HyperPodStack(Stack):
    """EKS + SageMaker HyperPod + the HyperPod Inference Operator serving one vLLM model."""

    network: HyperPodNetwork

    def __init__(self, scope: Construct, construct_id: str, *, settings: HyperPodSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description="inference-tiers hyperpod: SageMaker HyperPod on EKS with the HyperPod Inference Operator",
        )
        self.settings = settings
        group = HyperPodInstanceGroup(
            name="inference",
            instance_type=settings.instance_type,
            instance_count=settings.instance_count,
            threads_per_core=settings.threads_per_core,
            ebs_volume_gb=settings.ebs_volume_gb,
            deep_health_checks=settings.deep_health_checks,
            training_plan_arn=settings.training_plan_arn,
        )

        def network(log_key: kms.IKey) -> ec2.IVpc:
            self.network = HyperPodNetwork(
                self,
                "Network",
                flow_log_key=log_key,
                availability_zone_id=settings.availability_zone_id,
                vpc_cidr=settings.vpc_cidr,
                hyperpod_subnet_cidr=settings.hyperpod_subnet_cidr,
                required_ip_addresses=settings.instance_count
                * hyperpod_ips_per_instance(settings.instance_type),
            )
            return self.network.vpc

        # One key for every log group of the stack (flow logs, kubectl provider, node barrier, script upload).
        self.base = EksTierBase(
            self,
            log_key_description="Encrypts the log groups of the HyperPod tier",
            admin_principal_arn=settings.admin_principal_arn,
            public_endpoint_cidrs=settings.public_endpoint_cidrs,
            network=network,
        )
        self.log_key, self.eks = self.base.log_key, self.base.eks
        cluster = as_cluster_ref(self.eks.cluster)
        self.access_logs = self._access_logs_bucket()

        self.dependency_chart = HyperPodDependencyChart(
            self,
            "DependencyChart",
            cluster=cluster,
            chart_directory=(
                None
                if self.settings.dependency_chart_dir is None
                else Path(self.settings.dependency_chart_dir)
            ),
        )
        # Its controllers run on the system nodes until the HyperPod nodes join (its DaemonSets run there).
        self.dependency_chart.chart.node.add_dependency(self.eks.system_nodegroup)
        self.hyperpod = HyperPodCluster(
            self,
            "HyperPod",
            cluster=cluster,
            subnets=[self.network.hyperpod_subnet],
            security_groups=[self.network.security_group],
            instance_groups=[group],
            dependency_chart=self.dependency_chart,
            # Core add-ons, and the HyperPod subnet's route and S3 endpoint (nodes fetch scripts on boot).
            wait_for=[*self.eks.addons.values(), self.network],
            access_logs_bucket=self.access_logs,
            log_key=self.log_key,
            tiered_storage_memory_percent=settings.tiered_storage_memory_percent,
        )
        self.kv_cache_store = (
            HyperPodKvCacheStore(
                self,
                "KvCacheStore",
                vpc=self.network.vpc,
                clients=self.network.security_group,
                encryption_key=retained_key(self, "KvCacheKey", "Encrypts the HyperPod L2 KV cache"),
            )
            if settings.kv_cache_l2 == "redis" and settings.kv_cache_redis_url is None
            else None
        )
        self.observability = (
            HyperPodObservability(
                self,
                "Observability",
                cluster=cluster,
                hyperpod_cluster=self.hyperpod,
                grafana_workspace=settings.grafana,
            )
            if settings.observability
            else None
        )
        self.model_bucket = self._model_bucket()
        self.operator = HyperPodInferenceOperator(
            self,
            "InferenceOperator",
            cluster=cluster,
            hyperpod_cluster=self.hyperpod,
            model_buckets=[self.model_bucket] if self.model_bucket else [],
            prometheus_workspace_arn=self.observability.workspace_arn if self.observability else None,
            access_logs_bucket=self.access_logs,
            addon_versions={**OPERATOR_ADDON_VERSIONS, INFERENCE_ADDON: settings.operator_addon_version},
        )
        endpoint = self._endpoint()
        self.inference_gateway: InferenceGateway | None = None
        if settings.inference_gateway is not None:
            # Before the model: at zero, the endpoint's wake trigger reads the gateway's NLB.
            self.inference_gateway, endpoint = add_hyperpod_gateway(
                self, cluster, self.operator, endpoint, settings.inference_gateway
            )
        self.model = HyperPodModelEndpoint(
            self,
            "Model",
            cluster=cluster,
            hyperpod_cluster=self.hyperpod,
            operator=self.operator,
            endpoint=endpoint,
        )
        self._outputs()

    def _access_logs_bucket(self) -> s3.Bucket:
        bucket = access_logs_bucket(self, "AccessLogs")
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "This is the server access log destination of the tier's buckets; logging it into itself would loop",
        )
        return bucket

    def _model_bucket(self) -> s3.IBucket | None:
        settings = self.settings
        if settings.model_source != "s3":
            return None
        if settings.model_bucket_name is not None:
            return s3.Bucket.from_bucket_name(self, "ModelBucket", settings.model_bucket_name)
        key = retained_key(self, "ModelKey", "Encrypts the HyperPod model weights bucket")
        return private_bucket(
            self, "ModelBucket", key=key, access_logs=self.access_logs, access_logs_prefix="model-weights/"
        )

    def _model_source(self) -> ModelSource:
        settings = self.settings
        if settings.model_source == "fsx":
            assert settings.fsx_file_system_id is not None  # checked by HyperPodSettings
            return FsxModelSource(
                file_system_id=settings.fsx_file_system_id, location=settings.model_location
            )
        assert self.model_bucket is not None
        return S3ModelSource(
            bucket_name=self.model_bucket.bucket_name, region=Aws.REGION, location=settings.model_location
        )

    def _endpoint(self) -> InferenceEndpoint:
        settings = self.settings
        trigger: CloudWatchTrigger | PrometheusTrigger | tuple[PrometheusTrigger, ...]
        if settings.scaling_metric == "prometheus":
            assert self.observability is not None  # checked by HyperPodSettings
            # The operator's sidecar labels its series with spec.modelName (the name as deployed).
            trigger = PrometheusTrigger.concurrent_requests(
                self.observability.query_url,
                settings.model_name + creation_suffix(settings.routing),
                settings.scaling_target,
            )
            if settings.inference_gateway is not None:
                # Gateway traffic reaches vLLM past the sidecar that counts in-flight requests: its queue and
                # KV cache scale the pods, the in-flight count still covers the load balancer's traffic.
                trigger = (
                    *queue_triggers(
                        self.observability.query_url,
                        settings.model_name,
                        settings.inference_gateway.pools["model"],
                    ),
                    trigger,
                )
        else:
            assert settings.registered_endpoint_name is not None  # checked by HyperPodSettings
            trigger = CloudWatchTrigger.sagemaker_invocations(
                settings.registered_endpoint_name, settings.scaling_target
            )
        # Prefill and decode are two Deployments, each with its own autoscaling (pdSpec.autoScalingSpec).
        autoscaling = AutoScaling(
            settings.min_replicas,
            settings.max_replicas,
            trigger,
            # At zero the gateway wakes the model on new connections: idle ones must be gone by then.
            **(
                {"cooldown_seconds": SCALE_TO_ZERO_COOLDOWN_SECONDS}
                if settings.inference_gateway is not None and settings.min_replicas == 0
                else {}
            ),
        )
        return InferenceEndpoint(
            name=settings.model_name,
            instance_types=settings.instance_type_priority or (settings.instance_type,),
            model_source=self._model_source(),
            worker=VllmWorker(
                image=settings.vllm_image,
                tensor_parallel_size=settings.tensor_parallel,
                max_model_len=settings.max_model_len,
            ),
            endpoint_name=settings.endpoint_name,
            replicas=max(1, settings.min_replicas),
            request_limits=RequestLimits(settings.max_concurrent_requests, settings.max_queue_size)
            if settings.max_concurrent_requests is not None
            else None,
            autoscaling=None if settings.prefill_decode else autoscaling,
            threads_per_core=settings.threads_per_core,
            lora=self._lora(),
            kv_cache=self._kv_cache(),
            routing=settings.routing,
            prefill_decode=self._prefill_decode(trigger) if settings.prefill_decode else None,
        )

    def _prefill_decode(
        self, trigger: CloudWatchTrigger | PrometheusTrigger | tuple[PrometheusTrigger, ...]
    ) -> PrefillDecode:
        """Both roles scale on the tier's metric and target, each between max(1, min_replicas) and its own max."""
        settings = self.settings
        low = max(1, settings.min_replicas)

        def role(name: str) -> PdRole:
            return PdRole(
                tensor_parallel_size=getattr(settings, f"{name}_tensor_parallel_size")
                or settings.instance.gpus,
                replicas=low,
                autoscaling=AutoScaling(low, getattr(settings, f"{name}_max_replicas"), trigger),
            )

        return PrefillDecode(role("prefill"), role("decode"), routing_threshold=settings.pd_routing_threshold)

    def _kv_cache(self) -> KvCache | None:
        settings = self.settings
        if not (settings.kv_cache_l1 or settings.kv_cache_l2):
            return None
        return KvCache(
            l1=settings.kv_cache_l1,
            l2_backend=settings.kv_cache_l2,
            redis_url=self.kv_cache_store.url if self.kv_cache_store else settings.kv_cache_redis_url,
            tiered_storage_memory_percent=settings.tiered_storage_memory_percent,
        )

    def _lora(self) -> LoraServing | None:
        """The gateway's adapters, served by every model pod (the Endpoint Picker prefers pods that hold one)."""
        gateway = self.settings.inference_gateway
        if gateway is None or not gateway.lora_adapters:
            return None
        # The stack's Region: the model pods read the adapters through the VPC's S3 gateway endpoint.
        return LoraServing(gateway.lora_adapters, region=Aws.REGION, max_lora_rank=gateway.max_lora_rank)

    def _dashboard(self) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{self.stack_name}-{Aws.REGION}")
        if self.settings.endpoint_name is not None:
            dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Invocations per minute", left=[self.model.metric_invocations()]
                ),
                cloudwatch.GraphWidget(
                    title="Model latency p90 (us)", left=[self.model.metric_model_latency()]
                ),
                cloudwatch.GraphWidget(
                    title="Errors",
                    left=[self.model.metric("Invocation4XXErrors"), self.model.metric("Invocation5XXErrors")],
                ),
            )
        dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    "GPU, node and per-model metrics (`model_invocations_total`, `model_latency_milliseconds`, "
                    "vLLM `/metrics`) are in the Amazon Managed Prometheus workspace of this stack."
                ),
                width=24,
                height=2,
            )
        )
        return dashboard

    def _outputs(self) -> None:
        settings = self.settings
        dashboard = self._dashboard()
        CfnOutput(self, "HyperPodClusterArn", value=self.hyperpod.cluster_arn)
        self.base.add_outputs()
        CfnOutput(
            self,
            "DashboardUrl",
            value=dashboard_url(dashboard),
        )
        if settings.registered_endpoint_name is not None:
            CfnOutput(self, "SageMakerEndpointName", value=settings.registered_endpoint_name)
        if self.inference_gateway is not None:
            CfnOutput(self, "InferenceGatewayEndpoint", value=self.inference_gateway.endpoint)
        CfnOutput(self, "InvokeUrl", value=self._invoke_url())

    def _invoke_url(self) -> str:
        """The SageMaker runtime URL of the registered endpoint (SigV4), else how to read the ALB's URL.

        The operator creates the model's load balancer at runtime, so its DNS name cannot be known at synth.
        """
        settings = self.settings
        if settings.registered_endpoint_name is not None:
            return (
                f"https://runtime.sagemaker.{Aws.REGION}.{Aws.URL_SUFFIX}/endpoints/{settings.registered_endpoint_name}"
                "/invocations"
            )
        return (
            "kubectl get ingress -n default -o wide  # https://<ADDRESS>/v1/chat/completions "
            f"({settings.model_name}{creation_suffix(settings.routing)})"
        )


def build(app: Construct, settings: HyperPodSettings) -> list[Stack]:
    return [HyperPodStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec("hyperpod", HyperPodSettings), build=build)
