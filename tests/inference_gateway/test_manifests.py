"""The inference gateway's pure renderers, checked against the pinned versions' real schemas, flags and metrics."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from inference_tiers.k8s.inference_gateway import (
    EPP_CONFIG_FILE,
    EPP_GRPC_PORT,
    GatewaySpec,
    LoraAdapter,
    ModelPool,
    PoolScaling,
    endpoint_picker_args,
    endpoint_picker_config,
    pool_backend,
    render_endpoint_picker,
    render_gateway,
    render_http_route,
    render_inference_pool,
    service_backend,
)
from inference_tiers.k8s.inference_gateway_lora import lora_init_container, vllm_lora_args
from inference_tiers.k8s.inference_gateway_scaling import (
    CloudWatchMetrics,
    PrometheusMetrics,
    ScaledTarget,
    render_scaled_object,
    render_trigger_authentication,
    scaler_queries,
)
from inference_tiers.validation import ArgumentError
from tests.harness import DATA_DIR
from tests.inference_gateway.support import DATA, exported_metrics, listed, metric_names, validate

AMP = PrometheusMetrics(
    url="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef",
    region="us-west-2",
)
CLOUDWATCH = CloudWatchMetrics(namespace="InferenceTiers/Disaggregated", region="us-west-2")
ADAPTER = LoraAdapter(name="sql-lora", s3_uri="s3://adapters-bucket/sql-lora/")


def pool(**overrides: Any) -> ModelPool:
    values: dict[str, Any] = {
        "name": "llama",
        "namespace": "inference",
        "selector": {"app.kubernetes.io/component": "decode"},
        "model_name": "meta-llama/Llama-3.3-70B-Instruct",
    }
    return ModelPool(**{**values, **overrides})


GATEWAY = GatewaySpec(name="inference", namespace="inference", allowed_cidrs=["10.0.0.0/16"])


def target(min_replicas: int = 1) -> ScaledTarget:
    return ScaledTarget(
        "vllm-pd-decode", {"namespace": "inference", "role": "decode"}, PoolScaling(min_replicas, 4)
    )


def cloudwatch_target() -> ScaledTarget:
    return ScaledTarget(
        "vllm-pd-prefill",
        {"ClusterName": "c", "Namespace": "inference", "Role": "prefill"},
        PoolScaling(1, 3, waiting_per_replica=2),
    )


def every_manifest() -> list[dict[str, Any]]:
    lora_pool = pool(adapters=(ADAPTER,))
    return [
        render_inference_pool(lora_pool),
        *render_endpoint_picker(lora_pool),
        render_gateway(GATEWAY),
        render_http_route(GATEWAY, pool_backend(lora_pool)),
        render_http_route(GATEWAY, service_backend("vllm-pd-router", 30000)),
        render_scaled_object(
            "inference", target(0), model_name="m", metrics=AMP, trigger_authentication="keda-aws"
        ),
        render_scaled_object(
            "inference", target(1), model_name="m", metrics=AMP, trigger_authentication=None
        ),
        render_scaled_object(
            "inference",
            cloudwatch_target(),
            model_name="m",
            metrics=CLOUDWATCH,
            trigger_authentication="keda-aws",
        ),
        render_trigger_authentication("keda-aws", "inference"),
    ]


@pytest.mark.parametrize("manifest", every_manifest(), ids=lambda m: f"{m['kind']}-{m['metadata']['name']}")
def test_every_object_validates_against_the_pinned_schema(manifest: dict[str, Any]) -> None:
    validate(manifest)


def test_the_schema_check_can_fail() -> None:
    broken = render_inference_pool(pool())
    broken["spec"]["targetPort"] = broken["spec"].pop(
        "targetPorts"
    )  # a misspelt field the server would prune
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    no_picker = render_inference_pool(pool())
    del no_picker["spec"]["endpointPickerRef"]  # required by the v1.5.0 InferencePool
    with pytest.raises(jsonschema.ValidationError, match="endpointPickerRef"):
        validate(no_picker)
    rule = next(m for m in render_endpoint_picker(pool()) if m["kind"] == "DestinationRule")
    rule["spec"]["trafficPolicy"]["tls"]["insecureSkipVerfy"] = True  # Istio's schema lists its fields
    with pytest.raises(jsonschema.ValidationError, match="insecureSkipVerfy"):
        validate(rule)


def test_inference_pool_selects_the_vllm_pods_and_names_its_picker() -> None:
    spec = render_inference_pool(pool())["spec"]
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/component": "decode"}}
    assert spec["targetPorts"] == [{"number": 8000}]
    assert spec["endpointPickerRef"] == {
        "kind": "Service",
        "name": "llama-epp",
        "port": {"number": EPP_GRPC_PORT},
        "failureMode": "FailOpen",
    }
    assert (
        render_inference_pool(pool(fail_open=False))["spec"]["endpointPickerRef"]["failureMode"]
        == "FailClose"
    )


def test_every_epp_flag_exists_in_the_pinned_epp_and_none_is_deprecated() -> None:
    lines = [
        line.split()
        for line in (DATA / "epp-v1.5.0-flags.txt").read_text().splitlines()
        if line and line[0] != "#"
    ]
    flags = {words[0] for words in lines}
    deprecated = {words[0] for words in lines if words[1:] == ["deprecated"]}
    used = {arg[2:].split("=")[0] for arg in endpoint_picker_args(pool()) if arg.startswith("--")}
    assert used <= flags, used - flags
    assert not used & deprecated
    assert {"pool-name", "pool-namespace", "config-file"} <= used


def test_epp_config_uses_registered_plugins_with_the_three_scorers() -> None:
    registered = listed(DATA / "epp-v1.5.0-plugins.txt")
    for served in (pool(), pool(adapters=(ADAPTER,))):
        config = endpoint_picker_config(served)
        types = [plugin["type"] for plugin in config["plugins"]]
        assert set(types) <= registered, set(types) - registered
        refs = {ref["pluginRef"] for profile in config["schedulingProfiles"] for ref in profile["plugins"]}
        assert refs <= set(types)
    plain = endpoint_picker_config(pool())["schedulingProfiles"][0]["plugins"]
    assert {p["pluginRef"]: p["weight"] for p in plain} == {
        "queue-scorer": 2,
        "kv-cache-utilization-scorer": 2,
        "prefix-cache-scorer": 3,
    }
    with_lora = endpoint_picker_config(pool(adapters=(ADAPTER,)))["schedulingProfiles"][0]["plugins"]
    assert {"pluginRef": "lora-affinity-scorer", "weight": 1} in with_lora


def test_epp_config_map_holds_the_config_the_flag_points_at() -> None:
    objects = {m["kind"]: m for m in render_endpoint_picker(pool())}
    assert yaml.safe_load(objects["ConfigMap"]["data"][EPP_CONFIG_FILE]) == endpoint_picker_config(pool())
    container = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--config-file") + 1] == f"/config/{EPP_CONFIG_FILE}"
    assert container["volumeMounts"] == [{"name": "config", "mountPath": "/config", "readOnly": True}]
    assert objects["Deployment"]["spec"]["replicas"] == 1  # one prefix index
    rule = objects["DestinationRule"]
    assert rule["spec"]["host"] == "llama-epp.inference.svc.cluster.local"
    assert objects["Service"]["spec"]["selector"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]


def test_every_scaler_query_parses_and_names_only_exported_metrics() -> None:
    exported = exported_metrics()
    queries = scaler_queries(target(0), "m")
    assert len(queries) == 3
    for query in queries:
        names = metric_names(query)
        assert names and names <= exported, names - exported
    assert metric_names(queries[0]) == {"vllm:num_requests_waiting"}
    assert metric_names(queries[1]) == {"vllm:kv_cache_usage_perc"}


def test_the_metric_check_can_fail() -> None:
    # V0's name, gone from vLLM V1: the check must refuse it.
    assert not metric_names("avg(vllm:gpu_cache_usage_perc)") <= exported_metrics()
    with pytest.raises(ValueError):
        metric_names("sum(vllm:num_requests_waiting{")


def test_scaled_object_scales_one_deployment_on_queue_and_kv_cache() -> None:
    spec = render_scaled_object(
        "inference", target(1), model_name="m", metrics=AMP, trigger_authentication="keda-aws"
    )["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm-pd-decode"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 4)
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert set(triggers) == {"queue", "kv-cache"}
    assert triggers["queue"]["metadata"]["threshold"] == "4"
    assert triggers["queue"]["metricType"] == "AverageValue"
    assert triggers["kv-cache"]["metadata"]["threshold"] == "0.8"
    assert triggers["kv-cache"]["metricType"] == "Value"
    assert triggers["queue"]["metadata"]["awsRegion"] == "us-west-2"
    assert triggers["queue"]["authenticationRef"] == {"name": "keda-aws"}
    assert triggers["queue"]["metadata"]["query"] == (
        'sum(vllm:num_requests_waiting{namespace="inference",role="decode"})'
    )


def test_cloudwatch_triggers_read_the_exported_series_of_one_role() -> None:
    spec = render_scaled_object(
        "inference",
        cloudwatch_target(),
        model_name="m",
        metrics=CLOUDWATCH,
        trigger_authentication="keda-aws",
    )["spec"]
    assert spec["scaleTargetRef"]["name"] == "vllm-pd-prefill"
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert {t["type"] for t in triggers.values()} == {"aws-cloudwatch"}
    queue = triggers["queue"]["metadata"]
    assert queue["metricName"] == "vllm:num_requests_waiting"
    assert (queue["dimensionName"], queue["dimensionValue"]) == (
        "ClusterName;Namespace;Role",
        "c;inference;prefill",
    )
    assert (queue["metricStat"], queue["targetMetricValue"]) == ("Average", "2")
    assert triggers["queue"]["metricType"] == "Value"
    assert triggers["kv-cache"]["metadata"]["metricName"] == "vllm:kv_cache_usage_perc"
    assert {t["metadata"]["metricName"] for t in triggers.values()} <= exported_metrics()


def test_scale_to_zero_needs_the_prometheus_source() -> None:
    with pytest.raises(ArgumentError, match="PrometheusMetrics when min_replicas is 0"):
        render_scaled_object(
            "inference", target(0), model_name="m", metrics=CLOUDWATCH, trigger_authentication=None
        )


def test_scale_to_zero_adds_an_activation_trigger_that_exists_without_pods() -> None:
    spec = render_scaled_object(
        "inference", target(0), model_name="m", metrics=AMP, trigger_authentication=None
    )["spec"]
    assert spec["minReplicaCount"] == 0
    demand = next(t for t in spec["triggers"] if t["name"] == "demand")
    # Both EPP counters: with no pod the EPP counts a request only as an error (gateway-api-inference-extension
    # v1.5.0 pkg/epp/handlers/server.go:240-254, requestcontrol/director.go:172-177); both are in its metrics list.
    names = metric_names(demand["metadata"]["query"])
    assert names == {"inference_objective_request_total", "inference_objective_request_error_total"}
    assert names <= exported_metrics()
    assert demand["metadata"]["activationThreshold"] == "0"
    assert (demand["metadata"]["threshold"], demand["metricType"]) == ("1", "AverageValue")  # one replica


def test_gateway_is_istio_internal_and_routes_only_its_namespace() -> None:
    gateway = render_gateway(GATEWAY)["spec"]
    assert gateway["gatewayClassName"] == "istio"
    annotations = gateway["infrastructure"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations["service.beta.kubernetes.io/load-balancer-source-ranges"] == "10.0.0.0/16"
    assert gateway["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "Same"}}
    route = render_http_route(GATEWAY, pool_backend(pool()))["spec"]
    assert route["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama"}
    ]
    assert route["rules"][0]["timeouts"] == {"request": "600s"}


def test_lora_flags_exist_in_the_pinned_vllm() -> None:
    flags = listed(DATA_DIR / "disaggregated" / "vllm-serve-flags.txt")
    args = vllm_lora_args([ADAPTER, LoraAdapter("org/chat-lora", "s3://adapters-bucket/chat")])
    used = {a for a in args if a.startswith("--")}
    assert used <= flags, used - flags
    assert args[args.index("--lora-modules") + 1 :] == [
        "sql-lora=/adapters/sql-lora",
        "org/chat-lora=/adapters/org--chat-lora",
    ]
    assert args[args.index("--max-loras") + 1] == "2"
    assert vllm_lora_args([]) == []


def test_lora_init_container_syncs_every_adapter_into_the_shared_volume() -> None:
    container = lora_init_container([ADAPTER], "amazon/aws-cli:2.22.35")
    assert (
        'aws s3 sync --only-show-errors "s3://adapters-bucket/sql-lora/" "/adapters/sql-lora"'
        in container["command"][2]
    )
    assert container["volumeMounts"] == [{"name": "adapters", "mountPath": "/adapters"}]


@pytest.mark.parametrize(
    ("make", "param"),
    [
        (lambda: pool(name="Llama"), "name"),
        (lambda: pool(selector={}), "selector"),
        (lambda: pool(selector={"bad key!": "x"}), "selector key"),
        (lambda: pool(target_port=0), "target_port"),
        (lambda: pool(adapters=(ADAPTER, ADAPTER)), "adapters[1].name"),
        (
            lambda: pool(adapters=[LoraAdapter("meta-llama/Llama-3.3-70B-Instruct", "s3://b-1/x")]),
            "adapters[0].name",
        ),
        (lambda: pool(adapters="sql-lora"), "adapters"),
        (lambda: PoolScaling(3, 2), "min_replicas"),
        (lambda: PoolScaling(1, 65), "max_replicas"),
        (lambda: PoolScaling(1, 2, kv_cache_utilisation=1.5), "kv_cache_utilisation"),
        (lambda: LoraAdapter("sql", "https://bucket/x"), "s3_uri"),
        (lambda: GatewaySpec("g", "inference", allowed_cidrs=[]), "allowed_cidrs"),
        (lambda: ScaledTarget("Decode", {"role": "decode"}, PoolScaling(1, 2)), "deployment"),
        (lambda: ScaledTarget("decode", {}, PoolScaling(1, 2)), "series"),
        (
            lambda: GatewaySpec("g", "inference", ["10.0.0.0/8"], request_timeout_seconds=0),
            "request_timeout_seconds",
        ),
    ],
)
def test_bad_arguments_name_the_parameter(make: Any, param: str) -> None:
    with pytest.raises(ArgumentError) as raised:
        make()
    assert raised.value.param == param
