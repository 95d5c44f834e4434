"""Fixtures that run the real components: the LiteLLM proxy with the rendered config, stub upstreams, and
PostgreSQL, all on 127.0.0.1 (tests/gateway/proxy.py explains where each comes from)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from inference_tiers.litellm.config import (
    BedrockModel,
    GuardrailConfig,
    ModelTarget,
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    SageMakerModel,
    render_config,
    render_text,
)
from tests.gateway.proxy import Postgres, RunningProxy, run_postgres, run_proxy
from tests.gateway.stubs import StubBackend

GUARDRAIL = GuardrailConfig(
    guardrail_arn="arn:aws:bedrock:us-east-1:123456789012:guardrail/gr0tier1", version="3"
)
PROFILE_ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/aip0tier1"
UPSTREAM_KEY = "upstream-key-for-vllm"


def loopback_models(stub_url: str) -> list[ModelTarget]:
    """One model of every kind the gateway fronts, each pointed at the stub instead of AWS or EKS."""
    return [
        BedrockModel(
            name="nova-lite",
            model_id="us.amazon.nova-2-lite-v1:0",
            guardrail=GUARDRAIL,
            region="us-east-1",
            runtime_endpoint=stub_url,
        ),
        BedrockModel(
            name="nova-lite-attributed",
            model_id=PROFILE_ARN,
            base_model_id="us.amazon.nova-2-lite-v1:0",
            guardrail=GUARDRAIL,
            region="us-east-1",
            runtime_endpoint=stub_url,
        ),
        SageMakerModel(
            name="qwen-sagemaker",
            endpoint_name="qwen-endpoint",
            inference_component="qwen-endpoint-ic",
            served_model="Qwen/Qwen3-8B",
            region="us-east-1",
            runtime_url=f"{stub_url}/endpoints/qwen-endpoint/invocations",
        ),
        OpenAICompatibleModel(
            name="llama-eks", base_url=f"{stub_url}/v1", served_model="meta-llama/Llama-3.3-70B-Instruct"
        ),
        OpenAICompatibleModel(name="llama-down", base_url=f"{stub_url}/down/v1", served_model="llama-down"),
    ]


@dataclass
class Gateway:
    proxy: RunningProxy
    stub: StubBackend
    models: list[ModelTarget]


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The real proxy with the rendered production config (minus the database, which needs Prisma's native
    engine that cannot be downloaded here; docs/gateway.md) in front of the stub."""
    with StubBackend() as stub:
        models = loopback_models(stub.url)
        config = render_config(
            models,
            router=RouterOptions(
                num_retries=0, fallbacks={"llama-down": ["llama-eks"], "llama-eks": ["nova-lite"]}
            ),
            features=ProxyFeatures(database=False, redis=False),
        )
        folder = tmp_path_factory.mktemp("proxy")
        with run_proxy(
            render_text(config), folder, extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY}
        ) as proxy:
            yield Gateway(proxy, stub, models)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    with run_postgres(tmp_path_factory.mktemp("postgres")) as server:
        yield server
