"""Reusable L3 constructs, importable into any CDK app."""

from inference_tiers.constructs.eks_cluster import AddonVersions, EksCluster

__all__ = ["AddonVersions", "EksCluster"]
