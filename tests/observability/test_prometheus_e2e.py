"""Loopback end to end: a real Prometheus server (Debian's package) scrapes stub exporters that serve every pinned
vLLM, dcgm-exporter and LiteLLM series name, evaluates the rendered rules file, and the recording rules produce the
expected series."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from inference_tiers.observability import rules
from tests.observability.exporter import BUCKETS, ENGINES, MetricsStub, serve
from tests.observability.prometheus_server import Prometheus, running_prometheus
from tests.observability.tools import allowed_names

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
SCRAPE_SECONDS = 1
VLLM_NAMES = allowed_names("vllm-v0.33.0")
# Each scrape adds every histogram's observations to one bucket: TTFT to (0.1, 0.25], ITL to (0.01, 0.025].
TTFT_BUCKET = BUCKETS.index(0.25)
ITL_BUCKET = BUCKETS.index(0.025)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    folder = tmp_path_factory.mktemp("prometheus")
    vllm = MetricsStub(
        VLLM_NAMES,
        series=[{"model_name": MODEL, "engine": engine} for engine in ENGINES],
        gauges={
            "vllm:num_requests_waiting": (4, 3),
            "vllm:num_requests_running": (5, 6),
            "vllm:kv_cache_usage_perc": (0.25, 0.6),
        },
        histogram_bucket={
            "vllm:time_to_first_token_seconds": TTFT_BUCKET,
            "vllm:inter_token_latency_seconds": ITL_BUCKET,
        },
    )
    dcgm = MetricsStub(
        allowed_names("dcgm"),
        series=[{"Hostname": "gpu-node-1", "gpu": gpu} for gpu in ("0", "1")],
        gauges={
            "DCGM_FI_DEV_GPU_UTIL": (90, 70),
            "DCGM_FI_DEV_FB_USED": (60000, 70000),
            "DCGM_FI_DEV_FB_FREE": (20000, 10000),
        },
    )
    litellm = MetricsStub(
        allowed_names("litellm"),
        series=[
            {
                "requested_model": "nova",
                "litellm_model_name": "bedrock/nova",
                "team": "t1",
                "team_alias": "ml",
            }
        ],
        counter_steps={
            "litellm_proxy_failed_requests_metric_total": 5,
            "litellm_proxy_total_requests_metric_total": 100,
            "litellm_deployment_failure_responses_total": 30,
            "litellm_deployment_total_requests_total": 100,
        },
        gauges={"litellm_remaining_team_budget_metric": [25], "litellm_team_max_budget_metric": [100]},
    )
    with serve(vllm) as vllm_target, serve(dcgm) as dcgm_target, serve(litellm) as litellm_target:
        (folder / "rules.yaml").write_text(rules.rules_yaml())
        targets = {"vllm": vllm_target, "dcgm-exporter": dcgm_target, "litellm": litellm_target}
        config = {
            "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": "1s"},
            "rule_files": [str(folder / "rules.yaml")],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [target]}]}
                for job, target in targets.items()
            ],
        }
        with running_prometheus(folder, config) as server:
            yield server


def _value(result: list[dict[str, Any]]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_prometheus_loaded_every_rule_without_errors(prometheus: Prometheus) -> None:
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/rules", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    expected = rules.rule_groups()
    assert sorted(g["name"] for g in groups) == sorted(g.name for g in expected)
    assert sum(len(g["rules"]) for g in groups) == sum(len(g.rules) for g in expected)
    prometheus.wait_for(rules.QUEUE_DEPTH)
    time.sleep(2)  # a few evaluations
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/rules", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    unhealthy = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] == "err"]
    assert unhealthy == []


def test_every_pinned_vllm_series_is_scraped(prometheus: Prometheus) -> None:
    prometheus.wait_for('up{job="vllm"} == 1')
    result = prometheus.wait_for('group by (__name__) ({__name__=~"vllm:.+", job="vllm"})')
    assert {r["metric"]["__name__"] for r in result} == set(VLLM_NAMES)


def test_gauge_recordings_sum_and_max_over_engines(prometheus: Prometheus) -> None:
    assert _value(prometheus.wait_for(rules.QUEUE_DEPTH)) == 7
    assert _value(prometheus.wait_for(rules.RUNNING)) == 11
    assert _value(prometheus.wait_for(rules.KV_CACHE_USAGE)) == 0.6
    assert prometheus.query(rules.QUEUE_DEPTH)[0]["metric"] == {
        "__name__": rules.QUEUE_DEPTH,
        "model_name": MODEL,
    }


def test_latency_recordings_give_the_p90_of_the_served_histograms(prometheus: Prometheus) -> None:
    # All observations fall in one bucket, so the p90 interpolates 90 % into it, at any scrape rate.
    ttft = prometheus.wait_for(rules.TTFT_P90)
    low, high = BUCKETS[TTFT_BUCKET - 1], BUCKETS[TTFT_BUCKET]
    assert _value(ttft) == pytest.approx(low + 0.9 * (high - low))
    low, high = BUCKETS[ITL_BUCKET - 1], BUCKETS[ITL_BUCKET]
    assert _value(prometheus.wait_for(rules.ITL_P90)) == pytest.approx(low + 0.9 * (high - low))
    assert ttft[0]["metric"]["model_name"] == MODEL


def test_token_rate_recording_sums_the_engines_rates(prometheus: Prometheus) -> None:
    prometheus.wait_for(f"count_over_time({rules.GENERATION_TOKENS}[1m]) >= 3")
    # The raw samples the rule wrote, with the times it ran; the first is settled (no scrape arrives later).
    (series,) = prometheus.query(f"{rules.GENERATION_TOKENS}[1m]")
    at, recorded = series["values"][0]
    per_engine = [
        _value(prometheus.query(f'rate(vllm:generation_tokens_total{{engine="{e}"}}[5m])', float(at)))
        for e in ENGINES
    ]
    assert all(rate > 0 for rate in per_engine)
    assert float(recorded) == pytest.approx(sum(per_engine))


def test_gpu_recordings_average_utilisation_and_compute_memory_per_gpu(prometheus: Prometheus) -> None:
    assert _value(prometheus.wait_for(rules.GPU_UTILIZATION)) == 80
    memory = {r["metric"]["gpu"]: float(r["value"][1]) for r in prometheus.wait_for(rules.GPU_MEMORY_USED)}
    assert memory == {"0": 0.75, "1": 0.875}


def test_gateway_recordings_give_error_ratios_and_budget_left(prometheus: Prometheus) -> None:
    # counters grow by fixed steps per scrape, so the ratio of their rates is exact at any scrape rate
    assert _value(prometheus.wait_for(rules.GATEWAY_ERROR_RATIO)) == pytest.approx(0.05)
    assert _value(prometheus.wait_for(rules.BACKEND_ERROR_RATIO)) == pytest.approx(0.3)
    budget = prometheus.wait_for(rules.TEAM_BUDGET_LEFT)
    assert _value(budget) == 0.25
    assert budget[0]["metric"]["team_alias"] == "ml"


def test_every_pinned_dcgm_and_litellm_series_is_scraped(prometheus: Prometheus) -> None:
    for job, names in (("dcgm-exporter", allowed_names("dcgm")), ("litellm", allowed_names("litellm"))):
        # recording rules that keep the job label (budget ratios) are excluded by their colons
        result = prometheus.wait_for(f'group by (__name__) ({{job="{job}", __name__!~"up|scrape_.+|.+:.+"}})')
        assert {r["metric"]["__name__"] for r in result} == set(names), job
