"""The EFA and NVIDIA Kubernetes device plugins, as pinned Helm charts that tolerate the GPU taint.

The AL2023 NVIDIA AMI ships the EFA host stack, the NVIDIA driver and the container toolkit, but neither device
plugin: without them the nodes advertise no ``vpc.amazonaws.com/efa`` and no ``nvidia.com/gpu`` resources.
Both DaemonSets must tolerate ``nvidia.com/gpu:NoSchedule``; the EFA chart tolerates only ``CriticalAddonsOnly``
by default, so without the toleration EFA stays at 0 allocatable and every EFA pod stays Pending.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref, kubectl_cluster
from inference_tiers.constructs.eks.efa_node_group import GPU_TOLERATION
from inference_tiers.validation import Args

# aws/eks-charts aws-efa-k8s-device-plugin (image v0.5.20): knows p5, p5e, p5en and p6 instance types.
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"
# NVIDIA/k8s-device-plugin: 0.19.0-0.19.2 enable MOFED by default and mount every /dev/infiniband/uverbs*
# into GPU pods, which breaks EFA device allocation; 0.19.3 is the first release that does not.
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.19.3"
NVIDIA_DEVICE_PLUGIN_MINIMUM = (0, 19, 3)

_SEMVER = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)")


_ARGS = Args("GpuDevicePlugins")


def _version(prop: str, value: str, minimum: tuple[int, int, int] | None = None) -> str:
    match = _SEMVER.fullmatch(value) if isinstance(value, str) else None
    floor = ".".join(map(str, minimum)) if minimum else None
    accepted = "an exact chart version such as 1.2.3" + (f", {floor} or later" if floor else "")
    if match is None or (minimum is not None and tuple(map(int, match.groups())) < minimum):
        raise _ARGS.error(prop, value, accepted)
    return value


_TOLERATION_FIELDS = {"key", "operator", "value", "effect"}
_OPERATORS = {"Exists", "Equal"}
_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}


def _check_tolerations(tolerations: Sequence[Mapping[str, str]]) -> None:
    checked: tuple[object, ...] = _ARGS.sequence("tolerations", tolerations)
    for index, toleration in enumerate(checked):
        if (
            not isinstance(toleration, Mapping)
            or not set(toleration) <= _TOLERATION_FIELDS
            or not all(isinstance(v, str) for v in toleration.values())
            or toleration.get("operator", "Equal") not in _OPERATORS
            or toleration.get("effect", "NoSchedule") not in _EFFECTS
        ):
            raise _ARGS.error(
                f"tolerations[{index}]",
                toleration,
                f"a Kubernetes toleration with string fields {sorted(_TOLERATION_FIELDS)}, operator one of "
                f"{sorted(_OPERATORS)} and effect one of {sorted(_EFFECTS)}",
            )


class GpuDevicePlugins(Construct):
    """Installs the EFA and NVIDIA device plugins into ``kube-system``.

    Attributes: ``efa_device_plugin`` (``aws_eks_v2.HelmChart``, None with ``efa=False``) and
    ``nvidia_device_plugin`` (``aws_eks_v2.HelmChart``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        tolerations: Sequence[Mapping[str, str]] = (GPU_TOLERATION,),
        efa_chart_version: str = EFA_DEVICE_PLUGIN_CHART_VERSION,
        nvidia_chart_version: str = NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        efa: bool = True,
    ) -> None:
        """
        :param cluster: the cluster (with a kubectl provider).
        :param tolerations: tolerations for both DaemonSets, so that they land on tainted GPU nodes.
            Default: ``nvidia.com/gpu`` Exists NoSchedule.
        :param efa_chart_version: aws-efa-k8s-device-plugin chart version. Default: v0.5.30.
        :param nvidia_chart_version: nvidia-device-plugin chart version, 0.19.3 or later. Default: 0.19.3.
        :param efa: install the EFA device plugin too. Default True; False for GPU nodes without EFA.
        """
        cluster = kubectl_cluster(_ARGS, "cluster", cluster)  # type: ignore[assignment]
        super().__init__(scope, construct_id)
        _version("efa_chart_version", efa_chart_version)
        _version("nvidia_chart_version", nvidia_chart_version, NVIDIA_DEVICE_PLUGIN_MINIMUM)
        _check_tolerations(tolerations)
        _ARGS.boolean("efa", efa)
        toleration_values = [dict(t) for t in tolerations]
        self.efa_device_plugin = (
            eks.HelmChart(
                self,
                "EfaDevicePlugin",
                cluster=as_cluster_ref(cluster),
                chart="aws-efa-k8s-device-plugin",
                repository="https://aws.github.io/eks-charts",
                version=efa_chart_version,
                namespace="kube-system",
                values={"tolerations": toleration_values},
            )
            if efa
            else None
        )
        """The ``aws-efa-k8s-device-plugin`` Helm chart in ``kube-system``, which makes the nodes advertise
        ``vpc.amazonaws.com/efa`` (None with ``efa=False``); make workloads that request EFA devices depend on
        it."""
        self.nvidia_device_plugin = eks.HelmChart(
            self,
            "NvidiaDevicePlugin",
            cluster=as_cluster_ref(cluster),
            chart="nvidia-device-plugin",
            repository="https://nvidia.github.io/k8s-device-plugin",
            version=nvidia_chart_version,
            namespace="kube-system",
            # The chart's own default also tolerates CriticalAddonsOnly; keep it next to the GPU toleration.
            values={"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *toleration_values]},
        )
        """The ``nvidia-device-plugin`` Helm chart in ``kube-system``, which makes the nodes advertise
        ``nvidia.com/gpu``; make workloads that request GPUs depend on it."""
