"""Reusable L3 constructs, importable into any CDK app."""

from inference_tiers.constructs.hyperpod_cluster import HyperPodCluster, HyperPodInstanceGroup, HyperPodTaint
from inference_tiers.constructs.hyperpod_dependencies import HyperPodDependencyChart
from inference_tiers.constructs.hyperpod_inference_operator import HyperPodInferenceOperator
from inference_tiers.constructs.hyperpod_model_endpoint import HyperPodModelEndpoint
from inference_tiers.constructs.hyperpod_network import HyperPodNetwork
from inference_tiers.constructs.hyperpod_observability import HyperPodObservability

__all__ = [
    "HyperPodCluster",
    "HyperPodDependencyChart",
    "HyperPodInferenceOperator",
    "HyperPodInstanceGroup",
    "HyperPodModelEndpoint",
    "HyperPodNetwork",
    "HyperPodObservability",
    "HyperPodTaint",
]
