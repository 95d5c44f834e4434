"""The platform's opt-in in-cluster Prometheus: the kube-prometheus-stack chart's values (plain dicts).

AMP with its managed scraper is the platform's default (platform-cluster.md D4). With ``platform.metrics=
prometheus`` the same scrape jobs (:func:`~inference_tiers.observability.collectors.eks_scrape_config` plus the
platform's own, one renderer for both) and the same recording and alerting rules
(:func:`~inference_tiers.observability.rules.rules_yaml`) run in a Prometheus on the core nodes instead, managed by
the Prometheus Operator of kube-prometheus-stack **88.5.3** (operator v0.93.1; prometheus-community/helm-charts
tag ``kube-prometheus-stack-88.5.3``, commit ea930ba; every key below is in that release's ``values.yaml``, which
the tests hold). The stack's own Grafana, kube-state-metrics and node exporter are off: the platform runs them
in both modes. Alerts
are evaluated and shown in Grafana; Alertmanager is off, so nothing is sent (the SNS topic is AMP's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from inference_tiers.validation import Args

CHART = "kube-prometheus-stack"
CHART_REPOSITORY = "https://prometheus-community.github.io/helm-charts"
CHART_VERSION = "88.5.3"
RELEASE = "kube-prometheus-stack"
NAMESPACE = "monitoring"
# Object names: "<fullnameOverride>-prometheus" (templates/_helpers.tpl:14-25, templates/prometheus/service.yaml:6),
# on the service port 9090 (values.yaml prometheus.service.port).
FULLNAME = "kps"
SERVER_PORT = 9090
SERVER_URL = f"http://{FULLNAME}-prometheus.{NAMESPACE}.svc.cluster.local:{SERVER_PORT}"
"""The in-cluster query URL (Grafana's data source, KEDA's Prometheus scaler)."""
# Node exporter on every node (core, Kata, GPU), in both metrics modes: prometheus-node-exporter 4.56.1 (the
# release kube-prometheus-stack 88.5.3 depends on; tag prometheus-node-exporter-4.56.1, commit 8b8e639). Its pods
# serve port 9100 (values.yaml:131, templates/daemonset.yaml:137-138), the port the shared node-exporter job keeps,
# on the node's address (hostNetwork, :382), and tolerate every NoSchedule taint (:471-473): the Kata sandbox
# taint and startup taint, and the GPU taint.
NODE_EXPORTER_CHART = "prometheus-node-exporter"
NODE_EXPORTER_VERSION = "4.56.1"
NODE_EXPORTER_IMAGE = "quay.io/prometheus/node-exporter:v1.12.1"
NODE_EXPORTER_NAMESPACE = NAMESPACE


def node_exporter_values() -> dict[str, Any]:
    """The node exporter chart's values: the chart's defaults (every node, port 9100), the image tag explicit so
    that ``preflight`` checks the image the pods pull."""
    return {"image": {"tag": NODE_EXPORTER_IMAGE.rsplit(":", 1)[1]}}


STORAGE_CLASS_PATTERN = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"


def chart_values(
    *,
    scrape_configs: Sequence[Mapping[str, Any]],
    rules_text: str,
    cluster_label: str,
    node_selector: Mapping[str, str],
    retention_days: int = 15,
    storage_class: str | None = None,
    volume_gib: int = 50,
) -> dict[str, Any]:
    """kube-prometheus-stack's values for the platform.

    :param scrape_configs: the scrape jobs (the AMP scraper's, as ``eks_scrape_config`` renders them).
    :param rules_text: the rules YAML (``{"groups": [...]}``) AMP would load.
    :param cluster_label: the ``cluster`` label every series gets (AMP's ``external_labels``).
    :param node_selector: where Prometheus and the operator run (the core nodes).
    :param retention_days: how long samples are kept (1-90).
    :param storage_class: a StorageClass of the cluster for the Prometheus volume (such as the EBS CSI driver's
        gp3); None: an ``emptyDir`` on the node (samples are lost when the pod moves).
    :param volume_gib: the volume's size (10-16384).
    """
    args = Args("prometheus_chart.chart_values")
    retention = args.integer("retention_days", retention_days, minimum=1, maximum=90)
    size = args.integer("volume_gib", volume_gib, minimum=10, maximum=16_384)
    if storage_class is not None:
        args.text("storage_class", storage_class, pattern=STORAGE_CLASS_PATTERN, allow_token=False)
    groups = yaml.safe_load(rules_text)["groups"]
    storage: dict[str, Any] = (
        {"emptyDir": {"sizeLimit": f"{size}Gi"}}
        if storage_class is None
        else {
            "volumeClaimTemplate": {
                "spec": {
                    "storageClassName": storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{size}Gi"}},
                }
            }
        }
    )
    selector = dict(node_selector)
    return {
        "fullnameOverride": FULLNAME,
        "grafana": {"enabled": False},
        "kubeStateMetrics": {"enabled": False},
        # PlatformObservability installs the node exporter in both modes (node_exporter_values).
        "nodeExporter": {"enabled": False},
        "alertmanager": {"enabled": False},
        "prometheusOperator": {"nodeSelector": selector},
        "additionalPrometheusRulesMap": {"inference-tiers": {"groups": groups}},
        "prometheus": {
            "prometheusSpec": {
                "nodeSelector": selector,
                "retention": f"{retention}d",
                "externalLabels": {"cluster": cluster_label},
                "storageSpec": storage,
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                "additionalScrapeConfigs": [dict(job) for job in scrape_configs],
                # Without these, only objects labelled with the release are selected (values.yaml says so).
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
            }
        },
    }
