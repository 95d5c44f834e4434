"""The configuration contract: every bad context value is a ConfigError naming key, value and what is accepted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from inference_tiers import config
from inference_tiers.app_factory import parse_app_config
from inference_tiers.config import ConfigError, TierSpec, parse_config, setting
from tests.harness import cdk_json_context


@dataclass(frozen=True)
class _DemoSettings:
    replicas: int = setting(config.integer(1, 8), "replica count")
    ratio: float = setting(config.number(0, 1), "a fraction")
    enabled: bool = setting(config.boolean(), "a flag")
    engine: str = setting(config.choice("vllm", "sglang"), "serving engine")
    name: str = setting(config.text(r"[a-z]{1,8}"), "a short name")
    zones: tuple[str, ...] = setting(config.items(config.text(), min_items=1, max_items=3), "zones")
    tags: dict[str, str] = setting(config.mapping(config.text()), "tags")
    reservation: str | None = setting(config.optional(config.text(r"cr-[0-9a-f]+")), "reservation id")


DEMO = TierSpec("bedrock", _DemoSettings)
VALID: dict[str, Any] = {
    "tier": "bedrock",
    "bedrock.replicas": 2,
    "bedrock.ratio": 0.5,
    "bedrock.enabled": True,
    "bedrock.engine": "vllm",
    "bedrock.name": "abc",
    "bedrock.zones": ["use1-az1"],
    "bedrock.tags": {"team": "ml"},
    "bedrock.reservation": None,
}


def parse(**overrides: Any) -> _DemoSettings:
    settings = parse_config({**VALID, **overrides}, [DEMO]).settings["bedrock"]
    assert isinstance(settings, _DemoSettings)
    return settings


def test_json_values_keep_their_types() -> None:
    assert parse() == _DemoSettings(2, 0.5, True, "vllm", "abc", ("use1-az1",), {"team": "ml"}, None)


def test_command_line_strings_are_parsed() -> None:
    settings = parse(
        **{
            "bedrock.replicas": "8",
            "bedrock.ratio": "0.25",
            "bedrock.enabled": "false",
            "bedrock.zones": "use1-az1, use1-az2",
            "bedrock.tags": '{"team": "ml", "env": "dev"}',
            "bedrock.reservation": "cr-0abc",
        }
    )
    assert (settings.replicas, settings.ratio, settings.enabled) == (8, 0.25, False)
    assert settings.zones == ("use1-az1", "use1-az2")
    assert settings.tags == {"team": "ml", "env": "dev"}
    assert settings.reservation == "cr-0abc"


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("bedrock.replicas", "9", "an integer from 1 to 8"),
        ("bedrock.replicas", "two", "an integer from 1 to 8"),
        ("bedrock.replicas", True, "an integer from 1 to 8"),
        ("bedrock.ratio", "1.5", "a number from 0 to 1"),
        ("bedrock.enabled", "maybe", "true or false"),
        ("bedrock.engine", "VLLM", "one of vllm, sglang"),
        ("bedrock.name", "ABC", r"a string matching \[a-z\]\{1,8\}"),
        ("bedrock.zones", "", "a list of 1 to 3 items"),
        ("bedrock.zones", "[1,", "a list of 1 to 3 items"),
        ("bedrock.tags", "not json", "a JSON object"),
        ("bedrock.reservation", "r-1", r"a string matching cr-\[0-9a-f\]\+"),
    ],
)
def test_bad_values_name_key_value_and_accepted(key: str, value: Any, accepted: str) -> None:
    expected = re.escape(f"context key '{key}': got {value!r}; expected ") + accepted
    with pytest.raises(ConfigError, match=expected):
        parse(**{key: value})


def test_list_item_errors_name_the_item() -> None:
    with pytest.raises(ConfigError, match=r"context key 'bedrock.zones\[1\]'"):
        parse(**{"bedrock.zones": ["use1-az1", ""]})


def test_unknown_key_lists_the_tiers_keys() -> None:
    with pytest.raises(
        ConfigError, match=r"context key 'bedrock.replica': got 3; expected a known key: .*bedrock.replicas"
    ):
        parse(**{"bedrock.replica": 3})


def test_cdk_owned_keys_are_not_ours_to_reject() -> None:
    assert (
        parse(
            **{
                "@aws-cdk/core:newStyleStackSynthesis": True,
                "aws:cdk:bundling-stacks": [],
                "acknowledged-issue-numbers": [],
            }
        )
        == parse()
    )


def test_missing_key_says_where_defaults_live() -> None:
    context = dict(VALID)
    del context["bedrock.engine"]
    with pytest.raises(ConfigError, match="add it to the package's defaults.json or pass -c bedrock.engine="):
        parse_config(context, [DEMO])


@pytest.mark.parametrize("tier", ["", "bogus", "bedrock,bedrock", "BEDROCK", None])
def test_tier_selection_rejects_unknown_names(tier: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"context key 'tier': .*expected a comma-separated list of bedrock, or 'all'"
    ):
        parse_config({**VALID, "tier": tier}, [DEMO])


def test_tier_not_yet_provided_is_named_as_such() -> None:
    with pytest.raises(
        ConfigError, match=r"got 'hyperpod'.*not provide yet: sagemaker, hyperpod, disaggregated"
    ):
        parse_config({**VALID, "tier": "hyperpod"}, [DEMO])


def test_all_selects_every_provided_tier_in_build_order() -> None:
    assert parse_config({**VALID, "tier": "all"}, [DEMO]).tiers == ("bedrock",)


def test_tier_error_lists_only_what_exists_once_every_tier_is_provided() -> None:
    every_tier = [TierSpec(name, _DemoSettings) for name in config.TIER_ORDER]
    with pytest.raises(ConfigError) as error:
        parse_config({**VALID, "tier": "gpu"}, every_tier)
    assert str(error.value) == (
        "context key 'tier': got 'gpu'; expected a comma-separated list of "
        "bedrock, sagemaker, hyperpod, disaggregated, gateway, agent-sandbox, observability, platform, or 'all'"
    )


@pytest.mark.parametrize("raw", ["10.0.0.0/16", "10.0.0.0/18", "172.16.0.0/17"])
def test_ipv4_cidr_accepts_network_blocks_in_range(raw: str) -> None:
    assert config.ipv4_cidr(16, 18)("demo.cidr", raw) == raw


@pytest.mark.parametrize(
    "raw", ["10.0.0.0/8", "10.0.0.0/19", "10.0.0.1/16", "999.0.0.0/16", "fd00::/16", "", 16, None]
)
def test_ipv4_cidr_rejects_anything_else_naming_key_value_and_range(raw: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"'demo.cidr': got .*; expected an IPv4 CIDR block from /16 to /18"
    ):
        config.ipv4_cidr(16, 18)("demo.cidr", raw)


def test_ipv4_cidr_without_bounds_gives_an_example() -> None:
    with pytest.raises(ConfigError, match=r"got '203.0.113.0/33'; expected an IPv4 CIDR block such as 203"):
        config.ipv4_cidr()("demo.cidrs[0]", "203.0.113.0/33")


@pytest.mark.parametrize(
    "raw",
    [
        "vllm/vllm-openai:v0.10.1",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm:vllm0.33.0-efa1.50.0",
        "localhost:5000/router:0.1.17",
        "public.ecr.aws/x/vllm@sha256:" + "0" * 64,
        "ubuntu:latest-lts",
    ],
)
def test_pinned_image_accepts_tags_and_digests(raw: str) -> None:
    assert config.pinned_image()("demo.image", raw) == raw


@pytest.mark.parametrize(
    "raw", ["vllm/vllm-openai", "vllm/vllm-openai:latest", "localhost:5000/router", "a b:1", "x@sha256:abc"]
)
def test_pinned_image_rejects_untagged_and_latest(raw: str) -> None:
    with pytest.raises(
        ConfigError, match=r"'demo.image': got .*; expected a container image with a pinned tag"
    ):
        config.pinned_image()("demo.image", raw)


@pytest.mark.parametrize("tier", ["bedrock", "gateway", "observability", "platform"])
def test_every_alarm_email_is_one_parser(tier: str) -> None:
    """One email parser (config.email_address) for every tier's alert address: the same value refused the same
    way, naming the tier's key."""
    with pytest.raises(
        ConfigError, match=rf"'{tier}.alarm_email': got 'ops at example.com'; expected an email"
    ):
        parse_app_config({**cdk_json_context(), "tier": tier, f"{tier}.alarm_email": "ops at example.com"})
