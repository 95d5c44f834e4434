"""The EKS base both EKS tiers share: the cluster, the EFA GPU node group, the GPU/EFA device plugins."""

from inference_tiers.constructs.eks.cluster import AddonVersions, EksCluster
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.efa_node_group import EfaNodeGroup

__all__ = [
    "AddonVersions",
    "EfaNodeGroup",
    "EksCluster",
    "GpuDevicePlugins",
]
