"""Tier ``platform``: one EKS cluster for a model gateway, agent sandboxes and an elastic inference pool.

One stack, ``InferenceTiers-Platform``, grown in stages (``platform.stage``); a higher stage only adds to the
lower one, never changes it (tests/platform/test_stack.py):

- ``gateway``: the EKS preamble (``EksTierBase``: VPC, private cluster, pinned add-ons) with its core managed node
  group (on-demand, two or more nodes over two AZs, labelled ``node-role=core``, no taint), where every controller,
  the LiteLLM gateway and Grafana run; ``PlatformGateway`` (the ``gateway`` tier's models and guardrail, from
  :class:`~inference_tiers.stacks.gateway_models.GatewayModelSettings`), kube-state-metrics and
  ``PlatformObservability`` (AMP, its managed scraper, Grafana).
- ``tenants``: Karpenter, the Kata sandbox nodes, the agent-sandbox controller and the tenants, exactly as the
  ``agent-sandbox`` tier builds them (``Sandboxes``), and ``TenantModelKeys``: a LiteLLM team and key per tenant
  (``platform.tenant_models``), which the tenant's sandboxes get as ``OPENAI_API_KEY``.
- ``pool``: the elastic GPU pool (``PlatformInferencePool``, ``platform.pool``): Karpenter GPU nodes, vLLM
  behind the project's inference gateway, scaled by KEDA from zero, added to LiteLLM as one more model, which
  tenants may then name in ``platform.tenant_models``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from aws_cdk import Stack
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    InstanceNeed,
    TierSpec,
    addon_pins,
    boolean,
    choice,
    email_address,
    integer,
    ipv4_cidr,
    mapping,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    KUBERNETES_VERSION,
    admin_principal_arn_setting,
    as_cluster_ref,
    public_endpoint_cidrs_setting,
)
from inference_tiers.constructs.eks.cluster_exporters import ClusterExporters
from inference_tiers.constructs.eks.tier_base import EksTierBase, private_eks_vpc
from inference_tiers.constructs.observability import ADOT_IMAGE
from inference_tiers.constructs.platform.gateway import CERTIFICATE_ARN, PlatformGateway
from inference_tiers.constructs.platform.observability import METRICS_BACKENDS, PlatformObservability
from inference_tiers.constructs.platform.pool import PlatformInferencePool
from inference_tiers.constructs.platform.tenant_keys import TenantModelKeys
from inference_tiers.k8s import litellm_chart, prometheus_chart
from inference_tiers.k8s.gpu_pool import GpuPoolSpec, parse_pool
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS
from inference_tiers.k8s.sandbox_tenancy import TENANT_NAME_PATTERN
from inference_tiers.k8s.tenant_keys import TenantModelAccess, parse_model_access
from inference_tiers.k8s.trace_collector import TraceCollector
from inference_tiers.litellm.config import LITELLM_IMAGE
from inference_tiers.stacks.agent_sandbox import CORE_INSTANCE_TYPE, Sandboxes, SandboxSettings
from inference_tiers.stacks.gateway_models import GatewayModelSettings, gateway_models
from inference_tiers.tier import Tier

TIER_NAME = "platform"
STACK_NAME = "InferenceTiers-Platform"

Stage = Literal["gateway", "tenants", "pool"]
STAGES: tuple[Stage, ...] = ("gateway", "tenants", "pool")
"""The stages in the order they climb; each adds to the one before."""


@dataclass(frozen=True)
class PlatformSettings(SandboxSettings, GatewayModelSettings):
    """Settings of the ``platform`` tier (context keys ``platform.<field>``; defaults in defaults.json). The
    model keys are the ``gateway`` tier's; the sandbox keys are the ``agent-sandbox`` tier's and apply from stage
    ``tenants`` on."""

    tier_name: ClassVar[str] = TIER_NAME
    stack_name: ClassVar[str] = STACK_NAME

    stage: Stage = setting(
        choice(*STAGES),
        "how far the platform is built: gateway (cluster, core nodes, gateway), tenants (+ Kata sandboxes and "
        "tenants), pool (+ elastic GPU pool)",
    )
    vpc_cidr: str = setting(ipv4_cidr(16, 16), "VPC CIDR (a /16: two /18 private subnets for pod addresses)")
    core_instance_type: str = setting(
        text(CORE_INSTANCE_TYPE, description="an x86 m/c/r instance type such as m7i.xlarge", max_length=32),
        "instance type of the core node group (controllers, gateway, Grafana; never sandboxes or models)",
    )
    core_nodes: int = setting(
        integer(2, 10),
        "nodes of the core node group, spread over two AZs (two or more: a single node or AZ strands replicas)",
    )
    admin_principal_arn: str | None = admin_principal_arn_setting()
    public_endpoint_cidrs: tuple[str, ...] = public_endpoint_cidrs_setting()
    certificate_arn: str | None = setting(
        optional(text(CERTIFICATE_ARN, description="an ACM certificate ARN")),
        "ACM certificate of an internal HTTPS ALB in front of the gateway (empty: in-cluster clients only)",
    )
    gateway_replicas: int = setting(integer(2, 100), "the fewest LiteLLM pods (the autoscaler's floor)")
    gateway_max_replicas: int = setting(integer(2, 100), "the most LiteLLM pods")
    litellm_chart_dir: str | None = setting(
        optional(text(max_length=1024)),
        "the LiteLLM chart fetched by assets/platform/fetch-litellm-chart.sh; null: a placeholder that stops "
        "the deploy with instructions",
    )
    grafana: bool = setting(
        boolean(), "run Grafana on the core nodes (AMP data source, the project's dashboards)"
    )
    metrics: str = setting(
        choice(*METRICS_BACKENDS),
        "amp (Amazon Managed Service for Prometheus and its managed scraper) or prometheus (the same jobs and "
        "rules in an in-cluster Prometheus on the core nodes; no alert delivery)",
    )
    prometheus_storage_class: str | None = setting(
        optional(text(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", description="a StorageClass name")),
        "with metrics=prometheus: the StorageClass of its volume (one the cluster has); empty: an emptyDir",
    )
    prometheus_volume_gib: int = setting(integer(10, 16384), "with metrics=prometheus: its volume's size")
    prometheus_retention_days: int = setting(integer(1, 90), "with metrics=prometheus: days samples are kept")
    traces: bool = setting(
        boolean(),
        "export the gateway's spans to AWS X-Ray through an OpenTelemetry collector (ADOT) on the core nodes",
    )
    alarm_email: str | None = setting(
        email_address(),
        "subscribe this address to the AMP alert topic",
    )
    pool: GpuPoolSpec = setting(
        parse_pool,
        "the elastic GPU pool of stage pool: {model_id, served_model_name, gpus_per_replica, scaling: "
        "{min_replicas, max_replicas, waiting_per_replica}, instance_families, capacity_types, max_gpus, "
        "max_model_len, root_volume_gib, consolidate_after_minutes, hf_token_secret}",
    )
    tenant_models: dict[str, TenantModelAccess] = setting(
        mapping(parse_model_access, key_pattern=TENANT_NAME_PATTERN, max_items=50),
        "tenant name -> {models, max_budget_usd, budget_duration, rpm_limit, tpm_limit, max_parallel_requests, "
        "key_rotation}: the tenant's LiteLLM team and key (every tenant needs one)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        GatewayModelSettings.__post_init__(self)
        if self.gateway_max_replicas < self.gateway_replicas:
            raise ConfigError(
                f"{TIER_NAME}.gateway_max_replicas",
                self.gateway_max_replicas,
                f"at least {TIER_NAME}.gateway_replicas ({self.gateway_replicas})",
            )
        if self.metrics == "prometheus" and self.alarm_email is not None:
            raise ConfigError(
                f"{TIER_NAME}.alarm_email",
                self.alarm_email,
                f"empty with {TIER_NAME}.metrics=prometheus (alerts are sent by AMP's alert manager only)",
            )
        if set(self.tenant_models) != set(self.tenants):
            raise ConfigError(
                f"{TIER_NAME}.tenant_models",
                sorted(self.tenant_models),
                f"one entry per tenant of {TIER_NAME}.tenants, each tenant once: {sorted(self.tenants)}",
            )
        taken = sorted(set(self.pool.served_names()) & self.model_names()) if self.reaches("pool") else []
        if taken:
            raise ConfigError(
                f"{TIER_NAME}.pool",
                taken,
                f"served model and adapter names no other model of the gateway has (not among "
                f"{sorted(self.model_names())})",
            )
        served = self.served_models()
        for name, access in self.tenant_models.items():
            unknown = sorted(set(access.models) - served)
            if unknown:
                raise ConfigError(
                    f"{TIER_NAME}.tenant_models.{name}.models",
                    list(access.models),
                    f"model names the gateway serves, among {sorted(served)} (not {unknown})",
                )

    def served_models(self) -> set[str]:
        """The model names the platform's gateway serves (SageMaker only with an endpoint; the pool's from stage
        pool on)."""
        return {
            self.bedrock_model_name,
            *([self.sagemaker_model_name] if self.sagemaker_endpoint_name else []),
            *self.openai_models,
            *(self.pool.served_names() if self.reaches("pool") else []),
        }

    def model_gateway(self) -> dict[str, Any]:
        # The sandboxes call the cluster's own gateway with their tenant's key.
        return {"platform_gateway": litellm_chart.gateway_endpoint()}

    def reaches(self, stage: Stage) -> bool:
        """Whether the configured stage includes ``stage``."""
        return STAGES.index(self.stage) >= STAGES.index(stage)

    def account_requirements(self) -> AccountRequirements:
        litellm = ImageNeed(LITELLM_IMAGE, "inference_tiers.litellm.config:LITELLM_IMAGE")
        images = self.sandbox_images(litellm) if self.reaches("tenants") else (litellm,)
        images += (
            ImageNeed(
                prometheus_chart.NODE_EXPORTER_IMAGE,
                "inference_tiers.k8s.prometheus_chart:NODE_EXPORTER_IMAGE",
            ),
        )
        if self.traces:
            images += (ImageNeed(ADOT_IMAGE, "inference_tiers.constructs.observability:ADOT_IMAGE"),)
        instances = [InstanceNeed("ec2", self.core_instance_type, self.core_nodes)]
        if self.reaches("pool"):
            images += (ImageNeed(self.pool.vllm_image, "inference_tiers.k8s.gpu_pool:VLLM_IMAGE"),)
            instances.append(InstanceNeed("ec2", *self.pool.quota_need()))
        return AccountRequirements(
            instances=tuple(instances),
            bedrock_model_id=self.bedrock_model_id,
            bedrock_inference_profile_id=self.profile().profile_id,
            kubernetes_version=KUBERNETES_VERSION,
            eks_addons=addon_pins(
                DEFAULT_ADDON_VERSIONS.by_name(),
                "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
            ),
            images=images,
        )


class PlatformStack(Stack):
    """The platform's EKS cluster and core node group, and what its stage adds (see the module docstring)."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: PlatformSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"inference-tiers platform (stage {settings.stage}): EKS with a model gateway, "
            "Kata agent sandboxes per tenant and an elastic inference pool",
        )
        self.settings = settings
        # Stage gateway: the cluster and its core nodes; the gateway and observability are composed after them.
        self.base = EksTierBase(
            self,
            log_key_description="Encrypts the flow logs and kubectl provider logs of the platform",
            admin_principal_arn=settings.admin_principal_arn,
            public_endpoint_cidrs=settings.public_endpoint_cidrs,
            network=private_eks_vpc(self, cidr=settings.vpc_cidr),
            system_node_instance_type=settings.core_instance_type,
            system_node_count=settings.core_nodes,
            system_node_labels=CORE_NODE_LABELS,
        )
        self.eks = self.base.eks
        # From the first stage on, so that climbing does not reconfigure the add-on: the gateway's and the
        # tenants' NetworkPolicies need the agent.
        self.eks.enable_network_policy()
        core = self.eks.system_nodegroup
        cluster = self.eks.cluster
        # kube-state-metrics on the core nodes, for the AMP scraper (docs/observability.md).
        self.exporters = ClusterExporters(self, "Exporters", cluster=cluster)
        self.exporters.kube_state_metrics.node.add_dependency(core)
        self.gateway = PlatformGateway(
            self,
            "Gateway",
            cluster=cluster,
            vpc=self.base.vpc,
            models=gateway_models(self, settings),
            router=settings.router_options(),
            certificate_arn=settings.certificate_arn,
            replicas=settings.gateway_replicas,
            max_replicas=settings.gateway_max_replicas,
            chart_directory=Path(settings.litellm_chart_dir) if settings.litellm_chart_dir else None,
            trace_collector=TraceCollector() if settings.traces else None,
            chart_directory_setting=f"{TIER_NAME}.litellm_chart_dir",
        )
        # Every chart waits for its pods, which only the core nodes run.
        for chart in (self.gateway.chart, self.gateway.secrets_store):
            if chart is not None:
                chart.node.add_dependency(core)
        self.observability = PlatformObservability(
            self,
            "Observability",
            cluster=as_cluster_ref(cluster),
            gateway=self.gateway.endpoint,
            alarm_email=settings.alarm_email,
            grafana=settings.grafana,
            traces=settings.traces,
            metrics=settings.metrics,
            prometheus_storage_class=settings.prometheus_storage_class,
            prometheus_volume_gib=settings.prometheus_volume_gib,
            prometheus_retention_days=settings.prometheus_retention_days,
        )
        # Every chart whose pods the core nodes run waits for them (the node exporter's DaemonSet included).
        for observed in (
            self.observability.grafana,
            self.observability.prometheus,
            self.observability.node_exporter,
        ):
            if observed is not None:
                observed.node.add_dependency(core)
        # Stage tenants: the sandboxes, and a LiteLLM team and key per tenant.
        self.sandboxes: Sandboxes | None = None
        self.tenant_keys: TenantModelKeys | None = None
        if settings.reaches("tenants"):
            self.sandboxes = Sandboxes(self, self.base, settings)
            tenants = self.sandboxes.tenants
            self.tenant_keys = TenantModelKeys(
                self,
                "TenantKeys",
                cluster=cluster,
                gateway=self.gateway.endpoint,
                tenants=[(tenants[name].spec, access) for name, access in settings.tenant_models.items()],
            )
            # The Job calls the proxy, and writes each key into its tenant's namespace.
            self.tenant_keys.provisioner.node.add_dependency(self.gateway.chart)
            for name in settings.tenant_models:
                keys = self.tenant_keys.tenant_manifests[tenants[name].namespace]
                keys.node.add_dependency(tenants[name].namespace_manifest)
                # The sandboxes' template reads the key Secret: it exists (empty until the Job fills it) first.
                tenants[name].manifest.node.add_dependency(keys)
        # Stage pool: the elastic GPU pool behind the inference gateway, added to LiteLLM as one more model.
        self.pool: PlatformInferencePool | None = None
        if settings.reaches("pool"):
            assert self.sandboxes is not None  # stage tenants installed Karpenter
            self.pool = PlatformInferencePool(
                self,
                "Pool",
                cluster=cluster,
                karpenter=self.sandboxes.karpenter,
                subnets=self.base.vpc.private_subnets,
                gateway=self.gateway.endpoint,
                metrics=self.observability.keda_metrics,
                spec=settings.pool,
            )
            # LiteLLM serves before the pool is added; the registration Job calls it.
            self.pool.registration.node.add_dependency(self.gateway.chart)
        self.base.add_outputs()


def build(app: Construct, settings: PlatformSettings) -> list[Stack]:
    return [PlatformStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec(TIER_NAME, PlatformSettings), build=build)
