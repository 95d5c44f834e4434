"""The rendered rules file: real promtool checks it and runs a unit test per alert (fires on bad series, silent
on good ones); every expression parses and reads only metrics the pinned components export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_tiers.observability import rules
from inference_tiers.observability.rules import Alert, AlertThresholds, rule_groups, rules_yaml
from inference_tiers.validation import ArgumentError
from tests.observability.promql import metric_names
from tests.observability.tools import VLLM_LIST_OF_TIER, allowed_names, run

ALERTS = {r.alert: r for g in rule_groups() for r in g.rules if isinstance(r, Alert)}
RECORDED = {r.record for g in rule_groups() for r in g.rules if isinstance(r, rules.Recording)}


def _hist(name: str, labels: str, buckets: dict[str, str]) -> list[dict[str, str]]:
    return [{"series": f'{name}_bucket{{{labels}, le="{le}"}}', "values": v} for le, v in buckets.items()]


def _series(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"series": series, "values": values} for series, values in pairs]


# alert -> (series that must fire it, labels it fires with (besides alertname/severity), its summary,
#           series that must leave it silent). One sample a minute; the test evaluates at 30 minutes.
CASES: dict[str, tuple[list[dict[str, str]], dict[str, str], str, list[dict[str, str]]]] = {
    "VllmTimeToFirstTokenHigh": (
        _hist(
            "vllm:time_to_first_token_seconds",
            'model_name="m"',
            {"0.5": "0x40", "2.5": "0x40", "5": "0+10x40", "+Inf": "0+10x40"},
        ),
        {"model_name": "m"},
        "p90 time to first token of m is 4.75s",
        _hist(
            "vllm:time_to_first_token_seconds",
            'model_name="m"',
            {"0.5": "0+10x40", "2.5": "0+10x40", "5": "0+10x40", "+Inf": "0+10x40"},
        ),
    ),
    "VllmInterTokenLatencyHigh": (
        _hist(
            "vllm:inter_token_latency_seconds",
            'model_name="m"',
            {"0.05": "0x40", "0.1": "0x40", "0.5": "0+10x40", "+Inf": "0+10x40"},
        ),
        {"model_name": "m"},
        "p90 inter-token latency of m is 460ms",
        _hist(
            "vllm:inter_token_latency_seconds",
            'model_name="m"',
            {"0.05": "0+10x40", "0.1": "0+10x40", "0.5": "0+10x40", "+Inf": "0+10x40"},
        ),
    ),
    "VllmQueueDepthHigh": (
        _series(
            ('vllm:num_requests_waiting{model_name="m", engine="0"}', "15x40"),
            ('vllm:num_requests_waiting{model_name="m", engine="1"}', "10x40"),
        ),
        {"model_name": "m"},
        "25 requests are waiting for m",
        _series(('vllm:num_requests_waiting{model_name="m", engine="0"}', "3x40")),
    ),
    "VllmKvCacheNearlyFull": (
        _series(
            ('vllm:kv_cache_usage_perc{model_name="m", engine="0"}', "0.99x40"),
            ('vllm:kv_cache_usage_perc{model_name="m", engine="1"}', "0.5x40"),
        ),
        {"model_name": "m"},
        "KV cache of m is 99% full",
        _series(('vllm:kv_cache_usage_perc{model_name="m", engine="0"}', "0.5x40")),
    ),
    "VllmRouterWorkerUnhealthy": (
        _series(
            ('vllm_router_worker_health{worker="http://10.0.1.5:8000"}', "1x10 0x30"),
            ('vllm_router_worker_health{worker="http://10.0.1.6:8000"}', "1x40"),
        ),
        {"worker": "http://10.0.1.5:8000"},
        "vllm-router takes no traffic to http://10.0.1.5:8000",
        _series(('vllm_router_worker_health{worker="http://10.0.1.5:8000"}', "1x10 0x2 1x28")),
    ),
    "GpuUtilizationSaturated": (
        _series(
            ('DCGM_FI_DEV_GPU_UTIL{Hostname="h", gpu="0"}', "99x40"),
            ('DCGM_FI_DEV_GPU_UTIL{Hostname="h", gpu="1"}', "97x40"),
        ),
        {"Hostname": "h"},
        "GPUs of h are 98% busy",
        _series(('DCGM_FI_DEV_GPU_UTIL{Hostname="h", gpu="0"}', "40x40")),
    ),
    "GpuMemoryNearlyFull": (
        _series(
            ('DCGM_FI_DEV_FB_USED{Hostname="h", gpu="3"}', "79500x40"),
            ('DCGM_FI_DEV_FB_FREE{Hostname="h", gpu="3"}', "500x40"),
        ),
        {"Hostname": "h", "gpu": "3"},
        "GPU 3 of h uses 99.38% of its memory",
        _series(
            ('DCGM_FI_DEV_FB_USED{Hostname="h", gpu="3"}', "72000x40"),
            ('DCGM_FI_DEV_FB_FREE{Hostname="h", gpu="3"}', "8000x40"),
        ),
    ),
    "GpuXidError": (
        _series(('DCGM_FI_DEV_XID_ERRORS{Hostname="h", gpu="5"}', "0x10 79x30")),
        {"Hostname": "h", "gpu": "5"},
        "GPU 5 of h reported XID 79",
        _series(('DCGM_FI_DEV_XID_ERRORS{Hostname="h", gpu="5"}', "0x40")),
    ),
    "GpuRowRemapFailure": (
        _series(('DCGM_FI_DEV_ROW_REMAP_FAILURE{Hostname="h", gpu="2"}', "0x10 1x30")),
        {"Hostname": "h", "gpu": "2"},
        "GPU 2 of h failed to remap a memory row",
        _series(('DCGM_FI_DEV_ROW_REMAP_FAILURE{Hostname="h", gpu="2"}', "0x40")),
    ),
    "GatewayErrorRateHigh": (
        _series(
            (
                'litellm_proxy_failed_requests_metric_total{requested_model="nova", status_code="500"}',
                "0+10x40",
            ),
            (
                'litellm_proxy_total_requests_metric_total{requested_model="nova", status_code="200"}',
                "0+100x40",
            ),
        ),
        {"requested_model": "nova"},
        "10% of gateway requests for nova fail",
        _series(
            (
                'litellm_proxy_failed_requests_metric_total{requested_model="nova", status_code="500"}',
                "0+1x40",
            ),
            (
                'litellm_proxy_total_requests_metric_total{requested_model="nova", status_code="200"}',
                "0+100x40",
            ),
        ),
    ),
    "GatewayBackendErrorRateHigh": (
        _series(
            ('litellm_deployment_failure_responses_total{litellm_model_name="hosted_vllm/llama"}', "0+30x40"),
            ('litellm_deployment_total_requests_total{litellm_model_name="hosted_vllm/llama"}', "0+100x40"),
        ),
        {"litellm_model_name": "hosted_vllm/llama"},
        "30% of calls to backend hosted_vllm/llama fail",
        _series(
            ('litellm_deployment_failure_responses_total{litellm_model_name="hosted_vllm/llama"}', "0x40"),
            ('litellm_deployment_total_requests_total{litellm_model_name="hosted_vllm/llama"}', "0+100x40"),
        ),
    ),
    "GatewayTeamBudgetNearlyExhausted": (
        _series(
            ('litellm_remaining_team_budget_metric{team="t1", team_alias="research"}', "5x40"),
            ('litellm_team_max_budget_metric{team="t1", team_alias="research"}', "100x40"),
        ),
        {"team": "t1", "team_alias": "research"},
        "Team research has 5% of its budget left",
        _series(
            ('litellm_remaining_team_budget_metric{team="t1", team_alias="research"}', "50x40"),
            ('litellm_team_max_budget_metric{team="t1", team_alias="research"}', "100x40"),
            # a team without a budget (max 0) never alerts
            ('litellm_remaining_team_budget_metric{team="t2", team_alias="ops"}', "0x40"),
            ('litellm_team_max_budget_metric{team="t2", team_alias="ops"}', "0x40"),
        ),
    ),
    "GatewayKeyBudgetNearlyExhausted": (
        _series(
            ('litellm_remaining_api_key_budget_metric{hashed_api_key="ab12", api_key_alias="ci"}', "1x40"),
            ('litellm_api_key_max_budget_metric{hashed_api_key="ab12", api_key_alias="ci"}', "20x40"),
        ),
        {"hashed_api_key": "ab12", "api_key_alias": "ci"},
        "Key ci has 5% of its budget left",
        _series(
            ('litellm_remaining_api_key_budget_metric{hashed_api_key="ab12", api_key_alias="ci"}', "19x40"),
            ('litellm_api_key_max_budget_metric{hashed_api_key="ab12", api_key_alias="ci"}', "20x40"),
        ),
    ),
    "EfaErrors": (
        # No rdma_write_wr_err (an EFA driver before r2.5.0): the other two counters must still add up.
        _series(
            ('node_amazonefa_rdma_read_wr_err{instance="n1", device="rdmap16s27", port="1"}', "0x22 5x18"),
            ('node_amazonefa_cmds_err{instance="n1", device="rdmap16s27"}', "0x25 2x15"),
        ),
        {"instance": "n1", "device": "rdmap16s27"},
        "EFA device rdmap16s27 on n1 reported 7 errors",
        _series(
            ('node_amazonefa_rdma_read_wr_err{instance="n1", device="rdmap16s27"}', "0x40"),
            ('node_amazonefa_rdma_write_wr_err{instance="n1", device="rdmap16s27"}', "0x40"),
            ('node_amazonefa_cmds_err{instance="n1", device="rdmap16s27"}', "0x40"),
        ),
    ),
    "EfaPacketDrops": (
        _series(('node_amazonefa_rx_drops{instance="n1", device="rdmap16s27"}', "0+120x40")),
        {"instance": "n1", "device": "rdmap16s27"},
        "EFA device rdmap16s27 on n1 drops 2 packets/s",
        _series(('node_amazonefa_rx_drops{instance="n1", device="rdmap16s27"}', "0+30x40")),
    ),
    "ScrapeTargetDown": (
        _series(('up{job="vllm", instance="10.0.1.5:8000"}', "1x10 0x30")),
        {"job": "vllm", "instance": "10.0.1.5:8000"},
        "vllm target 10.0.1.5:8000 is down",
        _series(('up{job="vllm", instance="10.0.1.5:8000"}', "1x40")),
    ),
}


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(rules_yaml())
    return path


def test_promtool_check_rules_accepts_the_rendered_file(rules_file: Path) -> None:
    result = run("promtool", "check", "rules", rules_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS) + len(RECORDED)} rules found" in result.stdout


def test_promtool_check_rules_rejects_a_broken_expression(tmp_path: Path) -> None:
    """The check above can fail: the same file with one expression broken does."""
    document = yaml.safe_load(rules_yaml())
    document["groups"][0]["rules"][0]["expr"] = "sum by (le (rate(x[5m]))"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(document))
    assert run("promtool", "check", "rules", path).returncode != 0


def test_every_alert_has_a_unit_test() -> None:
    assert sorted(CASES) == sorted(ALERTS)


def _unit_test(rules_file: Path, alert: Alert, series: list[dict[str, str]], fires: bool) -> dict[str, Any]:
    bad, labels, summary, _ = CASES[alert.alert]
    expected = [
        {
            "exp_labels": {"severity": alert.severity, **labels},
            "exp_annotations": {"summary": summary, "description": alert.description},
        }
    ]
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": alert.alert, "exp_alerts": expected if fires else []}
        ],
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_alert_fires_on_bad_series_and_stays_silent_on_good_ones(
    name: str, rules_file: Path, tmp_path: Path
) -> None:
    alert = ALERTS[name]
    bad, _, _, good = CASES[name]
    tests = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [_unit_test(rules_file, alert, bad, True), _unit_test(rules_file, alert, good, False)],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))
    result = run("promtool", "test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_inter_token_latency_alert_fires_on_vllm_0_10_series(rules_file: Path, tmp_path: Path) -> None:
    """hyperpod's vLLM v0.10.1 exports the same intervals as vllm:time_per_output_token_seconds (vllm#24110)."""
    bad, _, _, good = CASES["VllmInterTokenLatencyHigh"]
    renamed = [
        [{**s, "series": s["series"].replace("inter_token_latency", "time_per_output_token")} for s in series]
        for series in (bad, good)
    ]
    alert = ALERTS["VllmInterTokenLatencyHigh"]
    tests = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            _unit_test(rules_file, alert, renamed[0], True),
            _unit_test(rules_file, alert, renamed[1], False),
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))
    result = run("promtool", "test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_unit_test_can_fail(name: str, rules_file: Path, tmp_path: Path) -> None:
    """Swapping the series (expect silence on bad ones) must make promtool fail: the unit tests are real."""
    alert = ALERTS[name]
    bad, _, _, good = CASES[name]
    tests = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [_unit_test(rules_file, alert, bad, False), _unit_test(rules_file, alert, good, True)],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))
    assert run("promtool", "test", "rules", path).returncode != 0


def test_every_expression_reads_only_allow_listed_metrics() -> None:
    allowed = allowed_names() | RECORDED
    for name, expr in rules.expressions(rule_groups()):
        unknown = metric_names(expr) - allowed
        assert not unknown, f"{name} reads metrics no pinned component exports: {sorted(unknown)}"


@pytest.mark.parametrize("tier", sorted(VLLM_LIST_OF_TIER))
def test_every_vllm_recording_reads_a_series_the_tiers_release_exports(tier: str) -> None:
    """The rules serve every tier: a vLLM recording must find its series in each release a tier deploys."""
    exported = allowed_names(VLLM_LIST_OF_TIER[tier])
    for name, expr in rules.expressions(rule_groups()):
        read = {n for n in metric_names(expr) if n.startswith("vllm:")}
        assert not read or read & exported, (
            f"{name} reads nothing vLLM's {tier} release exports: {sorted(read)}"
        )


def test_the_allow_list_check_catches_a_renamed_metric() -> None:
    """vLLM V0's cpu_cache_usage_perc (gone in V1) is not allow-listed, so a rule on it would be refused."""
    assert metric_names("max(vllm:cpu_cache_usage_perc) > 0.9") - allowed_names() == {
        "vllm:cpu_cache_usage_perc"
    }


def test_recording_rules_are_used_by_alerts_or_named_for_dashboards() -> None:
    read = set().union(*(metric_names(expr) for _, expr in rules.expressions(rule_groups())))
    assert {rules.TTFT_P90, rules.ITL_P90, rules.QUEUE_DEPTH, rules.KV_CACHE_USAGE} <= read
    assert rules.GATEWAY_ERROR_RATIO in read


def test_thresholds_reach_the_rules() -> None:
    text = rules_yaml(AlertThresholds(ttft_p90_seconds=0.75, queue_depth=7))
    assert f"{rules.TTFT_P90} > 0.75" in text
    assert f"{rules.QUEUE_DEPTH} > 7" in text


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("ttft_p90_seconds", 0, "greater than 0"),
        ("queue_depth", 2.5, "an integer"),
        ("kv_cache_usage_ratio", 1.5, "at most 1"),
        ("gpu_utilization_percent", "95", "a number"),
        ("efa_drops_per_second", -1, "from 0 to"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_field(field: str, value: Any, accepted: str) -> None:
    with pytest.raises(ArgumentError, match=rf"AlertThresholds: parameter '{field}' got .*{accepted}"):
        AlertThresholds(**{field: value})


def test_rule_groups_refuses_something_else_than_thresholds() -> None:
    with pytest.raises(ArgumentError, match="rule_groups: parameter 'thresholds'"):
        rule_groups({"ttft_p90_seconds": 1})  # type: ignore[arg-type]
