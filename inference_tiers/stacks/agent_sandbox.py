"""Tier ``agent-sandbox``: multi-tenant agent sandboxes on EKS, one Kata Containers micro-VM per sandbox pod.

One stack, ``InferenceTiers-AgentSandbox``: a VPC (private subnets, flow logs) and the shared ``EksCluster``
base (private API endpoint, pinned add-ons) whose system node group is the *core* pool: the platform
controllers run there, and never a sandbox. Karpenter provisions the Kata sandbox nodes (nested
virtualization on C8i/M8i/R8i, or bare metal), kata-deploy installs Kata Containers on them, and one
RuntimeClass sends sandbox pods there (``KataSandboxNodes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    InstanceNeed,
    TierSpec,
    addon_pins,
    choice,
    integer,
    ipv4_cidr,
    items,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    EKS_NAT_GATEWAYS,
    EKS_PRIVATE_CIDR_MASK,
    KUBERNETES_VERSION,
    PRINCIPAL_ARN_PATTERN,
    EksCluster,
)
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.constructs.sandbox.kata import KataSandboxNodes
from inference_tiers.k8s.sandbox_nodes import (
    KATA_SHIMS,
    METAL_FAMILIES,
    NESTED_VIRTUALIZATION_FAMILIES,
    NODE_MODES,
    KataShim,
    NodeArguments,
    NodeMode,
    SandboxNodesSpec,
)
from inference_tiers.tier import Tier
from inference_tiers.validation import ArgumentError

TIER_NAME = "agent-sandbox"
STACK_NAME = "InferenceTiers-AgentSandbox"

# The core pool runs Karpenter, the sandbox controller and CoreDNS (and the gateway/observability agents when
# present): x86 general-purpose nodes, never sandbox pods.
_CORE_INSTANCE_TYPE = r"(m|c|r)[5-8][a-z]*\.(large|[0-9]*xlarge)"


@dataclass(frozen=True)
class AgentSandboxSettings:
    """Settings of the ``agent-sandbox`` tier (context keys ``agent-sandbox.<field>``; defaults in cdk.json)."""

    vpc_cidr: str = setting(
        ipv4_cidr(16, 16),
        "VPC CIDR (a /16: two /18 private subnets leave room for hundreds of sandbox pod IPs per node)",
    )
    core_node_instance_type: str = setting(
        text(_CORE_INSTANCE_TYPE, description="an x86 m/c/r instance type such as m7i.xlarge", max_length=32),
        "instance type of the core node group (platform controllers, never sandboxes)",
    )
    core_node_count: int = setting(
        integer(2, 10), "nodes in the core node group (two or more: the controllers run two replicas)"
    )
    admin_principal_arn: str | None = setting(
        optional(text(PRINCIPAL_ARN_PATTERN, description="an IAM role or user ARN")),
        "IAM role/user ARN given cluster-admin access to the EKS cluster; null: none",
    )
    public_endpoint_cidrs: tuple[str, ...] = setting(
        items(ipv4_cidr(), max_items=40),
        "CIDRs allowed to reach a public EKS API endpoint; empty: private endpoint only",
    )

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

    def __post_init__(self) -> None:
        # The node spec makes the cross-field checks (families that fit the node mode); report them by key.
        try:
            self.nodes_spec()
        except ArgumentError as error:
            raise ConfigError(f"{TIER_NAME}.{error.param}", error.value, error.accepted) from None

    def nodes_spec(self) -> SandboxNodesSpec:
        return SandboxNodesSpec(**self.node_arguments(), owner=STACK_NAME)

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

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(InstanceNeed("ec2", self.core_node_instance_type, self.core_node_count),),
            kubernetes_version=KUBERNETES_VERSION,
            eks_addons=addon_pins(
                DEFAULT_ADDON_VERSIONS.by_name(),
                "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
            ),
        )


class AgentSandboxStack(Stack):
    """EKS with a core node group, Karpenter and Kata sandbox nodes."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: AgentSandboxSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description="inference-tiers agent-sandbox: EKS with Kata Containers micro-VM sandboxes per tenant",
        )
        self.settings = settings
        # One key for the stack's infrastructure log groups (flow logs, kubectl provider).
        self.log_key = retained_key(self, "LogKey", "Encrypts the flow logs and kubectl provider logs")
        self.vpc = create_private_vpc(
            self,
            "Vpc",
            flow_log_key=self.log_key,
            cidr=settings.vpc_cidr,
            private_cidr_mask=EKS_PRIVATE_CIDR_MASK,
            nat_gateways=EKS_NAT_GATEWAYS,
        )
        self.eks = EksCluster(
            self,
            "Eks",
            vpc=self.vpc,
            admin_principal_arns=[settings.admin_principal_arn] if settings.admin_principal_arn else [],
            public_endpoint_cidrs=settings.public_endpoint_cidrs,
            system_node_instance_type=settings.core_node_instance_type,
            system_node_count=settings.core_node_count,
            log_key=self.log_key,
        )
        cluster = self.eks.cluster
        self.karpenter = Karpenter(self, "Karpenter", cluster=cluster)
        self.kata = KataSandboxNodes(
            self,
            "KataNodes",
            cluster=cluster,
            karpenter=self.karpenter,
            subnets=self.vpc.private_subnets,
            **settings.node_arguments(),
        )
        CfnOutput(self, "EksClusterName", value=self.eks.cluster_name)
        CfnOutput(self, "KubeconfigCommand", value=self.eks.kubeconfig_command)


def build(app: Construct, settings: AgentSandboxSettings) -> list[Stack]:
    return [AgentSandboxStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec(TIER_NAME, AgentSandboxSettings), build=build)
