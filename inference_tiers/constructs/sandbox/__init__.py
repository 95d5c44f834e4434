"""The agent-sandbox platform: Karpenter, Kata sandbox nodes, the agent-sandbox controller, tenant isolation,
tenants, Pod Identity roles for service accounts."""

from inference_tiers.constructs.sandbox.controller import AgentSandboxController
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.constructs.sandbox.isolation import SandboxIsolation
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.constructs.sandbox.kata import KataSandboxNodes
from inference_tiers.constructs.sandbox.tenant import SandboxTenant

__all__ = [
    "AgentSandboxController",
    "KataSandboxNodes",
    "Karpenter",
    "PodIdentityRole",
    "SandboxIsolation",
    "SandboxTenant",
]
