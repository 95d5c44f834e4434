"""The kube-state-metrics job keeps exactly KSM's object-metrics port: Kubernetes pod discovery yields one target
per declared container port, so each case below is one (pod label, port name) pair as the scraper would see it.
The label and port names are those of the prometheus-community chart (port "http", self-telemetry "metrics")
and of the upstream kubernetes/kube-state-metrics example manifests ("http-metrics", "telemetry")."""

from __future__ import annotations

from typing import Any

import pytest

from inference_tiers.observability import collectors
from tests.observability.relabel import kept


def _job(name: str) -> dict[str, Any]:
    return next(j for j in collectors.eks_scrape_config("c")["scrape_configs"] if j["job_name"] == name)


def _target(app_name: str | None, port_name: str, port: int) -> dict[str, str]:
    labels = {
        "__meta_kubernetes_namespace": "kube-state-metrics",
        "__meta_kubernetes_pod_name": "kube-state-metrics-7d9c",
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_container_port_number": str(port),
    }
    if app_name is not None:
        labels["__meta_kubernetes_pod_label_app_kubernetes_io_name"] = app_name
    return labels


@pytest.mark.parametrize(
    ("app_name", "port_name", "port"),
    [("kube-state-metrics", "http", 8080), ("kube-state-metrics", "http-metrics", 8080)],
)
def test_the_object_metrics_port_of_kube_state_metrics_pods_is_kept(
    app_name: str, port_name: str, port: int
) -> None:
    assert kept(_job("kube-state-metrics")["relabel_configs"], _target(app_name, port_name, port))


@pytest.mark.parametrize(
    ("app_name", "port_name", "port"),
    [
        ("kube-state-metrics", "metrics", 8081),  # the chart's self-telemetry port
        ("kube-state-metrics", "telemetry", 8081),  # upstream's self-telemetry port
        ("kube-state-metrics", "http-healthz", 8888),  # the chart's kube-rbac-proxy health port
        ("vllm-router", "http", 8080),  # another pod with an "http" port
        ("keda-operator", "metrics", 8080),
        ("kube-state-metrics-extra", "http", 8080),  # the regex is anchored: no prefix matches
        (None, "http", 8080),  # unlabelled pod
    ],
)
def test_other_pods_and_ports_are_dropped(app_name: str | None, port_name: str, port: int) -> None:
    assert not kept(_job("kube-state-metrics")["relabel_configs"], _target(app_name, port_name, port))


def test_kube_state_metrics_series_keep_their_namespace_pod_and_node_labels() -> None:
    targets = {r.get("target_label") for r in _job("kube-state-metrics")["relabel_configs"]}
    assert {"namespace", "pod", "node"} <= targets


def test_the_other_jobs_do_not_scrape_kube_state_metrics() -> None:
    ksm = _target("kube-state-metrics", "http", 8080)
    others = [
        j
        for j in collectors.eks_scrape_config("c")["scrape_configs"]
        if j["job_name"] != "kube-state-metrics"
    ]
    assert [j["job_name"] for j in others if kept(j["relabel_configs"], ksm)] == []


def test_the_keda_job_still_keeps_only_the_operator_metrics_port() -> None:
    rules = _job("keda-operator")["relabel_configs"]
    assert kept(rules, _target("keda-operator", "metrics", 8080))
    assert not kept(rules, _target("keda-operator", "metricsx", 8080))
    assert not kept(rules, _target("kube-state-metrics", "metrics", 8081))
