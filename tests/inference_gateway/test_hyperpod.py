"""The hyperpod tier with ``hyperpod.inference_gateway`` on: one synth for the whole module.

What is checked: the InferencePool selects the operator's model pods (label ``app=<endpoint name>``, the vLLM
container's own port) in the endpoint's namespace, every gateway object and the InferenceEndpointConfig
validate against the vendored CRDs, the queue-driven scaling is the operator's ``autoScalingSpec`` (Prometheus
triggers from the shared query builder, parsed, naming only pinned vLLM metrics) with no KEDA of the gateway's
own, and zero cdk-nag findings and cfn-lint errors with the gateway on. The settings' cross-key rules are
checked without a synth. Scale to zero has its own synth (test_hyperpod_zero.py).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from inference_tiers.config import ConfigError
from inference_tiers.constructs.eks.hyperpod_gateway import (
    add_hyperpod_gateway,
    hyperpod_model_pool,
    queue_triggers,
)
from inference_tiers.constructs.hyperpod.inference_operator import INFERENCE_ADDON
from inference_tiers.k8s.hyperpod_inference import (
    InferenceEndpoint,
    LoraServing,
    S3ModelSource,
    VllmWorker,
)
from inference_tiers.k8s.inference_gateway import (
    EPP_IMAGE,
    KV_CACHE_METRIC,
    LOAD_BALANCER_NAME_ANNOTATION,
    QUEUE_METRIC,
    LoraAdapter,
    PoolScaling,
)
from inference_tiers.k8s.inference_gateway_settings import InferenceGatewaySettings
from inference_tiers.stacks.hyperpod import HyperPodSettings
from tests.harness import (
    CLEAN_GATES,
    TierBuild,
    build_tier,
    cdk_json_context,
    gate_findings,
    tier_settings,
)
from tests.hyperpod.support import (
    depends_on,
    manifest_documents,
    resolve_join,
    validate_inference_endpoint_config,
)
from tests.inference_gateway.support import exported_metrics, metric_names, validate
from tests.misuse import JUNK, JUNK_IDS, assert_refused

STACK = "InferenceTiers-HyperPod"
MODEL = cdk_json_context()["hyperpod.model_name"]
ADAPTER_URI = "s3://adapters-bucket/adapters/sql-lora"
GATEWAY_SETTING = {
    "pools": {"model": {"min_replicas": 1, "max_replicas": 2, "waiting_per_replica": 3}},
    "lora_adapters": {"sql-lora": ADAPTER_URI},
    "max_lora_rank": 32,
    "request_timeout_seconds": 900,
}
GATEWAY_ON = {
    "hyperpod.inference_gateway": GATEWAY_SETTING,
    "hyperpod.scaling_metric": "prometheus",
    # LoRA renders spec.kubernetes.serviceAccountName: the first build whose CRD has it.
    "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
}
AMP_URL = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-12345678"


@pytest.fixture(scope="module")
def build() -> TierBuild:
    return build_tier("hyperpod", **GATEWAY_ON)


@pytest.fixture(scope="module")
def template(build: TierBuild) -> dict[str, Any]:
    return build.templates()[STACK]


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _gateway_objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    (resource,) = [
        r
        for k, r in _of_type(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("InferenceGatewayObjects")
    ]
    objects: list[dict[str, Any]] = json.loads(resolve_join(resource["Properties"]["Manifest"], "<token>"))
    return objects


def _endpoint_config(template: dict[str, Any]) -> dict[str, Any]:
    (document,) = [d for d in manifest_documents(template) if d["kind"] == "InferenceEndpointConfig"]
    return document


def _parse(**overrides: Any) -> HyperPodSettings:
    settings = tier_settings("hyperpod", **{**GATEWAY_ON, **overrides})
    assert isinstance(settings, HyperPodSettings)
    return settings


def test_the_default_tier_has_no_gateway(tier_build: Any) -> None:
    template = tier_build("hyperpod").template(STACK).to_json()
    assert not [k for k in template["Resources"] if k.startswith("InferenceGateway")]
    assert "InferenceGatewayEndpoint" not in template["Outputs"]
    assert "prometheusTriggerList" not in json.dumps(_endpoint_config(template))


def test_the_pool_selects_the_operators_model_pods_on_the_vllm_port(template: dict[str, Any]) -> None:
    objects = _gateway_objects(template)
    endpoint = _endpoint_config(template)
    (pool,) = [m for m in objects if m["kind"] == "InferencePool"]
    # The operator labels each model pod app=<metadata.name> (the HyperPod CLI's list_pods reads that label).
    assert pool["spec"]["selector"] == {"matchLabels": {"app": endpoint["metadata"]["name"]}}
    assert pool["metadata"]["namespace"] == endpoint["metadata"]["namespace"] == "default"
    # Straight to vLLM (where it also serves /metrics for the EPP's scorers), past the operator's sidecar.
    worker_port = endpoint["spec"]["worker"]["modelInvocationPort"]["containerPort"]
    assert pool["spec"]["targetPorts"] == [{"number": worker_port}]
    assert endpoint["spec"]["metrics"]["modelMetrics"] == {"path": "/metrics", "port": worker_port}
    route = next(m for m in objects if m["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": MODEL}
    ]
    assert route["spec"]["rules"][0]["timeouts"] == {"request": "900s"}
    (epp,) = [m for m in objects if m["kind"] == "Deployment"]
    assert epp["spec"]["template"]["spec"]["containers"][0]["image"] == EPP_IMAGE


def test_every_pod_serves_the_adapters_and_the_epp_prefers_the_pods_holding_one(
    template: dict[str, Any],
) -> None:
    spec = _endpoint_config(template)["spec"]
    args = spec["worker"]["args"]
    assert args[args.index("--max-lora-rank") + 1] == "32"
    modules = args[args.index("--lora-modules") + 1 :]
    assert [m.split("=")[0] for m in modules] == ["sql-lora"] and "--enable-lora" in args
    assert spec["kubernetes"]["serviceAccountName"] == f"{MODEL}-lora"
    (config_map,) = [m for m in _gateway_objects(template) if m["kind"] == "ConfigMap"]
    (epp_config,) = [yaml.safe_load(v) for v in config_map["data"].values()]
    weights = {p["pluginRef"]: p["weight"] for p in epp_config["schedulingProfiles"][0]["plugins"]}
    assert weights["lora-affinity-scorer"] == 1
    # The pods' role reads the adapter's folder only.
    reads = [
        s
        for k, p in _of_type(template, "AWS::IAM::Policy").items()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "s3:GetObject" in s["Action"] and "adapters-bucket" in json.dumps(s["Resource"])
    ]
    assert reads and all("adapters/sql-lora/*" in json.dumps(s["Resource"]) for s in reads)


def test_adapters_other_than_the_endpoints_are_refused(build: TierBuild) -> None:
    (stack,) = build.stacks
    settings = InferenceGatewaySettings(pools={"model": PoolScaling(1, 2)})
    assert_refused(
        lambda: add_hyperpod_gateway(
            stack,
            stack.eks.cluster,  # type: ignore[attr-defined]
            stack.operator,  # type: ignore[attr-defined]
            stack.model.endpoint,  # type: ignore[attr-defined]
            settings,
        ),
        "add_hyperpod_gateway",
        "settings.lora_adapters",
        r"the adapters the endpoint's pods serve \(endpoint.lora: \['sql-lora'\]\)",
    )


def test_every_gateway_object_validates_and_none_is_a_keda_object(template: dict[str, Any]) -> None:
    objects = _gateway_objects(template)
    for manifest in objects:
        validate(manifest)
    kinds = {m["kind"] for m in objects}
    assert {"InferencePool", "Deployment", "DestinationRule", "Gateway", "HTTPRoute"} <= kinds
    assert not kinds & {"ScaledObject", "TriggerAuthentication"}


def test_the_gateway_installs_no_keda_of_its_own(template: dict[str, Any]) -> None:
    charts = [
        r["Properties"].get("Chart") for r in _of_type(template, "Custom::AWSCDK-EKS-HelmChart").values()
    ]
    assert "keda" not in charts and {"base", "istiod"} <= set(charts)
    assert not [k for k in template["Resources"] if k.startswith("InferenceGatewayKeda")]


def test_the_operator_scales_on_the_queue_and_kv_cache_from_amp(template: dict[str, Any]) -> None:
    document = _endpoint_config(template)
    scaling = document["spec"]["autoScalingSpec"]
    assert (scaling["minReplicaCount"], scaling["maxReplicaCount"]) == (1, 2)
    assert "prometheusTrigger" not in scaling and "cloudWatchTrigger" not in scaling
    triggers = {t["name"]: t for t in scaling["prometheusTriggerList"]}
    assert list(triggers) == ["queue", "kv-cache", "concurrent-requests"]
    assert triggers["queue"]["query"] == f'sum({QUEUE_METRIC}{{model_name="{MODEL}"}})'
    assert (triggers["queue"]["metricType"], triggers["queue"]["targetValue"]) == ("Average", 3)
    assert triggers["kv-cache"]["query"] == f'avg({KV_CACHE_METRIC}{{model_name="{MODEL}"}})'
    assert (triggers["kv-cache"]["metricType"], triggers["kv-cache"]["targetValue"]) == ("Value", 0.8)
    for name in ("queue", "kv-cache"):
        assert metric_names(triggers[name]["query"]) <= exported_metrics()
    # The sidecar's in-flight count still scales the traffic that comes through the operator's load balancer.
    assert triggers["concurrent-requests"]["query"].startswith("sum(model_concurrent_requests")
    assert len({t["serverAddress"] for t in triggers.values()}) == 1
    for trigger in triggers.values():
        trigger["serverAddress"] = AMP_URL  # a deploy-time token; the CRD's pattern wants a workspace URL
    validate_inference_endpoint_config(document)


def test_the_operators_keda_may_query_the_workspace(template: dict[str, Any]) -> None:
    statements = [
        s
        for k, p in _of_type(template, "AWS::IAM::Policy").items()
        if k.startswith("InferenceOperatorKedaRole")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    queries = [s for s in statements if "aps:QueryMetrics" in s["Action"]]
    (workspace,) = _of_type(template, "AWS::APS::Workspace")
    assert queries and all(s["Resource"] == {"Fn::GetAtt": [workspace, "Arn"]} for s in queries)


def test_the_gateway_waits_for_the_operator_and_not_for_the_model(template: dict[str, Any]) -> None:
    (objects_id,) = [k for k in template["Resources"] if k.startswith("InferenceGatewayObjects")]
    (model_id,) = [k for k in template["Resources"] if k.startswith("ModelManifest")]
    (addon_id,) = [
        k
        for k, r in _of_type(template, "AWS::EKS::Addon").items()
        if r["Properties"]["AddonName"] == INFERENCE_ADDON
    ]
    assert addon_id in depends_on(template, model_id)
    assert addon_id in depends_on(template, objects_id)
    # At one replica or more neither waits for the other (at zero the model reads the gateway's NLB).
    assert model_id not in depends_on(template, objects_id)
    assert not [k for k in depends_on(template, model_id) if k.startswith("InferenceGateway")]
    assert template["Outputs"]["InferenceGatewayEndpoint"]["Value"]


def test_at_one_replica_the_nlb_is_unnamed_and_nothing_reads_cloudwatch(template: dict[str, Any]) -> None:
    (gateway,) = [m for m in _gateway_objects(template) if m["kind"] == "Gateway"]
    assert LOAD_BALANCER_NAME_ANNOTATION not in gateway["spec"]["infrastructure"]["annotations"]
    scaling = _endpoint_config(template)["spec"]["autoScalingSpec"]
    assert "cloudWatchTriggerList" not in scaling and scaling["cooldownPeriod"] == 300


def test_account_requirements_name_the_endpoint_picker_image(build: TierBuild) -> None:
    (stack,) = build.stacks
    settings = stack.settings  # type: ignore[attr-defined]
    assert EPP_IMAGE in [image.reference for image in settings.account_requirements().images]


def test_cdk_nag_cfn_lint_and_checkov_pass_with_the_gateway_on(build: TierBuild) -> None:
    assert gate_findings(build) == CLEAN_GATES


def test_the_setting_parses_with_its_pool() -> None:
    settings = _parse()
    assert settings.inference_gateway is not None
    assert settings.inference_gateway.pools == {"model": PoolScaling(1, 2, waiting_per_replica=3)}
    assert settings.inference_gateway.lora_adapters == (LoraAdapter("sql-lora", ADAPTER_URI),)
    assert _parse(**{"hyperpod.inference_gateway": ""}).inference_gateway is None


@pytest.mark.parametrize(
    ("overrides", "key", "accepted"),
    [
        (
            {"hyperpod.observability": False},
            "hyperpod.observability",
            "true when hyperpod.inference_gateway is set",
        ),
        ({"hyperpod.scaling_metric": "cloudwatch"}, "hyperpod.scaling_metric", "prometheus when"),
        (
            {"hyperpod.model_name": "m" * 41},
            "hyperpod.model_name",
            "at most 40 characters starting with a letter",
        ),
        (
            {"hyperpod.model_name": "8b-model"},
            "hyperpod.model_name",
            "at most 40 characters starting with a letter",
        ),
        (
            {"hyperpod.min_replicas": 0},
            "hyperpod.inference_gateway.pools.model.min_replicas",
            "0, equal to hyperpod.min_replicas",
        ),
        (
            {"hyperpod.max_replicas": 4},
            "hyperpod.inference_gateway.pools.model.max_replicas",
            "4, equal to hyperpod.max_replicas",
        ),
        (
            {"hyperpod.inference_gateway": {"pools": {"model": {"min_replicas": 2, "max_replicas": 2}}}},
            "hyperpod.inference_gateway.pools.model.min_replicas",
            "1, equal to hyperpod.min_replicas",
        ),
        (
            {"hyperpod.inference_gateway": {"pools": {"prefill": {"min_replicas": 1, "max_replicas": 2}}}},
            "hyperpod.inference_gateway.pools",
            "exactly the pools model",
        ),
        (
            {
                "hyperpod.inference_gateway": {
                    "pools": GATEWAY_SETTING["pools"],
                    "lora_adapters": {"sql": "s3://adapters-bucket"},
                }
            },
            "hyperpod.inference_gateway.lora_adapters.sql",
            "with a prefix (the adapter's folder)",
        ),
        (
            {
                "hyperpod.inference_gateway": {
                    "pools": GATEWAY_SETTING["pools"],
                    "lora_adapters": {MODEL: "s3://adapters-bucket/base"},
                }
            },
            "hyperpod.inference_gateway.lora_adapters",
            "adapter names other than hyperpod.model_name",
        ),
        ({"hyperpod.inference_gateway": "{not json"}, "hyperpod.inference_gateway", "JSON object"),
    ],
)
def test_combinations_that_cannot_work_are_refused(
    overrides: dict[str, Any], key: str, accepted: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        _parse(**overrides)
    assert raised.value.key == key
    assert accepted in raised.value.accepted


@pytest.mark.parametrize("junk", JUNK, ids=JUNK_IDS)
def test_add_hyperpod_gateway_names_a_wrong_argument(junk: Any, tmp_path: Any) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Misuse")
    settings = InferenceGatewaySettings(pools={"model": PoolScaling(1, 2)})
    assert_refused(
        lambda: add_hyperpod_gateway(stack, junk, junk, junk, junk),
        "add_hyperpod_gateway",
        "settings",
        "an InferenceGatewaySettings",
    )
    assert_refused(
        lambda: add_hyperpod_gateway(stack, junk, junk, junk, settings),
        "add_hyperpod_gateway",
        "operator",
        "a HyperPodInferenceOperator",
    )


def test_the_pool_follows_the_endpoints_name_namespace_and_worker_port() -> None:
    endpoint = InferenceEndpoint(
        name="qwen",
        namespace="models",
        instance_types=("ml.p5.48xlarge",),
        model_source=S3ModelSource(bucket_name="weights", region="us-east-1", location="qwen"),
        worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=1, port=8080),
    )
    pool = hyperpod_model_pool(endpoint)
    assert (pool.name, pool.namespace, dict(pool.selector)) == ("qwen", "models", {"app": "qwen"})
    assert (pool.target_port, pool.model_name, tuple(pool.adapters)) == (8080, "qwen", ())
    adapter = LoraAdapter("sql-lora", "s3://adapters-bucket/sql")
    with_lora = dataclasses.replace(endpoint, lora=LoraServing((adapter,), region="us-east-1"))
    assert tuple(hyperpod_model_pool(with_lora).adapters) == (adapter,)


def test_queue_triggers_carry_the_pools_targets() -> None:
    queue, kv_cache = queue_triggers(AMP_URL, "qwen", PoolScaling(1, 4, 7, 0.6))
    assert (queue.name, queue.target_value, queue.metric_type) == ("queue", 7, "Average")
    assert (kv_cache.name, kv_cache.target_value, kv_cache.metric_type) == ("kv-cache", 0.6, "Value")
    assert queue.query == 'sum(vllm:num_requests_waiting{model_name="qwen"})'
    assert {queue.server_address, kv_cache.server_address} == {AMP_URL}
