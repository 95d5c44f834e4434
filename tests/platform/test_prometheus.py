"""The platform's opt-in in-cluster Prometheus (``platform.metrics=prometheus``): kube-prometheus-stack 88.5.3's
values checked against that release's values.yaml (tests/data/platform/kube-prometheus-stack, SOURCE.md), the
scrape jobs and rules AMP would run checked by the real promtool, Grafana and KEDA pointed at it, and no AWS
metrics resource left in the stack."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_tiers.config import ConfigError
from inference_tiers.k8s import grafana_chart, prometheus_chart
from inference_tiers.k8s.gpu_pool import GPU_TAINT
from inference_tiers.k8s.sandbox_nodes import KATA_STARTUP_TAINT, SANDBOX_TAINT
from inference_tiers.observability import collectors
from inference_tiers.observability.collectors import eks_scrape_config, to_yaml
from inference_tiers.observability.platform_scrape import controller_jobs, gateway_metrics_job
from inference_tiers.observability.rules import rules_yaml
from inference_tiers.stacks.platform import STACK_NAME
from inference_tiers.validation import ArgumentError
from tests.harness import CLEAN_GATES, DATA_DIR, build_tier, gate_findings, make_app
from tests.observability.test_alertmanager_and_collectors import _static
from tests.observability.tools import run
from tests.platform.test_observability import GATEWAY
from tests.sandbox.helpers import helm_charts, missing_values_keys

VALUES = "../platform/kube-prometheus-stack/values.yaml"


def values(**overrides: Any) -> dict[str, Any]:
    jobs = eks_scrape_config("platform", extra_jobs=[gateway_metrics_job(GATEWAY), *controller_jobs()])
    arguments: dict[str, Any] = {
        "scrape_configs": jobs["scrape_configs"],
        "rules_text": rules_yaml(),
        "cluster_label": "platform",
        "node_selector": {"node-role": "core"},
        **overrides,
    }
    return prometheus_chart.chart_values(**arguments)


def test_every_value_is_a_key_of_the_pinned_chart() -> None:
    """Free-form below ``additionalPrometheusRulesMap`` (a map of rule files, values.yaml:338) and the
    Prometheus CRD fields the chart passes through (``storageSpec``, ``resources``, ``externalLabels``)."""
    free = ("additionalPrometheusRulesMap", "prometheus.prometheusSpec.resources")
    assert missing_values_keys(values(storage_class="gp3"), VALUES, free) == []
    assert missing_values_keys(values(), VALUES, free) == []
    misspelt = {**values(), "alertmanger": {"enabled": False}}
    assert missing_values_keys(misspelt, VALUES, free) == ["alertmanger.enabled"]


def test_the_stack_s_own_grafana_kube_state_metrics_and_alertmanager_are_off() -> None:
    chart = values()
    assert chart["grafana"] == {"enabled": False}
    assert chart["kubeStateMetrics"] == {
        "enabled": False
    }  # ClusterExporters runs it (the kube-state-metrics job)
    assert chart["alertmanager"] == {"enabled": False}
    spec = chart["prometheus"]["prometheusSpec"]
    assert spec["nodeSelector"] == chart["prometheusOperator"]["nodeSelector"] == {"node-role": "core"}
    # Without these only objects labelled with the release are picked up (values.yaml:4451, :4476, :4499).
    assert not spec["serviceMonitorSelectorNilUsesHelmValues"]
    assert not spec["ruleSelectorNilUsesHelmValues"]


def test_a_storage_class_gives_a_volume_and_none_an_empty_dir() -> None:
    claimed = values(storage_class="gp3", volume_gib=80)["prometheus"]["prometheusSpec"]["storageSpec"]
    spec = claimed["volumeClaimTemplate"]["spec"]
    assert spec["storageClassName"] == "gp3" and spec["resources"]["requests"]["storage"] == "80Gi"
    assert values()["prometheus"]["prometheusSpec"]["storageSpec"] == {"emptyDir": {"sizeLimit": "50Gi"}}


def test_promtool_accepts_the_scrape_jobs_and_the_rules(tmp_path: Path) -> None:
    chart = values()
    spec = chart["prometheus"]["prometheusSpec"]
    config = tmp_path / "prometheus.yaml"
    jobs_only = {"global": {"external_labels": spec["externalLabels"]}, **_scrape(spec)}
    config.write_text(to_yaml(_static(jobs_only)))
    result = run("promtool", "check", "config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(yaml.safe_dump(chart["additionalPrometheusRulesMap"]["inference-tiers"]))
    result = run("promtool", "check", "rules", rule_file)
    assert result.returncode == 0, result.stdout + result.stderr
    # The same jobs and rules as AMP's: one renderer.
    jobs = {job["job_name"] for job in spec["additionalScrapeConfigs"]}
    assert {"pods", "litellm", "karpenter", "agent-sandbox-controller", "kube-state-metrics"} <= jobs
    assert chart["additionalPrometheusRulesMap"]["inference-tiers"] == yaml.safe_load(rules_yaml())


def _scrape(spec: dict[str, Any]) -> dict[str, Any]:
    return {"scrape_configs": spec["additionalScrapeConfigs"]}


def test_grafana_reads_the_in_cluster_prometheus_without_an_aws_identity() -> None:
    chart = grafana_chart.chart_values(
        node_selector={"node-role": "core"},
        dashboards={"a.json": {"uid": "a", "panels": []}},
        prometheus_url=prometheus_chart.SERVER_URL,
    )
    (source,) = chart["datasources"]["datasources.yaml"]["datasources"]
    assert (
        source["type"] == "prometheus"
        and source["url"] == "http://kps-prometheus.monitoring.svc.cluster.local:9090"
    )
    assert "sigV4Auth" not in source["jsonData"]
    assert chart["plugins"] == [] and chart["serviceAccount"]["create"] is True
    with pytest.raises(ArgumentError, match="exactly one of workspace_endpoint and prometheus_url"):
        grafana_chart.chart_values(node_selector={"a": "b"}, dashboards={"a.json": {}})


@pytest.fixture(scope="module")
def in_cluster() -> dict[str, Any]:
    build = build_tier(
        "platform",
        **{
            "platform.stage": "pool",
            "platform.metrics": "prometheus",
            "platform.prometheus_storage_class": "gp3",
        },
    )
    return {"build": build, "template": build.template(STACK_NAME).to_json()}


def test_the_in_cluster_stack_has_no_amp_and_passes_every_gate(in_cluster: dict[str, Any]) -> None:
    resources = in_cluster["template"]["Resources"]
    assert not [r for r in resources.values() if r["Type"].startswith("AWS::APS::")]
    assert gate_findings(in_cluster["build"]) == CLEAN_GATES


def test_keda_and_grafana_query_the_in_cluster_prometheus(in_cluster: dict[str, Any]) -> None:
    from aws_cdk.assertions import Template

    stack = in_cluster["build"].stacks[0]
    charts = helm_charts(Template.from_stack(stack))
    assert charts[prometheus_chart.RELEASE]["Version"] == prometheus_chart.CHART_VERSION
    grafana = charts[grafana_chart.RELEASE]["Values"]["datasources"]["datasources.yaml"]["datasources"][0]
    assert grafana["url"] == prometheus_chart.SERVER_URL
    objects = json.dumps(in_cluster["template"]["Resources"])
    # The pool's ScaledObject reads the in-cluster server, unsigned (no TriggerAuthentication to sign with).
    assert f'\\"serverAddress\\":\\"{prometheus_chart.SERVER_URL}\\"' in objects
    assert "TriggerAuthentication" not in objects
    assert "aps:QueryMetrics" not in objects


def test_alerts_by_email_need_amp() -> None:
    with pytest.raises(ConfigError, match=r"'platform.alarm_email'.*empty with platform.metrics=prometheus"):
        make_app(
            tier="platform", **{"platform.metrics": "prometheus", "platform.alarm_email": "ops@example.com"}
        )


# --- the node exporter (both modes) ------------------------------------------------------------------------

NODE_EXPORTER_VALUES = "../platform/prometheus-node-exporter/values.yaml"


def _tolerates(tolerations: list[dict[str, str]], taint: Mapping[str, str]) -> bool:
    """Kubernetes' toleration matching (core/v1 Toleration.ToleratesTaint): key (empty with Exists: every key),
    operator Exists or Equal with the value, effect (empty: every effect)."""
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint["effect"]):
            continue
        if toleration.get("key") not in (None, "", taint["key"]):
            continue
        if toleration.get("operator", "Equal") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


def test_the_node_exporter_runs_on_every_node_on_the_port_the_job_keeps() -> None:
    defaults = yaml.safe_load(
        (DATA_DIR / "platform" / "prometheus-node-exporter" / "values.yaml").read_text()
    )
    assert missing_values_keys(prometheus_chart.node_exporter_values(), NODE_EXPORTER_VALUES) == []
    assert defaults["service"]["port"] == collectors.NODE_EXPORTER_PORT
    assert defaults["hostNetwork"] is True
    for taint in (SANDBOX_TAINT, KATA_STARTUP_TAINT, GPU_TAINT):
        assert _tolerates(defaults["tolerations"], taint), taint
    assert not _tolerates([{"key": "other", "operator": "Exists", "effect": "NoSchedule"}], GPU_TAINT)
    assert prometheus_chart.NODE_EXPORTER_IMAGE.endswith(":v" + "1.12.1")
    # kube-prometheus-stack's own is off: one node exporter, not two scraped twice.
    assert values()["nodeExporter"] == {"enabled": False}


def test_the_node_exporter_is_installed_in_both_modes(in_cluster: dict[str, Any]) -> None:
    from aws_cdk.assertions import Template

    amp = helm_charts(build_tier("platform", **{"platform.stage": "gateway"}).template(STACK_NAME))
    for charts in (amp, helm_charts(Template.from_stack(in_cluster["build"].stacks[0]))):
        chart = charts["node-exporter"]
        assert (chart["Chart"], chart["Version"]) == ("prometheus-node-exporter", "4.56.1")
