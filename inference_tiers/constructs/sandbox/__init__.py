"""The agent-sandbox platform: Karpenter, Kata sandbox nodes, Pod Identity roles for service accounts."""

from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.constructs.sandbox.kata import KataSandboxNodes

__all__ = [
    "KataSandboxNodes",
    "Karpenter",
    "PodIdentityRole",
]
