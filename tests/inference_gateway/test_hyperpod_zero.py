"""Scale to zero in the hyperpod tier with ``hyperpod.inference_gateway`` on: one synth for the whole module.

What is checked: at ``min_replicas`` 0 the Gateway names its NLB (the AWS Load Balancer Controller's name
annotation), the InferenceEndpointConfig validates against the operator's v1 CRD with ``minReplicaCount`` 0,
the Prometheus triggers and a CloudWatch wake trigger on the NLB's ``NewFlowCount`` whose ``LoadBalancer``
dimension is cut out of the gateway's load-balancer hostname at deploy time; the model's manifest waits for that
hostname and the gateway does not wait for the model; the operator's KEDA role may read CloudWatch; zero cdk-nag
findings (both packs) and cfn-lint errors. The pure pieces (trigger lists, the name's rules, the hostname split)
are checked without a synth.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import aws_cdk as cdk
import pytest

from inference_tiers.constructs.eks.hyperpod_gateway import (
    NLB_TCP_IDLE_TIMEOUT_SECONDS,
    SCALE_TO_ZERO_COOLDOWN_SECONDS,
    WAKE_TRIGGER_NAME,
    add_hyperpod_gateway,
    gateway_load_balancer_name,
    wake_trigger,
)
from inference_tiers.constructs.eks.inference_gateway import nlb_full_name
from inference_tiers.k8s.hyperpod_inference import AutoScaling, CloudWatchTrigger, PrometheusTrigger
from inference_tiers.k8s.inference_gateway import (
    LOAD_BALANCER_NAME_ANNOTATION,
    GatewaySpec,
    PoolScaling,
    render_gateway,
)
from inference_tiers.k8s.inference_gateway_settings import InferenceGatewaySettings
from tests.harness import (
    CLEAN_GATES,
    TierBuild,
    build_tier,
    gate_findings,
)
from tests.hyperpod.support import depends_on, validate_inference_endpoint_config
from tests.misuse import JUNK, JUNK_IDS, assert_refused

STACK = "InferenceTiers-HyperPod"
ZERO = {
    "hyperpod.inference_gateway": {"pools": {"model": {"min_replicas": 0, "max_replicas": 2}}},
    "hyperpod.scaling_metric": "prometheus",
    "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
    "hyperpod.min_replicas": 0,
}
AMP_URL = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-12345678"


@pytest.fixture(scope="module")
def build() -> TierBuild:
    return build_tier("hyperpod", **ZERO)


@pytest.fixture(scope="module")
def template(build: TierBuild) -> dict[str, Any]:
    return build.templates()[STACK]


def _only(template: dict[str, Any], prefix: str) -> str:
    (logical_id,) = [k for k in template["Resources"] if k.startswith(prefix)]
    return logical_id


def _parts(template: dict[str, Any], prefix: str) -> list[Any]:
    """The Fn::Join parts of the manifest of the KubernetesManifest whose logical id starts with ``prefix``."""
    manifest = template["Resources"][_only(template, prefix)]["Properties"]["Manifest"]
    separator, parts = manifest["Fn::Join"]
    assert separator == ""
    return list(parts)


def _objects(parts: list[Any]) -> list[dict[str, Any]]:
    """The manifest's objects, each deploy-time value replaced by the index of its part (``<token:N>``)."""
    text = "".join(p if isinstance(p, str) else f"<token:{i}>" for i, p in enumerate(parts))
    objects: list[dict[str, Any]] = json.loads(text)
    return objects


def _endpoint_config(template: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    parts = _parts(template, "ModelManifest")
    (document,) = [d for d in _objects(parts) if d["kind"] == "InferenceEndpointConfig"]
    return document, parts


def _gateway(template: dict[str, Any]) -> dict[str, Any]:
    (gateway,) = [m for m in _objects(_parts(template, "InferenceGatewayObjects")) if m["kind"] == "Gateway"]
    return gateway


def test_the_gateway_names_its_nlb(build: TierBuild, template: dict[str, Any]) -> None:
    (stack,) = build.stacks
    annotations = _gateway(template)["spec"]["infrastructure"]["annotations"]
    name = annotations[LOAD_BALANCER_NAME_ANNOTATION]
    assert name == gateway_load_balancer_name(stack)
    assert re.fullmatch(r"inference-gw-[0-9a-f]{12}", name) and len(name) <= 32
    # The other NLB annotations are the ones the gateway always sets.
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"


def test_the_endpoint_scales_to_zero_and_wakes_on_new_nlb_flows(template: dict[str, Any]) -> None:
    document, parts = _endpoint_config(template)
    scaling = document["spec"]["autoScalingSpec"]
    assert (scaling["minReplicaCount"], scaling["maxReplicaCount"]) == (0, 2)
    assert scaling["cooldownPeriod"] == SCALE_TO_ZERO_COOLDOWN_SECONDS > NLB_TCP_IDLE_TIMEOUT_SECONDS
    assert [t["name"] for t in scaling["prometheusTriggerList"]] == [
        "queue",
        "kv-cache",
        "concurrent-requests",
    ]
    (wake,) = scaling["cloudWatchTriggerList"]
    assert wake["name"] == WAKE_TRIGGER_NAME
    assert (wake["namespace"], wake["metricName"], wake["metricStat"]) == (
        "AWS/NetworkELB",
        "NewFlowCount",
        "Sum",
    )
    # Any new connection wakes; no data (no traffic) reads as 0; the target is far above any real flow rate.
    assert (wake["activationTargetValue"], wake["minValue"]) == (0, 0)
    assert wake["targetValue"] >= 1_000_000 and wake["metricType"] == "Average"
    assert (wake["metricCollectionPeriod"], wake["metricCollectionStartTime"]) == (60, 180)
    (dimension,) = wake["dimensions"]
    assert dimension["name"] == "LoadBalancer"
    # The value is one deploy-time part of the manifest: net/<name>/<id>, the id cut out of the NLB hostname.
    (index,) = [int(i) for i in re.findall(r"<token:(\d+)>", dimension["value"])]
    assert dimension["value"] == f"<token:{index}>"
    value = parts[index]
    name = _gateway(template)["spec"]["infrastructure"]["annotations"][LOAD_BALANCER_NAME_ANNOTATION]
    # Fn::Join / Fn::Split / Fn::Select of the gateway's LoadBalancer value (its hostname), nothing else.
    load_balancer = _only(template, "InferenceGatewayLoadBalancer")
    assert set(re.findall(r'"(Fn::\w+)"', json.dumps(value))) == {
        "Fn::Join",
        "Fn::Split",
        "Fn::Select",
        "Fn::GetAtt",
    }
    assert re.findall(r'"Fn::GetAtt": \[("[^"]+"), "Value"\]', json.dumps(value)) == [f'"{load_balancer}"']
    hostname = f"{name}-50dc6c495c0c9188.elb.us-west-2.amazonaws.com"
    assert _evaluate(value, {load_balancer: hostname}) == f"net/{name}/50dc6c495c0c9188"
    for trigger in scaling["prometheusTriggerList"]:
        trigger["serverAddress"] = AMP_URL  # a deploy-time token; the CRD's pattern wants a workspace URL
    dimension["value"] = "net/inference-gw-0123456789ab/50dc6c495c0c9188"
    validate_inference_endpoint_config(document)


def test_the_model_waits_for_the_gateways_nlb_and_not_the_reverse(template: dict[str, Any]) -> None:
    model_id = _only(template, "ModelManifest")
    objects_id = _only(template, "InferenceGatewayObjects")
    assert _only(template, "InferenceGatewayLoadBalancer") in depends_on(template, model_id)
    assert objects_id in depends_on(template, model_id)
    assert model_id not in depends_on(template, objects_id)


def test_the_operators_keda_may_read_cloudwatch(template: dict[str, Any]) -> None:
    statements = [
        s
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and k.startswith("InferenceOperatorKedaRole")
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in statements if "cloudwatch:GetMetricData" in s["Action"]]
    # GetMetricData has no resource-level permissions (Service Authorization Reference).
    assert reads and all(s["Resource"] == "*" and s["Effect"] == "Allow" for s in reads)


def test_cdk_nag_cfn_lint_and_checkov_pass_at_zero(build: TierBuild) -> None:
    assert gate_findings(build) == CLEAN_GATES


def test_a_cooldown_within_the_nlb_idle_timeout_is_refused(build: TierBuild) -> None:
    (stack,) = build.stacks
    endpoint = stack.model.endpoint  # type: ignore[attr-defined]
    assert endpoint.autoscaling is not None
    short = dataclasses.replace(endpoint.autoscaling, cooldown_seconds=NLB_TCP_IDLE_TIMEOUT_SECONDS)
    settings = InferenceGatewaySettings(pools={"model": PoolScaling(0, 2)})
    assert_refused(
        lambda: add_hyperpod_gateway(
            stack,
            stack.eks.cluster,  # type: ignore[attr-defined]
            stack.operator,  # type: ignore[attr-defined]
            dataclasses.replace(endpoint, autoscaling=short),
            settings,
        ),
        "add_hyperpod_gateway",
        "endpoint.autoscaling.cooldown_seconds",
        r"more than 350 \(the NLB's TCP idle timeout\) when min_replicas is 0",
    )


@pytest.mark.parametrize("junk", JUNK, ids=JUNK_IDS)
def test_add_hyperpod_gateway_names_a_wrong_endpoint(build: TierBuild, junk: Any) -> None:
    (stack,) = build.stacks
    settings = InferenceGatewaySettings(pools={"model": PoolScaling(0, 2)})
    assert_refused(
        lambda: add_hyperpod_gateway(stack, junk, stack.operator, junk, settings),  # type: ignore[attr-defined]
        "add_hyperpod_gateway",
        "endpoint",
        "an InferenceEndpoint",
    )


# --- without a synth -------------------------------------------------------------------------------------


def test_the_name_is_stable_and_differs_between_stacks(tmp_path: Any) -> None:
    app = cdk.App(outdir=str(tmp_path))
    one, other = cdk.Stack(app, "One"), cdk.Stack(app, "Other")
    assert gateway_load_balancer_name(one) == gateway_load_balancer_name(one)
    assert gateway_load_balancer_name(one) != gateway_load_balancer_name(other)


def test_the_full_name_is_cut_from_a_resolved_hostname(tmp_path: Any) -> None:
    """Evaluate the intrinsics the way CloudFormation does, on a real-shaped NLB hostname."""
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Split")
    name = "inference-gw-0123456789ab"
    full = stack.resolve(nlb_full_name(name, cdk.Fn.ref("Hostname")))
    hostname = f"{name}-50dc6c495c0c9188.elb.us-west-2.amazonaws.com"
    assert _evaluate(full, {"Hostname": hostname}) == f"net/{name}/50dc6c495c0c9188"


def _evaluate(value: Any, refs: dict[str, str]) -> Any:
    if isinstance(value, dict):
        ((function, argument),) = value.items()
        if function == "Ref":
            return refs[argument]
        if function == "Fn::GetAtt":
            return refs[argument[0]]
        if function == "Fn::Split":
            separator, source = argument
            return _evaluate(source, refs).split(separator)
        if function == "Fn::Select":
            index, items = argument
            return _evaluate(items, refs)[index]
        if function == "Fn::Join":
            separator, items = argument
            return separator.join(_evaluate(i, refs) for i in items)
        raise AssertionError(f"unexpected intrinsic {function}")
    return value


def test_the_name_annotation_is_rendered_only_when_named() -> None:
    plain = GatewaySpec(name="inference-gateway", namespace="default", allowed_cidrs=["10.0.0.0/16"])
    named = dataclasses.replace(plain, load_balancer_name="inference-gw-0123456789ab")
    unnamed_annotations = render_gateway(plain)["spec"]["infrastructure"]["annotations"]
    named_annotations = render_gateway(named)["spec"]["infrastructure"]["annotations"]
    assert LOAD_BALANCER_NAME_ANNOTATION not in unnamed_annotations
    assert named_annotations == {
        **unnamed_annotations,
        LOAD_BALANCER_NAME_ANNOTATION: "inference-gw-0123456789ab",
    }


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("n" * 33, "1-32 letters, digits and '-'"),
        ("-leading", "1-32 letters, digits and '-'"),
        ("trailing-", "1-32 letters, digits and '-'"),
        ("under_score", "1-32 letters, digits and '-'"),
        ("internal-gateway", "not starting with 'internal-'"),
        ("${Token[TOKEN.1]}", "known at synth time"),
    ],
)
def test_a_bad_load_balancer_name_is_refused(name: str, accepted: str) -> None:
    assert_refused(
        lambda: GatewaySpec(
            name="inference-gateway",
            namespace="default",
            allowed_cidrs=["10.0.0.0/16"],
            load_balancer_name=name,
        ),
        "GatewaySpec",
        "load_balancer_name",
        re.escape(accepted),
    )


def test_mixed_triggers_render_in_their_own_lists() -> None:
    queue = PrometheusTrigger(AMP_URL, "sum(vllm:num_requests_waiting)", 3, name="queue")
    wake = wake_trigger("net/inference-gw-0123456789ab/50dc6c495c0c9188")
    rendered = AutoScaling(0, 2, (queue, wake)).render()
    assert rendered["prometheusTriggerList"] == [queue.render()["prometheusTrigger"]]
    assert rendered["cloudWatchTriggerList"] == [wake.render()["cloudWatchTrigger"]]
    assert "prometheusTrigger" not in rendered and "cloudWatchTrigger" not in rendered
    # A list of one kind renders only that list.
    assert set(AutoScaling(1, 2, (queue,)).render()) & {"prometheusTriggerList", "cloudWatchTriggerList"} == {
        "prometheusTriggerList"
    }


def test_the_optional_cloudwatch_keys_are_rendered_only_when_set() -> None:
    plain = CloudWatchTrigger.sagemaker_invocations("llama", 60).render()["cloudWatchTrigger"]
    assert "activationTargetValue" not in plain and "metricCollectionStartTime" not in plain


@pytest.mark.parametrize(
    ("build_it", "owner", "param", "accepted"),
    [
        (
            lambda: AutoScaling(1, 2, (wake_trigger("net/a/b"),)),
            "AutoScaling",
            "trigger[0].activation_target_value",
            "None when min_replicas is 1: activation only wakes an endpoint from 0",
        ),
        (
            lambda: AutoScaling(0, 2, (wake_trigger("net/a/b"), "queue")),
            "AutoScaling",
            "trigger[1]",
            "a CloudWatchTrigger or a PrometheusTrigger",
        ),
        (
            lambda: AutoScaling(0, 2, (wake_trigger("net/a/b"), wake_trigger("net/c/d"))),
            "AutoScaling",
            "trigger[1].name",
            "a name unique among the triggers",
        ),
        (
            lambda: dataclasses.replace(wake_trigger("net/a/b"), collection_seconds=30),
            "CloudWatchTrigger",
            "collection_seconds",
            "at least period_seconds (60)",
        ),
        (
            lambda: dataclasses.replace(wake_trigger("net/a/b"), activation_target_value=-1),
            "CloudWatchTrigger",
            "activation_target_value",
            "at least 0",
        ),
    ],
)
def test_bad_trigger_lists_are_refused(build_it: Any, owner: str, param: str, accepted: str) -> None:
    assert_refused(build_it, owner, param, re.escape(accepted))
