"""Values of the maintained community Grafana chart for the ``platform`` tier, rendered by a pure function.

``grafana`` from ``grafana-community/helm-charts`` (the successor of ``grafana/helm-charts``, frozen since
2026-01-30) at :data:`CHART_VERSION` / Grafana :data:`APP_VERSION`, commit :data:`CHART_COMMIT`. Grafana reads
Amazon Managed Service for Prometheus through the ``grafana-amazonprometheus-datasource`` plugin with SigV4 and
the default AWS credential chain, i.e. the pod's IRSA web identity (Grafana 13 migrates SigV4 data sources of the
core Prometheus type to that plugin at start; EKS Pod Identity is not picked up by it, grafana#105822). The
project's dashboards are provisioned as code: no PVC, nothing to lose when the pod moves.

The admin password is the chart's own: with ``admin.existingSecret`` empty, the chart creates Secret
``<release>`` with a random ``admin-password`` and keeps it on upgrade (``templates/secret.yaml``,
``_helpers.tpl`` ``grafana.password``: ``lookup`` of the live Secret, else ``randAlphaNum 40``), so no value is in
the template, the Helm values or a custom-resource payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from inference_tiers.validation import Args

CHART_REPOSITORY = "https://grafana-community.github.io/helm-charts"
CHART = "grafana"
CHART_VERSION = "12.11.1"
APP_VERSION = "13.2.0"
CHART_COMMIT = "3386a115"
"""grafana-community/helm-charts commit of ``charts/grafana`` at :data:`CHART_VERSION` (tag ``grafana-12.11.1``)."""
RELEASE = "grafana"
NAMESPACE = "grafana"
SERVICE_ACCOUNT = "grafana"
AMP_PLUGIN = "grafana-amazonprometheus-datasource"
AMP_PLUGIN_VERSION = "3.3.5"
DATASOURCE_UID = "amp"
DASHBOARD_PROVIDER = "inference-tiers"
PLATFORM_DASHBOARDS = (
    "inference-tiers-overview.json",
    "inference-tiers-gateway.json",
    "inference-tiers-tenants.json",
)
"""The project's dashboards (:func:`inference_tiers.observability.dashboards.all_dashboards`) a platform reads:
the overview (gateway, vLLM, GPUs, scrape targets), the gateway and its tenants (tokens, spend, requests, budget)."""
# The classic dashboards name their Prometheus data source as a variable of the core ``prometheus`` type
# (inference_tiers.observability.dashboards.PROMETHEUS); provisioned here, they point at the AMP plugin instead.
_CORE_PROMETHEUS = "prometheus"


def for_amp(board: Mapping[str, Any]) -> dict[str, Any]:
    """``board`` with its Prometheus data source (panels, targets and the ``datasource`` variable) of the AMP
    plugin's type, so that the variable lists the AMP data source and every panel queries it."""

    def convert(value: Any) -> Any:
        if isinstance(value, Mapping):
            converted = {key: convert(item) for key, item in value.items()}
            if converted.get("type") == _CORE_PROMETHEUS and "uid" in converted:
                converted["type"] = AMP_PLUGIN
            if converted.get("type") == "datasource" and converted.get("query") == _CORE_PROMETHEUS:
                converted["query"] = AMP_PLUGIN
            return converted
        if isinstance(value, list):
            return [convert(item) for item in value]
        return value

    converted: dict[str, Any] = convert(board)
    return converted


def chart_values(
    *,
    node_selector: Mapping[str, str],
    dashboards: Mapping[str, Mapping[str, Any]],
    workspace_endpoint: str | None = None,
    region: str | None = None,
    prometheus_url: str | None = None,
) -> dict[str, Any]:
    """The chart's values, reading either AMP (``workspace_endpoint`` and ``region``) or an in-cluster Prometheus
    (``prometheus_url``).

    :param node_selector: where Grafana runs (the core nodes).
    :param dashboards: file name (``<uid>.json``) to dashboard JSON model, provisioned read-only.
    :param workspace_endpoint: the AMP workspace's Prometheus endpoint (``.../workspaces/<id>/``).
    :param region: the workspace's Region (SigV4 signing).
    :param prometheus_url: an in-cluster Prometheus (the core data source type, no AWS identity).
    """
    args = Args("grafana_chart.chart_values")
    if (prometheus_url is None) == (workspace_endpoint is None):
        raise args.error(
            "prometheus_url", prometheus_url, "exactly one of workspace_endpoint and prometheus_url"
        )
    if prometheus_url is not None:
        args.text("prometheus_url", prometheus_url, pattern=r"https?://\S+", description="an http(s) URL")
        datasource: dict[str, Any] = {
            "name": "Prometheus",
            "type": _CORE_PROMETHEUS,
            "url": prometheus_url,
            "jsonData": {"httpMethod": "POST"},
        }
        plugins: list[str] = []
    else:
        args.text(
            "workspace_endpoint", workspace_endpoint, description="the AMP workspace's Prometheus endpoint"
        )
        args.text("region", region, description="an AWS Region such as us-east-1")
        datasource = {
            "name": "Amazon Managed Prometheus",
            "type": AMP_PLUGIN,
            "url": workspace_endpoint,
            "jsonData": {
                "httpMethod": "POST",
                "sigV4Auth": True,
                "sigV4AuthType": "default",
                "sigV4Region": region,
            },
        }
        plugins = [f"{AMP_PLUGIN}@{AMP_PLUGIN_VERSION}"]
    convert = for_amp if prometheus_url is None else dict
    args.mapping("node_selector", node_selector, lambda name, value: args.text(name, value))
    boards: Sequence[tuple[str, Mapping[str, Any]]] = sorted(dashboards.items())
    if not boards:
        raise args.error("dashboards", dashboards, "at least one dashboard")
    return {
        # One pod: without a shared database each replica keeps its own sessions and users in SQLite, so two
        # would log users out between them; dashboards and the data source are provisioned, so a lost pod loses
        # nothing (platform-cluster.md §2: HA needs grafana.ini database on PostgreSQL).
        "replicas": 1,
        # AMP: the IRSA ServiceAccount PlatformObservability makes; in-cluster, the chart's own (no AWS identity).
        "serviceAccount": {"create": prometheus_url is not None, "name": SERVICE_ACCOUNT},
        "nodeSelector": dict(node_selector),
        "persistence": {"enabled": False},
        # The chart's `helm test` pod pulls another image and is never run by the CDK kubectl handler.
        "testFramework": {"enabled": False},
        "assertNoLeakedSecrets": True,
        "admin": {"existingSecret": ""},
        "plugins": plugins,
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "grafana.ini": {
            "auth.anonymous": {"enabled": False},
            "users": {"allow_sign_up": False},
            "analytics": {"check_for_updates": False, "reporting_enabled": False},
        },
        "datasources": {
            "datasources.yaml": {
                "apiVersion": 1,
                "datasources": [
                    {
                        "name": datasource["name"],
                        "type": datasource["type"],
                        "uid": DATASOURCE_UID,
                        "access": "proxy",
                        "isDefault": True,
                        "editable": False,
                        "url": datasource["url"],
                        "jsonData": datasource["jsonData"],
                    }
                ],
            }
        },
        "dashboardProviders": {
            "dashboardproviders.yaml": {
                "apiVersion": 1,
                "providers": [
                    {
                        "name": DASHBOARD_PROVIDER,
                        "orgId": 1,
                        "folder": "inference-tiers",
                        "type": "file",
                        "disableDeletion": True,
                        "editable": False,
                        "options": {"path": f"/var/lib/grafana/dashboards/{DASHBOARD_PROVIDER}"},
                    }
                ],
            }
        },
        "dashboards": {
            DASHBOARD_PROVIDER: {
                name.removesuffix(".json"): {"json": json.dumps(convert(board))} for name, board in boards
            }
        },
    }
