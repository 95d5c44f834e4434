"""The gateway tier's context keys: every bad value is a ConfigError naming the key and what is accepted."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from inference_tiers.app_factory import parse_app_config
from inference_tiers.config import ConfigError
from inference_tiers.stacks.gateway import GatewaySettings, GatewayStack
from tests.harness import configured_app, make_app


def gateway_settings(**context: Any) -> GatewaySettings:
    """The parsed settings only (no stack is built)."""
    app = configured_app(tier="gateway", **context)
    return parse_app_config(app.node.get_all_context()).for_tier("gateway", GatewaySettings)


CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        (
            "gateway.certificate_arn",
            "arn:aws:iam::123456789012:server-certificate/x",
            "an ACM certificate ARN",
        ),
        ("gateway.allow_http", "maybe", "true or false"),
        ("gateway.domain_name", "Gateway", "a DNS name"),
        ("gateway.vpc_cidr", "10.0.0.0/8", "an IPv4 CIDR block from /16 to /24"),
        ("gateway.client_cidrs", "0.0.0.0/0", r"an IPv4 CIDR block from /8 to /32"),
        ("gateway.bedrock_model_id", "us.amazon.nova-2-lite-v1:0", "a foundation-model id|geography"),
        ("gateway.bedrock_inference_profile", "mars", "one of us, eu"),
        ("gateway.guardrail_arn", "gr-123", "a guardrail ARN"),
        ("gateway.guardrail_version", "DRAFT", "a numbered guardrail version"),
        ("gateway.sagemaker_endpoint_name", "my_endpoint", "a SageMaker endpoint name"),
        ("gateway.openai_models", '{"x": "http://a/v1"}', "an object"),
        ("gateway.openai_models", '{"x": {"base_url": "a", "served_model": "m"}}', "an http"),
        ("gateway.fallbacks", '{"nova-lite": ["unknown"]}', "model names among"),
        ("gateway.requests_per_minute", '{"nova-lite": 0}', "an integer from 1 to 1000000"),
        ("gateway.requests_per_minute", '{"nova-lite": "many"}', "an integer from 1 to 1000000"),
        ("gateway.requests_per_minute", '{"unknown": 60}', r"model names among .*not \['unknown'\]"),
        ("gateway.desired_count", "1", "an integer from 2 to 100"),
        ("gateway.max_count", "1", "an integer from 2 to 100"),
        ("gateway.request_timeout_seconds", "0", "an integer from 5 to 3600"),
        ("gateway.alarm_email", "nobody", "an email address"),
        ("gateway.request_logging", "verbose", "true or false"),
    ],
)
def test_bad_values_name_the_key(key: str, value: Any, accepted: str) -> None:
    with pytest.raises(ConfigError, match=rf"context key '{key}[^']*': got .*expected .*({accepted})"):
        make_app(tier="gateway", **{key: value})


def test_a_certificate_and_plain_http_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="'gateway.allow_http'.*false when gateway.certificate_arn is set"):
        make_app(tier="gateway", **{"gateway.allow_http": "true", "gateway.certificate_arn": CERT})


def test_guardrail_arn_and_version_come_together() -> None:
    with pytest.raises(ConfigError, match="'gateway.guardrail_version'.*both gateway.guardrail_arn"):
        make_app(
            tier="gateway",
            **{"gateway.guardrail_arn": "arn:aws:bedrock:us-east-1:123456789012:guardrail/ab1"},
        )


def test_max_count_is_at_least_desired_count() -> None:
    with pytest.raises(ConfigError, match="'gateway.max_count'.*at least gateway.desired_count"):
        make_app(tier="gateway", **{"gateway.desired_count": "6", "gateway.max_count": "4"})


def test_fargate_cpu_and_memory_pairs_are_checked_before_any_construct() -> None:
    with pytest.raises(ConfigError, match="'gateway.cpu': got 3000; expected one of 1024, 2048"):
        make_app(tier="gateway", **{"gateway.cpu": "3000"})


# Fargate's table (docs.aws.amazon.com/AmazonECS/latest/developerguide/task-cpu-memory-error.html): the pairs
# CloudFormation's own validation refuses with E3047 (audit W10), and the edges of each row.
@pytest.mark.parametrize(
    ("cpu", "memory", "accepted"),
    [
        (4096, 4096, "8192 to 30720 MiB in steps of 1024"),
        (4096, 32768, "8192 to 30720 MiB in steps of 1024"),
        (4096, 9000, "8192 to 30720 MiB in steps of 1024"),
        (1024, 9216, "2048 to 8192 MiB in steps of 1024"),
        (8192, 18432, "16384 to 61440 MiB in steps of 4096"),
        (16384, 36864, "32768 to 122880 MiB in steps of 8192"),
    ],
)
def test_memory_outside_fargates_table_names_the_key_and_the_sizes(
    cpu: int, memory: int, accepted: str
) -> None:
    with pytest.raises(ConfigError, match=rf"'gateway.memory_mib': got {memory}; expected {accepted}"):
        make_app(tier="gateway", **{"gateway.cpu": str(cpu), "gateway.memory_mib": str(memory)})


@pytest.mark.parametrize(("cpu", "memory"), [(1024, 8192), (2048, 16384), (4096, 30720), (8192, 20480)])
def test_memory_in_fargates_table_is_accepted(cpu: int, memory: int) -> None:
    settings = gateway_settings(**{"gateway.cpu": cpu, "gateway.memory_mib": memory})
    assert (settings.cpu, settings.memory_mib) == (cpu, memory)


def test_an_inference_component_without_its_endpoint_is_refused() -> None:
    with pytest.raises(
        ConfigError, match="'gateway.sagemaker_inference_component': got 'qwen-ic'; expected empty unless"
    ):
        make_app(tier="gateway", **{"gateway.sagemaker_inference_component": "qwen-ic"})


def test_the_guarded_model_falls_back_to_an_unguarded_one_only_when_allowed() -> None:
    fallbacks = '{"nova-lite": ["qwen3-8b"]}'
    context = {"gateway.sagemaker_endpoint_name": "qwen", "gateway.fallbacks": fallbacks}
    with pytest.raises(
        ConfigError,
        match=r"'gateway.fallbacks.nova-lite'.*not \['qwen3-8b'\].*gateway.allow_unguarded_fallbacks",
    ):
        make_app(tier="gateway", **context)
    allowed = gateway_settings(**context, **{"gateway.allow_unguarded_fallbacks": "true"})
    assert allowed.fallbacks == {"nova-lite": ("qwen3-8b",)} and allowed.allow_unguarded_fallbacks


def rendered_config(**context: Any) -> dict[str, Any]:
    _, stacks = make_app(tier="gateway", **{"gateway.allow_http": "true", **context})
    (stack,) = stacks
    assert isinstance(stack, GatewayStack)
    return stack.gateway.config


def test_a_rate_limit_reaches_the_rendered_model_and_none_keeps_simple_shuffle() -> None:
    limited = rendered_config(**{"gateway.requests_per_minute": '{"nova-lite": 120}'})
    assert limited["model_list"][0]["litellm_params"]["rpm"] == 120
    assert limited["router_settings"]["routing_strategy"] == "usage-based-routing-v2"
    assert limited["router_settings"]["model_group_retry_policy"] == {
        "nova-lite": {"RateLimitErrorRetries": 0}
    }
    default = rendered_config()
    assert "rpm" not in default["model_list"][0]["litellm_params"]
    assert default["router_settings"]["routing_strategy"] == "simple-shuffle"
    assert "model_group_retry_policy" not in default["router_settings"]


def test_request_logging_sets_the_proxys_log_level_to_info_and_is_off_by_default() -> None:
    def log_level(**context: Any) -> str:
        _, stacks = make_app(tier="gateway", **{"gateway.allow_http": "true", **context})
        (stack,) = stacks
        assert isinstance(stack, GatewayStack)
        (definition,) = Template.from_stack(stack).find_resources("AWS::ECS::TaskDefinition").values()
        (entry,) = definition["Properties"]["ContainerDefinitions"]
        return str({e["Name"]: e["Value"] for e in entry["Environment"]}["LITELLM_LOG"])

    assert log_level() == "WARNING"
    assert log_level(**{"gateway.request_logging": "true"}) == "INFO"


def test_a_fallback_with_its_own_rate_limit_is_refused() -> None:
    context = {
        "gateway.openai_models": '{"llama": {"base_url": "http://10.1.0.5:30000/v1", "served_model": "m"}}',
        "gateway.fallbacks": '{"llama": ["nova-lite"]}',
        "gateway.requests_per_minute": '{"nova-lite": 60}',
    }
    with pytest.raises(
        ConfigError, match=r"'gateway.fallbacks.llama'.*not \['nova-lite'\].*counts a limit per deployment"
    ):
        gateway_settings(**context)
    assert gateway_settings(**{**context, "gateway.requests_per_minute": '{"llama": 60}'}).fallbacks
