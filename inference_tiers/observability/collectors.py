"""What collects the metrics: the AMP managed scraper's configuration for the EKS tiers and the ADOT collector's
configuration for the ECS gateway (pure data; the constructs base64-encode or inject it).

EKS (``AWS::APS::Scraper``): pods that carry ``prometheus.io/scrape: "true"`` with ``prometheus.io/port`` and
``prometheus.io/path`` (what the disaggregated tier's vLLM, vllm-router, mooncake_master and EFA exporter pods set;
the EFA exporter's series get the node's name as ``instance``), plus the
DCGM exporter (:9400) and node exporters (:9100) by container port, and the KEDA
operator and kube-state-metrics by their pods' ``app.kubernetes.io/name`` label and metrics port name. Jobs are named
after the pod's ``app.kubernetes.io/component`` so ``up{job="prefill"}`` reads naturally.

ECS (ADOT sidecar): scrape the gateway container on 127.0.0.1 (same task network namespace), with a bearer key
when the endpoint needs one (LiteLLM's /metrics does), receive OTLP traces on 127.0.0.1 only, and export metrics
to AMP (remote write, SigV4) and traces to X-Ray.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from inference_tiers.validation import Args

DCGM_EXPORTER_PORT = 9400
NODE_EXPORTER_PORT = 9100
# KEDA 2.20.2's chart: operator.name and prometheus.operator.portName (metrics are off until
# prometheus.operator.enabled=true is set in its values).
KEDA_OPERATOR = "keda-operator"
KEDA_METRICS_PORT_NAME = "metrics"
# kube-state-metrics: the prometheus-community chart labels its pod app.kubernetes.io/name=kube-state-metrics and
# names the object-metrics port "http"; the upstream kubernetes/kube-state-metrics example manifests name it
# "http-metrics". Its self-telemetry port ("metrics" in the chart, "telemetry" upstream) is left out: it describes
# the exporter, not the cluster.
KUBE_STATE_METRICS = "kube-state-metrics"
KUBE_STATE_METRICS_PORT_NAMES = ("http", "http-metrics")
# This project's EFA exporter (inference_tiers.k8s.efa_exporter): one pod per EFA node, found by its
# prometheus.io annotations. Its series describe the node's devices, so their ``instance`` is the node's name
# (a pod IP changes with every restart and names no node).
EFA_EXPORTER = "efa-exporter"
# The sidecar's environment variable holding the key it scrapes with (an ECS secret, never in the template). The
# configuration names it as ${env:METRICS_KEY}: aws-otel-collector v0.49.0 loads AOT_CONFIG_CONTENT through
# confmap's resolver with the env provider (pkg/config/config_factory.go:36-59), and the resolver replaces a
# ${env:NAME} embedded in a string (vendor/go.opentelemetry.io/collector/confmap/expand.go:148-187).
METRICS_KEY_ENV = "METRICS_KEY"
OTLP_GRPC = "127.0.0.1:4317"
OTLP_HTTP = "127.0.0.1:4318"


def named_port_job(job_name: str, app_name: str, port_names: tuple[str, ...]) -> dict[str, Any]:
    """A job scraping the pods labelled ``app.kubernetes.io/name=<app_name>`` on a container port of those names
    (plain HTTP ``/metrics``), with their namespace, pod and node as labels."""
    return {
        "job_name": job_name,
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [_keep_named_port(app_name, port_names), *POD_LABELS],
    }


def _keep_named_port(app_name: str, port_names: tuple[str, ...]) -> dict[str, Any]:
    """Keep only the pods labelled ``app.kubernetes.io/name=<app_name>``, on a container port of those names."""
    return {
        "source_labels": [
            "__meta_kubernetes_pod_label_app_kubernetes_io_name",
            "__meta_kubernetes_pod_container_port_name",
        ],
        "regex": f"{app_name};({'|'.join(port_names)})",
        "action": "keep",
    }


def _keep_port(port: int) -> dict[str, Any]:
    return {
        "source_labels": ["__meta_kubernetes_pod_container_port_number"],
        "regex": str(port),
        "action": "keep",
    }


# Every pod-discovered target's namespace, pod and node as labels (relabel rules; platform_scrape reuses them).
POD_LABELS: list[dict[str, Any]] = [
    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
]


def eks_scrape_config(
    cluster_label: str, *, scrape_interval_seconds: int = 30, extra_jobs: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The scraper's Prometheus configuration; every series gets ``cluster=<cluster_label>``.

    :param extra_jobs: scrape jobs appended after this module's own (a tier's components, such as the platform's
        gateway metrics Service). Default: none."""
    args = Args("eks_scrape_config")
    args.text("cluster_label", cluster_label, pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", allow_token=True)
    interval = args.integer("scrape_interval_seconds", scrape_interval_seconds, minimum=10, maximum=300)
    annotated = [
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
            "regex": "true",
            "action": "keep",
        },
        {
            # one target per pod, on the annotated port (not once per declared container port)
            "source_labels": ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"],
            "regex": r"([^:]+)(?::\d+)?;(\d+)",
            "replacement": "$1:$2",
            "target_label": "__address__",
        },
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
            "regex": "(.+)",
            "target_label": "__metrics_path__",
        },
        {
            "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
            "regex": "(.+)",
            "target_label": "job",
        },
        {
            "source_labels": [
                "__meta_kubernetes_pod_label_app_kubernetes_io_name",
                "__meta_kubernetes_pod_node_name",
            ],
            "regex": f"{EFA_EXPORTER};(.+)",
            "target_label": "instance",
        },
        *POD_LABELS,
    ]
    return {
        "global": {
            "scrape_interval": f"{interval}s",
            "scrape_timeout": f"{min(10, interval)}s",
            "external_labels": {"cluster": cluster_label},
        },
        "scrape_configs": [
            {"job_name": "pods", "kubernetes_sd_configs": [{"role": "pod"}], "relabel_configs": annotated},
            {
                "job_name": "dcgm-exporter",
                "kubernetes_sd_configs": [{"role": "pod"}],
                "relabel_configs": [_keep_port(DCGM_EXPORTER_PORT), *POD_LABELS],
            },
            {
                "job_name": "node-exporter",
                "kubernetes_sd_configs": [{"role": "pod"}],
                "relabel_configs": [_keep_port(NODE_EXPORTER_PORT), *POD_LABELS],
            },
            named_port_job("keda-operator", KEDA_OPERATOR, (KEDA_METRICS_PORT_NAME,)),
            named_port_job(KUBE_STATE_METRICS, KUBE_STATE_METRICS, KUBE_STATE_METRICS_PORT_NAMES),
            *extra_jobs,
        ],
    }


def ecs_collector_config(
    *,
    remote_write_url: str,
    region: str,
    metrics_port: int,
    scrape_interval_seconds: int = 30,
    metrics_key_prefix: str | None = None,
) -> dict[str, Any]:
    """The ADOT collector's configuration for a sidecar next to the gateway container.

    :param metrics_key_prefix: scrape with ``Authorization: Bearer <prefix><$METRICS_KEY>`` (the sidecar's
        :data:`METRICS_KEY_ENV`), for an endpoint that needs a key; None (default): no key.
    """
    args = Args("ecs_collector_config")
    args.text("remote_write_url", remote_write_url, pattern=r"https://\S+/api/v1/remote_write")
    args.text("region", region, pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]")
    port = args.integer("metrics_port", metrics_port, minimum=1, maximum=65535)
    interval = args.integer("scrape_interval_seconds", scrape_interval_seconds, minimum=10, maximum=300)
    job: dict[str, Any] = {
        "job_name": "litellm",
        "scrape_interval": f"{interval}s",
        "metrics_path": "/metrics",
        "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
    }
    if metrics_key_prefix is not None:
        prefix = args.text(
            "metrics_key_prefix", metrics_key_prefix, pattern=r"[A-Za-z0-9_-]*", min_length=0, max_length=16
        )
        job["authorization"] = {"type": "Bearer", "credentials": f"{prefix}${{env:{METRICS_KEY_ENV}}}"}
    traces = trace_collector_config(region, grpc=OTLP_GRPC, http=OTLP_HTTP, detectors=("env", "ecs"))
    return {
        "extensions": {"sigv4auth": {"region": region, "service": "aps"}, **traces["extensions"]},
        "receivers": {"prometheus": {"config": {"scrape_configs": [job]}}, **traces["receivers"]},
        "processors": traces["processors"],
        "exporters": {
            "prometheusremotewrite": {"endpoint": remote_write_url, "auth": {"authenticator": "sigv4auth"}},
            **traces["exporters"],
        },
        "service": {
            "extensions": ["sigv4auth", *traces["service"]["extensions"]],
            "pipelines": {
                "metrics": {
                    "receivers": ["prometheus"],
                    "processors": ["resourcedetection", "batch"],
                    "exporters": ["prometheusremotewrite"],
                },
                **traces["service"]["pipelines"],
            },
        },
    }


def trace_collector_config(
    region: str, *, grpc: str, http: str, detectors: Sequence[str] = ("env",)
) -> dict[str, Any]:
    """An ADOT collector configuration that receives OTLP spans on ``grpc`` and ``http`` (``host:port``) and
    exports them to AWS X-Ray in ``region``: the ECS sidecar's trace pipeline (:func:`ecs_collector_config`),
    and the whole of the platform's in-cluster collector (``detectors``: resource detectors; ``env`` only where
    the instance metadata service is out of reach, as from pods with IMDSv2 hop limit 1)."""
    return {
        "extensions": {"health_check": {}},
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": grpc}, "http": {"endpoint": http}}}},
        "processors": {"batch": {}, "resourcedetection": {"detectors": list(detectors)}},
        "exporters": {"awsxray": {"region": region}},
        "service": {
            "extensions": ["health_check"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["resourcedetection", "batch"],
                    "exporters": ["awsxray"],
                },
            },
        },
    }


def to_yaml(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False, width=1000)
