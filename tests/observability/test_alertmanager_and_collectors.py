"""The Alertmanager definition (checked by real amtool) and the collector configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_tiers.observability import collectors
from inference_tiers.observability.alertmanager import alertmanager_config, alertmanager_definition
from inference_tiers.validation import ArgumentError
from tests.observability.tools import run

TOPIC = "arn:aws:sns:us-east-1:111122223333:inference-alerts"


def test_amtool_accepts_the_inner_configuration(tmp_path: Path) -> None:
    definition = yaml.safe_load(alertmanager_definition(TOPIC, "us-east-1"))
    assert list(definition) == ["alertmanager_config"]
    path = tmp_path / "alertmanager.yaml"
    path.write_text(definition["alertmanager_config"])
    result = run("amtool", "check-config", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 receivers" in result.stdout


def test_amtool_rejects_a_broken_route(tmp_path: Path) -> None:
    config = alertmanager_config(TOPIC, "us-east-1")
    config["route"]["receiver"] = "nobody"
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    assert run("amtool", "check-config", path).returncode != 0


def test_only_an_sns_receiver_with_sigv4_as_amp_requires() -> None:
    (receiver,) = alertmanager_config(TOPIC, "eu-west-1")["receivers"]
    assert set(receiver) == {"name", "sns_configs"}
    assert receiver["sns_configs"][0]["topic_arn"] == TOPIC
    assert receiver["sns_configs"][0]["sigv4"] == {"region": "eu-west-1"}


@pytest.mark.parametrize(
    ("topic", "region", "param"),
    [("arn:aws:sqs:us-east-1:111122223333:q", "us-east-1", "topic_arn"), (TOPIC, "moon", "region")],
)
def test_bad_topic_or_region_is_refused(topic: str, region: str, param: str) -> None:
    with pytest.raises(ArgumentError, match=rf"alertmanager_config: parameter '{param}'"):
        alertmanager_config(topic, region)


def _static(config: dict[str, Any]) -> dict[str, Any]:
    """The scrape config with kubernetes_sd_configs swapped for a static target (Debian's promtool is built
    without Kubernetes service discovery); everything else (relabelling, intervals, labels) is kept."""
    jobs = []
    for job in config["scrape_configs"]:
        job = {k: v for k, v in job.items() if k != "kubernetes_sd_configs"}
        jobs.append({**job, "static_configs": [{"targets": ["127.0.0.1:9"]}]})
    return {**config, "scrape_configs": jobs}


def test_promtool_accepts_the_eks_scrape_config_apart_from_kubernetes_discovery(tmp_path: Path) -> None:
    config = collectors.eks_scrape_config("disaggregated")
    assert all(job["kubernetes_sd_configs"] == [{"role": "pod"}] for job in config["scrape_configs"])
    path = tmp_path / "scrape.yaml"
    path.write_text(collectors.to_yaml(_static(config)))
    result = run("promtool", "check", "config", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_annotated_pods_are_scraped_on_their_annotated_port_and_path() -> None:
    pods = collectors.eks_scrape_config("c")["scrape_configs"][0]["relabel_configs"]
    by_target = {r.get("target_label"): r for r in pods}
    assert pods[0]["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    assert by_target["__address__"]["replacement"] == "$1:$2"
    assert by_target["__metrics_path__"]["source_labels"] == [
        "__meta_kubernetes_pod_annotation_prometheus_io_path"
    ]
    assert by_target["job"]["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]


def test_every_component_the_issue_names_has_a_job() -> None:
    jobs = [job["job_name"] for job in collectors.eks_scrape_config("c")["scrape_configs"]]
    # vLLM, vllm-router and mooncake_master are annotated pods (job renamed to their component label)
    assert jobs == ["pods", "dcgm-exporter", "node-exporter", "keda-operator", "kube-state-metrics"]


def test_the_scrape_config_labels_every_series_with_the_cluster() -> None:
    assert collectors.eks_scrape_config("tier4")["global"]["external_labels"] == {"cluster": "tier4"}


def test_collector_pipelines_use_only_defined_components() -> None:
    config = collectors.ecs_collector_config(
        remote_write_url="https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/remote_write",
        region="us-east-1",
        metrics_port=4000,
    )
    service = config["service"]
    assert set(service["extensions"]) == set(config["extensions"])
    used = {kind: set() for kind in ("receivers", "processors", "exporters")}  # type: dict[str, set[str]]
    for pipeline in service["pipelines"].values():
        for kind in used:
            assert set(pipeline[kind]) <= set(config[kind]), pipeline
            used[kind] |= set(pipeline[kind])
    assert all(used[kind] == set(config[kind]) for kind in used), "a component is defined but never used"
    targets = config["receivers"]["prometheus"]["config"]["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["127.0.0.1:4000"]
    # OTLP is received on loopback only: other tasks in the VPC cannot inject traces
    assert {p["endpoint"].split(":")[0] for p in config["receivers"]["otlp"]["protocols"].values()} == {
        "127.0.0.1"
    }


def test_collector_refuses_a_url_that_is_not_a_remote_write_endpoint() -> None:
    with pytest.raises(ArgumentError, match="ecs_collector_config: parameter 'remote_write_url'"):
        collectors.ecs_collector_config(
            remote_write_url="http://example.com/write", region="us-east-1", metrics_port=4000
        )
