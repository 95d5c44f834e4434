"""InferenceGateway on its own, in an app of its own: the aggregated path (an InferencePool and its EPP as the
route's backend, KEDA on AMP including scale to zero), the cluster's existing KEDA reused, and misuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.eks.inference_gateway import InferenceGateway, ServiceBackend
from inference_tiers.k8s.inference_gateway import LoraAdapter, ModelPool, PoolScaling
from inference_tiers.k8s.inference_gateway_scaling import PrometheusMetrics, ScaledTarget
from inference_tiers.validation import ArgumentError
from tests.disaggregated.helpers import make_cluster
from tests.inference_gateway.support import validate

AMP_WORKSPACE = "ws-0123abcd-4567-89ef-0123-456789abcdef"
AMP = PrometheusMetrics(
    url=f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{AMP_WORKSPACE}", region="us-west-2"
)
POOL = ModelPool(
    name="qwen",
    namespace="models",
    selector={"app": "qwen"},
    model_name="qwen3-8b",
    adapters=(LoraAdapter("sql-lora", "s3://adapters-bucket/sql"),),
)
TARGET = ScaledTarget("qwen", {"namespace": "models", "app": "qwen"}, PoolScaling(0, 3))


def _app(tmp_path: Path) -> cdk.App:
    return cdk.App(outdir=str(tmp_path / "cdk.out"), context={"aws:cdk:bundling-stacks": []})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.App, dict[str, Any]]:
    app = _app(tmp_path_factory.mktemp("gateway"))
    stack = cdk.Stack(app, "GatewayOnly", env=cdk.Environment(account="123456789012", region="us-west-2"))
    InferenceGateway(
        stack,
        "Gateway",
        cluster=make_cluster(stack),
        namespace="models",
        backend=POOL,
        scaled_targets=[TARGET],
        metrics=AMP,
    )
    return app, Template.from_stack(stack).to_json()


def _objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    (resource,) = [
        r
        for k, r in template["Resources"].items()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and k.startswith("GatewayObjects")
    ]
    manifest = resource["Properties"]["Manifest"]
    if isinstance(manifest, dict):
        manifest = "".join(p if isinstance(p, str) else "10.0.0.0/16" for p in manifest["Fn::Join"][1])
    objects: list[dict[str, Any]] = json.loads(manifest)
    return objects


def test_the_pool_is_the_backend_and_every_object_validates(built: tuple[cdk.App, dict[str, Any]]) -> None:
    objects = _objects(built[1])
    for manifest in objects:
        validate(manifest)
    kinds = {m["kind"] for m in objects}
    assert {"InferencePool", "Deployment", "ConfigMap", "Gateway", "HTTPRoute", "ScaledObject"} <= kinds
    route = next(m for m in objects if m["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"][0]["kind"] == "InferencePool"
    config = next(m for m in objects if m["kind"] == "ConfigMap")
    assert "lora-affinity-scorer" in next(iter(config["data"].values()))
    scaled = next(m for m in objects if m["kind"] == "ScaledObject")
    assert scaled["spec"]["minReplicaCount"] == 0
    assert {t["name"] for t in scaled["spec"]["triggers"]} == {"queue", "kv-cache", "demand"}


def test_keda_may_query_only_the_workspace(built: tuple[cdk.App, dict[str, Any]]) -> None:
    statements = [
        s
        for r in built[1]["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "aps:QueryMetrics"
    ]
    (statement,) = statements
    assert AMP_WORKSPACE in json.dumps(statement["Resource"])


def test_no_unacknowledged_nag_findings_of_the_gateway(built: tuple[cdk.App, dict[str, Any]]) -> None:
    report = AwsSolutionsChecks().validate_scope(built[0])
    ours = [
        f"{v.rule_name}: {path}"
        for v in report.violations
        for path in (r.construct_path for r in v.violating_resources)
        if "/Gateway/" in path
    ]
    assert ours == []


def test_an_existing_keda_is_reused(tmp_path: Path) -> None:
    stack = cdk.Stack(_app(tmp_path), "Reuse")
    gateway = InferenceGateway(
        stack,
        "Gateway",
        cluster=make_cluster(stack),
        namespace="models",
        backend=POOL,
        scaled_targets=[TARGET],
        metrics=AMP,
        install_keda=False,
    )
    assert gateway.keda is None and gateway.keda_role is None
    charts = [
        r["Properties"].get("Chart")
        for r in Template.from_stack(stack).find_resources("Custom::AWSCDK-EKS-HelmChart").values()
    ]
    assert "keda" not in charts and {"base", "istiod"} <= set(charts)


def test_an_in_cluster_gateway_has_no_load_balancer(tmp_path: Path) -> None:
    stack = cdk.Stack(_app(tmp_path), "InCluster")
    gateway = InferenceGateway(
        stack,
        "Gateway",
        cluster=make_cluster(stack),
        namespace="models",
        backend=POOL,
        internal_load_balancer=False,
    )
    assert gateway.load_balancer is None
    assert gateway.endpoint == "http://inference-gateway-istio.models.svc.cluster.local:80"
    assert not Template.from_stack(stack).find_resources("Custom::AWSCDK-EKS-KubernetesObjectValue")


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"backend": "vllm-router"}, "backend"),
        ({"scaled_targets": [TARGET], "metrics": None}, "metrics"),
        ({"pools": [POOL], "namespace": "other", "backend": ServiceBackend("r", 80)}, "pools[0].namespace"),
        ({"install_keda": "yes"}, "install_keda"),
        ({"internal_load_balancer": False, "allowed_cidrs": ["10.0.0.0/16"]}, "allowed_cidrs"),
        ({"internal_load_balancer": False, "load_balancer_name": "gw"}, "load_balancer_name"),
    ],
)
def test_misuse_names_the_parameter(tmp_path: Path, overrides: dict[str, Any], param: str) -> None:
    stack = cdk.Stack(_app(tmp_path), "Misuse")
    values: dict[str, Any] = {"namespace": "models", "backend": POOL, **overrides}
    with pytest.raises(ArgumentError) as raised:
        InferenceGateway(stack, "Gateway", cluster=make_cluster(stack), **values)
    assert raised.value.param == param
