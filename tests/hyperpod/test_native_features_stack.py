"""The hyperpod tier with the operator's own features on (tiered KV cache, intelligent routing): what the
template carries, the replacement of the InferenceEndpointConfig when a creation-only field changes, the
refusals that name the key, and the gates (cdk-nag both packs, cfn-lint, checkov) on the new configurations."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.stacks.hyperpod import HyperPodSettings
from tests.harness import CLEAN_GATES, TierBuild, build_tier, gate_findings, tier_settings
from tests.hyperpod.support import (
    logical_ids,
    manifest_documents,
    only,
    validate_inference_endpoint_config,
)

LMCACHE = "lmcache/vllm-openai:v0.3.7"
REDIS_L2 = {
    "hyperpod.vllm_image": LMCACHE,
    "hyperpod.kv_cache_l1": True,
    "hyperpod.kv_cache_l2": "redis",
    "hyperpod.routing_strategy": "kvaware",
}
TIERED_L2 = {
    "hyperpod.vllm_image": LMCACHE,
    "hyperpod.kv_cache_l1": True,
    "hyperpod.kv_cache_l2": "tieredstorage",
    "hyperpod.tiered_storage_memory_percent": 20,
    "hyperpod.routing_strategy": "prefixaware",
}
# The tieredstorage build also runs prefill/decode (one synth for both): p5 is a DPD instance type.
TIERED_PD = {
    **TIERED_L2,
    "hyperpod.instance_type": "ml.p5.48xlarge",
    "hyperpod.prefill_decode": True,
    "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",  # the first build whose CRD has spec.pdSpec
    "hyperpod.decode_tensor_parallel_size": 4,
    "hyperpod.decode_max_replicas": 4,
    "hyperpod.pd_routing_threshold": 2048,
}


@pytest.fixture(scope="module")
def redis_build() -> TierBuild:
    return build_tier("hyperpod", **REDIS_L2)


@pytest.fixture(scope="module")
def tiered_build() -> TierBuild:
    return build_tier("hyperpod", **TIERED_PD)


def _document(template: Mapping[str, Any]) -> dict[str, Any]:
    (document,) = [d for d in manifest_documents(template) if d["kind"] == "InferenceEndpointConfig"]
    return document


def _cluster(template: Mapping[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = template["Resources"][only(logical_ids(template, "AWS::SageMaker::Cluster"))]
    return cluster["Properties"]


def test_tiered_storage_is_on_the_cluster_exactly_when_l2_needs_it(
    tiered_build: TierBuild, redis_build: TierBuild, tier_build: Callable[[str], TierBuild]
) -> None:
    tiered = tiered_build.template().to_json()
    assert _cluster(tiered)["TieredStorageConfig"] == {
        "Mode": "Enable",
        "InstanceMemoryAllocationPercentage": 20,
    }
    assert _document(tiered)["spec"]["kvCacheSpec"] == {
        "enableL1Cache": True,
        "enableL2Cache": True,
        "l2CacheSpec": {"l2CacheBackend": "tieredstorage"},
    }
    assert "TieredStorageConfig" not in _cluster(redis_build.template().to_json())
    assert "TieredStorageConfig" not in _cluster(tier_build("hyperpod").template().to_json())


def test_redis_l2_is_an_encrypted_valkey_in_the_vpc_reached_by_the_nodes_only(redis_build: TierBuild) -> None:
    template = redis_build.template().to_json()
    resources = template["Resources"]
    group_id = only(logical_ids(template, "AWS::ElastiCache::ReplicationGroup"))
    group = resources[group_id]["Properties"]
    assert group["Engine"] == "valkey"
    assert group["TransitEncryptionEnabled"] is True and group["TransitEncryptionMode"] == "required"
    assert group["AtRestEncryptionEnabled"] is True and "KmsKeyId" in group
    subnets = resources[group["CacheSubnetGroupName"]["Ref"]]["Properties"]["SubnetIds"]
    vpc_subnets = {s for s, r in resources.items() if r["Type"] == "AWS::EC2::Subnet"}
    assert {s["Ref"] for s in subnets} <= vpc_subnets
    (cache_sg,) = group["SecurityGroupIds"]
    ingress = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and r["Properties"]["GroupId"] == cache_sg
    ]
    node_sg = only(
        [s for s, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroup" and "EFA" in str(r)]
    )
    assert ingress == [
        {
            "IpProtocol": "tcp",
            "FromPort": 6379,
            "ToPort": 6379,
            "GroupId": cache_sg,
            "SourceSecurityGroupId": {"Fn::GetAtt": [node_sg, "GroupId"]},
            "Description": "HyperPod model pods to the L2 KV cache",
        }
    ]
    document = _document(template)
    spec = document["spec"]["kvCacheSpec"]
    assert spec["l2CacheSpec"] == {"l2CacheBackend": "redis", "l2CacheLocalUrl": "rediss://token:token"}


def test_prefill_decode_roles_scale_separately_with_efa(tiered_build: TierBuild) -> None:
    spec = _document(tiered_build.template().to_json())["spec"]
    pd = spec["pdSpec"]
    # The single Deployment's autoscaling would be ignored: each role has its own.
    assert "autoScalingSpec" not in spec
    assert pd["routingThreshold"] == 2048
    assert pd["prefillSpec"]["args"] == ["--tensor-parallel-size", "8"]
    assert pd["decodingSpec"]["args"] == ["--tensor-parallel-size", "4"]
    # p5.48xlarge: 32 EFA devices for 8 GPUs.
    assert pd["prefillSpec"]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert pd["decodingSpec"]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
    scaling = pd["autoScalingSpec"]
    assert scaling["prefillAutoScaling"]["maxReplicaCount"] == 2
    assert scaling["decodingAutoScaling"]["maxReplicaCount"] == 4
    trigger = scaling["decodingAutoScaling"]["cloudWatchTrigger"]
    assert {"name": "EndpointName", "value": spec["endpointName"]} in trigger["dimensions"]


def test_a_given_redis_url_is_used_and_no_cache_is_created() -> None:
    url = "rediss://kv.abc123.usw2.cache.amazonaws.com:6379"
    template = build_tier("hyperpod", **REDIS_L2, **{"hyperpod.kv_cache_redis_url": url}).template().to_json()
    assert logical_ids(template, "AWS::ElastiCache::ReplicationGroup") == []
    assert _document(template)["spec"]["kvCacheSpec"]["l2CacheSpec"]["l2CacheLocalUrl"] == url


def test_every_rendered_config_validates_strictly(tiered_build: TierBuild, redis_build: TierBuild) -> None:
    for build in (tiered_build, redis_build):
        document = _document(build.template().to_json())
        validate_inference_endpoint_config(document)


def test_a_routing_change_deploys_a_new_endpoint_config(
    tiered_build: TierBuild, redis_build: TierBuild, tier_build: Callable[[str], TierBuild]
) -> None:
    names, resources = {}, {}
    for strategy, build in (
        ("off", tier_build("hyperpod")),
        ("prefixaware", tiered_build),
        ("kvaware", redis_build),
    ):
        template = build.template().to_json()
        document = _document(template)
        names[strategy] = document["metadata"]["name"]
        (resources[strategy],) = [
            logical_id
            for logical_id, r in template["Resources"].items()
            if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
            and "InferenceEndpointConfig" in json.dumps(r["Properties"]["Manifest"])
        ]
        outputs = template["Outputs"]
        # The registered endpoint is renewed with it (two resources cannot register one SageMaker name).
        assert outputs["SageMakerEndpointName"]["Value"] == document["spec"]["endpointName"]
    assert names["off"] == "llama-3-1-8b-instruct"
    assert names["prefixaware"].startswith("llama-3-1-8b-instruct-")
    assert len(set(names.values())) == 3
    # The custom resource is replaced, not updated: CloudFormation applies the new object, then deletes the old
    # one (an update's `kubectl apply --prune` would leave the old custom resource running).
    assert len(set(resources.values())) == 3
    assert resources["off"].startswith("ModelManifest")
    assert names["kvaware"].rsplit("-", 1)[1].upper() in resources["kvaware"].upper()
    routing = _document(redis_build.template().to_json())["spec"]["intelligentRoutingSpec"]
    assert routing == {"enabled": True, "routingStrategy": "kvaware"}


def test_gates_are_clean_for_the_native_feature_configurations(
    tiered_build: TierBuild, redis_build: TierBuild
) -> None:
    assert gate_findings(redis_build) == CLEAN_GATES
    assert gate_findings(tiered_build) == CLEAN_GATES


def _parse(**overrides: Any) -> HyperPodSettings:
    settings = tier_settings("hyperpod", **overrides)
    assert isinstance(settings, HyperPodSettings)
    return settings


@pytest.mark.parametrize(
    ("overrides", "key", "accepted"),
    [
        ({"hyperpod.kv_cache_l1": True}, "hyperpod.vllm_image", "an image of lmcache/vllm-openai or"),
        (
            {"hyperpod.prefill_decode": True, "hyperpod.vllm_image": LMCACHE},
            "hyperpod.instance_type",
            "one of ml.p5.48xlarge, ml.p5e.48xlarge, ml.p5en.48xlarge, ml.p6-b200.48xlarge, "
            "ml.p6-b300.48xlarge when prefill_decode is true",
        ),
        (
            {**TIERED_PD, "hyperpod.instance_type_priority": ["ml.p5.48xlarge", "ml.g5.48xlarge"]},
            "hyperpod.instance_type_priority",
            "when prefill_decode is true",
        ),
        (
            {
                **TIERED_PD,
                "hyperpod.vllm_image": "vllm/vllm-openai:v0.10.1",
                "hyperpod.kv_cache_l1": False,
                "hyperpod.kv_cache_l2": "",
                "hyperpod.tiered_storage_memory_percent": "",
            },
            "hyperpod.vllm_image",
            "when prefill_decode is true (the operator moves KV with LMCache and NIXL)",
        ),
        (
            {
                **TIERED_PD,
                "hyperpod.routing_strategy": "",
                "hyperpod.scaling_metric": "prometheus",
                "hyperpod.inference_gateway": '{"pools":{"model":{"min_replicas":1,"max_replicas":2}}}',
            },
            "hyperpod.prefill_decode",
            "false when hyperpod.inference_gateway is set",
        ),
        (
            {**TIERED_PD, "hyperpod.prefill_max_replicas": 1, "hyperpod.min_replicas": 2},
            "hyperpod.prefill_max_replicas",
            "at least min_replicas (2)",
        ),
        (
            {"hyperpod.kv_cache_l2": "redis"},
            "hyperpod.vllm_image",
            "when hyperpod.kv_cache_l2 is set (the operator's KV cache is LMCache)",
        ),
        (
            {**TIERED_L2, "hyperpod.tiered_storage_memory_percent": ""},
            "hyperpod.tiered_storage_memory_percent",
            "1-100 when kv_cache_l2 is tieredstorage",
        ),
        (
            {**REDIS_L2, "hyperpod.tiered_storage_memory_percent": 10},
            "hyperpod.tiered_storage_memory_percent",
            "else null",
        ),
        (
            {
                **TIERED_L2,
                "hyperpod.kv_cache_redis_url": "rediss://kv.abc.usw2.cache.amazonaws.com:6379",
            },
            "hyperpod.kv_cache_redis_url",
            "null unless kv_cache_l2 is redis",
        ),
        (
            {**REDIS_L2, "hyperpod.kv_cache_redis_url": "redis://kv.abc.usw2.cache.amazonaws.com:6379"},
            "hyperpod.kv_cache_redis_url",
            "plain redis:// is refused",
        ),
        (
            {**TIERED_L2, "hyperpod.tiered_storage_memory_percent": 100},
            "hyperpod.tiered_storage_memory_percent",
            "a share that leaves each model pod at least 1 GiB on ml.g5.48xlarge",
        ),
        (
            {
                "hyperpod.routing_strategy": "session",
                "hyperpod.vllm_image": "ghcr.io/sgl-project/sglang:v0.5.0",
            },
            "hyperpod.vllm_image",
            "a vLLM image when routing_strategy is set",
        ),
        (
            {"hyperpod.routing_strategy": "session", "hyperpod.model_name": "m" * 42},
            "hyperpod.model_name",
            "at most 41 characters when routing_strategy is set",
        ),
        (
            {"hyperpod.routing_strategy": "session", "hyperpod.endpoint_name": "e" * 55},
            "hyperpod.endpoint_name",
            "at most 54 characters when routing_strategy is set",
        ),
        (
            {
                "hyperpod.routing_strategy": "session",
                "hyperpod.inference_gateway": '{"pools":{"model":{"min_replicas":1,"max_replicas":2}}}',
                "hyperpod.scaling_metric": "prometheus",
            },
            "hyperpod.routing_strategy",
            "null when hyperpod.inference_gateway is set",
        ),
    ],
)
def test_invalid_combinations_are_refused_naming_the_key(
    overrides: dict[str, Any], key: str, accepted: str
) -> None:
    with pytest.raises(ConfigError) as error:
        _parse(**overrides)
    assert error.value.key == key
    assert accepted in str(error.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({**TIERED_PD, "hyperpod.operator_addon_version": "v1.0.0-eksbuild.1"}, "hyperpod.prefill_decode"),
        ({"hyperpod.max_concurrent_requests": 32}, "hyperpod.max_concurrent_requests"),
        # 51b8dd2's prometheusTrigger.serverAddress pattern wants a segment after ws-<id>; 4b76719 dropped it.
        ({"hyperpod.scaling_metric": "prometheus"}, "hyperpod.scaling_metric"),
    ],
)
def test_a_field_the_pinned_operator_build_lacks_is_refused_naming_the_key(
    overrides: dict[str, Any], key: str
) -> None:
    """The default build v1.0.0-eksbuild.1 carries the operator 3.0 CRD (sagemaker-hyperpod-cli 51b8dd2): no
    spec.pdSpec (from 959b62b) and no spec.worker.requestLimits (from d5e7256)."""
    with pytest.raises(ConfigError) as error:
        _parse(**overrides)
    assert error.value.key == key
    assert "amazon-sagemaker-hyperpod-inference v1.0.0-eksbuild.1 ships operator 3.0" in str(error.value)
    assert "pin amazon-sagemaker-hyperpod-inference v2.0.0-eksbuild.2 or later" in str(error.value)
    assert "(hyperpod.operator_addon_version)" in str(error.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hyperpod.operator_addon_version", "v1.1.0-eksbuild.1"),
        ("hyperpod.kv_cache_l2", "memcached"),
        ("hyperpod.routing_strategy", "random"),
        ("hyperpod.tiered_storage_memory_percent", 0),
        ("hyperpod.kv_cache_redis_url", "redis://10.0.0.5:6379"),
        ("hyperpod.pd_routing_threshold", -1),
        ("hyperpod.decode_tensor_parallel_size", 16),
    ],
)
def test_invalid_values_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as error:
        _parse(**{key: value})
    assert error.value.key == key
