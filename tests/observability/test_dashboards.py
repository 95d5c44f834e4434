"""The Grafana dashboards: valid against the dashboard schema they target (@grafana/schema 13.2.3), every
PromQL expression parses and reads only allow-listed metrics, every CloudWatch metric exists."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from inference_tiers.observability import dashboards, rules
from tests.harness import DATA_DIR
from tests.observability.promql import metric_names
from tests.observability.tools import VLLM_LIST_OF_TIER, allowed_names, allowed_names_for

SCHEMA = json.loads((DATA_DIR / "observability" / "grafana-dashboard-13.2.3.schema.json").read_text())
BOARDS = dashboards.all_dashboards()
RECORDED = {r.record for g in rules.rule_groups() for r in g.rules if isinstance(r, rules.Recording)}
CLOUDWATCH = {
    line
    for line in (DATA_DIR / "observability" / "cloudwatch-metrics.txt").read_text().splitlines()
    if line[:1] != "#"
}
# Grafana's macros and this project's variables, replaced by values PromQL accepts before parsing.
_MACROS = {"$__rate_interval": "5m", "$model_name": ".*", "$tenant": ".*"}


def _targets(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for panel in board["panels"] for t in panel["targets"]]


def _promql(target: dict[str, Any]) -> str:
    expr = str(target["expr"])
    for macro, value in _MACROS.items():
        expr = expr.replace(macro, value)
    assert "$" not in expr, f"unknown variable in {target['expr']}"
    return expr


def test_one_dashboard_per_tier_with_metrics_plus_an_overview() -> None:
    assert sorted(BOARDS) == [
        f"inference-tiers-{name}.json"
        for name in ("bedrock", "disaggregated", "gateway", "hyperpod", "overview", "sagemaker", "tenants")
    ]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_is_valid_against_the_grafana_schema(name: str) -> None:
    jsonschema.Draft7Validator(SCHEMA).validate(BOARDS[name])


def test_the_schema_check_catches_a_misspelled_key() -> None:
    board = json.loads(json.dumps(BOARDS["inference-tiers-overview.json"]))
    board["panels"][0]["gridpos"] = board["panels"][0].pop("gridPos")
    with pytest.raises(jsonschema.ValidationError, match="gridpos"):
        jsonschema.Draft7Validator(SCHEMA).validate(board)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels_have_unique_ids_and_do_not_overlap(name: str) -> None:
    panels = BOARDS[name]["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (x, y)
        for p in panels
        for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
        for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells))
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)


def test_uids_are_unique_and_fit_grafanas_limit() -> None:
    uids = [b["uid"] for b in BOARDS.values()]
    assert len(set(uids)) == len(uids)
    assert all(re.fullmatch(r"[a-z0-9-]{1,40}", uid) for uid in uids)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_promql_parses_and_reads_only_allow_listed_metrics(name: str) -> None:
    prometheus = [t for t in _targets(BOARDS[name]) if t["datasource"] == dashboards.PROMETHEUS]
    # A tier's board reads only what the vLLM release that tier deploys exports.
    tier = next((t for t in BOARDS[name]["tags"] if t in VLLM_LIST_OF_TIER), None)
    allowed = (allowed_names_for(tier) if tier else allowed_names()) | RECORDED
    for target in prometheus:
        unknown = metric_names(_promql(target)) - allowed
        assert not unknown, f"{name}: {target['expr']} reads {sorted(unknown)}"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_cloudwatch_metric_exists(name: str) -> None:
    for target in _targets(BOARDS[name]):
        if target["datasource"] == dashboards.CLOUDWATCH:
            assert f"{target['namespace']}/{target['metricName']}" in CLOUDWATCH


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_panel_uses_one_data_source_variable_and_every_variable_is_declared(name: str) -> None:
    board = BOARDS[name]
    declared = {v["name"] for v in board["templating"]["list"]}
    for panel in board["panels"]:
        assert {t["datasource"]["uid"] for t in panel["targets"]} == {panel["datasource"]["uid"]}
        used = set(re.findall(r"\$\{?([a-z_]+)", json.dumps(panel))) - {"__rate_interval", "__auto"}
        assert used <= declared, f"{panel['title']}: {sorted(used - declared)} not declared"


def test_dashboards_read_the_same_recordings_as_the_alerts() -> None:
    read = set().union(
        *(metric_names(_promql(t)) for b in BOARDS.values() for t in _targets(b) if "expr" in t)
    )
    assert {rules.TTFT_P90, rules.ITL_P90, rules.KV_CACHE_USAGE, rules.GATEWAY_ERROR_RATIO} <= read
