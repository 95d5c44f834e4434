"""The platform's elastic inference pool (inference_tiers/k8s/gpu_pool.py): its objects against the pinned schemas
and upstream sources, its NetworkPolicies evaluated, and its LiteLLM model run in the real proxy.

Evidence: Karpenter v1.14.1 CRDs (tests/data/sandbox/karpenter, SOURCE.md there); vLLM serve flags
(tests/data/disaggregated/vllm-serve-flags.txt); the Inference Extension v1.5.0 and KEDA 2.20.2 CRDs
(tests/data/inference_gateway); Istio's gateway template (istio/istio manifests/charts/istio-control/
istio-discovery/files/kube-gateway.yaml: the proxy pods carry ``gateway.networking.k8s.io/gateway-name``, listen
on the listener port, serve metrics on 15020); LiteLLM 1.104.0 (tool venv): ``hosted_vllm/`` sends the served
name and the ``api_key`` as bearer, ``/model/info?litellm_model_id=`` answers 400 for an id it does not serve
(proxy_server.py:15905-15911).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from inference_tiers.config import ConfigError
from inference_tiers.k8s import sandbox_tenancy as tenancy_k8s
from inference_tiers.k8s.gpu_pool import (
    GATEWAY_NAME_LABEL,
    GPU_NODE_POOL,
    GpuPoolSpec,
    gpu_node_pool,
    litellm_models,
    namespace,
    parse_pool,
    pool_network_policies,
    vllm_deployment,
    vllm_serve_args,
)
from inference_tiers.k8s.inference_gateway import (
    EPP_GRPC_PORT,
    GatewaySpec,
    LoraAdapter,
    PoolScaling,
    endpoint_picker_config,
    render_endpoint_picker,
    render_gateway,
    render_inference_pool,
)
from inference_tiers.k8s.inference_gateway_scaling import (
    PrometheusMetrics,
    render_scaled_object,
    scaler_queries,
)
from inference_tiers.k8s.sandbox_nodes import karpenter_node_class
from inference_tiers.k8s.sandbox_tenancy import TENANT_LABEL
from inference_tiers.k8s.tenant_keys import gateway_network_policies
from inference_tiers.litellm.config import render_text
from inference_tiers.validation import ArgumentError
from tests.gateway.proxy import MASTER_KEY, http, run_proxy
from tests.gateway.stubs import StubBackend
from tests.harness import DATA_DIR
from tests.inference_gateway.support import listed, validate
from tests.platform.netpol import Cluster, Pod, allows
from tests.platform.tenant_keys_data import GATEWAY, TEAM_A, TENANCY
from tests.sandbox.helpers import validate_custom_resource

SPEC = GpuPoolSpec(model_id="Qwen/Qwen3-8B", served_model_name="pool-qwen3-8b")
GATEWAY_NAME = "inference-gateway"
AMP = PrometheusMetrics(
    url="https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1", region="us-east-1"
)
VPC = "10.0.0.0/16"


def node_objects(spec: GpuPoolSpec = SPEC) -> list[dict[str, Any]]:
    node_class = karpenter_node_class(
        GPU_NODE_POOL,
        ami_alias=spec.ami_alias,
        root_volume_gib=spec.root_volume_gib,
        instance_profile="profile",
        subnet_ids=["subnet-1"],
        security_group_ids=["sg-1"],
        volume_kms_key_id="arn:aws:kms:us-east-1:1:key/k",
        tags={"inference-tiers:tier": "platform"},
    )
    return [node_class, gpu_node_pool(spec)]


def test_nodes_fit_the_pinned_karpenter_crds() -> None:
    for manifest in node_objects():
        validate_custom_resource(manifest)


def test_the_node_schema_check_can_fail() -> None:
    broken = gpu_node_pool(SPEC)
    broken["spec"]["disruption"]["consolidateAfterr"] = "10m"
    with pytest.raises(Exception, match="consolidateAfterr"):
        validate_custom_resource(broken)


def test_gpu_nodes_are_tainted_nvidia_only_limited_by_gpus_and_never_consolidated_while_busy() -> None:
    node_class, pool = node_objects(GpuPoolSpec(model_id="a/b", served_model_name="p", max_gpus=16))
    template = pool["spec"]["template"]["spec"]
    assert template["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    requirements = {r["key"]: r["values"] for r in template["requirements"]}
    assert requirements["karpenter.k8s.aws/instance-family"] == ["g6e", "g6"]
    assert requirements["karpenter.k8s.aws/instance-gpu-manufacturer"] == ["nvidia"]
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    # WhenEmptyOrUnderutilized would drain a node mid-generation to pack pods tighter.
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert node_class["spec"]["metadataOptions"]["httpTokens"] == "required"
    assert node_class["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert node_class["spec"]["blockDeviceMappings"][0]["ebs"]["encrypted"] is True
    assert "cpuOptions" not in node_class["spec"]


def test_vllm_runs_only_on_gpu_nodes_with_its_gpus_and_pinned_flags() -> None:
    spec = GpuPoolSpec(model_id="Qwen/Qwen3-32B", served_model_name="q32", gpus_per_replica=4, max_gpus=16)
    deployment = vllm_deployment(spec)
    kubernetes_validate.validate(deployment, "1.35", strict=True)
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert pod["spec"]["nodeSelector"] == {"inference-tiers/node-pool": "gpu"}
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    # Karpenter waits for these pods before it disrupts their node (drift, expiry); KEDA scales them in.
    assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8000"
    assert "replicas" not in deployment["spec"]  # KEDA owns the count
    args = vllm_serve_args(spec)
    flags = listed(DATA_DIR / "disaggregated" / "vllm-serve-flags.txt")
    used = {a for a in args if a.startswith("--")}
    assert used <= flags, used - flags
    assert args[args.index("--tensor-parallel-size") + 1] == "4"
    assert args[args.index("--served-model-name") + 1] == "q32"


def test_the_gateway_objects_select_the_vllm_pods_and_scale_them_from_zero_on_their_own_series() -> None:
    pool = SPEC.model_pool()
    inference_pool = render_inference_pool(pool)
    pod_labels = vllm_deployment(SPEC)["spec"]["template"]["metadata"]["labels"]
    assert inference_pool["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert inference_pool["spec"]["targetPorts"] == [{"number": 8000}]
    scaled = render_scaled_object(
        SPEC.namespace,
        SPEC.scaled_target(),
        model_name=SPEC.served_model_name,
        metrics=AMP,
        trigger_authentication="keda-aws",
    )
    for manifest in (inference_pool, *render_endpoint_picker(pool), scaled):
        validate(manifest)
    assert scaled["spec"]["scaleTargetRef"]["name"] == vllm_deployment(SPEC)["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] == 0
    queue, _, demand = scaler_queries(SPEC.scaled_target(), SPEC.served_model_name)
    assert 'namespace="inference-pool"' in queue and 'model_name="pool-qwen3-8b"' in queue
    assert 'model_name="pool-qwen3-8b"' in demand


def test_every_core_object_is_valid_kubernetes_1_35() -> None:
    objects = [
        namespace(SPEC),
        *pool_network_policies(SPEC, gateway_name=GATEWAY_NAME, litellm=GATEWAY, scraper_cidrs=[VPC]),
    ]
    for manifest in objects:
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35", manifest["kind"]


# --- who may talk to the pool ------------------------------------------------------------------------------

NAMESPACES = {
    "kube-system": {},
    GATEWAY.namespace: {},
    TEAM_A.namespace: {TENANT_LABEL: TEAM_A.name},
    SPEC.namespace: {},
}
PROXY = Pod(GATEWAY.namespace, dict(GATEWAY.pod_labels), "10.0.20.10")
SANDBOX = Pod(TEAM_A.namespace, {TENANT_LABEL: TEAM_A.name}, "10.0.30.5")
ISTIO = Pod(SPEC.namespace, {GATEWAY_NAME_LABEL: GATEWAY_NAME}, "10.0.40.2")
EPP = Pod(SPEC.namespace, SPEC.model_pool().epp_labels(), "10.0.40.3")
VLLM = Pod(SPEC.namespace, SPEC.pod_labels(), "10.0.40.4")
OUTSIDE = {"outside": {}}


def cluster() -> Cluster:
    policies = [
        *tenancy_k8s.network_policies(TEAM_A, TENANCY),
        *gateway_network_policies(GATEWAY, vpc_cidr=VPC, alb_cidrs=[VPC], scraper_cidrs=[VPC]),
        *pool_network_policies(SPEC, gateway_name=GATEWAY_NAME, litellm=GATEWAY, scraper_cidrs=[VPC]),
    ]
    return Cluster({**NAMESPACES, **OUTSIDE}, policies)


@pytest.mark.parametrize(
    ("source", "destination", "port"),
    [
        (PROXY, ISTIO, 80),  # LiteLLM -> the pool's gateway
        (ISTIO, EPP, EPP_GRPC_PORT),  # the gateway asks the Endpoint Picker
        (ISTIO, VLLM, 8000),
        (EPP, VLLM, 8000),  # the picker reads vLLM's metrics
        (Pod("outside", {}, "10.0.8.9"), VLLM, 8000),  # the metrics scraper
        (Pod("outside", {}, "10.0.8.9"), EPP, 9090),
    ],
)
def test_allowed(source: Pod, destination: Pod, port: int) -> None:
    assert allows(cluster(), source, destination, port)


@pytest.mark.parametrize(
    ("source", "destination", "port"),
    [
        (SANDBOX, ISTIO, 80),  # a tenant bypassing its key and budget
        (SANDBOX, VLLM, 8000),
        (PROXY, VLLM, 8000),  # only through the gateway's routing
        (Pod("outside", {}, "10.0.1.20"), ISTIO, 80),  # a VPC client: no client but LiteLLM
        (Pod("outside", {}, "10.0.8.9"), VLLM, 22),
    ],
)
def test_denied(source: Pod, destination: Pod, port: int) -> None:
    assert not allows(cluster(), source, destination, port)


def test_the_proxy_s_own_policy_does_not_know_the_pool() -> None:
    # The pool adds a policy of its own for LiteLLM's egress: the gateway stage's policy stays as it was.
    without = Cluster(
        {**NAMESPACES, **OUTSIDE},
        [*gateway_network_policies(GATEWAY, vpc_cidr=VPC, alb_cidrs=[VPC], scraper_cidrs=[VPC])],
    )
    assert not allows(
        without, PROXY, Pod(SPEC.namespace, {GATEWAY_NAME_LABEL: GATEWAY_NAME}, "192.168.0.9"), 80
    )


# --- settings ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key", "accepted"),
    [
        ({"served_model_name": "p"}, "platform.pool.model_id", "required"),
        ({"model_id": "not-an-id", "served_model_name": "p"}, "platform.pool.model_id", "Hugging Face"),
        (
            {"model_id": "a/b", "served_model_name": "p", "gpus_per_replica": 3},
            "platform.pool.gpus_per_replica",
            "one of 1, 2, 4, 8",
        ),
        (
            {"model_id": "a/b", "served_model_name": "p", "instance_families": ["m7i"]},
            "platform.pool.instance_families[0]",
            "'g6e'",
        ),
        (
            {"model_id": "a/b", "served_model_name": "p", "capacity_types": ["reserved"]},
            "platform.pool.capacity_types[0]",
            "'spot'",
        ),
        ({"model_id": "a/b", "served_model_name": "p", "max_gpus": 3}, "platform.pool.max_gpus", "4 x 1"),
        (
            {"model_id": "a/b", "served_model_name": "p", "scaling": {"min_replicas": 5, "max_replicas": 4}},
            "platform.pool.scaling.min_replicas",
            "at most",
        ),
        ({"model_id": "a/b", "served_model_name": "p", "gpus": 1}, "platform.pool.gpus", "a known key"),
        ("[1]", "platform.pool", "a JSON object"),
    ],
)
def test_bad_pool_settings_name_the_entry(raw: Any, key: str, accepted: str) -> None:
    with pytest.raises(ConfigError, match=rf"'{re.escape(key)}'.*{accepted}"):
        parse_pool("platform.pool", raw)


def test_the_construct_spec_refuses_bad_values_by_parameter() -> None:
    with pytest.raises(ArgumentError, match="GpuPoolSpec: parameter 'served_model_name'"):
        GpuPoolSpec(model_id="a/b", served_model_name="bad name")
    with pytest.raises(ArgumentError, match="parameter 'scaling'"):
        GpuPoolSpec(model_id="a/b", served_model_name="p", scaling=(0, 4))  # type: ignore[arg-type]


def test_preflight_counts_the_smallest_fitting_size_up_to_the_gpu_limit() -> None:
    assert SPEC.quota_need() == ("g6e.xlarge", 8)
    wide = GpuPoolSpec(
        model_id="a/b",
        served_model_name="p",
        gpus_per_replica=4,
        scaling=PoolScaling(min_replicas=0, max_replicas=2),
        instance_families=["g6e"],
        max_gpus=8,
    )
    assert wide.quota_need() == ("g6e.12xlarge", 2)


# --- LiteLLM: the model entry in the real proxy ------------------------------------------------------------


def test_the_pool_s_model_entry_runs_in_the_real_proxy(tmp_path: Path) -> None:
    """The entry the registration Job adds, loaded by LiteLLM 1.104.0 (from its file here: the proxy cannot keep
    models in a database without Prisma's engine) in front of a stand-in of the pool's gateway: a tenant's call
    reaches it with the served name and a bearer, and the id the Job checks answers /model/info."""
    with StubBackend() as stub:
        (entry,) = litellm_models(SPEC, f"{stub.url}/v1")
        config = {
            "model_list": [entry],
            "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
        }
        with run_proxy(render_text(config), tmp_path) as proxy:
            body = {"model": SPEC.served_model_name, "messages": [{"role": "user", "content": "hi"}]}
            status, answer = http("POST", f"{proxy.url}/v1/chat/completions", key=MASTER_KEY, body=body)
            assert status == 200, answer
            model_id = entry["model_info"]["id"]
            query = model_id.replace("#", "%23")
            found = http("GET", f"{proxy.url}/model/info?litellm_model_id={query}", key=MASTER_KEY)
            missing = http("GET", f"{proxy.url}/model/info?litellm_model_id=nothing%23pool", key=MASTER_KEY)
    sent = stub.received(lambda r: r.path == "/v1/chat/completions")[-1]
    assert sent.body["model"] == SPEC.served_model_name
    assert sent.headers["authorization"] == "Bearer no-key"
    assert found[0] == 200 and found[1]["data"][0]["model_info"]["id"] == model_id
    assert missing[0] == 400  # what the registration Job reads as "add it"


# --- LoRA adapters -----------------------------------------------------------------------------------------

ADAPTER = LoraAdapter("sql-lora", "s3://adapters-bucket/sql-lora/")
LORA_SPEC = GpuPoolSpec(model_id="Qwen/Qwen3-8B", served_model_name="pool-qwen3-8b", lora_adapters=[ADAPTER])


def test_lora_adapters_are_loaded_by_every_pod_routed_by_affinity_and_registered_each() -> None:
    deployment = vllm_deployment(LORA_SPEC, region="us-east-1")
    kubernetes_validate.validate(deployment, "1.35", strict=True)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "vllm"
    (init,) = pod["initContainers"]
    assert "s3://adapters-bucket/sql-lora/" in init["command"][-1]
    assert {"name": "adapters", "mountPath": "/adapters", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    args = vllm_serve_args(LORA_SPEC)
    assert args[args.index("--lora-modules") + 1] == "sql-lora=/adapters/sql-lora"
    assert {a for a in args if a.startswith("--")} <= listed(
        DATA_DIR / "disaggregated" / "vllm-serve-flags.txt"
    )
    scorers = {p["type"] for p in endpoint_picker_config(LORA_SPEC.model_pool())["plugins"]}
    assert "lora-affinity-scorer" in scorers
    assert "lora-affinity-scorer" not in {
        p["type"] for p in endpoint_picker_config(SPEC.model_pool())["plugins"]
    }
    assert [m["model_name"] for m in litellm_models(LORA_SPEC, "http://gw/v1")] == [
        "pool-qwen3-8b",
        "sql-lora",
    ]
    assert "initContainers" not in vllm_deployment(SPEC)["spec"]["template"]["spec"]


def test_lora_settings_are_parsed_and_bad_ones_named() -> None:
    spec = parse_pool(
        "platform.pool",
        {
            "model_id": "a/b",
            "served_model_name": "p",
            "lora_adapters": {"sql-lora": "s3://adapters-bucket/sql/"},
        },
    )
    assert spec.lora_adapters == (LoraAdapter("sql-lora", "s3://adapters-bucket/sql/"),)
    with pytest.raises(ConfigError, match=r"'platform.pool.lora_adapters.sql-lora'.*s3://bucket/prefix"):
        parse_pool(
            "platform.pool", {"model_id": "a/b", "served_model_name": "p", "lora_adapters": {"sql-lora": "x"}}
        )
    with pytest.raises(ConfigError, match=r"'platform.pool.lora_adapters\[0\].name'.*unique"):
        parse_pool(
            "platform.pool",
            {"model_id": "a/b", "served_model_name": "p", "lora_adapters": {"p": "s3://adapters-bucket/p/"}},
        )
    with pytest.raises(ConfigError, match=r"'platform.pool.max_lora_rank'.*one of 1, 8, 16"):
        parse_pool("platform.pool", {"model_id": "a/b", "served_model_name": "p", "max_lora_rank": 12})


def test_the_pool_s_gateway_has_no_load_balancer_and_litellm_calls_its_service() -> None:
    """Only LiteLLM may call the pool: the gateway's Service is ClusterIP (Istio's ``networking.istio.io/
    service-type``, istio/api 1.30.1 annotation/annotations.yaml:567-574), so no NLB exists that a VPC client
    could reach the pods through (NLB traffic can arrive from a node's address, which the VPC CNI's policy agent
    always admits: aws/aws-network-policy-agent#56, #65)."""
    gateway = render_gateway(GatewaySpec("inference-gateway", "inference-pool", [], load_balancer=False))
    validate(gateway)
    assert gateway["metadata"]["annotations"] == {"networking.istio.io/service-type": "ClusterIP"}
    assert "infrastructure" not in gateway["spec"]
