"""The platform tier's own scrape jobs for the AMP managed scraper (pure data, added to
:func:`~inference_tiers.observability.collectors.eks_scrape_config` through ``extra_jobs``).

LiteLLM: newer proxies answer an unauthenticated scrape of ``/metrics`` on the http port with 401, so the gateway
chart serves metrics from a separate Service (``GatewayEndpoint.metrics_service``/``metrics_port``) and this job
keeps only that Service's endpoints on that port. The managed scraper runs outside the cluster's network (ENIs in
the VPC) and cannot reach a ClusterIP, so it scrapes the Service's endpoints (pod IP:port) directly.

The controllers the platform installs serve unauthenticated HTTP metrics on a named container port, scraped by
their pods' ``app.kubernetes.io/name`` (:func:`controller_jobs`). The Endpoint Picker and vLLM carry
``prometheus.io`` annotations: the shared annotated-pods job takes them.
"""

from __future__ import annotations

from typing import Any

from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.observability.collectors import POD_LABELS, named_port_job

GATEWAY_JOB = "litellm"
# Karpenter v1.14.1's chart (aws/karpenter-provider-aws charts/karpenter): the controller's container port
# "http-metrics" (templates/deployment.yaml:208-209, values.yaml:165-167 controller.metrics.port 8080) on pods
# labelled app.kubernetes.io/name=karpenter (templates/_helpers.tpl:4-6 and :51-52; no nameOverride); served by
# controller-runtime with only a BindAddress (kubernetes-sigs/karpenter pkg/operator/operator.go, Metrics:
# server.Options{BindAddress}), so plain HTTP without authentication.
KARPENTER = ("karpenter", "karpenter", ("http-metrics",))
# agent-sandbox v0.5.6 (the chart fetch-agent-sandbox-chart.sh pins, commit 211b757): container port "metrics"
# 8080 (helm/templates/deployment.yaml:38-40) on pods labelled app.kubernetes.io/name=agent-sandbox
# (helm/Chart.yaml name, _helpers.tpl:38-41); metricsserver.Options{BindAddress} only
# (cmd/agent-sandbox-controller/main.go:309-311): plain HTTP, as the chart's README says (":8080/metrics").
AGENT_SANDBOX_CONTROLLER = ("agent-sandbox-controller", "agent-sandbox", ("metrics",))


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


def controller_jobs() -> list[dict[str, Any]]:
    """Karpenter's and the agent-sandbox controller's metrics (jobs ``karpenter`` and
    ``agent-sandbox-controller``); they keep nothing on a cluster without them (stage gateway)."""
    return [named_port_job(*job) for job in (KARPENTER, AGENT_SANDBOX_CONTROLLER)]
