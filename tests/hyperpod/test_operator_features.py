"""The operator's own inference features on the InferenceEndpointConfig: tiered KV cache (kvCacheSpec),
intelligent routing (intelligentRoutingSpec, creation-only) and prefill/decode (pdSpec).

Every combination the builder allows validates against the vendored v1 CRD (tests/data/hyperpod/SOURCE.md) with
no field the API server would prune; every combination the operator rejects or silently ignores is refused."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from inference_tiers.constructs.eks.hyperpod_gateway import hyperpod_model_pool
from inference_tiers.k8s.hyperpod_inference import (
    AutoScaling,
    CloudWatchTrigger,
    InferenceEndpoint,
    IntelligentRouting,
    KvCache,
    PdRole,
    PrefillDecode,
    S3ModelSource,
    VllmWorker,
    creation_suffix,
    image_repository,
    render_inference_endpoint_config,
)
from tests.hyperpod.support import validate_inference_endpoint_config

# The image of the AWS KV-cache sample (aws/sagemaker-hyperpod-cli@011ca927, config/samples/
# v1_llama31_8b_kv_cache_l1_l2.yaml) and of the DPD page.
LMCACHE = "lmcache/vllm-openai:v0.3.7"
DLC = "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1"
REDIS = "rediss://master.kv-cache.abc123.usw2.cache.amazonaws.com:6379"

KV_CACHES: dict[str, KvCache | None] = {
    "no-kv": None,
    "l1": KvCache(),
    "l1-tieredstorage": KvCache(l2_backend="tieredstorage", tiered_storage_memory_percent=20),
    "l1-redis": KvCache(l2_backend="redis", redis_url=REDIS),
    "redis-only": KvCache(l1=False, l2_backend="redis", redis_url=REDIS),
}
ROUTINGS: dict[str, IntelligentRouting | None] = {
    "no-routing": None,
    **{s: IntelligentRouting(s) for s in ("prefixaware", "kvaware", "session", "roundrobin")},
}
PDS: dict[str, PrefillDecode | None] = {
    "no-pd": None,
    "pd": PrefillDecode(PdRole(tensor_parallel_size=4), PdRole(tensor_parallel_size=4, replicas=2)),
    "pd-scaled": PrefillDecode(
        PdRole(8, autoscaling=AutoScaling(1, 3, CloudWatchTrigger.sagemaker_invocations("chat", 30))),
        PdRole(8, autoscaling=AutoScaling(1, 4, CloudWatchTrigger.sagemaker_invocations("chat", 60))),
        routing_threshold=0,
    ),
}


def endpoint(**overrides: Any) -> InferenceEndpoint:
    values: dict[str, Any] = {
        "name": "chat",
        "instance_types": ("ml.p5.48xlarge",),
        "model_source": S3ModelSource(bucket_name="models", region="us-west-2", location="Llama"),
        "worker": VllmWorker(image=LMCACHE, tensor_parallel_size=8),
        "endpoint_name": "chat",
    }
    values.update(overrides)
    return InferenceEndpoint(**values)


COMBINATIONS = list(itertools.product(KV_CACHES, ROUTINGS, PDS))


@pytest.mark.parametrize(("kv", "routing", "pd"), COMBINATIONS)
def test_every_allowed_combination_validates_strictly(kv: str, routing: str, pd: str) -> None:
    document = render_inference_endpoint_config(
        endpoint(kv_cache=KV_CACHES[kv], routing=ROUTINGS[routing], prefill_decode=PDS[pd])
    )
    validate_inference_endpoint_config(document)
    spec = document["spec"]
    assert ("kvCacheSpec" in spec) == (KV_CACHES[kv] is not None)
    assert ("intelligentRoutingSpec" in spec) == (ROUTINGS[routing] is not None)
    assert ("pdSpec" in spec) == (PDS[pd] is not None)


def test_kv_cache_renders_the_l2_backend() -> None:
    spec = render_inference_endpoint_config(endpoint(kv_cache=KV_CACHES["l1-redis"]))["spec"]
    assert spec["kvCacheSpec"] == {
        "enableL1Cache": True,
        "enableL2Cache": True,
        "l2CacheSpec": {"l2CacheBackend": "redis", "l2CacheLocalUrl": REDIS},
    }
    tiered = render_inference_endpoint_config(endpoint(kv_cache=KV_CACHES["l1-tieredstorage"]))["spec"]
    # The docs: no URL for tieredstorage (the daemon runs on every node).
    assert tiered["kvCacheSpec"]["l2CacheSpec"] == {"l2CacheBackend": "tieredstorage"}
    assert render_inference_endpoint_config(endpoint(kv_cache=KvCache()))["spec"]["kvCacheSpec"] == {
        "enableL1Cache": True,
        "enableL2Cache": False,
    }


def test_tiered_storage_share_comes_off_the_model_pod_memory() -> None:
    plain = render_inference_endpoint_config(endpoint())["spec"]["worker"]["resources"]["requests"]
    tiered = render_inference_endpoint_config(endpoint(kv_cache=KV_CACHES["l1-tieredstorage"]))["spec"]
    # 20 % of a p5's 2048 GiB (409.6 GiB) is the daemon's, not the pod's.
    memory = int(plain["memory"].removesuffix("Gi")) - int(
        tiered["worker"]["resources"]["requests"]["memory"].removesuffix("Gi")
    )
    assert memory in (409, 410)
    with pytest.raises(ValueError, match=r"'threads_per_core' got 1; .*tiered storage share \(95 %\)"):
        endpoint(
            instance_types=("ml.g5.xlarge",),
            worker=VllmWorker(image=LMCACHE, tensor_parallel_size=1),
            kv_cache=KvCache(l2_backend="tieredstorage", tiered_storage_memory_percent=95),
        )


def test_routing_renames_the_resource_and_the_registered_endpoint() -> None:
    names = {}
    for strategy, routing in ROUTINGS.items():
        document = render_inference_endpoint_config(endpoint(routing=routing))
        names[strategy] = document["metadata"]["name"]
        assert document["spec"]["modelName"] == document["metadata"]["name"]
        assert document["spec"]["endpointName"] == "chat" + creation_suffix(routing)
        # Clients keep asking for the served model by its name.
        args = document["spec"]["worker"]["args"]
        assert args[args.index("--served-model-name") + 1] == "chat"
    assert names["no-routing"] == "chat"
    assert len(set(names.values())) == len(names)
    assert render_inference_endpoint_config(endpoint(routing=IntelligentRouting("session")))["spec"][
        "intelligentRoutingSpec"
    ] == {"enabled": True, "routingStrategy": "session"}


def test_prefill_decode_roles_get_gpus_efa_and_their_own_scaling() -> None:
    pd = render_inference_endpoint_config(endpoint(prefill_decode=PDS["pd-scaled"]))["spec"]["pdSpec"]
    assert pd["routingThreshold"] == 0
    prefill = pd["prefillSpec"]
    assert prefill["args"] == ["--tensor-parallel-size", "8"]
    # A p5.48xlarge has 32 EFA devices for 8 GPUs: a pod of 8 GPUs gets all of them.
    assert prefill["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert pd["decodingSpec"]["replicas"] == 1
    assert pd["autoScalingSpec"]["prefillAutoScaling"]["maxReplicaCount"] == 3
    assert pd["autoScalingSpec"]["decodingAutoScaling"]["maxReplicaCount"] == 4
    half = render_inference_endpoint_config(endpoint(prefill_decode=PDS["pd"]))["spec"]["pdSpec"]
    assert half["decodingSpec"]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
    assert "autoScalingSpec" not in half


def test_image_repository_drops_tag_and_digest() -> None:
    assert image_repository(LMCACHE) == "lmcache/vllm-openai"
    assert image_repository("localhost:5000/lmcache/vllm-openai@sha256:" + "a" * 64) == (
        "localhost:5000/lmcache/vllm-openai"
    )
    assert image_repository(DLC) == "public.ecr.aws/deep-learning-containers/vllm"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {
                "worker": VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=8),
                "kv_cache": KvCache(),
            },
            r"'worker.image' got 'vllm/vllm-openai:v0.10.1'; expected an image of lmcache/vllm-openai or "
            r"deep-learning-containers/vllm .* when kv_cache is set",
        ),
        (
            {
                "worker": VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=8),
                "prefill_decode": PDS["pd"],
            },
            r"'worker.image' .* when prefill_decode is set",
        ),
        (
            {
                "worker": VllmWorker(image="ghcr.io/sgl-project/sglang:v0.5.0", tensor_parallel_size=8),
                "routing": IntelligentRouting(),
            },
            r"'worker.image' got 'ghcr.io/sgl-project/sglang:v0.5.0'; expected a vLLM image when routing is set",
        ),
        (
            {"instance_types": ("ml.g6e.48xlarge",), "prefill_decode": PDS["pd"]},
            r"'instance_types\[0\]' got 'ml.g6e.48xlarge'; expected one of ml.p5.48xlarge, .* when prefill_decode",
        ),
        (
            {
                "prefill_decode": PDS["pd"],
                "autoscaling": AutoScaling(1, 2, CloudWatchTrigger.sagemaker_invocations("chat", 60)),
            },
            r"'autoscaling' got 1; expected None when prefill_decode is set",
        ),
        (
            {"prefill_decode": PrefillDecode(PdRole(16), PdRole(8))},
            r"'prefill_decode.prefill.tensor_parallel_size' got 16; expected 1 to 8",
        ),
        (
            {"name": "a" * 42, "endpoint_name": None, "routing": IntelligentRouting(), "autoscaling": None},
            r"'name' got 'a{42}'; expected at most 41 characters when routing is set",
        ),
        (
            {"endpoint_name": "e" * 55, "routing": IntelligentRouting()},
            r"'endpoint_name' got 'e{55}'; expected at most 54 characters when routing is set",
        ),
    ],
)
def test_operator_rejected_combinations_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        endpoint(**overrides)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: KvCache(l1=False), r"KvCache: parameter 'l1' got False; expected True, or an l2_backend"),
        (lambda: KvCache(l2_backend="memcached"), r"'l2_backend' got 'memcached'"),
        (lambda: KvCache(l2_backend="redis"), r"'redis_url' got None; expected the URL of the ElastiCache"),
        (
            lambda: KvCache(l2_backend="redis", redis_url="redis://10.0.0.5:6379"),
            r"'redis_url' got 'redis://10.0.0.5:6379'; expected rediss://<ElastiCache endpoint>",
        ),
        (
            # The cache is TLS-only: a plain redis:// URL to a real ElastiCache host never connects.
            lambda: KvCache(l2_backend="redis", redis_url="redis://kv.abc.usw2.cache.amazonaws.com:6379"),
            r"'redis_url' got 'redis://kv\.abc.*; expected rediss://.*plain redis:// is refused",
        ),
        (
            lambda: KvCache(l2_backend="redis", redis_url="rediss://cache.example.com:6379"),
            r"'redis_url' got 'rediss://cache.example.com:6379'",
        ),
        (lambda: KvCache(redis_url=REDIS), r"'redis_url' got .*; expected None unless l2_backend is redis"),
        (
            lambda: KvCache(l2_backend="tieredstorage"),
            r"'tiered_storage_memory_percent' got None; expected the cluster's TieredStorageConfig",
        ),
        (
            lambda: KvCache(l2_backend="tieredstorage", tiered_storage_memory_percent=0),
            r"'tiered_storage_memory_percent' got 0",
        ),
        (
            lambda: KvCache(tiered_storage_memory_percent=10),
            r"'tiered_storage_memory_percent' got 10; expected None unless l2_backend is tieredstorage",
        ),
        (lambda: IntelligentRouting("random"), r"IntelligentRouting: parameter 'strategy' got 'random'"),
        (lambda: PdRole(0), r"PdRole: parameter 'tensor_parallel_size' got 0"),
        (lambda: PrefillDecode(PdRole(1), PdRole(1), routing_threshold=-1), r"'routing_threshold' got -1"),
        (lambda: replace(PDS["pd"], decode="decode"), r"PrefillDecode: parameter 'decode' got 'decode'"),
    ],
)
def test_invalid_feature_arguments_are_refused(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("field", ["routing", "prefill_decode"])
def test_the_istio_gateway_is_refused_beside_the_operators_routers(field: str) -> None:
    value = {"routing": IntelligentRouting(), "prefill_decode": PDS["pd"]}[field]
    with pytest.raises(
        ValueError,
        match=rf"hyperpod_model_pool: parameter 'endpoint.{field}' got .*; expected None behind the inference "
        "gateway",
    ):
        hyperpod_model_pool(endpoint(**{field: value}))
    # Without them the pool selects the operator's pods by their app label (metadata.name).
    assert hyperpod_model_pool(endpoint()).selector == {"app": "chat"}
