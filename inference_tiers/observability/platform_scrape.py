"""The platform tier's own scrape jobs for the AMP managed scraper (pure data, added to
:func:`~inference_tiers.observability.collectors.eks_scrape_config` through ``extra_jobs``).

LiteLLM: newer proxies answer an unauthenticated scrape of ``/metrics`` on the http port with 401, so the gateway
chart serves metrics from a separate Service (``GatewayEndpoint.metrics_service``/``metrics_port``) and this job
keeps only that Service's endpoints on that port. The managed scraper runs outside the cluster's network (ENIs in
the VPC) and cannot reach a ClusterIP, so it scrapes the Service's endpoints (pod IP:port) directly.
"""

from __future__ import annotations

from typing import Any

from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.observability.collectors import POD_LABELS

GATEWAY_JOB = "litellm"


def gateway_metrics_job(gateway: GatewayEndpoint) -> dict[str, Any]:
    """Scrape LiteLLM's metrics Service on its metrics port: its endpoints in the gateway's namespace only.

    The endpoint's port is the pod's (the Service's target port): BerriAI/litellm's componentized chart
    (helm/litellm/templates/_workload.tpl @74795c8, ``litellm.workload.serviceMetrics``) gives the ``-metrics``
    Service ``port: gateway.metricsServer.port`` with ``targetPort: metrics``, the sidecar's container port of
    the same number, and its ServiceMonitor scrapes path ``/metrics/``."""
    return {
        "job_name": GATEWAY_JOB,
        "metrics_path": "/metrics/",
        "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": [gateway.namespace]}}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_service_name", "__meta_kubernetes_endpoint_port_number"],
                "regex": f"{gateway.metrics_service};{gateway.metrics_port}",
                "action": "keep",
            },
            *POD_LABELS,
        ],
    }
