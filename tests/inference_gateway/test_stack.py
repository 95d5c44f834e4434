"""The disaggregated tier with ``disaggregated.inference_gateway`` on: one synth for the whole module.

What is checked: the opt-in adds the pinned charts in order, one manifest whose every object validates against
the vendored CRDs, ScaledObjects that scale prefill and decode apart on the series DisaggregatedMonitoring
exports, a least-privilege KEDA role, and zero cdk-nag findings and cfn-lint errors with the gateway on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.k8s.inference_gateway import ISTIO_VERSION, KEDA_VERSION
from tests.harness import (
    CLEAN_GATES,
    TierBuild,
    build_tier,
    gate_findings,
)
from tests.inference_gateway.support import exported_metrics, validate

STACK = "InferenceTiers-Disaggregated"
GATEWAY_SETTING = {
    "pools": {
        "prefill": {"min_replicas": 1, "max_replicas": 1},
        "decode": {"min_replicas": 1, "max_replicas": 1, "waiting_per_replica": 2},
    },
    "request_timeout_seconds": 900,
}


@pytest.fixture(scope="module")
def build() -> TierBuild:
    return build_tier("disaggregated", **{"disaggregated.inference_gateway": GATEWAY_SETTING})


@pytest.fixture(scope="module")
def template(build: TierBuild) -> dict[str, Any]:
    return build.templates()[STACK]


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _manifest_objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The gateway's objects: the KubernetesManifest whose logical id starts with InferenceGateway."""
    (resource,) = [
        r
        for k, r in _of_type(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("InferenceGatewayObjects")
    ]
    manifest = resource["Properties"]["Manifest"]
    return _resolve(manifest)


def _resolve(value: Any) -> Any:
    """A manifest with its Fn::Join tokens flattened to text (the deploy-time values become '<token>')."""
    if isinstance(value, str):
        return json.loads(value)
    parts = value["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<token>" for p in parts)
    return json.loads(text)


def test_the_default_tier_has_no_gateway(tier_build: Any) -> None:
    resources = tier_build("disaggregated").template(STACK).to_json()["Resources"]
    assert not [k for k in resources if k.startswith("InferenceGateway")]


def test_charts_are_pinned_and_installed_in_order(template: dict[str, Any]) -> None:
    charts = {
        r["Properties"].get("Chart"): (k, r)
        for k, r in _of_type(template, "Custom::AWSCDK-EKS-HelmChart").items()
    }
    assert charts["base"][1]["Properties"]["Version"] == ISTIO_VERSION
    istiod = charts["istiod"][1]["Properties"]
    assert istiod["Version"] == ISTIO_VERSION
    assert json.loads(
        istiod["Values"]["Fn::Join"][1][0] if isinstance(istiod["Values"], dict) else istiod["Values"]
    )["env"] == {"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"}
    assert charts["keda"][1]["Properties"]["Version"] == KEDA_VERSION
    crds = [
        r
        for k, r in _of_type(template, "Custom::AWSCDK-EKS-HelmChart").items()
        if k.startswith("InferenceGatewayCrds")
    ]
    assert len(crds) == 1 and "ChartAssetURL" in crds[0]["Properties"]
    # CRDs before Istio before istiod before the objects that use both.
    base_id, istiod_id = charts["base"][0], charts["istiod"][0]
    assert any(d.startswith("InferenceGatewayCrds") for d in template["Resources"][base_id]["DependsOn"])
    assert base_id in template["Resources"][istiod_id]["DependsOn"]


def test_every_gateway_object_validates_and_routes_to_the_router(template: dict[str, Any]) -> None:
    objects = _manifest_objects(template)
    for manifest in objects:
        validate(manifest)
    kinds = sorted(m["kind"] for m in objects)
    assert kinds == ["Gateway", "HTTPRoute", "ScaledObject", "ScaledObject", "TriggerAuthentication"]
    route = next(m for m in objects if m["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"kind": "Service", "name": "vllm-pd-router", "port": 80}
    ]
    assert route["spec"]["rules"][0]["timeouts"] == {"request": "900s"}


def test_prefill_and_decode_scale_apart_on_their_exported_series(template: dict[str, Any]) -> None:
    scaled = {
        m["spec"]["scaleTargetRef"]["name"]: m["spec"]
        for m in _manifest_objects(template)
        if m["kind"] == "ScaledObject"
    }
    assert set(scaled) == {"vllm-pd-prefill", "vllm-pd-decode"}
    for role, spec in (("prefill", scaled["vllm-pd-prefill"]), ("decode", scaled["vllm-pd-decode"])):
        for trigger in spec["triggers"]:
            metadata = trigger["metadata"]
            assert metadata["namespace"] == "InferenceTiers/Disaggregated"
            assert metadata["metricName"] in exported_metrics()
            assert metadata["dimensionValue"].endswith(f";inference;{role}")
    decode_queue = next(t for t in scaled["vllm-pd-decode"]["triggers"] if t["name"] == "queue")
    assert decode_queue["metadata"]["targetMetricValue"] == "2"


def test_keda_starts_after_the_pod_identity_agent_and_the_metrics_pipeline(template: dict[str, Any]) -> None:
    (keda_id,) = [
        k
        for k, r in _of_type(template, "Custom::AWSCDK-EKS-HelmChart").items()
        if r["Properties"].get("Chart") == "keda"
    ]
    depends = template["Resources"][keda_id]["DependsOn"]
    addons = {k: r["Properties"]["AddonName"] for k, r in _of_type(template, "AWS::EKS::Addon").items()}
    waited = {addons[d] for d in depends if d in addons}
    assert {"eks-pod-identity-agent", "amazon-cloudwatch-observability"} <= waited


def test_keda_role_reads_metrics_only_and_trusts_this_cluster(template: dict[str, Any]) -> None:
    roles = {
        k: r
        for k, r in _of_type(template, "AWS::IAM::Role").items()
        if k.startswith("InferenceGatewayKedaRole")
    }
    (role,) = roles.values()
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    # The project's Pod Identity trust (constructs/common/trust.py): this account, and this cluster's exact ARN
    # (ArnLike without a wildcard matches that ARN only).
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert set(statement["Condition"]["StringEquals"]) == {"aws:SourceAccount"}
    source_arn = statement["Condition"]["ArnLike"]["aws:SourceArn"]
    assert "*" not in json.dumps(source_arn)
    assert source_arn["Fn::GetAtt"][1] == "Arn" and source_arn["Fn::GetAtt"][0].startswith("EksCluster")
    policies = [
        r
        for k, r in _of_type(template, "AWS::IAM::Policy").items()
        if k.startswith("InferenceGatewayKedaRole")
    ]
    actions = {s["Action"] for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]}
    assert actions == {"cloudwatch:GetMetricData"}
    (association,) = _of_type(template, "AWS::EKS::PodIdentityAssociation").values()
    assert (association["Properties"]["Namespace"], association["Properties"]["ServiceAccount"]) == (
        "keda",
        "keda-operator",
    )


def test_cdk_nag_cfn_lint_and_checkov_pass_with_the_gateway_on(build: TierBuild) -> None:
    assert gate_findings(build) == CLEAN_GATES


def test_a_pool_larger_than_the_node_group_is_refused() -> None:
    too_big = {
        **GATEWAY_SETTING,
        "pools": {**GATEWAY_SETTING["pools"], "decode": {"min_replicas": 1, "max_replicas": 2}},
    }
    with pytest.raises(
        ConfigError, match=r"disaggregated.inference_gateway.pools.decode.max_replicas.*at most 1"
    ):
        build_tier("disaggregated", **{"disaggregated.inference_gateway": too_big})
