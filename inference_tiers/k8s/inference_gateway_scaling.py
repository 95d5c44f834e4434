"""KEDA ScaledObjects for the inference gateway's pools: scale each Deployment on its vLLM queue and KV cache.

One ScaledObject per Deployment, so prefill and decode pools scale independently. The signals are vLLM's own
gauges, ``vllm:num_requests_waiting`` (requests queued in the engine's scheduler, summed over the pods: KEDA
divides by the replica count) and ``vllm:kv_cache_usage_perc`` (how full the KV cache is, the earliest sign
that the next long-context request will queue). They are read either from a Prometheus-compatible store
(PromQL, the ``prometheus`` scaler; every query is parsed by the tests) or from CloudWatch, where the
disaggregated tier's OpenTelemetry pipeline writes them under their Prometheus names (``aws-cloudwatch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inference_tiers.k8s.inference_gateway import (
    DNS_LABEL,
    EPP_REQUEST_ERROR_METRIC,
    EPP_REQUEST_METRIC,
    KEDA_API,
    KV_CACHE_METRIC,
    QUEUE_METRIC,
    Manifest,
    PoolScaling,
    metadata,
)
from inference_tiers.validation import Args


@dataclass(frozen=True)
class PrometheusMetrics:
    """vLLM's series in a Prometheus-compatible store KEDA queries with PromQL (``prometheus`` scaler).

    :param url: the query endpoint; an Amazon Managed Prometheus workspace URL is signed with SigV4.
    :param region: the workspace's region when ``url`` is AMP's (a token is accepted). Default: none (no SigV4).
    """

    url: str
    region: str | None = None


@dataclass(frozen=True)
class CloudWatchMetrics:
    """vLLM's series exported to CloudWatch under their Prometheus names (``aws-cloudwatch`` scaler).

    :param namespace: the CloudWatch namespace the exporter writes.
    :param region: the region of those metrics (a token is accepted).
    """

    namespace: str
    region: str


MetricsSource = PrometheusMetrics | CloudWatchMetrics


@dataclass(frozen=True)
class ScaledTarget:
    """A Deployment KEDA scales, and the labels (Prometheus) or dimensions (CloudWatch) of its own series."""

    deployment: str
    """The Deployment's name, in the gateway's namespace."""
    series: Mapping[str, str]
    """Label (Prometheus) or dimension (CloudWatch) -> value selecting this Deployment's series; at least one."""
    scaling: PoolScaling
    """Its replica bounds and scaling targets."""

    def __post_init__(self) -> None:
        args = Args("ScaledTarget")
        args.text("deployment", self.deployment, pattern=DNS_LABEL.pattern, allow_token=False)
        args.mapping(
            "series", self.series, lambda n, v: args.text(n, v), key_pattern=r"[A-Za-z_][A-Za-z0-9_]*"
        )
        if not self.series:
            raise args.error(
                "series", dict(self.series), "at least one label that tells this Deployment's series apart"
            )
        args.instance("scaling", self.scaling, PoolScaling)


def _matchers(series: Mapping[str, str]) -> str:
    return ",".join(f'{label}="{value}"' for label, value in series.items())


def queue_query(target: ScaledTarget) -> str:
    """Requests waiting in the Deployment's vLLM schedulers, summed (KEDA divides by replicas)."""
    return f"sum({QUEUE_METRIC}{{{_matchers(target.series)}}})"


def kv_cache_query(target: ScaledTarget) -> str:
    """Mean KV-cache usage (0-1) over the Deployment's pods."""
    return f"avg({KV_CACHE_METRIC}{{{_matchers(target.series)}}})"


def demand_query(model_name: str) -> str:
    """1 while requests for the model reach the EPP (in the last 2 minutes), else 0: wakes the pool and keeps
    one replica; the queue and KV-cache triggers size it. With no pod the EPP counts a request only as an error
    (see ``EPP_REQUEST_ERROR_METRIC``), so both counters are read; a counter that has never been incremented
    has no series at all, so each sum falls back to 0 (``or vector(0)``) and the query always has a value."""
    rates = " + ".join(
        f'(sum(rate({metric}{{model_name="{model_name}"}}[2m])) or vector(0))'
        for metric in (EPP_REQUEST_METRIC, EPP_REQUEST_ERROR_METRIC)
    )
    return f"({rates}) > bool 0"


def scaler_queries(target: ScaledTarget, model_name: str) -> list[str]:
    """Every PromQL query a Prometheus-sourced ScaledObject of ``target`` runs."""
    queries = [queue_query(target), kv_cache_query(target)]
    if target.scaling.scale_to_zero:
        queries.append(demand_query(model_name))
    return queries


def render_scaled_object(
    namespace: str,
    target: ScaledTarget,
    *,
    model_name: str,
    metrics: MetricsSource,
    trigger_authentication: str | None,
) -> Manifest:
    """A ScaledObject with one trigger per signal; HPA takes the largest replica count any of them asks for."""
    scaling = target.scaling
    if scaling.scale_to_zero and not isinstance(metrics, PrometheusMetrics):
        raise Args("render_scaled_object").error(
            "metrics",
            metrics,
            "PrometheusMetrics when min_replicas is 0 (waking a pool from zero needs the EPP's request "
            "counter, which only a Prometheus scrape of the EPP holds)",
        )
    auth = {"authenticationRef": {"name": trigger_authentication}} if trigger_authentication else {}
    if isinstance(metrics, PrometheusMetrics):
        queue, kv_cache, *demand = scaler_queries(target, model_name)
        triggers = [
            _prometheus_trigger("queue", metrics, queue, str(scaling.waiting_per_replica), "AverageValue"),
            _prometheus_trigger("kv-cache", metrics, kv_cache, f"{scaling.kv_cache_utilisation:g}", "Value"),
        ]
        if demand:
            # From zero replicas vLLM exports nothing: the EPP's request rate activates the first pod.
            triggers.append(
                _prometheus_trigger(
                    "demand", metrics, demand[0], "1", "AverageValue", activationThreshold="0"
                )
            )
    else:
        # The exported series has no pod dimension: every pod's samples land in one metric, so Sum would
        # count each pod once per scrape in the period. Average is the mean per pod, compared as a Value.
        triggers = [
            _cloudwatch_trigger(
                "queue", metrics, target, QUEUE_METRIC, "Average", scaling.waiting_per_replica, "Value"
            ),
            _cloudwatch_trigger(
                "kv-cache", metrics, target, KV_CACHE_METRIC, "Average", scaling.kv_cache_utilisation, "Value"
            ),
        ]
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": metadata(target.deployment, namespace),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.deployment},
            "minReplicaCount": scaling.min_replicas,
            "maxReplicaCount": scaling.max_replicas,
            "pollingInterval": 15,
            # GPU pods take minutes to start: scale in slowly so a burst that returns finds warm replicas.
            "cooldownPeriod": 600,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}
                }
            },
            "triggers": [{**trigger, **auth} for trigger in triggers],
        },
    }


def _prometheus_trigger(
    name: str, metrics: PrometheusMetrics, query: str, threshold: str, metric_type: str, **extra: str
) -> dict[str, Any]:
    metadata = {"serverAddress": metrics.url, "query": query, "threshold": threshold, **extra}
    if metrics.region is not None:
        # Amazon Managed Service for Prometheus: KEDA signs the query with SigV4 for this region.
        metadata["awsRegion"] = metrics.region
    return {"type": "prometheus", "name": name, "metricType": metric_type, "metadata": metadata}


def _cloudwatch_trigger(
    name: str,
    metrics: CloudWatchMetrics,
    target: ScaledTarget,
    metric: str,
    statistic: str,
    threshold: float,
    metric_type: str,
) -> dict[str, Any]:
    return {
        "type": "aws-cloudwatch",
        "name": name,
        "metricType": metric_type,
        "metadata": {
            "namespace": metrics.namespace,
            "metricName": metric,
            # Several dimensions are ';'-separated, names and values in the same order.
            "dimensionName": ";".join(target.series),
            "dimensionValue": ";".join(target.series.values()),
            "metricStat": statistic,
            "metricStatPeriod": "60",
            "metricCollectionTime": "120",
            "targetMetricValue": f"{threshold:g}",
            "minMetricValue": "0",
            "awsRegion": metrics.region,
        },
    }


def render_trigger_authentication(name: str, namespace: str) -> Manifest:
    """KEDA signs with the credentials of its operator's own identity (EKS Pod Identity / IRSA)."""
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": metadata(name, namespace),
        "spec": {"podIdentity": {"provider": "aws", "identityOwner": "keda"}},
    }
