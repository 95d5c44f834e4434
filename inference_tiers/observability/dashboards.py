"""Grafana dashboards as code: one per tier plus a platform overview, rendered by pure functions as the classic
dashboard JSON model (what ``POST /api/dashboards/db`` imports and what the tests validate against the schema of
``@grafana/schema`` 13.2.3).

Prometheus panels read the recording rules of :mod:`inference_tiers.observability.rules` where one exists, so a
dashboard and an alert never disagree on a quantile. Bedrock and SageMaker panels read CloudWatch (their only
metrics source). Data sources are dashboard variables (``${prometheus}``, ``${cloudwatch}``), so one JSON file
imports into any Grafana with any data source names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inference_tiers.observability import rules

SCHEMA_VERSION = 41  # the classic model Grafana 12.x writes; Grafana migrates older versions up, never down
PROMETHEUS = {"type": "prometheus", "uid": "${prometheus}"}
CLOUDWATCH = {"type": "cloudwatch", "uid": "${cloudwatch}"}
_WIDTH = 12
_HEIGHT = 8


def prometheus(expr: str, legend: str = "__auto") -> dict[str, Any]:
    return {"refId": "", "datasource": PROMETHEUS, "expr": expr, "legendFormat": legend, "range": True}


def cloudwatch(
    namespace: str, metric: str, dimensions: Mapping[str, str], statistic: str = "Sum"
) -> dict[str, Any]:
    return {
        "refId": "",
        "datasource": CLOUDWATCH,
        "queryMode": "Metrics",
        "namespace": namespace,
        "metricName": metric,
        "dimensions": {name: [value] for name, value in dimensions.items()},
        "statistic": statistic,
        "region": "default",
        "matchExact": True,
    }


def timeseries(title: str, targets: Sequence[dict[str, Any]], unit: str = "short") -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "datasource": targets[0]["datasource"],
        "targets": [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
    }


def _variable(name: str, plugin: str) -> dict[str, Any]:
    return {"name": name, "label": name, "type": "datasource", "query": plugin, "hide": 0}


def _query_variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": name,
        "type": "query",
        "datasource": PROMETHEUS,
        "query": {"query": query, "refId": "variable"},
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "hide": 0,
    }


def dashboard(
    uid: str,
    title: str,
    panels: Sequence[dict[str, Any]],
    *,
    variables: Sequence[dict[str, Any]] = (),
    tags: Sequence[str] = (),
) -> dict[str, Any]:
    """A dashboard of ``panels`` laid out two per row (ids and grid positions assigned here)."""
    laid_out = [
        {
            **panel,
            "id": index + 1,
            "gridPos": {"h": _HEIGHT, "w": _WIDTH, "x": (index % 2) * _WIDTH, "y": (index // 2) * _HEIGHT},
        }
        for index, panel in enumerate(panels)
    ]
    return {
        "uid": uid,
        "title": title,
        "tags": ["inference-tiers", *tags],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "1m",
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "links": [],
        "panels": laid_out,
    }


_PROM = _variable("prometheus", "prometheus")
_CW = _variable("cloudwatch", "cloudwatch")
_MODEL = _query_variable("model_name", "label_values(vllm:num_requests_running, model_name)")
_SELECTED = '{model_name=~"$model_name"}'


def _vllm_panels() -> list[dict[str, Any]]:
    return [
        timeseries(
            "Time to first token, p90", [prometheus(rules.TTFT_P90 + _SELECTED, "{{model_name}}")], "s"
        ),
        timeseries(
            "Inter-token latency, p90", [prometheus(rules.ITL_P90 + _SELECTED, "{{model_name}}")], "s"
        ),
        timeseries("End-to-end latency, p90", [prometheus(rules.E2E_P90 + _SELECTED, "{{model_name}}")], "s"),
        timeseries(
            "Requests running and waiting",
            [
                prometheus(rules.RUNNING + _SELECTED, "running {{model_name}}"),
                prometheus(rules.QUEUE_DEPTH + _SELECTED, "waiting {{model_name}}"),
            ],
        ),
        timeseries(
            "KV-cache usage (highest engine)", [prometheus(rules.KV_CACHE_USAGE + _SELECTED)], "percentunit"
        ),
        timeseries(
            "Generated tokens per second", [prometheus(rules.GENERATION_TOKENS + _SELECTED, "{{model_name}}")]
        ),
        timeseries(
            "Preemptions per second",
            [
                prometheus(
                    f"sum by (model_name) (rate(vllm:num_preemptions_total{_SELECTED}[$__rate_interval]))"
                )
            ],
        ),
        timeseries(
            "Prefix-cache hit ratio",
            [
                prometheus(
                    f"sum by (model_name) (rate(vllm:prefix_cache_hits_total{_SELECTED}[$__rate_interval])) / "
                    f"sum by (model_name) (rate(vllm:prefix_cache_queries_total{_SELECTED}[$__rate_interval]))"
                )
            ],
            "percentunit",
        ),
    ]


def _gpu_panels() -> list[dict[str, Any]]:
    return [
        timeseries(
            "GPU utilisation per node", [prometheus(rules.GPU_UTILIZATION, "{{Hostname}}")], "percent"
        ),
        timeseries(
            "GPU memory used (highest GPU per node)",
            [prometheus(f"max by (Hostname) ({rules.GPU_MEMORY_USED})", "{{Hostname}}")],
            "percentunit",
        ),
        timeseries(
            "GPU power per node",
            [prometheus("sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE)", "{{Hostname}}")],
            "watt",
        ),
        timeseries(
            "EFA received bytes per second",
            [
                prometheus(
                    "sum by (instance) (rate(node_amazonefa_rx_bytes[$__rate_interval]))", "{{instance}}"
                )
            ],
            "Bps",
        ),
    ]


def _gateway_panels() -> list[dict[str, Any]]:
    return [
        timeseries(
            "Gateway requests per second",
            [
                prometheus(
                    "sum by (requested_model) (rate(litellm_proxy_total_requests_metric_total[$__rate_interval]))",
                    "{{requested_model}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Gateway error ratio",
            [prometheus(rules.GATEWAY_ERROR_RATIO, "{{requested_model}}")],
            "percentunit",
        ),
        timeseries(
            "Backend error ratio",
            [prometheus(rules.BACKEND_ERROR_RATIO, "{{litellm_model_name}}")],
            "percentunit",
        ),
        timeseries(
            "Gateway latency p90 (request to response)",
            [
                prometheus(
                    "histogram_quantile(0.9, sum by (le, requested_model) "
                    "(rate(litellm_request_total_latency_metric_bucket[$__rate_interval])))",
                    "{{requested_model}}",
                )
            ],
            "s",
        ),
        timeseries(
            "Spend per hour (USD)",
            [prometheus("sum by (team_alias) (increase(litellm_spend_metric_total[1h]))", "{{team_alias}}")],
            "currencyUSD",
        ),
        timeseries("Team budget left", [prometheus(rules.TEAM_BUDGET_LEFT, "{{team_alias}}")], "percentunit"),
    ]


# One tenant of the platform tier is one LiteLLM team whose alias is the tenant's namespace
# (inference_tiers.k8s.tenant_keys.team_body); LiteLLM 1.104.0 labels its token, spend and request series with
# ``team_alias`` (litellm/types/integrations/prometheus.py:473-488, :579-594, :605-660).
_TENANT = '{team_alias=~"$tenant"}'


def _tenant_panels() -> list[dict[str, Any]]:
    def per_tenant(series: str) -> str:
        return f"sum by (team_alias) (rate({series}{_TENANT}[$__rate_interval]))"

    return [
        timeseries(
            "Tokens per second by tenant",
            [
                prometheus(per_tenant("litellm_input_tokens_metric_total"), "{{team_alias}} input"),
                prometheus(per_tenant("litellm_output_tokens_metric_total"), "{{team_alias}} output"),
            ],
        ),
        timeseries(
            "Spend per hour by tenant (USD)",
            [
                prometheus(
                    f"sum by (team_alias) (increase(litellm_spend_metric_total{_TENANT}[1h]))",
                    "{{team_alias}}",
                )
            ],
            "currencyUSD",
        ),
        timeseries(
            "Tokens per tenant and model, last 24 h",
            [
                prometheus(
                    "sum by (team_alias, requested_model) "
                    f"(increase(litellm_total_tokens_metric_total{_TENANT}[24h]))",
                    "{{team_alias}} {{requested_model}}",
                )
            ],
        ),
        timeseries(
            "Requests per second by tenant and status",
            [
                prometheus(
                    "sum by (team_alias, status_code) "
                    f"(rate(litellm_proxy_total_requests_metric_total{_TENANT}[$__rate_interval]))",
                    "{{team_alias}} {{status_code}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Budget left by tenant", [prometheus(rules.TEAM_BUDGET_LEFT, "{{team_alias}}")], "percentunit"
        ),
    ]


def _bedrock_panels() -> list[dict[str, Any]]:
    model = {"ModelId": "$model_id"}
    return [
        timeseries("Invocations", [cloudwatch("AWS/Bedrock", "Invocations", model)]),
        timeseries(
            "Invocation latency, p90 (ms)",
            [cloudwatch("AWS/Bedrock", "InvocationLatency", model, "p90")],
            "ms",
        ),
        timeseries(
            "Tokens",
            [
                cloudwatch("AWS/Bedrock", "InputTokenCount", model),
                cloudwatch("AWS/Bedrock", "OutputTokenCount", model),
            ],
        ),
        timeseries(
            "Throttles and errors",
            [
                cloudwatch("AWS/Bedrock", "InvocationThrottles", model),
                cloudwatch("AWS/Bedrock", "InvocationClientErrors", model),
                cloudwatch("AWS/Bedrock", "InvocationServerErrors", model),
            ],
        ),
    ]


def _sagemaker_panels() -> list[dict[str, Any]]:
    # the sagemaker tier's default topology serves through an inference component (metrics per component)
    endpoint = {"InferenceComponentName": "$inference_component"}
    return [
        timeseries("Invocations", [cloudwatch("AWS/SageMaker", "Invocations", endpoint)]),
        timeseries(
            "Model latency, p90 (µs)", [cloudwatch("AWS/SageMaker", "ModelLatency", endpoint, "p90")], "µs"
        ),
        timeseries(
            "5xx error rate",
            [cloudwatch("AWS/SageMaker", "Invocation5XXErrors", endpoint, "Average")],
            "percentunit",
        ),
        timeseries(
            "Concurrent requests per copy",
            [cloudwatch("AWS/SageMaker", "ConcurrentRequestsPerCopy", endpoint, "Average")],
        ),
    ]


def _text_variable(name: str, default: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": name,
        "type": "textbox",
        "query": default,
        "current": {"text": default, "value": default},
        "hide": 0,
    }


def all_dashboards() -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by file name (``<uid>.json``)."""
    boards = [
        dashboard(
            "inference-tiers-overview",
            "Inference tiers: platform overview",
            [
                timeseries("Gateway requests per second", _gateway_panels()[0]["targets"], "reqps"),
                timeseries("Gateway error ratio", _gateway_panels()[1]["targets"], "percentunit"),
                *_vllm_panels()[:2],
                _vllm_panels()[4],
                _gpu_panels()[0],
                timeseries(
                    "Scrape targets down",
                    [prometheus("count by (job) (up == 0)", "{{job}}")],
                ),
                timeseries("Team budget left", _gateway_panels()[5]["targets"], "percentunit"),
            ],
            variables=[_PROM, _MODEL],
            tags=["overview"],
        ),
        dashboard(
            "inference-tiers-bedrock",
            "Inference tiers: Bedrock",
            _bedrock_panels(),
            variables=[_CW, _text_variable("model_id", "amazon.nova-2-lite-v1:0")],
            tags=["bedrock"],
        ),
        dashboard(
            "inference-tiers-sagemaker",
            "Inference tiers: SageMaker",
            _sagemaker_panels(),
            variables=[_CW, _text_variable("inference_component", "inference-tiers")],
            tags=["sagemaker"],
        ),
        dashboard(
            "inference-tiers-hyperpod",
            "Inference tiers: HyperPod",
            _vllm_panels() + _gpu_panels()[:3],
            variables=[_PROM, _MODEL],
            tags=["hyperpod"],
        ),
        dashboard(
            "inference-tiers-disaggregated",
            "Inference tiers: disaggregated prefill/decode",
            [
                *_vllm_panels(),
                timeseries(
                    "Waiting requests by pool",
                    [prometheus(f"sum by (job) (vllm:num_requests_waiting{_SELECTED})", "{{job}}")],
                ),
                timeseries(
                    "Router requests per second by route",
                    [
                        prometheus(
                            "sum by (route) (rate(vllm_router_requests_total[$__rate_interval]))", "{{route}}"
                        )
                    ],
                    "reqps",
                ),
                timeseries(
                    "Router: healthy workers",
                    [
                        prometheus("sum(vllm_router_worker_health)", "healthy"),
                        prometheus("vllm_router_active_workers"),
                    ],
                ),
                timeseries(
                    "KV-cache usage by pool",
                    [prometheus(f"max by (job) (vllm:kv_cache_usage_perc{_SELECTED})", "{{job}}")],
                    "percentunit",
                ),
                *_gpu_panels(),
            ],
            variables=[_PROM, _MODEL],
            tags=["disaggregated"],
        ),
        dashboard(
            "inference-tiers-gateway",
            "Inference tiers: gateway",
            _gateway_panels(),
            variables=[_PROM],
            tags=["gateway"],
        ),
        dashboard(
            "inference-tiers-tenants",
            "Inference tiers: platform tenants",
            _tenant_panels(),
            variables=[
                _PROM,
                _query_variable(
                    "tenant", "label_values(litellm_proxy_total_requests_metric_total, team_alias)"
                ),
            ],
            tags=["platform"],
        ),
    ]
    return {f"{board['uid']}.json": board for board in boards}
