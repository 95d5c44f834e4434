"""Tier 3 constructs: the HyperPod cluster on EKS, its network, the inference operator, the model endpoint, its L2 KV cache, observability."""

from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster, HyperPodInstanceGroup, HyperPodTaint
from inference_tiers.constructs.hyperpod.dependencies import HyperPodDependencyChart
from inference_tiers.constructs.hyperpod.inference_operator import HyperPodInferenceOperator
from inference_tiers.constructs.hyperpod.kv_cache import HyperPodKvCacheStore
from inference_tiers.constructs.hyperpod.model_endpoint import HyperPodModelEndpoint
from inference_tiers.constructs.hyperpod.network import HyperPodNetwork
from inference_tiers.constructs.hyperpod.observability import HyperPodObservability

__all__ = [
    "HyperPodCluster",
    "HyperPodDependencyChart",
    "HyperPodInferenceOperator",
    "HyperPodInstanceGroup",
    "HyperPodKvCacheStore",
    "HyperPodModelEndpoint",
    "HyperPodNetwork",
    "HyperPodObservability",
    "HyperPodTaint",
]
