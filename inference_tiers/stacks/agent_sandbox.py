"""Tier ``agent-sandbox``: multi-tenant agent sandboxes on EKS, one Kata Containers micro-VM per sandbox pod.

One stack, ``InferenceTiers-AgentSandbox``: a VPC (private subnets, flow logs) and the shared ``EksCluster``
base (private API endpoint, pinned add-ons) whose system node group is the *core* pool: the platform
controllers run there, and never a sandbox. Karpenter provisions the Kata sandbox nodes (nested
virtualization on C8i/M8i/R8i, or bare metal), kata-deploy installs Kata Containers on them, and one
RuntimeClass sends sandbox pods there (``KataSandboxNodes``). The agent-sandbox controller runs on the core
nodes; every tenant of the typed ``tenants`` setting gets its namespace, quota, default-deny networking, a
SandboxTemplate and warm pool, and a Pod Identity role with no permissions (``SandboxTenant``). A
ValidatingAdmissionPolicy keeps every pod in a tenant namespace on Kata, without an API token or privilege
escalation, and every claim with a shutdown time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    InstanceNeed,
    TierSpec,
    addon_pins,
    choice,
    integer,
    ipv4_cidr,
    items,
    mapping,
    optional,
    pinned_image,
    setting,
    text,
)
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    KUBERNETES_VERSION,
    admin_principal_arn_setting,
    public_endpoint_cidrs_setting,
)
from inference_tiers.constructs.eks.cluster_exporters import ClusterExporters, exporter_images
from inference_tiers.constructs.eks.tier_base import EksTierBase, private_eks_vpc
from inference_tiers.constructs.sandbox.controller import AgentSandboxController
from inference_tiers.constructs.sandbox.isolation import SandboxIsolation
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.constructs.sandbox.kata import KataSandboxNodes
from inference_tiers.constructs.sandbox.tenant import SandboxTenant
from inference_tiers.k8s.sandbox_nodes import (
    KATA_DEPLOY_IMAGE,
    KATA_SHIMS,
    KATA_VERSION,
    METAL_FAMILIES,
    NESTED_VIRTUALIZATION_FAMILIES,
    NODE_MODES,
    KataShim,
    NodeArguments,
    NodeMode,
    SandboxNodesSpec,
    kata_overhead,
)
from inference_tiers.k8s.sandbox_tenancy import (
    AGENT_SANDBOX_IMAGE,
    AGENT_SANDBOX_VERSION,
    TENANT_NAME_PATTERN,
    TenancySpec,
    TenantSpec,
    claim_command,
)
from inference_tiers.tier import Tier
from inference_tiers.validation import ArgumentError

TIER_NAME = "agent-sandbox"
STACK_NAME = "InferenceTiers-AgentSandbox"

# The core pool runs Karpenter, the sandbox controller and CoreDNS (and the gateway/observability agents when
# present): x86 general-purpose nodes, never sandbox pods.
CORE_INSTANCE_TYPE = r"(m|c|r)[5-8][a-z]*\.(large|[0-9]*xlarge)"
TENANT_FIELDS = (
    "max_sandboxes",
    "cpu_millicores",
    "memory_mib",
    "scratch_mib",
    "warm_pool",
    "egress",
    "image",
)


def tenant_object(key: str, raw: Any) -> dict[str, Any]:
    """A tenant's JSON object: only known keys (values are checked by TenantSpec, reported by key)."""
    if not isinstance(raw, dict) or not set(raw) <= set(TENANT_FIELDS):
        raise ConfigError(key, raw, "a JSON object whose keys are among " + ", ".join(TENANT_FIELDS))
    return dict(raw)


_TENANT_MAPPING = mapping(tenant_object, key_pattern=TENANT_NAME_PATTERN, max_items=50)


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise _RepeatedKey(repeated)
    return dict(pairs)


def tenants_setting(key: str, raw: Any) -> dict[str, dict[str, Any]]:
    """The tenants mapping; a ``-c`` JSON string that names a tenant (or a tenant's key) twice is refused, since
    ``json.loads`` would keep the last one silently and two teams would share one namespace."""
    if isinstance(raw, str):
        try:
            json.loads(raw, object_pairs_hook=_unique_keys)
        except _RepeatedKey as repeated:
            raise ConfigError(
                key,
                raw,
                f"a JSON object naming each tenant (and each key of a tenant) once; {repeated.args[0]!r} is repeated",
            ) from None
        except json.JSONDecodeError:
            pass  # reported by the mapping parser
    tenants: dict[str, dict[str, Any]] = _TENANT_MAPPING(key, raw)
    return tenants


@dataclass(frozen=True)
class SandboxSettings:
    """The sandbox settings of the ``agent-sandbox`` tier and of the ``platform`` tier's ``tenants`` stage: Kata
    nodes, the controller and the tenants (context keys ``<tier>.<field>``; defaults in defaults.json)."""

    tier_name: ClassVar[str]
    """The tier whose context keys these are (errors name ``<tier_name>.<field>``)."""
    stack_name: ClassVar[str]
    """The stack that builds the sandboxes (it owns their specs)."""

    node_mode: NodeMode = setting(
        choice(*NODE_MODES),
        "nested: Kata on virtual C8i/M8i/R8i sizes with nested virtualization; metal: on bare-metal sizes",
    )
    instance_families: tuple[str, ...] = setting(
        items(choice(*dict.fromkeys(NESTED_VIRTUALIZATION_FAMILIES + METAL_FAMILIES)), max_items=20),
        "Karpenter instance families of the sandbox nodes; empty: c8i, m8i, r8i (nested) or c7i, m7i, r7i (metal)",
    )
    kata_shim: KataShim = setting(
        choice(*KATA_SHIMS), "Kata runtime: qemu-runtime-rs (the Kata 4.x default) or clh-runtime-rs"
    )
    max_vcpus: int = setting(integer(8, 100_000), "limit on the vCPUs of all sandbox nodes together")
    max_memory_gib: int = setting(integer(16, 400_000), "limit on the memory of all sandbox nodes together")
    consolidate_after_minutes: int = setting(
        integer(2, 1440), "minutes a sandbox node must be empty before Karpenter removes it"
    )
    root_volume_gib: int = setting(
        integer(30, 16_384), "root EBS volume of each sandbox node (images, scratch)"
    )
    ami_alias: str = setting(
        text(r"al2023@(latest|v[0-9]{8})", description="al2023@latest or al2023@vYYYYMMDD", max_length=20),
        "AL2023 EKS AMI of the sandbox nodes; pin al2023@vYYYYMMDD in production",
    )

    tenants: dict[str, dict[str, Any]] = setting(
        tenants_setting,
        "tenant name -> {max_sandboxes, cpu_millicores, memory_mib, scratch_mib, warm_pool, egress: [CIDR:port], "
        "image}; each gets namespace sandbox-<name>",
    )
    sandbox_image: str = setting(pinned_image(), "default sandbox container image (pinned tag or digest)")
    sandbox_command: tuple[str, ...] = setting(
        items(text(max_length=1024), max_items=32), "sandbox container command; empty: the image's entrypoint"
    )
    claim_ttl_minutes: int = setting(
        integer(5, 10080), "lifetime of a sandbox claimed with the SandboxClaimExample output"
    )
    controller_chart_dir: str | None = setting(
        optional(text(max_length=1024)),
        "the agent-sandbox chart fetched by assets/sandbox/fetch-agent-sandbox-chart.sh; null: a placeholder "
        "that stops the deploy with instructions",
    )

    def __post_init__(self) -> None:
        # The specs make the remaining checks (families that fit the node mode, tenant values, the gateway URL);
        # report them by context key.
        try:
            self.nodes_spec()
        except ArgumentError as error:
            raise ConfigError(f"{self.tier_name}.{error.param}", error.value, error.accepted) from None
        try:
            self.tenancy_spec()
        except ArgumentError as error:
            raise ConfigError(f"{self.tier_name}.{error.param}", error.value, error.accepted) from None
        if not self.tenants:
            raise ConfigError(f"{self.tier_name}.tenants", {}, "at least one tenant")
        for name, values in self.tenants.items():
            try:
                TenantSpec(name=name, **values)
            except ArgumentError as error:
                raise ConfigError(
                    f"{self.tier_name}.tenants.{name}.{error.param}", error.value, error.accepted
                ) from None

    def tenancy_spec(self) -> TenancySpec:
        cpu, memory = kata_overhead(self.kata_shim)
        return TenancySpec(
            runtime_class_name=f"kata-{self.kata_shim}",
            overhead_cpu_millicores=cpu,
            overhead_memory_mib=memory,
            image=self.sandbox_image,
            command=self.sandbox_command,
            owner=self.stack_name,
            **self.model_gateway(),
        )

    def model_gateway(self) -> dict[str, Any]:
        """The ``TenancySpec`` arguments that say which model gateway the sandboxes call (none here)."""
        return {}

    def nodes_spec(self) -> SandboxNodesSpec:
        return SandboxNodesSpec(**self.node_arguments(), owner=self.stack_name)

    def node_arguments(self) -> NodeArguments:
        """The sandbox-node settings as ``KataSandboxNodes`` keyword arguments."""
        return {
            "node_mode": self.node_mode,
            "instance_families": self.instance_families or None,
            "kata_shim": self.kata_shim,
            "max_vcpus": self.max_vcpus,
            "max_memory_gib": self.max_memory_gib,
            "consolidate_after_minutes": self.consolidate_after_minutes,
            "root_volume_gib": self.root_volume_gib,
            "ami_alias": self.ami_alias,
        }

    def sandbox_images(self, *others: ImageNeed) -> tuple[ImageNeed, ...]:
        """The images the charts' values pin (to their releases), the sandbox image, ``others`` (the stack's
        other images) and each tenant's own."""
        tenant_images = {
            f"{self.tier_name}.tenants.{name}.image": values["image"]
            for name, values in self.tenants.items()
            if values.get("image") not in (None, self.sandbox_image)
        }
        return (
            ImageNeed(
                f"{KATA_DEPLOY_IMAGE}:{KATA_VERSION}", "inference_tiers.k8s.sandbox_nodes:KATA_VERSION"
            ),
            ImageNeed(
                f"{AGENT_SANDBOX_IMAGE}:{AGENT_SANDBOX_VERSION}",
                "inference_tiers.k8s.sandbox_tenancy:AGENT_SANDBOX_VERSION",
            ),
            ImageNeed(self.sandbox_image, f"{self.tier_name}.sandbox_image"),
            *others,
            *(ImageNeed(image, key) for key, image in tenant_images.items()),
        )


@dataclass(frozen=True)
class AgentSandboxSettings(SandboxSettings):
    """Settings of the ``agent-sandbox`` tier (context keys ``agent-sandbox.<field>``; defaults in cdk.json)."""

    tier_name: ClassVar[str] = TIER_NAME
    stack_name: ClassVar[str] = STACK_NAME

    vpc_cidr: str = setting(
        ipv4_cidr(16, 16),
        "VPC CIDR (a /16: two /18 private subnets leave room for hundreds of sandbox pod IPs per node)",
    )
    core_node_instance_type: str = setting(
        text(CORE_INSTANCE_TYPE, description="an x86 m/c/r instance type such as m7i.xlarge", max_length=32),
        "instance type of the core node group (platform controllers, never sandboxes)",
    )
    core_node_count: int = setting(
        integer(2, 10), "nodes in the core node group (two or more: the controllers run two replicas)"
    )
    admin_principal_arn: str | None = admin_principal_arn_setting()
    public_endpoint_cidrs: tuple[str, ...] = public_endpoint_cidrs_setting()
    model_gateway_url: str | None = setting(
        optional(text(description="an http(s) URL", max_length=512)),
        "the model gateway sandboxes may call (MODEL_GATEWAY_URL); null: none",
    )
    model_gateway_cidrs: tuple[str, ...] = setting(
        items(ipv4_cidr(), max_items=16),
        "the addresses the model gateway resolves to (NetworkPolicies match addresses, not names)",
    )

    def model_gateway(self) -> dict[str, Any]:
        return {"model_gateway_url": self.model_gateway_url, "model_gateway_cidrs": self.model_gateway_cidrs}

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(InstanceNeed("ec2", self.core_node_instance_type, self.core_node_count),),
            kubernetes_version=KUBERNETES_VERSION,
            eks_addons=addon_pins(
                DEFAULT_ADDON_VERSIONS.by_name(),
                "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
            ),
            images=self.sandbox_images(*exporter_images(efa_exporter=False)),
        )


class AgentSandboxStack(Stack):
    """EKS with a core node group, Karpenter, Kata sandbox nodes, the agent-sandbox controller and tenants."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: AgentSandboxSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description="inference-tiers agent-sandbox: EKS with Kata Containers micro-VM sandboxes per tenant",
        )
        self.settings = settings
        # One key for the stack's infrastructure log groups (flow logs, kubectl provider).
        self.base = EksTierBase(
            self,
            log_key_description="Encrypts the flow logs and kubectl provider logs",
            admin_principal_arn=settings.admin_principal_arn,
            public_endpoint_cidrs=settings.public_endpoint_cidrs,
            network=private_eks_vpc(self, cidr=settings.vpc_cidr),
            system_node_instance_type=settings.core_node_instance_type,
            system_node_count=settings.core_node_count,
        )
        self.log_key, self.vpc, self.eks = self.base.log_key, self.base.vpc, self.base.eks
        # kube-state-metrics on the core nodes, for the AMP scraper (docs/observability.md).
        self.exporters = ClusterExporters(self, "Exporters", cluster=self.eks.cluster)
        self.exporters.kube_state_metrics.node.add_dependency(self.eks.system_nodegroup)
        self.sandboxes = Sandboxes(self, self.base, settings)
        self.base.add_outputs()


class Sandboxes:
    """Karpenter, the Kata sandbox nodes, the agent-sandbox controller, the tenants' isolation and the tenants,
    created in ``stack`` (the ids the agent-sandbox tier has always had), with the outputs ``SandboxClaimExample``
    and ``TenantNamespaces``. The ``agent-sandbox`` tier and the ``platform`` tier's ``tenants`` stage build them.

    Attributes: ``karpenter``, ``kata``, ``controller``, ``isolation``, ``tenants`` (name to ``SandboxTenant``).
    """

    def __init__(self, stack: Stack, base: EksTierBase, settings: SandboxSettings) -> None:
        """
        :param stack: the tier's stack.
        :param base: its EKS preamble; the controllers run on its system (core) node group.
        :param settings: the sandbox settings.
        """
        eks, cluster = base.eks, base.eks.cluster
        self.karpenter = Karpenter(stack, "Karpenter", cluster=cluster)
        self.kata = KataSandboxNodes(
            stack,
            "KataNodes",
            cluster=cluster,
            karpenter=self.karpenter,
            subnets=base.vpc.private_subnets,
            # Each tier tags its own nodes (the platform's Kata nodes are the platform's).
            tags={"inference-tiers:tier": settings.tier_name},
            **settings.node_arguments(),
        )
        self.controller = AgentSandboxController(
            stack,
            "SandboxController",
            cluster=cluster,
            chart_directory=Path(settings.controller_chart_dir) if settings.controller_chart_dir else None,
            chart_directory_setting=f"{settings.tier_name}.controller_chart_dir",
        )
        # Both charts wait for their pods, which only the core nodes can run.
        for chart in (self.karpenter.chart, self.controller.chart):
            chart.node.add_dependency(eks.system_nodegroup)
        # kata-deploy's DaemonSet runs on the nodes Karpenter launches.
        self.kata.kata_chart.node.add_dependency(self.karpenter.chart)
        tenancy = settings.tenancy_spec()
        # Named for the admission policy it holds, whose logical id (and so the deployed policy) stays as it was.
        self.isolation = SandboxIsolation(
            stack, "TenantAdmissionPolicy", eks_cluster=eks, runtime_class_name=tenancy.runtime_class_name
        )
        self.tenants: dict[str, SandboxTenant] = {}
        for name, values in settings.tenants.items():
            tenant = SandboxTenant(
                stack,
                f"Tenant-{name}",
                cluster=cluster,
                controller=self.controller,
                isolation=self.isolation,
                tenancy=tenancy,
                name=name,
                **values,
            )
            # The first sandbox needs the runtime class (the isolation is the tenant's own dependency).
            tenant.manifest.node.add_dependency(self.kata.runtime_class_manifest)
            self.tenants[name] = tenant

        first = next(iter(self.tenants.values()))
        CfnOutput(
            stack,
            "SandboxClaimExample",
            description=f"claims one sandbox of tenant {first.spec.name} for {settings.claim_ttl_minutes} minutes",
            value=claim_command(first.spec, settings.claim_ttl_minutes),
        )
        CfnOutput(stack, "TenantNamespaces", value=",".join(t.namespace for t in self.tenants.values()))


def build(app: Construct, settings: AgentSandboxSettings) -> list[Stack]:
    return [AgentSandboxStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec(TIER_NAME, AgentSandboxSettings), build=build)
