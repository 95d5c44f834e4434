"""Recording and alerting rules for every tier, as one Prometheus rules file (the ``Data`` of an AMP
``RuleGroupsNamespace``; promtool checks and tests the same text).

Recording rules precompute what both the alerts and the dashboards read (named ``level:metric:operation``, the
Prometheus convention), so a threshold change never edits a quantile twice. Metric names come from the pinned
components only: vLLM V1 (``vllm:*``), dcgm-exporter's default counters (``DCGM_FI_*``), LiteLLM's prometheus
callback (``litellm_*``), vllm-router (``vllm_router_*``), the EFA node exporter (``node_amazonefa_*``) and the scrape loop's ``up``; the tests
check every expression against the per-version allow-lists in tests/data.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from inference_tiers.validation import Args

# Recording rules (also the names dashboards query).
TTFT_P90 = "model_name:vllm_time_to_first_token_seconds:p90_5m"
ITL_P90 = "model_name:vllm_inter_token_latency_seconds:p90_5m"
E2E_P90 = "model_name:vllm_e2e_request_latency_seconds:p90_5m"
QUEUE_DEPTH = "model_name:vllm_num_requests_waiting:sum"
RUNNING = "model_name:vllm_num_requests_running:sum"
KV_CACHE_USAGE = "model_name:vllm_kv_cache_usage_perc:max"
GENERATION_TOKENS = "model_name:vllm_generation_tokens:rate5m"
GPU_UTILIZATION = "Hostname:dcgm_gpu_utilization_percent:avg"
GPU_MEMORY_USED = "Hostname_gpu:dcgm_framebuffer_used:ratio"
GATEWAY_ERROR_RATIO = "requested_model:litellm_proxy_failed_requests:ratio_rate5m"
BACKEND_ERROR_RATIO = "litellm_model_name:litellm_deployment_failure_responses:ratio_rate5m"
TEAM_BUDGET_LEFT = "team:litellm_team_budget_remaining:ratio"
KEY_BUDGET_LEFT = "hashed_api_key:litellm_api_key_budget_remaining:ratio"


@dataclass(frozen=True)
class AlertThresholds:
    """When the alerts fire; every default is the value the observability tier ships in cdk.json.

    :param ttft_p90_seconds: p90 time to first token per model over 5 minutes, sustained 10 minutes.
    :param inter_token_p90_seconds: p90 inter-token latency per model (streaming smoothness).
    :param queue_depth: requests waiting in vLLM's scheduler, summed per model, sustained 5 minutes.
    :param kv_cache_usage_ratio: highest KV-cache usage (0-1) of any engine of a model, sustained 5 minutes.
    :param gpu_utilization_percent: average GPU utilisation of a node, sustained 15 minutes (saturation).
    :param gpu_memory_ratio: framebuffer used / total of one GPU (vLLM reserves gpu_memory_utilization, 0.9).
    :param gateway_error_ratio: share of failed gateway requests per requested model, sustained 10 minutes.
    :param budget_remaining_ratio: a team's or key's remaining budget below this share of its maximum.
    :param efa_drops_per_second: EFA packets dropped per second on one device, sustained 15 minutes.
    """

    ttft_p90_seconds: float = 2.0
    inter_token_p90_seconds: float = 0.15
    queue_depth: int = 20
    kv_cache_usage_ratio: float = 0.95
    gpu_utilization_percent: float = 95.0
    gpu_memory_ratio: float = 0.97
    gateway_error_ratio: float = 0.05
    budget_remaining_ratio: float = 0.1
    efa_drops_per_second: float = 1.0

    def __post_init__(self) -> None:
        args = Args("AlertThresholds")
        args.number("ttft_p90_seconds", self.ttft_p90_seconds, minimum=0, maximum=600, exclusive_minimum=True)
        args.number(
            "inter_token_p90_seconds",
            self.inter_token_p90_seconds,
            minimum=0,
            maximum=60,
            exclusive_minimum=True,
        )
        args.integer("queue_depth", self.queue_depth, minimum=1, maximum=100_000)
        for name in (
            "kv_cache_usage_ratio",
            "gpu_memory_ratio",
            "gateway_error_ratio",
            "budget_remaining_ratio",
        ):
            args.number(name, getattr(self, name), minimum=0, maximum=1, exclusive_minimum=True)
        args.number(
            "gpu_utilization_percent",
            self.gpu_utilization_percent,
            minimum=0,
            maximum=100,
            exclusive_minimum=True,
        )
        args.number("efa_drops_per_second", self.efa_drops_per_second, minimum=0, maximum=1e9)


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "expr": self.expr}


@dataclass(frozen=True)
class Alert:
    """An alerting rule; ``summary``/``description`` may use ``{{ $labels.x }}`` and ``{{ $value }}``."""

    alert: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.for_ != "0m":
            rule["for"] = self.for_
        rule["labels"] = {"severity": self.severity}
        rule["annotations"] = {"summary": self.summary, "description": self.description}
        return rule


@dataclass(frozen=True)
class RuleGroup:
    name: str
    rules: Sequence[Recording | Alert] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rules": [rule.to_dict() for rule in self.rules]}


def _sum_of_counters(prefix: str, counters: Sequence[str], window: str) -> str:
    """``sum by (instance, device)`` of the increase of several counters, counting a missing one as none.

    ``a + b`` would be empty wherever one of them is not exported (EFA drivers before r2.5.0 have no
    ``rdma_write_*`` counters), silencing the alert. ``or`` keeps every series only when their label sets
    differ, so each increase is labelled with its counter's name first.
    """
    terms = " or ".join(
        f'label_replace(increase({prefix}{counter}[{window}]), "counter", "{counter}", "", "")'
        for counter in counters
    )
    return f"sum by (instance, device) ({terms})"


def _n(value: float) -> str:
    """A threshold as PromQL text (``0.95``, ``20``)."""
    return f"{value:g}"


def _p90(histogram: str) -> str:
    return f"histogram_quantile(0.9, sum by (le, model_name) (rate({histogram}_bucket[5m])))"


def _ratio(numerator: str, denominator: str, by: str) -> str:
    """Share of ``numerator`` in ``denominator`` per ``by``; no result while the denominator is idle."""
    return f"sum by ({by}) (rate({numerator}[5m])) / (sum by ({by}) (rate({denominator}[5m])) > 0)"


def _budget_left(remaining: str, maximum: str) -> str:
    """Remaining budget / max budget, only where a max budget is set (no budget = no alert)."""
    return f"{remaining} / ({maximum} > 0)"


def rule_groups(thresholds: AlertThresholds | None = None) -> tuple[RuleGroup, ...]:
    """Every rule group of the platform, with ``thresholds`` (default: :class:`AlertThresholds`)."""
    t = Args("rule_groups").instance("thresholds", thresholds or AlertThresholds(), AlertThresholds)
    return (
        RuleGroup(
            "inference-tiers-vllm",
            (
                Recording(TTFT_P90, _p90("vllm:time_to_first_token_seconds")),
                # vLLM 0.11 renamed the histogram (vllm#24110); hyperpod's default v0.10.1 has the old name.
                Recording(
                    ITL_P90,
                    f"{_p90('vllm:inter_token_latency_seconds')} or {_p90('vllm:time_per_output_token_seconds')}",
                ),
                Recording(E2E_P90, _p90("vllm:e2e_request_latency_seconds")),
                Recording(QUEUE_DEPTH, "sum by (model_name) (vllm:num_requests_waiting)"),
                Recording(RUNNING, "sum by (model_name) (vllm:num_requests_running)"),
                Recording(KV_CACHE_USAGE, "max by (model_name) (vllm:kv_cache_usage_perc)"),
                Recording(GENERATION_TOKENS, "sum by (model_name) (rate(vllm:generation_tokens_total[5m]))"),
                Alert(
                    "VllmTimeToFirstTokenHigh",
                    f"{TTFT_P90} > {_n(t.ttft_p90_seconds)}",
                    "10m",
                    "warning",
                    "p90 time to first token of {{ $labels.model_name }} is {{ $value | humanizeDuration }}",
                    f"Above {_n(t.ttft_p90_seconds)} s for 10 minutes: prefill is queueing. Check the queue depth "
                    "and KV-cache usage of the same model; add prefill capacity or replicas.",
                ),
                Alert(
                    "VllmInterTokenLatencyHigh",
                    f"{ITL_P90} > {_n(t.inter_token_p90_seconds)}",
                    "10m",
                    "warning",
                    "p90 inter-token latency of {{ $labels.model_name }} is {{ $value | humanizeDuration }}",
                    f"Above {_n(t.inter_token_p90_seconds)} s for 10 minutes: decode batches are too large or "
                    "prefill interferes with decode; add decode capacity or lower max_num_seqs.",
                ),
                Alert(
                    "VllmQueueDepthHigh",
                    f"{QUEUE_DEPTH} > {_n(t.queue_depth)}",
                    "5m",
                    "warning",
                    "{{ $value }} requests are waiting for {{ $labels.model_name }}",
                    f"More than {_n(t.queue_depth)} requests waited in vLLM's scheduler for 5 minutes: the "
                    "model needs more replicas (or the autoscaler is at its maximum).",
                ),
                Alert(
                    "VllmKvCacheNearlyFull",
                    f"{KV_CACHE_USAGE} > {_n(t.kv_cache_usage_ratio)}",
                    "5m",
                    "warning",
                    "KV cache of {{ $labels.model_name }} is {{ $value | humanizePercentage }} full",
                    f"Above {_n(t.kv_cache_usage_ratio)} for 5 minutes: requests are being preempted and "
                    "recomputed. Lower max_model_len or max_num_seqs, or add replicas.",
                ),
            ),
        ),
        RuleGroup(
            "inference-tiers-router",
            (
                Alert(
                    "VllmRouterWorkerUnhealthy",
                    "min by (worker) (vllm_router_worker_health) == 0",
                    "5m",
                    "warning",
                    "vllm-router takes no traffic to {{ $labels.worker }}",
                    "The router's health check of this worker has failed for 5 minutes: it routes around it, so "
                    "the pool serves with less capacity. Check the worker pod (vLLM /health).",
                ),
            ),
        ),
        RuleGroup(
            "inference-tiers-gpu",
            (
                Recording(GPU_UTILIZATION, "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"),
                Recording(
                    GPU_MEMORY_USED,
                    "max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE))",
                ),
                Alert(
                    "GpuUtilizationSaturated",
                    f"{GPU_UTILIZATION} > {_n(t.gpu_utilization_percent)}",
                    "15m",
                    "warning",
                    "GPUs of {{ $labels.Hostname }} are {{ $value }}% busy",
                    f"Average utilisation above {_n(t.gpu_utilization_percent)}% for 15 minutes: the node has no "
                    "headroom left for bursts. (DCGM_FI_DEV_GPU_UTIL saturates early on H100; read the "
                    "latency alerts before scaling.)",
                ),
                Alert(
                    "GpuMemoryNearlyFull",
                    f"{GPU_MEMORY_USED} > {_n(t.gpu_memory_ratio)}",
                    "10m",
                    "warning",
                    "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} uses {{ $value | humanizePercentage }} of "
                    "its memory",
                    f"Above {_n(t.gpu_memory_ratio)} for 10 minutes: something besides vLLM's reservation "
                    "(gpu_memory_utilization) holds memory; the next allocation may fail with out-of-memory.",
                ),
                Alert(
                    "GpuXidError",
                    "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                    "0m",
                    "critical",
                    "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} reported XID {{ $value }}",
                    "The driver reported an XID error (the value is the last XID code): check NVIDIA's XID "
                    "catalogue; 48, 63, 64, 79 and 94/95 usually mean the node must be drained and replaced.",
                ),
                Alert(
                    "GpuRowRemapFailure",
                    "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
                    "0m",
                    "critical",
                    "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} failed to remap a memory row",
                    "A row remapping failed: the GPU's memory is no longer reliable. Drain and replace the node.",
                ),
            ),
        ),
        RuleGroup(
            "inference-tiers-gateway",
            (
                Recording(
                    GATEWAY_ERROR_RATIO,
                    _ratio(
                        "litellm_proxy_failed_requests_metric_total",
                        "litellm_proxy_total_requests_metric_total",
                        "requested_model",
                    ),
                ),
                Recording(
                    BACKEND_ERROR_RATIO,
                    _ratio(
                        "litellm_deployment_failure_responses_total",
                        "litellm_deployment_total_requests_total",
                        "litellm_model_name",
                    ),
                ),
                Recording(
                    TEAM_BUDGET_LEFT,
                    _budget_left("litellm_remaining_team_budget_metric", "litellm_team_max_budget_metric"),
                ),
                Recording(
                    KEY_BUDGET_LEFT,
                    _budget_left(
                        "litellm_remaining_api_key_budget_metric", "litellm_api_key_max_budget_metric"
                    ),
                ),
                Alert(
                    "GatewayErrorRateHigh",
                    f"{GATEWAY_ERROR_RATIO} > {_n(t.gateway_error_ratio)}",
                    "10m",
                    "critical",
                    "{{ $value | humanizePercentage }} of gateway requests for {{ $labels.requested_model }} fail",
                    f"More than {_n(t.gateway_error_ratio)} of the requests failed for 10 minutes "
                    "(litellm_proxy_failed_requests_metric_total: auth, budget, rate-limit and backend errors).",
                ),
                Alert(
                    "GatewayBackendErrorRateHigh",
                    f"{BACKEND_ERROR_RATIO} > {_n(t.gateway_error_ratio)}",
                    "10m",
                    "critical",
                    "{{ $value | humanizePercentage }} of calls to backend {{ $labels.litellm_model_name }} fail",
                    "The model behind the gateway (Bedrock, SageMaker or an EKS service) answers with errors; "
                    "the gateway falls back where fallbacks are configured.",
                ),
                Alert(
                    "GatewayTeamBudgetNearlyExhausted",
                    f"{TEAM_BUDGET_LEFT} < {_n(t.budget_remaining_ratio)}",
                    "5m",
                    "warning",
                    "Team {{ $labels.team_alias }} has {{ $value | humanizePercentage }} of its budget left",
                    "Requests of this team's keys are refused once the budget is spent: raise max_budget or "
                    "wait for the budget period to reset.",
                ),
                Alert(
                    "GatewayKeyBudgetNearlyExhausted",
                    f"{KEY_BUDGET_LEFT} < {_n(t.budget_remaining_ratio)}",
                    "5m",
                    "warning",
                    "Key {{ $labels.api_key_alias }} has {{ $value | humanizePercentage }} of its budget left",
                    "Requests with this virtual key are refused once its budget is spent.",
                ),
            ),
        ),
        RuleGroup(
            "inference-tiers-efa",
            (
                Alert(
                    "EfaErrors",
                    _sum_of_counters(
                        "node_amazonefa_", ("rdma_read_wr_err", "rdma_write_wr_err", "cmds_err"), "10m"
                    )
                    + " > 0",
                    "0m",
                    "critical",
                    "EFA device {{ $labels.device }} on {{ $labels.instance }} reported {{ $value }} errors",
                    "RDMA work requests or device commands failed in the last 10 minutes: KV-cache transfers "
                    "between prefill and decode (Mooncake over EFA) fail or retry. Check the EFA driver and the "
                    "security group's self-referencing rules.",
                ),
                Alert(
                    "EfaPacketDrops",
                    "sum by (instance, device) (rate(node_amazonefa_rx_drops[5m])) > "
                    + _n(t.efa_drops_per_second),
                    "15m",
                    "warning",
                    "EFA device {{ $labels.device }} on {{ $labels.instance }} drops {{ $value }} packets/s",
                    "Sustained receive drops slow KV-cache transfers down (SRD retransmits them).",
                ),
            ),
        ),
        RuleGroup(
            "inference-tiers-targets",
            (
                Alert(
                    "ScrapeTargetDown",
                    "up == 0",
                    "5m",
                    "critical",
                    "{{ $labels.job }} target {{ $labels.instance }} is down",
                    "The scraper has not reached this target for 5 minutes: the pod or task is gone or its "
                    "metrics port is blocked; every alert that reads its metrics is blind meanwhile.",
                ),
            ),
        ),
    )


def rules_document(groups: Sequence[RuleGroup]) -> dict[str, Any]:
    """The rules file as data: ``{"groups": [...]}``."""
    return {"groups": [group.to_dict() for group in groups]}


def rules_yaml(thresholds: AlertThresholds | None = None) -> str:
    """The rules file text (the RuleGroupsNamespace's ``Data``)."""
    return yaml.safe_dump(rules_document(rule_groups(thresholds)), sort_keys=False, width=1000)


def expressions(groups: Sequence[RuleGroup]) -> Iterator[tuple[str, str]]:
    """(rule name, PromQL) of every rule, for checks that parse them all."""
    for group in groups:
        for rule in group.rules:
            yield (rule.record if isinstance(rule, Recording) else rule.alert), rule.expr
