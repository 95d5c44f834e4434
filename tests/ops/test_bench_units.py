"""Errors counted, never hidden (issue 31, D2, D6, D12, D13), and one token unit for every engine (issue 31, review D1 and D4): the server's usage when it reports it, else the
model's tokenizer counting the text, never stream chunks; each target records its unit, and targets counted in
different units are never ranked together.

The loopback server's tokens are two words each here (``token_text``), so the server's usage and a word-counting
tokenizer (tools/bench/make_tokenizer.py) disagree by 2x: a target that read the wrong one is off by that.
aiperf 0.13.0 reads usage under ``--use-server-token-count`` (aiperf/config/flags/cli_config.py) and exports it per
request as ``usage_completion_tokens`` (aiperf/metrics/types/usage_metrics.py ``UsageCompletionTokensMetric``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from inference_tiers.ops import cli
from inference_tiers.ops.bench import command, native
from inference_tiers.ops.bench.measured import advise_measured
from inference_tiers.ops.bench.report import merge_results
from inference_tiers.ops.bench.run import MEASURE_CONFIG, Engine, Target, run_bench
from inference_tiers.ops.bench.workload import parse_workload
from tests.harness import PROJECT_ROOT
from tests.ops.helpers import StubClients, event_stream_message, respond_raw
from tests.ops.test_bench_engine import MODEL, TOOL_VENV, engine, within
from tests.ops.test_bench_native import aws_env, converse_stream
from tools.bench.loopback import REGION, LoopbackServer

__all__ = ["engine"]  # the aiperf tool venv fixture, shared with test_bench_engine

TWO_WORDS = replace(MODEL, token_text="lorem ipsum ")
OUTPUT, REQUESTS = 8, 6
SPEC = {
    "shape": "chat",
    "model": "loopback",
    "input_tokens": {"mean": 40, "stddev": 0},
    "output_tokens": {"mean": OUTPUT, "stddev": 0},
    "load": {"mode": "concurrency", "levels": [2], "requests_per_level": REQUESTS},
    "slo": {"ttft_p90_ms": 5000, "itl_p90_ms": 500, "e2e_p90_ms": 10000},
}


def bench(tmp_path: Path, *target: str) -> int:
    (tmp_path / "workload.yaml").write_text(json.dumps(SPEC), encoding="utf-8")
    argv = ["bench", "--workload", str(tmp_path / "workload.yaml"), "--out", str(tmp_path / "out"), *target]
    argv += ["--aiperf", str(TOOL_VENV / "bin" / "aiperf"), "--tokenizer", str(TOOL_VENV / "tokenizer")]
    return cli.main(argv)


@pytest.mark.parametrize(
    ("usage", "unit", "tokens_per_token"),
    [(True, "server usage", 1), (False, "tokenizer tokenizer", 2)],
    ids=["server-usage", "no-usage-tokenizer"],
)
def test_aiperf_and_sagemaker_count_the_same_tokens_on_one_server(
    engine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    usage: bool,
    unit: str,
    tokens_per_token: int,
) -> None:
    with LoopbackServer(model=replace(TWO_WORDS, usage=usage)) as server:
        aws_env(monkeypatch, server.url)
        assert bench(tmp_path, "--url", server.url, "--name", "aiperf") == 0
        assert bench(tmp_path, "--sagemaker-endpoint", "qwen", "--name", "native", "--region", REGION) == 0
    targets = {t["name"]: t for t in json.loads((tmp_path / "out" / "results.json").read_text())["targets"]}
    assert {name: t["token_unit"] for name, t in targets.items()} == {"aiperf": unit, "native": unit}
    levels = {name: t["levels"][0] for name, t in targets.items()}
    for figures in levels.values():
        assert figures["errors"] == 0 and figures["output_tokens"] == REQUESTS * OUTPUT * tokens_per_token
    # ITL divides one stream by one count: both engines agree, and with usage it is the server's decode time.
    assert within(levels["aiperf"]["itl_ms"]["p50"], levels["native"]["itl_ms"]["p50"])
    if usage:
        assert within(levels["native"]["itl_ms"]["p50"], MODEL.decode_ms_per_token)


def test_bedrock_stream_without_usage_is_counted_by_the_tokenizer_not_by_its_chunks() -> None:
    runtime = boto3.client(
        "bedrock-runtime", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    respond_raw(runtime, "ConverseStream", converse_stream("two words ", "and three more", usage=None))
    spec = parse_workload(
        {"shape": "chat", "input_tokens": {"mean": 5}, "load": {"levels": [1], "requests_per_level": 1}}
    )
    count = native.tokenizer_count(TOOL_VENV / "bin" / "python", TOOL_VENV / "tokenizer")
    (record,) = native.run_level(native.bedrock_sender(runtime, "m"), spec, 1, 7, count)
    # Two chunks, five words: the word tokenizer's five; the prompt's five words likewise.
    assert (record.error, record.input_tokens, record.output_tokens, record.token_unit) == (
        None,
        5,
        5,
        "tokenizer",
    )


def _target(name: str, unit: str | None) -> dict[str, Any]:
    figures = {"level": 4, "meets_slo": True, "usd_per_1m_good_tokens": 1.0}
    return {"name": name, "tier": None, "token_unit": unit, "levels": [figures]}


def test_targets_counted_in_different_units_are_never_ranked_together(tmp_path: Path) -> None:
    workload = {"load": {"mode": "concurrency"}, "slo": {}}
    (tmp_path / "results.json").write_text(
        json.dumps({"workload": workload, "targets": [_target("a", "server usage")]}), encoding="utf-8"
    )
    assert len(merge_results(tmp_path, workload, _target("b", "server usage"))["targets"]) == 2
    with pytest.raises(ValueError, match=r"different units \(a: server usage; b: tokenizer tokenizer\)"):
        merge_results(tmp_path, workload, _target("b", "tokenizer tokenizer"))
    mixed = {"workload": workload, "targets": [_target("a", "server usage"), _target("b", None)]}
    with pytest.raises(ValueError, match="cannot be ranked together"):
        advise_measured(mixed, 4)


def _error(status: int, code: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"x-amzn-ErrorType": code, "Content-Type": "application/json"}, b'{"message": "test"}'


def test_every_failure_is_counted_by_kind_and_never_retried(tmp_path: Path) -> None:
    """A throttle, a 5xx, a 4xx and a stream ending in an exception event are failed requests of their own kind,
    each sent once (botocore 1.44.8 would retry the throttle and the 5xx up to 3 times in standard mode), left
    out of the latency figures; a 1-token answer has no ITL."""
    _, headers, ok = converse_stream("a ", "b", usage=(5, 2))
    _, _, one_token = converse_stream("a", usage=(5, 1))
    clients = StubClients(unstubbed=("bedrock-runtime",))
    sent = respond_raw(
        clients.client("bedrock-runtime", config=MEASURE_CONFIG),
        "ConverseStream",
        _error(429, "ThrottlingException"),
        _error(503, "ServiceUnavailableException"),
        _error(400, "ValidationException"),
        (200, headers, _truncated_with_exception()),
        (200, headers, ok),
        (200, headers, one_token),
    )
    spec = parse_workload({"shape": "chat", "load": {"levels": [1], "requests_per_level": 6}})
    engine = Engine(aiperf=tmp_path / "unused", tokenizer=tmp_path)
    result = run_bench(
        Target("br", "bedrock", model_id="m"), spec, work_dir=tmp_path, engine=engine, clients=clients
    )
    (figures,) = result["levels"]
    assert len(sent) == 6
    assert figures["errors"] == 4
    assert figures["errors_by_kind"] == {"4xx": 1, "5xx": 1, "stream_error": 1, "throttled": 1}
    assert figures["output_tokens"] == 3 and figures["good_requests"] == 2
    # ITL from the 2-token answer alone (the 1-token one has none): the same at every percentile.
    assert figures["itl_ms"]["p50"] == figures["itl_ms"]["p99"] and figures["itl_ms"]["p50"] is not None


def _truncated_with_exception() -> bytes:
    start = event_stream_message(
        "messageStart", json.dumps({"role": "assistant"}).encode(), "application/json"
    )
    delta = {"contentBlockIndex": 0, "delta": {"text": "a "}}
    text = event_stream_message("contentBlockDelta", json.dumps(delta).encode(), "application/json")
    error = event_stream_message(
        "modelStreamErrorException", b'{"message": "boom"}', "application/json", exception=True
    )
    return start + text + error


class _ErrorMidStream:
    """A SageMaker stream that starts well, then carries vLLM's error payload instead of the rest of the answer."""

    def invoke_endpoint_with_response_stream(self, **_: Any) -> dict[str, Any]:
        events = [
            {"choices": [{"delta": {"content": "a "}}]},
            {"error": {"message": "engine died", "code": 500}},
        ]
        return {"Body": [{"PayloadPart": {"Bytes": f"data: {json.dumps(e)}\n\n".encode()}} for e in events]}


def test_a_stream_ending_in_an_error_payload_is_a_stream_error() -> None:
    spec = parse_workload({"shape": "chat", "load": {"levels": [1], "requests_per_level": 1}})
    send = native.sagemaker_sender(_ErrorMidStream(), "qwen", None, None)
    (record,) = native.run_level(send, spec, 1, 7, lambda texts: [0] * len(texts))
    assert record.error_kind == "stream_error" and record.error and "engine died" in record.error


def test_the_default_tool_venv_does_not_depend_on_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert command.TOOL_VENV == PROJECT_ROOT / "tools" / "bench" / ".venv"
    assert (command.TOOL_VENV / "tokenizer" / "tokenizer.json").is_file()


ANSWER_AFTER_S = 0.2


class _Reasoning:
    """Both runtimes' streams of a thinking model: reasoning at once, the answer ``ANSWER_AFTER_S`` later (vLLM's
    reasoning parser writes ``delta.reasoning_content``; Bedrock ``contentBlockDelta.delta.reasoningContent.text``,
    bedrock-runtime 2023-09-30 ReasoningContentBlockDelta)."""

    def invoke_endpoint_with_response_stream(self, **_: Any) -> dict[str, Any]:
        events = [
            (0.0, {"choices": [{"delta": {"reasoning_content": "think "}}]}),
            (ANSWER_AFTER_S, {"choices": [{"delta": {"content": "Paris"}}]}),
            (0.0, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 12}}),
        ]
        parts = [(p, {"PayloadPart": {"Bytes": f"data: {json.dumps(e)}\n\n".encode()}}) for p, e in events]
        return {"Body": _paced(parts)}

    def converse_stream(self, **_: Any) -> dict[str, Any]:
        events = [
            (0.0, {"contentBlockDelta": {"delta": {"reasoningContent": {"text": "think "}}}}),
            (ANSWER_AFTER_S, {"contentBlockDelta": {"delta": {"text": "Paris"}}}),
            (0.0, {"metadata": {"usage": {"inputTokens": 3, "outputTokens": 12}}}),
        ]
        return {"stream": _paced(events)}


def _paced(events: list[tuple[float, Any]]) -> Iterator[Any]:
    for pause, event in events:
        time.sleep(pause)
        yield event


@pytest.mark.parametrize(
    "sender",
    [
        lambda runtime: native.sagemaker_sender(runtime, "qwen", None, None),
        lambda runtime: native.bedrock_sender(runtime, "m"),
    ],
    ids=["sagemaker", "bedrock"],
)
def test_reasoning_is_the_first_token_and_the_answer_is_timed_apart(sender: Any) -> None:
    spec = parse_workload({"shape": "chat", "load": {"levels": [1], "requests_per_level": 1}})
    (record,) = native.run_level(sender(_Reasoning()), spec, 1, 7, lambda texts: [0] * len(texts))
    assert record.ttft_ms is not None and record.ttft_ms < ANSWER_AFTER_S * 1000 / 2
    assert record.ttfa_ms is not None and record.ttfa_ms >= ANSWER_AFTER_S * 1000
    # The server's 12 tokens include the reasoning: ITL spreads the stream over all of them.
    assert record.output_tokens == 12 and record.itl_ms == pytest.approx(
        (record.e2e_ms - record.ttft_ms) / 11
    )
