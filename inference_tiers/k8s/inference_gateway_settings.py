"""The opt-in ``<tier>.inference_gateway`` context key of the EKS tiers: one JSON object, or null (off).

::

    "disaggregated.inference_gateway": {
      "pools": {"prefill": {"min_replicas": 1, "max_replicas": 4},
                "decode":  {"min_replicas": 1, "max_replicas": 8, "waiting_per_replica": 2}},
      "lora_adapters": {"sql-lora": "s3://my-bucket/adapters/sql-lora"},
      "max_lora_rank": 16,
      "request_timeout_seconds": 600
    }

Every pool the tier has must be listed (``prefill`` and ``decode`` for ``disaggregated``, ``model`` for
``hyperpod``); each takes ``min_replicas``/``max_replicas`` and optionally ``waiting_per_replica`` and
``kv_cache_utilisation`` (:class:`~inference_tiers.k8s.inference_gateway.PoolScaling`). ``min_replicas: 0``
(scale to zero) is accepted only where the tier has no decode pool (a dev setup that can wait for a cold start).
Wrong values raise :class:`~inference_tiers.config.ConfigError` naming the full key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inference_tiers.config import ConfigError, Parser, integer, number
from inference_tiers.k8s.inference_gateway import (
    MODEL_NAME_PATTERN,
    S3_PREFIX_PATTERN,
    LoraAdapter,
    PoolScaling,
)

_POOL_KEYS = {
    "min_replicas": integer(0, 64),
    "max_replicas": integer(1, 64),
    "waiting_per_replica": integer(1, 10000),
    "kv_cache_utilisation": number(0.05, 1),
}
_TOP_KEYS = ("pools", "lora_adapters", "max_lora_rank", "request_timeout_seconds")


@dataclass(frozen=True)
class InferenceGatewaySettings:
    """The parsed setting: scaling per pool name, LoRA adapters, route timeout."""

    pools: Mapping[str, PoolScaling]
    lora_adapters: tuple[LoraAdapter, ...] = ()
    max_lora_rank: int = 16
    request_timeout_seconds: int = 600


def inference_gateway_setting(pool_names: tuple[str, ...], *, decode_pool: str | None = None) -> Parser:
    """A parser of the tier's ``inference_gateway`` key; ``pool_names`` are the pools the tier scales.

    ``decode_pool``: the pool that must keep a replica (scale to zero would leave prefilled requests with no
    decoder); None where the tier has no separate decode pool.
    """
    accepted_pools = ", ".join(pool_names)

    def parse(key: str, raw: Any) -> InferenceGatewaySettings | None:
        if raw is None or raw == "":
            return None
        value = json_object(key, raw, f"null (off) or a JSON object with keys {', '.join(_TOP_KEYS)}")
        known_keys(key, value, _TOP_KEYS)
        pools_raw = value.get("pools")
        if not isinstance(pools_raw, dict) or set(pools_raw) != set(pool_names):
            raise ConfigError(
                f"{key}.pools", pools_raw, f"a JSON object with exactly the pools {accepted_pools}"
            )
        pools = {name: pool_scaling(f"{key}.pools.{name}", pools_raw[name]) for name in pool_names}
        if decode_pool is not None and pools[decode_pool].scale_to_zero:
            raise ConfigError(
                f"{key}.pools.{decode_pool}.min_replicas",
                0,
                "at least 1: prefill hands every request to a decode pod (scale to zero is for setups "
                "without a separate decode pool)",
            )
        adapters_raw = value.get("lora_adapters", {})
        if not isinstance(adapters_raw, dict) or len(adapters_raw) > 64:
            raise ConfigError(
                f"{key}.lora_adapters", adapters_raw, "a JSON object of at most 64 adapter name -> s3:// URI"
            )
        adapters = tuple(lora_adapter(f"{key}.lora_adapters", n, uri) for n, uri in adapters_raw.items())
        return InferenceGatewaySettings(
            pools=pools,
            lora_adapters=adapters,
            max_lora_rank=_choice_int(f"{key}.max_lora_rank", value.get("max_lora_rank", 16)),
            request_timeout_seconds=integer(1, 3600)(
                f"{key}.request_timeout_seconds", value.get("request_timeout_seconds", 600)
            ),
        )

    return parse


# vLLM's --max-lora-rank choices (vllm/config/lora.py MaxLoRARanks).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def _choice_int(key: str, raw: Any) -> int:
    value = integer(1, 512)(key, raw)
    if value not in LORA_RANKS:
        raise ConfigError(key, raw, "one of " + ", ".join(map(str, LORA_RANKS)) + " (vLLM's LoRA ranks)")
    return int(value)


def json_object(key: str, raw: Any, accepted: str) -> dict[str, Any]:
    """The context value at ``key`` as a JSON object (a dict, or its JSON text); ConfigError otherwise."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigError(key, raw, accepted) from None
    if not isinstance(value, dict):
        raise ConfigError(key, raw, accepted)
    return value


def known_keys(key: str, value: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """ConfigError naming ``<key>.<entry>`` for an entry of ``value`` not in ``known``."""
    for name in value:
        if name not in known:
            raise ConfigError(f"{key}.{name}", value[name], "a known key: " + ", ".join(known))


def pool_scaling(key: str, raw: Any) -> PoolScaling:
    """``{"min_replicas": .., "max_replicas": .., "waiting_per_replica": .., "kv_cache_utilisation": ..}`` at
    ``key`` as a PoolScaling; ConfigError naming the entry otherwise."""
    value = json_object(key, raw, "a JSON object with min_replicas and max_replicas")
    known_keys(key, value, tuple(_POOL_KEYS))
    parsed: dict[str, Any] = {}
    for name, parser in _POOL_KEYS.items():
        if name in value:
            parsed[name] = parser(f"{key}.{name}", value[name])
        elif name in ("min_replicas", "max_replicas"):
            raise ConfigError(f"{key}.{name}", None, "a value (this key is required)")
    if parsed["min_replicas"] > parsed["max_replicas"]:
        raise ConfigError(
            f"{key}.min_replicas", parsed["min_replicas"], f"at most max_replicas ({parsed['max_replicas']})"
        )
    return PoolScaling(**parsed)


def lora_adapter(key: str, name: Any, uri: Any) -> LoraAdapter:
    """The entry ``name: uri`` of the adapters object at ``key``; ConfigError naming it otherwise."""
    if not isinstance(name, str) or not re.fullmatch(MODEL_NAME_PATTERN, name):
        raise ConfigError(f"{key}", name, f"adapter names matching {MODEL_NAME_PATTERN}")
    if not isinstance(uri, str) or not re.fullmatch(S3_PREFIX_PATTERN, uri):
        raise ConfigError(f"{key}.{name}", uri, "an s3://bucket/prefix URI")
    return LoraAdapter(name=name, s3_uri=uri)


def check_node_capacity(settings: InferenceGatewaySettings | None, key: str, nodes: int) -> None:
    """Each pool's maximum must fit on the nodes the other pools leave at their minimum (one vLLM pod per node)."""
    if settings is None:
        return
    for name, scaling in settings.pools.items():
        others = sum(other.min_replicas for other_name, other in settings.pools.items() if other_name != name)
        if scaling.max_replicas + others > nodes:
            raise ConfigError(
                f"{key}.pools.{name}.max_replicas",
                scaling.max_replicas,
                f"at most {nodes - others}: the tier has {nodes} GPU nodes, one vLLM pod each, and the other "
                f"pools keep {others} at their minimum (more replicas would stay Pending)",
            )
