"""PlatformObservability on an EksCluster in an app of its own: the AMP scraper of the platform cluster scrapes
LiteLLM's unauthenticated metrics sidecar (never the 401 http port), its configuration passes promtool, the
construct is nag-clean and refuses misuse by name."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.platform.observability import PlatformObservability
from inference_tiers.k8s.platform_names import GATEWAY_NAMESPACE, GatewayEndpoint
from inference_tiers.nag import InferenceChecks
from inference_tiers.observability import collectors
from inference_tiers.observability.platform_scrape import GATEWAY_JOB, controller_jobs, gateway_metrics_job
from tests.harness import cfn_lint_errors, nag_findings
from tests.misuse import assert_refused
from tests.observability.relabel import kept
from tests.observability.test_alertmanager_and_collectors import _static
from tests.observability.tools import run

# The componentized chart's monolith: Service "<release>" on 4000 (http, answers /metrics with 401) and
# "<release>-metrics" on gateway.metricsServer.port (the sidecar; BerriAI/litellm helm/litellm/templates/
# _workload.tpl @74795c8, litellm.workload.service and litellm.workload.serviceMetrics).
GATEWAY = GatewayEndpoint(
    namespace=GATEWAY_NAMESPACE,
    service="litellm",
    port=4000,
    pod_labels=MappingProxyType({"app.kubernetes.io/name": "litellm"}),
    metrics_service="litellm-metrics",
    metrics_port=4001,
    master_key_secret="litellm-masterkey",
    master_key_field="masterkey",
)


def _endpoint(service: str, port: int, namespace: str = GATEWAY_NAMESPACE) -> dict[str, str]:
    """The labels Prometheus's endpoints discovery gives one endpoint (pod IP:port) of ``service``."""
    return {
        "__address__": f"10.0.1.7:{port}",
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_service_name": service,
        "__meta_kubernetes_endpoint_port_number": str(port),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, PlatformObservability]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("obs")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(account="111122223333", region="us-east-1"))
    eks = EksCluster(stack, "Eks")
    return stack, PlatformObservability(stack, "Observability", cluster=eks.cluster, gateway=GATEWAY)


@pytest.fixture(scope="module")
def template(built: tuple[cdk.Stack, PlatformObservability]) -> dict[str, Any]:
    return cdk.assertions.Template.from_stack(built[0]).to_json()


def _scrape_config(template: dict[str, Any]) -> dict[str, Any]:
    """The scraper's configuration as deployed, with the cluster's name (a token) read as ``CLUSTER``."""
    (scraper,) = (r for r in template["Resources"].values() if r["Type"] == "AWS::APS::Scraper")
    blob = scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"]["Fn::Base64"]
    parts = blob["Fn::Join"][1] if isinstance(blob, dict) else [blob]
    return dict(yaml.safe_load("".join(p if isinstance(p, str) else "CLUSTER" for p in parts)))


def test_scraper_keeps_only_the_gateway_metrics_sidecar(template: dict[str, Any]) -> None:
    """Trap 5: the http port answers an unauthenticated scrape with 401; only the metrics Service's endpoint on
    its port is a target, at the sidecar's path."""
    jobs = {job["job_name"]: job for job in _scrape_config(template)["scrape_configs"]}
    job = jobs[GATEWAY_JOB]
    assert job["kubernetes_sd_configs"] == [
        {"role": "endpoints", "namespaces": {"names": [GATEWAY_NAMESPACE]}}
    ]
    assert job["metrics_path"] == "/metrics/"
    relabel = job["relabel_configs"]
    assert kept(relabel, _endpoint("litellm-metrics", 4001))
    assert not kept(relabel, _endpoint("litellm", 4000))  # the http Service
    assert not kept(relabel, _endpoint("litellm-metrics", 4000))
    assert not kept(relabel, _endpoint("other-metrics", 4001))
    # the shared jobs stay: vLLM (annotated pods), node exporters, kube-state-metrics
    assert {"pods", "node-exporter", collectors.KUBE_STATE_METRICS} <= set(jobs)


def test_scraper_reads_the_platform_cluster_into_the_hub_workspace(
    built: tuple[cdk.Stack, PlatformObservability], template: dict[str, Any]
) -> None:
    stack, observability = built
    props = template["Resources"][stack.get_logical_id(observability.scraper)]["Properties"]
    assert len(props["Source"]["EksConfiguration"]["SubnetIds"]) == 2
    assert "Fn::GetAtt" in props["Source"]["EksConfiguration"]["ClusterArn"]
    workspace = stack.get_logical_id(observability.hub.workspace)
    assert props["Destination"]["AmpConfiguration"]["WorkspaceArn"] == {"Fn::GetAtt": [workspace, "Arn"]}
    assert _scrape_config(template)["global"]["external_labels"] == {"cluster": "CLUSTER"}


def test_promtool_accepts_the_platform_scrape_config(tmp_path: Path) -> None:
    config = collectors.eks_scrape_config(
        "platform", extra_jobs=[gateway_metrics_job(GATEWAY), *controller_jobs()]
    )
    path = tmp_path / "scrape.yaml"
    path.write_text(collectors.to_yaml(_static(config)))
    result = run("promtool", "check", "config", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_unacknowledged_nag_findings_and_no_cfn_lint_errors(
    built: tuple[cdk.Stack, PlatformObservability], template: dict[str, Any]
) -> None:
    observability = built[1]
    assert nag_findings(observability, AwsSolutionsChecks()) == []
    assert nag_findings(observability, InferenceChecks()) == []
    assert cfn_lint_errors(json.loads(json.dumps(template))) == []


@pytest.mark.parametrize(
    ("param", "value", "match"),
    [
        ("gateway", "litellm:4001", "GatewayEndpoint"),
        ("cluster", "arn:aws:eks:us-east-1:111122223333:cluster/x", "ICluster"),
    ],
)
def test_refuses_misuse_naming_the_parameter(tmp_path: Path, param: str, value: Any, match: str) -> None:
    app = cdk.App(outdir=str(tmp_path), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "S")
    eks = EksCluster(stack, "Eks")
    arguments: dict[str, Any] = {"cluster": eks.cluster, "gateway": GATEWAY, param: value}
    assert_refused(
        lambda: PlatformObservability(stack, "Observability", **arguments),
        "PlatformObservability",
        param,
        match,
    )


def _pod(app: str, port_name: str, port: int) -> dict[str, str]:
    """The labels Prometheus's pod discovery gives one declared container port of a pod."""
    return {
        "__address__": f"10.0.2.9:{port}",
        "__meta_kubernetes_namespace": "kube-system",
        "__meta_kubernetes_pod_name": f"{app}-0",
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": app,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_container_port_number": str(port),
    }


@pytest.mark.parametrize(
    ("job", "app", "metrics", "others"),
    [
        # Karpenter v1.14.1's chart: http-metrics 8080, http 8081 (health probes), webhook ports off in v1.
        ("karpenter", "karpenter", ("http-metrics", 8080), [("http", 8081)]),
        # agent-sandbox v0.5.6's chart: metrics 8080, healthz 8081, webhook 9443.
        (
            "agent-sandbox-controller",
            "agent-sandbox",
            ("metrics", 8080),
            [("healthz", 8081), ("webhook", 9443)],
        ),
    ],
)
def test_controllers_are_scraped_on_their_metrics_port_only(
    template: dict[str, Any], job: str, app: str, metrics: tuple[str, int], others: list[tuple[str, int]]
) -> None:
    jobs = {j["job_name"]: j for j in _scrape_config(template)["scrape_configs"]}
    relabel = jobs[job]["relabel_configs"]
    assert kept(relabel, _pod(app, *metrics))
    for other in others:
        assert not kept(relabel, _pod(app, *other))
    assert not kept(relabel, _pod("some-other-app", *metrics))
