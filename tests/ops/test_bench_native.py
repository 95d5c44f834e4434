"""bench's own runs where aiperf 0.13.0 has no transport: SageMaker streaming against the loopback server (which
checks SigV4 and answers in the event-stream framing), and Bedrock ConverseStream on raw event-stream bodies.

The SageMaker run's timing is held to the latency model with the tolerance tests/ops/test_bench_engine.py states.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import pytest

import inference_tiers
from inference_tiers.ops import cli
from inference_tiers.ops.bench import native
from inference_tiers.ops.bench.command import bench
from inference_tiers.ops.bench.metrics import Pricing
from inference_tiers.ops.bench.run import Engine, run_bench, target_from_stack
from inference_tiers.ops.bench.workload import parse_workload
from inference_tiers.ops.pricing import BEDROCK_PRICE_FILE, PriceTableError, load_token_price_table
from tests.ops.helpers import StubClients, event_stream_message, respond_raw
from tests.ops.test_bench_engine import MODEL, within
from tests.ops.test_smoke import BEDROCK_OUTPUTS, CREDENTIALS, ROLE, _stack
from tools.bench.loopback import ACCESS_KEY, REGION, SECRET_KEY, LoopbackServer

SPEC = {
    "shape": "rag",
    "prefix_tokens": 160,
    "input_tokens": {"mean": 40, "stddev": 0},
    "output_tokens": {"mean": 8, "stddev": 0},
    "load": {"mode": "concurrency", "levels": [1, 3], "requests_per_level": 9},
    "slo": {"ttft_p90_ms": 5000, "itl_p90_ms": 500, "e2e_p90_ms": 10000},
}


def aws_env(monkeypatch: pytest.MonkeyPatch, url: str, secret: str = SECRET_KEY) -> None:
    # The SageMaker Runtime client goes to the loopback server (botocore's per-service endpoint variable).
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def bench_sagemaker(tmp_path: Path, *extra: str) -> int:
    (tmp_path / "workload.yaml").write_text(json.dumps(SPEC), encoding="utf-8")
    argv = ["bench", "--workload", str(tmp_path / "workload.yaml"), "--out", str(tmp_path / "out")]
    argv += ["--sagemaker-endpoint", "qwen", "--inference-component", "qwen-ic", "--region", REGION, *extra]
    return cli.main(argv)


def test_sagemaker_stream_is_signed_decoded_and_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LoopbackServer(model=MODEL) as server:
        aws_env(monkeypatch, server.url)
        assert bench_sagemaker(tmp_path, "--instance-type", "ml.g6e.2xlarge") == 0
    assert server.rejected_signatures == 0
    # Each level's client keeps its connections (one per concurrent request: 1 + 3), not one per request (18).
    assert server.connections <= 4, server.connections
    target = json.loads((tmp_path / "out" / "results.json").read_text())["targets"][0]
    assert target["engine"] == "inference-tiers (boto3)" and "g6e.2xlarge" in target["pricing"]["basis"]
    for figures in target["levels"]:
        assert figures["requests"] == 9 and figures["errors"] == 0
        assert figures["output_tokens"] == 9 * 8 and figures["usd_per_1m_good_tokens"] is not None
    # Each level's shared RAG prefix is cached once its first requests are in (each level draws its own
    # prompts, the 3 first ones of the second level may arrive together): the model's TTFT for what each left.
    requests = server.cache.requests
    assert {prompt for prompt, _ in requests} == {200} and sum(cached >= 160 for _, cached in requests) >= 14
    expected = MODEL.ttft_ms(int(statistics.median(prompt - cached for prompt, cached in requests)))
    assert within(target["levels"][0]["ttft_ms"]["p50"], expected)
    assert within(target["levels"][0]["itl_ms"]["p50"], MODEL.decode_ms_per_token)


def test_sagemaker_bad_signature_is_a_failed_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackServer(model=MODEL) as server:
        aws_env(monkeypatch, server.url, secret="not-the-secret")
        assert bench_sagemaker(tmp_path) == 0
    assert server.rejected_signatures == 18 and not server.cache.requests
    levels = json.loads((tmp_path / "out" / "results.json").read_text())["targets"][0]["levels"]
    assert [(f["error_rate"], f["meets_slo"]) for f in levels] == [(1.0, False), (1.0, False)]


CONTENT_AFTER_S = 0.2


def _paced(*events: tuple[float, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for pause, event in events:
        time.sleep(pause)
        yield event


def _sse(event: dict[str, Any]) -> dict[str, Any]:
    return {"PayloadPart": {"Bytes": f"data: {json.dumps(event)}\n\n".encode()}}


class _StreamStandIn:
    """SageMaker and Bedrock Runtime stand-in whose streams open with a content-free event at once and carry
    the first text ``CONTENT_AFTER_S`` later: vLLM's OpenAI server first sends a role-only chunk
    (``delta: {role: assistant, content: ''}``, sent when the first output arrives, before its text: vllm
    main @ 0fc8fa75, the v0.10.1 state, vllm/entrypoints/openai/serving_chat.py:559-567), ConverseStream a
    ``messageStart``."""

    def invoke_endpoint_with_response_stream(self, **_: Any) -> dict[str, Any]:
        return {
            "Body": _paced(
                (0.0, _sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]})),
                (CONTENT_AFTER_S, _sse({"choices": [{"delta": {"content": "Paris"}}]})),
                (0.0, _sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}})),
            )
        }

    def converse_stream(self, **_: Any) -> dict[str, Any]:
        return {
            "stream": _paced(
                (0.0, {"messageStart": {"role": "assistant"}}),
                (CONTENT_AFTER_S, {"contentBlockDelta": {"delta": {"text": "Paris"}}}),
                (0.0, {"metadata": {"usage": {"inputTokens": 5, "outputTokens": 1}}}),
            )
        }


@pytest.mark.parametrize(
    "sender",
    [
        lambda runtime: native.sagemaker_sender(runtime, "qwen", None, None),
        lambda runtime: native.bedrock_sender(runtime, "us.amazon.nova-2-lite-v1:0"),
    ],
    ids=["sagemaker", "bedrock"],
)
def test_ttft_is_the_first_content_not_the_first_event(sender: Callable[[Any], native.Send]) -> None:
    send = sender(_StreamStandIn())
    ttft, ttfa, usage, text, reasoning = send([{"role": "user", "content": "capital of France"}], 1)
    assert (usage, text, reasoning, ttfa) == ((5, 1), "Paris", "", ttft)
    assert ttft is not None and CONTENT_AFTER_S * 1000 <= ttft < CONTENT_AFTER_S * 1000 + 50


def converse_stream(*pieces: str, usage: tuple[int, int] | None) -> tuple[int, dict[str, str], bytes]:
    """A ConverseStream body; ``usage`` None leaves out the metadata event."""
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    events += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}}) for p in pieces]
    events += [("contentBlockStop", {"contentBlockIndex": 0}), ("messageStop", {"stopReason": "max_tokens"})]
    if usage:
        metadata = {
            "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
            "metrics": {"latencyMs": 5},
        }
        events.append(("metadata", metadata))
    body = b"".join(event_stream_message(t, json.dumps(p).encode(), "application/json") for t, p in events)
    return 200, {"Content-Type": "application/vnd.amazon.eventstream"}, body


def _no_count(texts: list[str]) -> list[int]:
    raise AssertionError(f"the server reported usage, yet the tokenizer was asked to count {texts}")


def test_bedrock_converse_stream_sessions_carry_their_context() -> None:
    runtime = boto3.client(
        "bedrock-runtime", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    spec = parse_workload(
        {
            "shape": "agentic",
            "input_tokens": {"mean": 5},
            "output_tokens": {"mean": 3},
            "turns": {"mean": 2},
            "think_time_ms": 0,
            "load": {"levels": [1], "requests_per_level": 4},
        }
    )
    sent = respond_raw(
        runtime,
        "ConverseStream",
        *(converse_stream("Par", "is", "!", usage=(5 + 10 * i, 3)) for i in range(4)),
    )
    guardrail = {"guardrailIdentifier": "gr-1", "guardrailVersion": "1"}
    records = native.run_level(
        native.bedrock_sender(runtime, "us.amazon.nova-2-lite-v1:0", guardrail), spec, 1, 7, _no_count
    )
    assert [(r.error, r.input_tokens, r.output_tokens, r.token_unit) for r in records] == [
        (None, 5, 3, "usage"),
        (None, 15, 3, "usage"),
        (None, 25, 3, "usage"),
        (None, 35, 3, "usage"),
    ]
    assert all(r.ttft_ms is not None and r.ttft_ms <= r.e2e_ms for r in records)
    bodies = [json.loads(request.body) for request in sent]
    # Two sessions of two turns: the second turn resends the first and the streamed answer.
    assert [len(b["messages"]) for b in bodies] == [1, 3, 1, 3]
    assert bodies[1]["messages"][1] == {"role": "assistant", "content": [{"text": "Paris!"}]}
    assert bodies[0]["guardrailConfig"] == {**guardrail, "streamProcessingMode": "async"}
    assert bodies[0]["inferenceConfig"] == {"maxTokens": 3}


def _deployed_bedrock_tier(clients: StubClients, outputs: dict[str, str]) -> StubClients:
    """Stub the bedrock tier's stack outputs and the assumption of its application role; returns
    ``clients.assumed``, the clients bench then calls Bedrock with."""
    clients.stub("cloudformation").add_response(
        "describe_stacks", _stack(outputs), {"StackName": "InferenceTiers-Bedrock"}
    )
    clients.stub("sts").add_response(
        "assume_role",
        {"Credentials": CREDENTIALS},
        {"RoleArn": ROLE, "RoleSessionName": "inference-tiers-bench"},
    )
    clients.assumed = StubClients(unstubbed=("bedrock-runtime",))
    return clients.assumed


def test_bedrock_tier_runs_as_its_application_role_with_the_guardrail(tmp_path: Path) -> None:
    clients = StubClients()
    assumed = _deployed_bedrock_tier(clients, BEDROCK_OUTPUTS)
    sent = respond_raw(
        assumed.client("bedrock-runtime"),
        "ConverseStream",
        *(converse_stream("a", "b", usage=(1000, 500)) for _ in range(2)),
    )
    pricing = Pricing("per token: test table", usd_per_1m_input=1.0, usd_per_1m_output=4.0)
    target = target_from_stack(clients, "bedrock", "InferenceTiers-Bedrock", pricing)
    spec = parse_workload({"shape": "chat", "load": {"levels": [1], "requests_per_level": 2}})
    engine = Engine(aiperf=tmp_path / "unused", tokenizer=tmp_path)
    result = run_bench(target, spec, work_dir=tmp_path, engine=engine, clients=clients)
    clients.assert_done()
    assert clients.assumed_with == CREDENTIALS
    assert {json.loads(r.body)["guardrailConfig"]["guardrailIdentifier"] for r in sent} == {"gr-abc123"}
    assert f"/model/{BEDROCK_OUTPUTS['ModelId']}/converse-stream" in unquote(sent[0].url)
    (figures,) = result["levels"]
    # 2 requests x (1000 input x $1 + 500 output x $4) / 1M, over 1000 output tokens: $6 per 1M output tokens.
    assert figures["usd"] == pytest.approx(0.006) and figures["usd_per_1m_output_tokens"] == pytest.approx(
        6.0
    )


def test_bedrock_price_table_prices_each_model_and_its_us_profile_only() -> None:
    raw = json.loads(BEDROCK_PRICE_FILE.read_text(encoding="utf-8"))
    table = load_token_price_table()
    assert raw["as_of"] and raw["source"] and raw["unit"] == "USD per 1M tokens"
    defaults = json.loads((Path(inference_tiers.__file__).parent / "defaults.json").read_text())
    assert defaults["bedrock.model_id"] in raw["prices"]
    for model, price in raw["prices"].items():
        assert (
            table.per_1m_tokens(model)
            == table.per_1m_tokens(f"us.{model}")
            == (price["input"], price["output"])
        )
        # A global profile is billed about 10% below the standard price (docs/bench.md); eu. is another Region's.
        assert table.per_1m_tokens(f"global.{model}") is None and table.per_1m_tokens(f"eu.{model}") is None


@pytest.mark.parametrize("bad", [{"input": 1.0}, {"input": 1.0, "output": 0}, 0.5])
def test_bedrock_price_file_errors_name_the_file_and_the_model(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"as_of": "d", "region": "us-east-1", "source": "s", "prices": {"m": bad}}))
    with pytest.raises(PriceTableError, match=rf"price file {path}: price of 'm"):
        load_token_price_table(path)


def bench_bedrock(
    tmp_path: Path, model: str, *extra: str, usage: tuple[int, int], clients: StubClients | None = None
) -> tuple[dict[str, Any], str]:
    clients = clients or StubClients(unstubbed=("bedrock-runtime",))
    respond_raw(clients.client("bedrock-runtime"), "ConverseStream", converse_stream("a", "b", usage=usage))
    tmp_path.mkdir(exist_ok=True)
    spec = tmp_path / "workload.yaml"
    spec.write_text(json.dumps({"shape": "chat", "load": {"levels": [1], "requests_per_level": 1}}))
    argv = [
        "bench",
        "--workload",
        str(spec),
        "--out",
        str(tmp_path / "out"),
        "--bedrock-model",
        model,
        *extra,
    ]
    document, text = bench(cli.build_parser().parse_args(argv), lambda: clients)
    clients.assert_done()
    return document["targets"][0], text


def test_bedrock_model_in_the_table_is_priced_from_it_unless_token_prices_are_given(tmp_path: Path) -> None:
    prices = json.loads(BEDROCK_PRICE_FILE.read_text(encoding="utf-8"))
    model = prices["prices"]["amazon.nova-2-lite-v1:0"]
    target, text = bench_bedrock(tmp_path / "table", "us.amazon.nova-2-lite-v1:0", usage=(1000, 500))
    basis = target["pricing"]["basis"]
    assert prices["as_of"] in basis and prices["source"] in basis and basis in text
    usd = (1000 * model["input"] + 500 * model["output"]) / 1e6
    assert target["levels"][0]["usd"] == pytest.approx(usd)
    given = ["--token-prices", "1,4", "--price-source", "my contract, 2026-12"]
    target, _ = bench_bedrock(tmp_path / "given", "us.amazon.nova-2-lite-v1:0", *given, usage=(1000, 500))
    assert target["pricing"]["basis"] == "per token: my contract, 2026-12"
    assert target["levels"][0]["usd"] == pytest.approx((1000 * 1 + 500 * 4) / 1e6)


PROFILE = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"


def profile_clients(*regions: str) -> StubClients:
    clients = StubClients(unstubbed=("bedrock-runtime",))
    models = [{"modelArn": f"arn:aws:bedrock:{r}::foundation-model/amazon.nova-2-lite-v1:0"} for r in regions]
    clients.stub("bedrock").add_response(
        "get_inference_profile",
        {
            "inferenceProfileName": "p",
            "inferenceProfileArn": PROFILE,
            "inferenceProfileId": "abc123",
            "models": models,
            "status": "ACTIVE",
            "type": "APPLICATION",
        },
        {"inferenceProfileIdentifier": PROFILE},
    )
    return clients


def test_bedrock_application_profile_is_priced_as_the_model_it_routes_to(tmp_path: Path) -> None:
    model = json.loads(BEDROCK_PRICE_FILE.read_text(encoding="utf-8"))["prices"]["amazon.nova-2-lite-v1:0"]
    us = profile_clients("us-east-1", "us-east-2", "us-west-2")
    target, _ = bench_bedrock(tmp_path / "us", PROFILE, usage=(1000, 500), clients=us)
    assert target["levels"][0]["usd"] == pytest.approx((1000 * model["input"] + 500 * model["output"]) / 1e6)
    world = profile_clients("us-east-1", "eu-west-1", "ap-northeast-1")
    target, text = bench_bedrock(tmp_path / "global", PROFILE, usage=(10, 5), clients=world)
    assert target["pricing"] is None
    assert "routes amazon.nova-2-lite-v1:0 to ap-northeast-1, eu-west-1, us-east-1, outside the US" in text
    denied = StubClients(unstubbed=("bedrock-runtime",))
    denied.stub("bedrock").add_client_error("get_inference_profile", "AccessDeniedException")
    target, text = bench_bedrock(tmp_path / "denied", PROFILE, usage=(10, 5), clients=denied)
    assert target["pricing"] is None
    assert "bedrock:GetInferenceProfile on it failed (AccessDeniedException)" in text


def test_bedrock_model_not_in_the_table_says_so_and_has_no_cost(tmp_path: Path) -> None:
    target, text = bench_bedrock(tmp_path / "claude", "anthropic.claude-x-v1:0", usage=(10, 5))
    assert target["pricing"] is None and target["levels"][0]["usd"] is None
    assert (
        "cost: Bedrock model 'anthropic.claude-x-v1:0' is not priced by bedrock-prices-us-east-1.json" in text
    )
    assert "pass --token-prices INPUT,OUTPUT with --price-source" in text
    other_region = StubClients("eu-west-1", unstubbed=("bedrock-runtime",))
    target, text = bench_bedrock(
        tmp_path / "eu", "amazon.nova-2-lite-v1:0", usage=(10, 5), clients=other_region
    )
    assert target["pricing"] is None and "bench calls Bedrock in eu-west-1" in text


def test_bedrock_tier_is_priced_through_its_application_profile(tmp_path: Path) -> None:
    model = json.loads(BEDROCK_PRICE_FILE.read_text(encoding="utf-8"))["prices"]["amazon.nova-2-lite-v1:0"]
    clients = profile_clients("us-east-1", "us-east-2", "us-west-2")
    outputs = {**BEDROCK_OUTPUTS, "ModelId": PROFILE}
    assumed = _deployed_bedrock_tier(clients, outputs)
    respond_raw(assumed.client("bedrock-runtime"), "ConverseStream", converse_stream("a", usage=(1000, 500)))
    spec = tmp_path / "workload.yaml"
    spec.write_text(json.dumps({"shape": "chat", "load": {"levels": [1], "requests_per_level": 1}}))
    argv = ["bench", "--workload", str(spec), "--out", str(tmp_path / "out"), "--tier", "bedrock"]
    document, _ = bench(cli.build_parser().parse_args(argv), lambda: clients)
    clients.assert_done()
    (target,) = document["targets"]
    assert target["levels"][0]["usd"] == pytest.approx((1000 * model["input"] + 500 * model["output"]) / 1e6)
