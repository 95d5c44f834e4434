"""Tier ``platform``: one EKS cluster for a model gateway, agent sandboxes and an elastic inference pool.

One stack, ``InferenceTiers-Platform``, grown in stages (``platform.stage``); a higher stage only adds to the
lower one, never changes it (tests/platform/test_stack.py):

- ``gateway``: the EKS preamble (``EksTierBase``: VPC, private cluster, pinned add-ons) with its core managed node
  group (on-demand, two or more nodes over two AZs, labelled ``node-role=core``, no taint), where every controller,
  the LiteLLM gateway and Grafana run. The gateway and observability constructs are composed here next.
- ``tenants``: Karpenter, the Kata sandbox nodes, the agent-sandbox controller and the tenants, exactly as the
  ``agent-sandbox`` tier builds them (``Sandboxes``); the tenants' model keys are composed after them.
- ``pool``: the elastic GPU pool; not built yet, so refused at synth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from aws_cdk import Stack
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
    setting,
    text,
)
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    KUBERNETES_VERSION,
    admin_principal_arn_setting,
    public_endpoint_cidrs_setting,
)
from inference_tiers.constructs.eks.tier_base import EksTierBase, private_eks_vpc
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS
from inference_tiers.stacks.agent_sandbox import CORE_INSTANCE_TYPE, Sandboxes, SandboxSettings
from inference_tiers.tier import Tier

TIER_NAME = "platform"
STACK_NAME = "InferenceTiers-Platform"

Stage = Literal["gateway", "tenants", "pool"]
STAGES: tuple[Stage, ...] = ("gateway", "tenants", "pool")
"""The stages in the order they climb; each adds to the one before."""
BUILT_STAGES: tuple[Stage, ...] = ("gateway", "tenants")
"""The stages this release builds."""


@dataclass(frozen=True)
class PlatformSettings(SandboxSettings):
    """Settings of the ``platform`` tier (context keys ``platform.<field>``; defaults in defaults.json). The
    sandbox keys are the ``agent-sandbox`` tier's and apply from stage ``tenants`` on."""

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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stage not in BUILT_STAGES:
            raise ConfigError(
                f"{TIER_NAME}.stage",
                self.stage,
                " or ".join(BUILT_STAGES) + " (the elastic GPU pool of stage pool is not available yet)",
            )

    def reaches(self, stage: Stage) -> bool:
        """Whether the configured stage includes ``stage``."""
        return STAGES.index(self.stage) >= STAGES.index(stage)

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(InstanceNeed("ec2", self.core_instance_type, self.core_nodes),),
            kubernetes_version=KUBERNETES_VERSION,
            eks_addons=addon_pins(
                DEFAULT_ADDON_VERSIONS.by_name(),
                "inference_tiers.constructs.eks.cluster:DEFAULT_ADDON_VERSIONS",
            ),
            images=self.sandbox_images() if self.reaches("tenants") else (),
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
        # Stage tenants: the sandboxes; the tenants' model keys are composed after them.
        self.sandboxes = Sandboxes(self, self.base, settings) if settings.reaches("tenants") else None
        self.base.add_outputs()


def build(app: Construct, settings: PlatformSettings) -> list[Stack]:
    return [PlatformStack(app, STACK_NAME, settings=settings)]


TIER = Tier(spec=TierSpec(TIER_NAME, PlatformSettings), build=build)
