"""The pods the disaggregated tier renders are what the EKS scraper's annotated-pods job keeps: every metrics
endpoint (vLLM prefill/decode, vllm-router, mooncake_master) carries prometheus.io/scrape "true", a numeric
prometheus.io/port that is one of its containers' ports, a path, and the component label that names the job."""

from __future__ import annotations

from typing import Any

from inference_tiers.k8s.disaggregated import (
    COMPONENT_LABEL,
    MASTER_METRICS_PORT,
    ROUTER_METRICS_PORT,
    VLLM_PORT,
    DisaggregatedWorkloadSpec,
    render,
)
from inference_tiers.observability import collectors

SPEC = DisaggregatedWorkloadSpec(
    model_id="meta-llama/Llama-3.3-70B-Instruct",
    instance_type="p5.48xlarge",
    vllm_image="123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-mooncake-efa:t",
    router_image="123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-router:0.1.17",
    enable_kv_store=True,
)


def _pod_templates() -> list[dict[str, Any]]:
    return [
        m["spec"]["template"] for m in render(SPEC) if m["kind"] in ("Deployment", "StatefulSet", "DaemonSet")
    ]


def _relabel_rule(source: str) -> dict[str, Any]:
    pods = collectors.eks_scrape_config("c")["scrape_configs"][0]["relabel_configs"]
    return next(r for r in pods if r["source_labels"][-1] == source)


def test_every_metrics_pod_is_kept_on_its_annotated_port() -> None:
    keep = _relabel_rule("__meta_kubernetes_pod_annotation_prometheus_io_scrape")
    scraped: dict[str, int] = {}
    for template in _pod_templates():
        annotations = template["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") != keep["regex"]:
            continue
        port = int(annotations["prometheus.io/port"])
        declared = {p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert port in declared, f"{template['metadata']['labels']}: port {port} is no container port"
        assert annotations["prometheus.io/path"] == "/metrics"
        scraped[template["metadata"]["labels"][COMPONENT_LABEL]] = port
    assert {VLLM_PORT, ROUTER_METRICS_PORT, MASTER_METRICS_PORT} <= set(scraped.values()), scraped
    assert {"prefill", "decode"} <= set(scraped), scraped


def test_the_job_comes_from_the_component_label_the_pods_carry() -> None:
    job = _relabel_rule("__meta_kubernetes_pod_label_app_kubernetes_io_component")
    assert job["target_label"] == "job"
    # Kubernetes SD turns the label key into __meta_kubernetes_pod_label_<key with / . - as _>
    assert job["source_labels"] == [
        "__meta_kubernetes_pod_label_" + COMPONENT_LABEL.replace("/", "_").replace(".", "_")
    ]
