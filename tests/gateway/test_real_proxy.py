"""The rendered configuration against the real LiteLLM proxy (the release the image pins) on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.litellm.config import (
    BedrockModel,
    OpenAICompatibleModel,
    ProxyFeatures,
    render_config,
    render_text,
)
from tests.gateway.conftest import GUARDRAIL, PROFILE_ARN, UPSTREAM_KEY, Gateway
from tests.gateway.proxy import MASTER_KEY, RunningProxy, http, run_proxy
from tests.gateway.stubs import REPLY, StubBackend


def chat(gateway: Gateway, model: str, *, key: str | None = MASTER_KEY, **extra: Any) -> tuple[int, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": f"hello {model}"}], **extra}
    return http("POST", f"{gateway.proxy.url}/v1/chat/completions", key=key, body=body)


def test_the_rendered_config_loads_with_every_model(gateway: Gateway) -> None:
    status, listing = http("GET", f"{gateway.proxy.url}/v1/models", key=MASTER_KEY)
    assert status == 200, listing
    assert sorted(m["id"] for m in listing["data"]) == sorted(m.name for m in gateway.models)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/chat/completions", "/v1/models", "/metrics"])
def test_a_call_without_a_key_is_refused(gateway: Gateway, path: str) -> None:
    method = "GET" if path in ("/v1/models", "/metrics") else "POST"
    body = None if method == "GET" else {"model": "llama-eks", "messages": [{"role": "user", "content": "x"}]}
    before = len(gateway.stub.requests)
    status, _ = http(method, f"{gateway.proxy.url}{path}", body=body)
    assert status == 401
    assert len(gateway.stub.requests) == before, "a refused call must not reach any upstream"


def test_a_wrong_key_is_refused(gateway: Gateway) -> None:
    status, _ = chat(gateway, "llama-eks", key="sk-not-the-master-key")
    assert status in (400, 401), status  # without a database no virtual key can match


def test_health_endpoints_answer_without_a_key(gateway: Gateway) -> None:
    for path in ("/health/liveliness", "/health/readiness"):
        assert http("GET", f"{gateway.proxy.url}{path}")[0] == 200, path


@pytest.mark.parametrize("model", ["llama-eks", "qwen-sagemaker", "nova-lite", "nova-lite-attributed"])
def test_a_call_with_the_master_key_reaches_its_upstream(gateway: Gateway, model: str) -> None:
    status, reply = chat(gateway, model)
    assert status == 200, reply
    assert reply["choices"][0]["message"]["content"] == REPLY


def test_eks_models_get_their_api_key_and_served_name(gateway: Gateway) -> None:
    chat(gateway, "llama-eks")
    sent = gateway.stub.received(lambda r: r.path == "/v1/chat/completions")[-1]
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.body["model"] == "meta-llama/Llama-3.3-70B-Instruct"


def test_sagemaker_calls_are_signed_and_routed_to_the_inference_component(gateway: Gateway) -> None:
    chat(gateway, "qwen-sagemaker")
    sent = gateway.stub.received(lambda r: r.path == "/endpoints/qwen-endpoint/invocations")[-1]
    assert sent.headers["x-amzn-sagemaker-inference-component"] == "qwen-endpoint-ic"
    assert "/sagemaker/aws4_request" in sent.headers["authorization"]
    assert sent.body["model"] == "Qwen/Qwen3-8B"


def test_every_bedrock_converse_call_carries_the_tier1_guardrail(gateway: Gateway) -> None:
    bedrock = [m for m in gateway.models if isinstance(m, BedrockModel)]
    assert len(bedrock) == 2
    for model in bedrock:
        assert chat(gateway, model.name)[0] == 200
        path = f"/model/{model.model_id}/converse"
        sent = gateway.stub.received(lambda r, p=path: r.path == p)
        assert sent, f"no Converse call for {model.name} at {path}"
        assert sent[-1].body["guardrailConfig"] == {
            "guardrailIdentifier": GUARDRAIL.guardrail_arn,
            "guardrailVersion": GUARDRAIL.version,
            "trace": "disabled",
        }
        assert "/bedrock/aws4_request" in sent[-1].headers["authorization"]
    assert gateway.stub.received(lambda r: r.path == f"/model/{PROFILE_ARN}/converse")


def test_a_caller_supplied_guardrail_replaces_the_models_so_iam_must_enforce_it(gateway: Gateway) -> None:
    """LiteLLM 1.104.0 lets a caller's guardrailConfig win over the model's: the config alone cannot stop a
    caller from naming another guardrail. The task role's Deny on any other bedrock:GuardrailIdentifier
    (ModelInvokeAccess, asserted in test_stack.py) is what keeps the gateway fail-closed."""
    other = {
        "guardrailIdentifier": "arn:aws:bedrock:us-east-1:123456789012:guardrail/other",
        "guardrailVersion": "1",
    }
    assert chat(gateway, "nova-lite", guardrailConfig=other)[0] == 200
    sent = gateway.stub.received(lambda r: r.path == "/model/us.amazon.nova-2-lite-v1:0/converse")[-1]
    assert sent.body["guardrailConfig"]["guardrailIdentifier"] == other["guardrailIdentifier"]


def test_metrics_need_the_key(gateway: Gateway) -> None:
    status, text = http("GET", f"{gateway.proxy.url}/metrics", key=MASTER_KEY)
    assert status == 200
    assert "litellm" in str(text)


def test_a_failing_model_falls_back_to_the_next(gateway: Gateway) -> None:
    status, reply = chat(gateway, "llama-down")
    assert status == 200, reply
    assert gateway.stub.received(lambda r: r.path == "/down/v1/chat/completions")
    assert gateway.stub.received(
        lambda r: r.path == "/v1/chat/completions" and r.body["model"].startswith("meta")
    )


def _request_lines(proxy: RunningProxy) -> list[str]:
    """The proxy's log lines about a chat-completions request (uvicorn's access lines, JSON with json_logs)."""
    return [line for line in proxy.log.read_text().splitlines() if "/v1/chat/completions" in line]


def test_the_default_log_level_writes_no_line_per_request(gateway: Gateway) -> None:
    before = len(_request_lines(gateway.proxy))
    for _ in range(3):
        assert chat(gateway, "llama-eks")[0] == 200
    assert len(_request_lines(gateway.proxy)) == before


def test_request_logging_writes_one_json_line_per_request(tmp_path: Path) -> None:
    with StubBackend() as stub:
        config = render_config(
            [OpenAICompatibleModel(name="llama-eks", base_url=f"{stub.url}/v1", served_model="llama")],
            features=ProxyFeatures(database=False, redis=False),
        )
        with run_proxy(render_text(config), tmp_path, request_logging=True) as proxy:
            body = {"model": "llama-eks", "messages": [{"role": "user", "content": "hello"}]}
            for _ in range(3):
                assert http("POST", f"{proxy.url}/v1/chat/completions", key=MASTER_KEY, body=body)[0] == 200
            lines = _request_lines(proxy)
    assert len(lines) == 3, lines
    assert all(json.loads(line)["level"] == "INFO" for line in lines), lines
