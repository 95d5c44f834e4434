"""The cluster exporters the AMP managed scraper collects on the EKS tiers this project builds.

- kube-state-metrics (object state: pods, deployments, nodes, jobs...) from the prometheus-community Helm chart,
  on the system nodes. The scraper's ``kube-state-metrics`` job keeps its pod by the chart's pod label and its
  object-metrics port name (``collectors.KUBE_STATE_METRICS`` / ``KUBE_STATE_METRICS_PORT_NAMES``).
- With ``efa_exporter``: this project's EFA exporter (``inference_tiers.k8s.efa_exporter``) as a DaemonSet on
  the EFA GPU nodes, found by its ``prometheus.io`` annotations; the EFA alerts read its ``node_amazonefa_*``.

The chart facts below were read from prometheus-community/helm-charts at tag ``kube-state-metrics-8.4.0``
(commit 1982f1c5828920f5d4ea5d04956169e81f8c5129, 2026-08-18): ``Chart.yaml`` version 8.4.0, appVersion 2.20.0;
``templates/_helpers.tpl`` labels the pod ``app.kubernetes.io/name: kube-state-metrics`` (the chart name, no
``nameOverride``); ``templates/deployment.yaml`` names the container ports ``http`` (``service.port``, 8080) and
``metrics`` (self-telemetry, 8081) while kube-rbac-proxy is off (the default); ``values.yaml`` runs it as 65534
with a read-only root file system, no privilege escalation and every capability dropped, and its ClusterRole
(``templates/role.yaml``) grants only ``list``/``watch`` on the enabled collectors' resources.
tests/data/observability/kube-state-metrics-chart.json records them and the tests compare against it.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.config import ImageNeed
from inference_tiers.constructs.eks.cluster import SYSTEM_NODE_LABEL, kubectl_cluster
from inference_tiers.k8s import efa_exporter as efa_exporter_module
from inference_tiers.k8s.efa_exporter import EfaExporterSpec
from inference_tiers.observability.collectors import KUBE_STATE_METRICS
from inference_tiers.validation import Args

KUBE_STATE_METRICS_REPOSITORY = "https://prometheus-community.github.io/helm-charts"
KUBE_STATE_METRICS_CHART_VERSION = "8.4.0"
KUBE_STATE_METRICS_REGISTRY = "registry.k8s.io"
KUBE_STATE_METRICS_REPOSITORY_PATH = "kube-state-metrics/kube-state-metrics"
# The chart's default tag (v + appVersion), set explicitly so that the preflight checks the image the pod pulls.
KUBE_STATE_METRICS_TAG = "v2.20.0"
KUBE_STATE_METRICS_IMAGE = (
    f"{KUBE_STATE_METRICS_REGISTRY}/{KUBE_STATE_METRICS_REPOSITORY_PATH}:{KUBE_STATE_METRICS_TAG}"
)
KUBE_STATE_METRICS_NAMESPACE = "kube-system"
# Not the chart's `secrets` collector: list/watch on secrets returns every secret's data to the exporter, and
# no rule or dashboard reads kube_secret_*. Every other default collector stays (read-only object metadata).
EXCLUDED_COLLECTORS = ("secrets",)
NOBODY = efa_exporter_module.NOBODY


def kube_state_metrics_values() -> dict[str, Any]:
    """The chart values: pinned image, system nodes, requests and limits, and the chart's own hardening stated
    explicitly so that a later chart default cannot loosen it."""
    return {
        "image": {
            "registry": KUBE_STATE_METRICS_REGISTRY,
            "repository": KUBE_STATE_METRICS_REPOSITORY_PATH,
            "tag": KUBE_STATE_METRICS_TAG,
        },
        "nodeSelector": {SYSTEM_NODE_LABEL: "system"},
        # kube-state-metrics keeps every watched object in memory; its README sizes it at about 250 MiB and
        # 0.1 CPU for 100 nodes (2 MiB and 0.001 CPU per further node): these fit that with room to the limits.
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "collectorsExclude": list(EXCLUDED_COLLECTORS),
        "securityContext": {
            "enabled": True,
            "runAsNonRoot": True,
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "fsGroup": NOBODY,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def exporter_images(*, efa_exporter: bool) -> tuple[ImageNeed, ...]:
    """The images :class:`ClusterExporters` pulls, for a tier's account requirements (the preflight checks them)."""
    images = [
        ImageNeed(
            KUBE_STATE_METRICS_IMAGE,
            "inference_tiers.constructs.eks.cluster_exporters:KUBE_STATE_METRICS_TAG",
        )
    ]
    if efa_exporter:
        images.append(
            ImageNeed(
                efa_exporter_module.EFA_EXPORTER_IMAGE, "inference_tiers.k8s.efa_exporter:EFA_EXPORTER_IMAGE"
            )
        )
    return tuple(images)


_ARGS = Args("ClusterExporters")


class ClusterExporters(Construct):
    """kube-state-metrics on the system nodes and, with ``efa_exporter``, the EFA exporter on the EFA GPU nodes.

    Attributes: ``kube_state_metrics`` (``aws_eks_v2.HelmChart``), ``efa_exporter`` (``KubernetesManifest``
    with the exporter's ConfigMap and DaemonSet, or None).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        efa_exporter: EfaExporterSpec | None = None,
    ) -> None:
        """
        :param cluster: the cluster (with a kubectl provider), whose system nodes carry
            ``inference-tiers/node-pool: system`` (``EksCluster``'s system node group).
        :param efa_exporter: where the EFA exporter runs (``EfaExporterSpec()``: the ``EfaNodeGroup`` nodes).
            Default: none (a cluster without EFA nodes).
        """
        checked = kubectl_cluster(_ARGS, "cluster", cluster)
        spec = None if efa_exporter is None else _ARGS.instance("efa_exporter", efa_exporter, EfaExporterSpec)
        super().__init__(scope, construct_id)
        self.kube_state_metrics = eks.HelmChart(
            self,
            "KubeStateMetrics",
            cluster=checked,
            chart=KUBE_STATE_METRICS,
            repository=KUBE_STATE_METRICS_REPOSITORY,
            version=KUBE_STATE_METRICS_CHART_VERSION,
            release=KUBE_STATE_METRICS,
            namespace=KUBE_STATE_METRICS_NAMESPACE,
            values=kube_state_metrics_values(),
        )
        """The kube-state-metrics Helm chart (release ``kube-state-metrics`` in ``kube-system``), scheduled on
        the system nodes: make it depend on ``EksCluster.system_nodegroup`` so that it installs once those
        nodes exist."""
        self.efa_exporter = (
            None
            if spec is None
            else eks.KubernetesManifest(
                self, "EfaExporter", cluster=checked, manifest=efa_exporter_module.render(spec)
            )
        )
        """The manifest with the EFA exporter's ConfigMap and DaemonSet, or None without ``efa_exporter``."""
