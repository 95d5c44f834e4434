"""Tier ``agent-sandbox``: multi-tenant agent sandboxes on EKS, one Kata Containers micro-VM per sandbox pod.

One stack, ``InferenceTiers-AgentSandbox``: a VPC (private subnets, flow logs) and the shared ``EksCluster``
base (private API endpoint, pinned add-ons) whose system node group is the *core* pool: the platform
controllers run there, and never a sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    InstanceNeed,
    TierSpec,
    integer,
    ipv4_cidr,
    items,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.constructs.eks.cluster import (
    EKS_NAT_GATEWAYS,
    EKS_PRIVATE_CIDR_MASK,
    KUBERNETES_VERSION,
    PRINCIPAL_ARN_PATTERN,
    EksCluster,
)
from inference_tiers.tier import Tier

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

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(InstanceNeed("ec2", self.core_node_instance_type, self.core_node_count),),
            kubernetes_version=KUBERNETES_VERSION,
        )


class AgentSandboxStack(Stack):
    """EKS with a core node group for the sandbox platform."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: AgentSandboxSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            description="inference-tiers agent-sandbox: EKS with Kata Containers micro-VM sandboxes per tenant",
        )
        self.settings = settings
        self.vpc = create_private_vpc(
            self,
            "Vpc",
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
        )
        CfnOutput(self, "EksClusterName", value=self.eks.cluster_name)
        CfnOutput(self, "KubeconfigCommand", value=self.eks.kubeconfig_command)


def build(app: Construct, settings: AgentSandboxSettings) -> list[Stack]:
    return [AgentSandboxStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec(TIER_NAME, AgentSandboxSettings), build=build)
