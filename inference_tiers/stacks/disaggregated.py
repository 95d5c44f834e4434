"""Tier ``disaggregated``: EKS + EFA GPU nodes in a cluster placement group, prefill/decode disaggregated vLLM.

One stack, ``InferenceTiers-Disaggregated``: a VPC (private subnets, flow logs), the ``EksCluster`` base, one
``EfaNodeGroup`` sized for prefill + decode nodes (one vLLM instance per node) in the first AZ, the EFA and
NVIDIA device plugins, the ``DisaggregatedServing`` workload (vLLM prefill/decode over Mooncake, vllm-router
behind an internal NLB) and ``DisaggregatedMonitoring`` (Container Insights, dashboard, alarms).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    InstanceNeed,
    TierSpec,
    addon_pins,
    boolean,
    choice,
    integer,
    items,
    number,
    optional,
    pinned_image,
    setting,
    text,
)
from inference_tiers.constructs.disaggregated.monitoring import (
    CLOUDWATCH_OBSERVABILITY_ADDON,
    CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
    DisaggregatedMonitoring,
)
from inference_tiers.constructs.disaggregated.serving import (
    ROUTER_DOCKERFILE_DIR,
    VLLM_DOCKERFILE_DIR,
    DisaggregatedServing,
)
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    DEFAULT_SYSTEM_NODE_COUNT,
    DEFAULT_SYSTEM_NODE_INSTANCE_TYPE,
    KUBERNETES_VERSION,
    admin_principal_arn_setting,
    as_cluster_ref,
    public_endpoint_cidrs_setting,
)
from inference_tiers.constructs.eks.cluster_exporters import ClusterExporters, exporter_images
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.disaggregated_gateway import add_disaggregated_gateway
from inference_tiers.constructs.eks.efa_node_group import (
    CAPACITY_MODES,
    EFA_NODE_POOL,
    CapacityMode,
    EfaNodeGroup,
)
from inference_tiers.constructs.eks.tier_base import EksTierBase, private_eks_vpc
from inference_tiers.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType
from inference_tiers.k8s.disaggregated import EFA_INSTANCE_TYPES
from inference_tiers.k8s.efa_exporter import EfaExporterSpec
from inference_tiers.k8s.inference_gateway import EPP_IMAGE
from inference_tiers.k8s.inference_gateway_lora import LORA_INIT_IMAGE, LoraServing, lora_from_settings
from inference_tiers.k8s.inference_gateway_settings import (
    InferenceGatewaySettings,
    check_node_capacity,
    inference_gateway_setting,
)
from inference_tiers.ops.models import context_limit
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-Disaggregated"

_AZ_NAME = r"[a-z]{2}(-[a-z]+)+-[0-9][a-z]"
_IMAGE_URI = optional(pinned_image())


@dataclass(frozen=True)
class DisaggregatedSettings:
    """Settings of the ``disaggregated`` tier (context keys ``disaggregated.<field>``; defaults in cdk.json)."""

    model_id: str = setting(
        text(r"[A-Za-z0-9][\w.-]*/[\w.-]+", description="a Hugging Face model id (org/name)", max_length=200),
        "Hugging Face model id served by both the prefill and the decode pools",
    )
    instance_type: str = setting(
        choice(*EFA_INSTANCE_TYPES), "EC2 GPU instance type with EFA for the prefill and decode nodes"
    )
    prefill_nodes: int = setting(
        integer(1, 32), "prefill nodes, one vLLM prefill instance (kv_producer) each"
    )
    decode_nodes: int = setting(integer(1, 32), "decode nodes, one vLLM decode instance (kv_consumer) each")
    tensor_parallel_size: int | None = setting(
        optional(integer(1, 64)), "vLLM tensor parallelism per instance; null: every GPU of the node"
    )
    capacity_mode: CapacityMode = setting(
        choice(*CAPACITY_MODES), "on-demand, capacity-reservation (targeted ODCR) or capacity-block"
    )
    capacity_reservation_id: str | None = setting(
        optional(text(r"cr-[0-9a-f]{8}([0-9a-f]{9})?", description="a capacity reservation id (cr-...)")),
        "ODCR or Capacity Block reservation id; required unless capacity_mode is on-demand",
    )
    availability_zones: tuple[str, ...] | None = setting(
        optional(
            items(
                text(_AZ_NAME, description="an availability zone name such as us-east-1a"),
                min_items=2,
                max_items=2,
            )
        ),
        "two AZ names for the VPC; the GPU nodes go to the first (the reservation's AZ); null: the region's first two",
    )
    max_model_len: int | None = setting(
        optional(integer(1024, 1_048_576)), "vLLM --max-model-len; null: the model's own context length"
    )
    image_uri: str | None = setting(
        _IMAGE_URI,
        "vLLM + EFA + Mooncake image; null: built from assets/disaggregated/vllm by cdk deploy (needs Docker)",
    )
    router_image_uri: str | None = setting(
        _IMAGE_URI,
        "vllm-router image; null: built from assets/disaggregated/router by cdk deploy (needs Docker)",
    )
    enable_kv_store: bool = setting(
        boolean(),
        "add mooncake_master and the shared KV pool (MooncakeStoreConnector through MultiConnector)",
    )
    hf_token_secret_name: str | None = setting(
        optional(text(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", description="a Kubernetes Secret name")),
        "Kubernetes Secret (key token) in the workload namespace with a Hugging Face token; null: public model",
    )
    ttft_alarm_seconds: float = setting(
        number(0.05, 600), "alarm when the mean decode time to first token exceeds this"
    )
    admin_principal_arn: str | None = admin_principal_arn_setting()
    public_endpoint_cidrs: tuple[str, ...] = public_endpoint_cidrs_setting()
    inference_gateway: InferenceGatewaySettings | None = setting(
        inference_gateway_setting(("prefill", "decode"), decode_pool="decode"),
        "opt-in Istio inference gateway in front of vllm-router and KEDA scaling of each pool on its queue "
        "(docs/inference-gateway.md); null: off",
    )

    def __post_init__(self) -> None:
        check_node_capacity(self.inference_gateway, "disaggregated.inference_gateway", self.gpu_nodes)
        # The adapters' own rules (one folder each): refused at parse time, as ConfigErrors naming the key.
        lora_from_settings("disaggregated.inference_gateway", self.inference_gateway, Aws.REGION)
        beyond = context_limit(self.model_id, self.max_model_len)
        if beyond is not None:
            raise ConfigError("disaggregated.max_model_len", self.max_model_len, beyond)
        gpus = self.instance.gpus
        if self.tensor_parallel_size is not None and self.tensor_parallel_size > gpus:
            raise ConfigError(
                "disaggregated.tensor_parallel_size",
                self.tensor_parallel_size,
                f"at most {gpus}, the GPUs of one {self.instance_type} (or null for all of them)",
            )
        if self.tensor_parallel_size is not None and gpus % self.tensor_parallel_size:
            raise ConfigError(
                "disaggregated.tensor_parallel_size",
                self.tensor_parallel_size,
                f"a divisor of {gpus}, the GPUs of one {self.instance_type}",
            )
        if self.capacity_mode != "on-demand" and self.capacity_reservation_id is None:
            raise ConfigError(
                "disaggregated.capacity_reservation_id",
                None,
                f"a reservation id (cr-...) because disaggregated.capacity_mode is {self.capacity_mode}",
            )
        if self.capacity_mode == "on-demand" and self.capacity_reservation_id is not None:
            raise ConfigError(
                "disaggregated.capacity_reservation_id",
                self.capacity_reservation_id,
                "null when disaggregated.capacity_mode is on-demand (or set capacity_mode to "
                "capacity-reservation or capacity-block)",
            )
        if self.capacity_mode != "on-demand" and self.availability_zones is None:
            raise ConfigError(
                "disaggregated.availability_zones",
                None,
                "two AZ names, the reservation's AZ first: a reservation only serves instances in its own AZ",
            )
        if (
            self.availability_zones is not None
            and (
                len(set(self.availability_zones)) != 2
                # An AZ name is its region's name plus one letter; a VPC lives in one region.
                or len({zone[:-1] for zone in self.availability_zones}) != 1
            )
        ):
            raise ConfigError(
                "disaggregated.availability_zones",
                list(self.availability_zones),
                "two different AZ names of the same region",
            )

    @property
    def instance(self) -> GpuInstanceType:
        return GPU_INSTANCE_TYPES[self.instance_type]

    @property
    def gpu_nodes(self) -> int:
        return self.prefill_nodes + self.decode_nodes

    @property
    def tensor_parallel(self) -> int:
        """Tensor parallelism per vLLM instance: the setting, or every GPU of the node."""
        return self.tensor_parallel_size or self.instance.gpus

    @property
    def lora(self) -> LoraServing | None:
        """The gateway setting's LoRA adapters, served by every prefill and decode pod; None: none."""
        return lora_from_settings("disaggregated.inference_gateway", self.inference_gateway, Aws.REGION)

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(
                InstanceNeed("ec2", self.instance_type, self.gpu_nodes),
                InstanceNeed("ec2", DEFAULT_SYSTEM_NODE_INSTANCE_TYPE, DEFAULT_SYSTEM_NODE_COUNT),
            ),
            kubernetes_version=KUBERNETES_VERSION,
            capacity_reservation_ids=(self.capacity_reservation_id,) if self.capacity_reservation_id else (),
            eks_addons=(
                *addon_pins(
                    DEFAULT_ADDON_VERSIONS.by_name(),
                    "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
                ),
                *addon_pins(
                    {CLOUDWATCH_OBSERVABILITY_ADDON: CLOUDWATCH_OBSERVABILITY_ADDON_VERSION},
                    "inference_tiers.constructs.disaggregated.monitoring:CLOUDWATCH_OBSERVABILITY_ADDON_VERSION",
                ),
            ),
            images=(
                _image(self.image_uri, "disaggregated.image_uri", VLLM_DOCKERFILE_DIR),
                _image(self.router_image_uri, "disaggregated.router_image_uri", ROUTER_DOCKERFILE_DIR),
                *(
                    (ImageNeed(EPP_IMAGE, "inference_tiers.k8s.inference_gateway:EPP_IMAGE"),)
                    if self.inference_gateway is not None
                    else ()
                ),
                *(
                    (
                        ImageNeed(
                            LORA_INIT_IMAGE, "inference_tiers.k8s.inference_gateway_lora:LORA_INIT_IMAGE"
                        ),
                    )
                    if self.lora is not None
                    else ()
                ),
                *exporter_images(efa_exporter=True),
            ),
        )


def _image(uri: str | None, key: str, dockerfile_dir: Path) -> ImageNeed:
    """The image ``key`` names, or (unset) the CDK image asset the stack builds from ``dockerfile_dir``."""
    if uri is not None:
        return ImageNeed(uri, key)
    return ImageNeed(str(dockerfile_dir.relative_to(ASSETS_DIR.parents[1])), key, source="asset")


class DisaggregatedStack(Stack):
    """EKS cluster, EFA GPU node group and device plugins for prefill/decode disaggregated serving."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: DisaggregatedSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description="inference-tiers disaggregated: EKS + EFA GPU nodes, vLLM prefill/decode over Mooncake",
        )
        self.settings = settings
        # One key for the stack's infrastructure log groups (flow logs, kubectl provider).
        self.base = EksTierBase(
            self,
            log_key_description="Encrypts the flow logs and kubectl provider logs",
            admin_principal_arn=settings.admin_principal_arn,
            public_endpoint_cidrs=settings.public_endpoint_cidrs,
            network=private_eks_vpc(self, availability_zones=settings.availability_zones),
        )
        self.log_key, self.vpc, self.eks = self.base.log_key, self.base.vpc, self.base.eks
        cluster = self.eks.cluster
        self.gpu_nodes = EfaNodeGroup(
            self,
            "GpuNodes",
            cluster=cluster,
            # One subnet in one AZ: the first private subnet (the reservation's AZ when one is configured).
            subnet=self.vpc.private_subnets[0],
            instance_type=settings.instance_type,
            node_count=settings.gpu_nodes,
            capacity_mode=settings.capacity_mode,
            capacity_reservation_id=settings.capacity_reservation_id,
            node_role=self.eks.node_role,
        )
        self.device_plugins = GpuDevicePlugins(self, "DevicePlugins", cluster=cluster)
        # kube-state-metrics and the EFA exporter, for the AMP scraper (docs/observability.md).
        self.exporters = ClusterExporters(self, "Exporters", cluster=cluster, efa_exporter=EfaExporterSpec())
        # Each chart after the nodes its pods run on, so that they are removed before those nodes on delete.
        self.device_plugins.node.add_dependency(self.gpu_nodes.nodegroup)
        self.exporters.kube_state_metrics.node.add_dependency(self.eks.system_nodegroup)

        self.serving = DisaggregatedServing(
            self,
            "Serving",
            cluster=as_cluster_ref(cluster),
            model_id=settings.model_id,
            instance_type=settings.instance_type,
            prefill_replicas=settings.prefill_nodes,
            decode_replicas=settings.decode_nodes,
            tensor_parallel_size=settings.tensor_parallel,
            max_model_len=settings.max_model_len,
            image_uri=settings.image_uri,
            router_image_uri=settings.router_image_uri,
            enable_kv_store=settings.enable_kv_store,
            hf_token_secret_name=settings.hf_token_secret_name,
            gpu_node_labels={"inference-tiers/node-pool": EFA_NODE_POOL},
            efa_devices=self.gpu_nodes.efa_interfaces,
            lora=settings.lora,
        )
        # The pods request nvidia.com/gpu and vpc.amazonaws.com/efa, which only the device plugins advertise.
        self.serving.node.add_dependency(self.device_plugins)
        self.monitoring = DisaggregatedMonitoring(
            self,
            "Monitoring",
            cluster=as_cluster_ref(cluster),
            serving=self.serving,
            ttft_alarm_seconds=settings.ttft_alarm_seconds,
        )
        # The CloudWatch agent gets its IAM role through EKS Pod Identity.
        self.monitoring.addon.node.add_dependency(self.eks.addons["eks-pod-identity-agent"])

        CfnOutput(self, "RouterEndpoint", value=self.serving.router_endpoint)
        if settings.inference_gateway is not None:
            self.inference_gateway = add_disaggregated_gateway(
                self,
                self.serving,
                settings.inference_gateway,
                wait_for=[self.eks.addons["eks-pod-identity-agent"], self.monitoring],
            )
            CfnOutput(self, "InferenceGatewayEndpoint", value=self.inference_gateway.endpoint)

        self.base.add_outputs()
        CfnOutput(self, "DashboardUrl", value=self.monitoring.dashboard_url)


def build(app: Construct, settings: DisaggregatedSettings) -> list[Stack]:
    return [DisaggregatedStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec("disaggregated", DisaggregatedSettings), build=build)
