"""The opt-in ``<tier>.inference_gateway`` context key: parsed from JSON (cdk.json) or a string (-c)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.k8s.inference_gateway import LoraAdapter, PoolScaling
from inference_tiers.k8s.inference_gateway_settings import inference_gateway_setting

KEY = "disaggregated.inference_gateway"
parse = inference_gateway_setting(("prefill", "decode"), decode_pool="decode")
POOLS = {"prefill": {"min_replicas": 1, "max_replicas": 2}, "decode": {"min_replicas": 1, "max_replicas": 8}}


def test_null_and_empty_mean_off() -> None:
    assert parse(KEY, None) is None
    assert parse(KEY, "") is None


def test_a_json_object_and_its_string_form_parse_alike() -> None:
    value = {
        "pools": {**POOLS, "decode": {"min_replicas": 1, "max_replicas": 8, "waiting_per_replica": 2}},
        "lora_adapters": {"sql-lora": "s3://adapters-bucket/sql"},
        "max_lora_rank": 32,
    }
    settings = parse(KEY, value)
    assert settings == parse(KEY, json.dumps(value))
    assert settings is not None
    assert settings.pools["decode"] == PoolScaling(1, 8, waiting_per_replica=2)
    assert settings.pools["prefill"] == PoolScaling(1, 2)
    assert settings.lora_adapters == (LoraAdapter("sql-lora", "s3://adapters-bucket/sql"),)
    assert (settings.max_lora_rank, settings.request_timeout_seconds) == (32, 600)


def test_scale_to_zero_is_allowed_where_there_is_no_decode_pool() -> None:
    single = inference_gateway_setting(("model",))
    settings = single(
        "hyperpod.inference_gateway", {"pools": {"model": {"min_replicas": 0, "max_replicas": 2}}}
    )
    assert settings is not None and settings.pools["model"].scale_to_zero


@pytest.mark.parametrize(
    ("value", "key", "accepted"),
    [
        ("{not json", KEY, "null (off) or a JSON object"),
        ([1], KEY, "null (off) or a JSON object"),
        ({"pools": POOLS, "replicas": 3}, f"{KEY}.replicas", "a known key"),
        ({"pools": {"prefill": POOLS["prefill"]}}, f"{KEY}.pools", "exactly the pools prefill, decode"),
        (
            {"pools": {**POOLS, "decode": {"min_replicas": 0, "max_replicas": 2}}},
            f"{KEY}.pools.decode.min_replicas",
            "prefill hands every request",
        ),
        (
            {"pools": {**POOLS, "prefill": {"max_replicas": 2}}},
            f"{KEY}.pools.prefill.min_replicas",
            "required",
        ),
        (
            {"pools": {**POOLS, "prefill": {"min_replicas": 3, "max_replicas": 2}}},
            f"{KEY}.pools.prefill.min_replicas",
            "at most max_replicas",
        ),
        (
            {"pools": {**POOLS, "prefill": {"min_replicas": 1, "max_replicas": 99}}},
            f"{KEY}.pools.prefill.max_replicas",
            "from 1 to 64",
        ),
        (
            {
                "pools": {
                    **POOLS,
                    "prefill": {"min_replicas": 1, "max_replicas": 2, "kv_cache_utilisation": 2},
                }
            },
            f"{KEY}.pools.prefill.kv_cache_utilisation",
            "0.05 to 1",
        ),
        (
            {"pools": {**POOLS, "prefill": {"min_replicas": 1, "max_replicas": 2, "burst": 1}}},
            f"{KEY}.pools.prefill.burst",
            "a known key",
        ),
        (
            {"pools": POOLS, "lora_adapters": ["s3://b/x"]},
            f"{KEY}.lora_adapters",
            "adapter name -> s3:// URI",
        ),
        (
            {"pools": POOLS, "lora_adapters": {"sql": "/local/path"}},
            f"{KEY}.lora_adapters.sql",
            "s3://bucket/prefix",
        ),
        ({"pools": POOLS, "max_lora_rank": 12}, f"{KEY}.max_lora_rank", "vLLM's LoRA ranks"),
        (
            {"pools": POOLS, "request_timeout_seconds": "0"},
            f"{KEY}.request_timeout_seconds",
            "from 1 to 3600",
        ),
    ],
)
def test_bad_values_name_the_full_key(value: Any, key: str, accepted: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(KEY, value)
    assert raised.value.key == key
    assert accepted in raised.value.accepted
