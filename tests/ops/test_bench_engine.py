"""The real engine (aiperf from tools/bench/.venv) against the loopback server's known latency model, directly,
through the real LiteLLM proxy (tools/gateway/.venv) and through the real vllm-router (the dev extra).

Tolerance, the only timing assertion: a measured p50 is within 25 % + 15 ms of what the latency model gives for
the requests the server actually received (sleep and scheduling jitter on a shared 2-core machine). Through a
proxy or router the model is a floor only: their own overhead (LiteLLM's first requests take seconds on a busy
machine) is what such a run measures, and is not asserted.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.litellm.config import OpenAICompatibleModel, ProxyFeatures, render_config, render_text
from inference_tiers.ops import cli
from tests.gateway.conftest import UPSTREAM_KEY
from tests.gateway.proxy import MASTER_KEY, run_proxy
from tests.harness import PROJECT_ROOT
from tests.loopback import free_port, vllm_router
from tools.bench.loopback import LatencyModel, LoopbackServer

TOOL_VENV = PROJECT_ROOT / "tools" / "bench" / ".venv"
MODEL = LatencyModel(ttft_base_ms=30.0, prefill_ms_per_token=0.2, decode_ms_per_token=12.0)
# Prefill dear enough that the cache saves hundreds of milliseconds, far beyond the tolerance.
PREFILL_BOUND = LatencyModel(ttft_base_ms=30.0, prefill_ms_per_token=1.0, decode_ms_per_token=12.0)
OUTPUT_TOKENS = 12


def within(measured: float, expected: float, *, floor_only: bool = False) -> bool:
    return expected * 0.75 - 15 <= measured and (floor_only or measured <= expected * 1.25 + 15)


@pytest.fixture(scope="module")
def engine() -> Path:
    aiperf = TOOL_VENV / "bin" / "aiperf"
    if not aiperf.exists() or not (TOOL_VENV / "tokenizer" / "tokenizer.json").exists():
        pytest.fail(
            "the bench tool venv is missing: run `bash tools/bench/setup.sh` and rerun", pytrace=False
        )
    return aiperf


def run_bench(tmp_path: Path, spec: dict[str, Any], *target: str) -> dict[str, Any]:
    (tmp_path / "workload.yaml").write_text(json.dumps(spec), encoding="utf-8")
    argv = ["bench", "--workload", str(tmp_path / "workload.yaml"), "--out", str(tmp_path / "out"), *target]
    argv += ["--aiperf", str(TOOL_VENV / "bin" / "aiperf"), "--tokenizer", str(TOOL_VENV / "tokenizer")]
    assert cli.main(argv) == 0
    results: dict[str, Any] = json.loads((tmp_path / "out" / "results.json").read_text())
    return results


CHAT = {
    "shape": "chat",
    "model": "loopback",
    "input_tokens": {"mean": 400, "stddev": 0},
    "output_tokens": {"mean": OUTPUT_TOKENS, "stddev": 0},
    "load": {"mode": "concurrency", "levels": [4], "requests_per_level": 24},
    "slo": {"ttft_p90_ms": 2000, "itl_p90_ms": 500, "e2e_p90_ms": 10000},
}


def check_chat(server: LoopbackServer, figures: dict[str, Any], *, floor_only: bool = False) -> None:
    assert figures["requests"] == 24 and figures["errors"] == 0
    prompts = [prompt - cached for prompt, cached in server.cache.requests]
    expected_ttft = MODEL.ttft_ms(int(statistics.median(prompts)))
    assert within(figures["ttft_ms"]["p50"], expected_ttft, floor_only=floor_only), (figures, expected_ttft)
    assert within(figures["itl_ms"]["p50"], MODEL.decode_ms_per_token, floor_only=floor_only), figures
    assert figures["output_tokens"] == 24 * OUTPUT_TOKENS


def test_chat_measured_within_tolerance_of_the_latency_model(engine: Path, tmp_path: Path) -> None:
    with LoopbackServer(model=MODEL) as server:
        results = run_bench(tmp_path, CHAT, "--url", server.url, "--name", "direct")
    # The server saw the prompt sizes the spec asked for (aiperf synthesised them with the offline tokenizer).
    assert {prompt for prompt, _ in server.cache.requests} == {400}
    check_chat(server, results["targets"][0]["levels"][0])
    assert (tmp_path / "out" / "report.html").read_text().count("<polyline") == 1


def test_agentic_shape_shows_the_prefix_cache(engine: Path, tmp_path: Path) -> None:
    spec = {
        **CHAT,
        "shape": "agentic",
        "input_tokens": {"mean": 200, "stddev": 0},
        "turns": {"mean": 4, "stddev": 0},
        "think_time_ms": 50,
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 16},
    }
    with LoopbackServer(model=PREFILL_BOUND) as server:
        results = run_bench(tmp_path, spec, "--url", server.url)
    requests = server.cache.requests
    # Each later turn resends the growing context: the server finds all but the new turn in its cache.
    later = [(prompt, cached) for prompt, cached in requests if prompt > 200 + OUTPUT_TOKENS]
    assert len(later) == 12 and all(cached >= prompt - 200 - OUTPUT_TOKENS - 16 for prompt, cached in later)
    figures = results["targets"][0]["levels"][0]
    with_cache = PREFILL_BOUND.ttft_ms(int(statistics.median(prompt - cached for prompt, cached in requests)))
    without_cache = PREFILL_BOUND.ttft_ms(int(statistics.median(prompt for prompt, _ in requests)))
    assert within(figures["ttft_ms"]["p50"], with_cache), (figures, with_cache)
    assert figures["ttft_ms"]["p50"] < without_cache


def test_same_run_through_the_real_litellm_proxy(engine: Path, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("BENCH_TEST_KEY", MASTER_KEY)
    with LoopbackServer(model=MODEL) as server:
        config = render_config(
            [OpenAICompatibleModel("loopback", f"{server.url}/v1", "loopback")],
            features=ProxyFeatures(database=False, redis=False),
        )
        with run_proxy(
            render_text(config), tmp_path, extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY}
        ) as proxy:
            results = run_bench(tmp_path, CHAT, "--url", proxy.url, "--api-key-env", "BENCH_TEST_KEY")
    check_chat(server, results["targets"][0]["levels"][0], floor_only=True)


def test_same_run_through_the_real_vllm_router(engine: Path, tmp_path: Path) -> None:
    port = free_port()
    with LoopbackServer(model=MODEL) as server:
        args = [
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--worker-urls",
            server.url,
            "--policy",
            "round_robin",
        ]
        with vllm_router(args, port) as url:
            results = run_bench(tmp_path, CHAT, "--url", url)
    check_chat(server, results["targets"][0]["levels"][0], floor_only=True)
