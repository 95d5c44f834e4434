"""The EKS base both EKS tiers share: the cluster, the EFA GPU node group, the GPU/EFA device plugins, the cluster
exporters the AMP scraper collects (kube-state-metrics, the EFA exporter), and the opt-in inference gateway."""

from inference_tiers.constructs.eks.cluster import AddonVersions, EksCluster
from inference_tiers.constructs.eks.cluster_exporters import ClusterExporters
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.efa_node_group import EfaNodeGroup
from inference_tiers.constructs.eks.inference_gateway import InferenceGateway, ServiceBackend

__all__ = [
    "AddonVersions",
    "ClusterExporters",
    "EfaNodeGroup",
    "EksCluster",
    "GpuDevicePlugins",
    "InferenceGateway",
    "ServiceBackend",
]
