"""Reusable L3 constructs, importable into any CDK app."""

from inference_tiers.constructs.disaggregated_monitoring import DisaggregatedMonitoring
from inference_tiers.constructs.disaggregated_serving import DisaggregatedServing
from inference_tiers.constructs.eks_cluster import AddonVersions, EksCluster

__all__ = ["AddonVersions", "DisaggregatedMonitoring", "DisaggregatedServing", "EksCluster"]
