"""Loopback: the real vllm-router 0.1.17 (dev extra) sends requests sharing a long prefix to the same backend.

This is the policy the disaggregated tier's router applies to prefill (``--prefill-policy cache_aware``, which
the inference gateway keeps in front of the P/D pair): the router keeps an approximate radix tree of the text it
sent each worker and routes a prompt to the worker with the longest match once the match exceeds
``--cache-threshold``. In 0.1.17 the tree holds token ids, which the router gets from each worker's
``/tokenize``. Three stub vLLM servers on 127.0.0.1 answer it and record which prompts they received, and the
router's own ``vllm_router_prefix_routing_decisions_total`` says which decisions were prefix hits. A round-robin control run shows the same requests spread out, so the assertion
depends on the policy, not on luck.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.loopback import free_port, vllm_router

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
# An agent's long, shared context (system prompt + tool definitions + history): about 6 000 characters.
SHARED_PREFIX = "You are a coding agent. Tools: " + " ".join(f"tool_{i}(path, content)" for i in range(300))
OTHER_PREFIX = "Summarise these meeting notes. Notes: " + " ".join(
    f"item {i} was discussed" for i in range(300)
)


def toy_tokens(text: str) -> list[int]:
    """A stable stand-in tokenizer: one id per whitespace-separated word (equal words, equal ids)."""
    return [zlib.crc32(word.encode()) % 128_000 for word in text.split()]


class StubVllm:
    """An OpenAI-compatible stand-in for one vLLM pod: health, /tokenize and completions; records prompts.

    ``/v1/completions/render`` (newer vLLM) is left unanswered (404): the router then falls back to
    ``/tokenize``, as it does against a vLLM without the render endpoint.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.prompts: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:  # keep the test output clean
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.startswith("/v1/models"):
                    self._reply(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:  # /health, /get_server_info, /get_model_info: what the router probes
                    self._reply(200, {"model_path": MODEL})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/tokenize":
                    # The router tokenizes through the worker (vLLM's /tokenize) and matches token prefixes.
                    tokens = toy_tokens(body["prompt"])
                    self._reply(200, {"count": len(tokens), "max_model_len": 131072, "tokens": tokens})
                    return
                if self.path == "/v1/completions":
                    stub.prompts.append(body["prompt"])
                elif self.path == "/v1/chat/completions":
                    stub.prompts.append(body["messages"][-1]["content"])
                else:
                    self._reply(404, {"error": f"unexpected path {self.path}"})
                    return
                self._reply(
                    200,
                    {
                        "id": "cmpl-stub",
                        "object": "text_completion",
                        "model": MODEL,
                        "choices": [{"index": 0, "text": stub.name, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def running_router(policy: str) -> Iterator[tuple[str, str, list[StubVllm]]]:
    """Three stubs and the pinned router in front of them; everything is stopped on exit."""
    stubs = [StubVllm(f"worker-{i}") for i in range(3)]
    port, metrics_port = free_port(), free_port()
    args = [
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)),
        "--worker-urls",
        *(stub.url for stub in stubs),
        *("--policy", policy),
        # Never let load balancing override the cache decision in this sequential test.
        *("--balance-abs-threshold", "1000", "--balance-rel-threshold", "1000"),
    ]
    try:
        with vllm_router(args, port) as url:
            yield url, f"http://127.0.0.1:{metrics_port}/metrics", stubs
    finally:
        for stub in stubs:
            stub.close()


def complete(router: str, prompt: str) -> str:
    """Send one completion through the router; returns the name of the stub that answered."""
    request = urllib.request.Request(
        f"{router}/v1/completions",
        data=json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        text: str = json.loads(response.read())["choices"][0]["text"]
        return text


def prefix_decisions(metrics_url: str) -> dict[str, float]:
    """The router's own count of cache-aware decisions by outcome (prefix_hit, prefix_miss, ...)."""
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    found = re.findall(
        r'vllm_router_prefix_routing_decisions_total\{[^}]*outcome="([a-z_]+)"[^}]*\} ([0-9.e+]+)', text
    )
    return {outcome: float(value) for outcome, value in found}


def test_requests_sharing_a_long_prefix_go_to_the_same_backend() -> None:
    with running_router("cache_aware") as (router, metrics, stubs):
        first = complete(router, SHARED_PREFIX + " Task: fix the failing test in parser.py")
        second = complete(router, SHARED_PREFIX + " Task: now add a regression test for it")
        third = complete(router, SHARED_PREFIX + " Task: and update the changelog")
        decisions = prefix_decisions(metrics)
    assert first == second == third
    holder = next(stub for stub in stubs if stub.name == first)
    assert len(holder.prompts) == 3 and all(p.startswith(SHARED_PREFIX) for p in holder.prompts)
    # The router says why: the first prompt found no cached prefix, the next two matched the first's.
    assert decisions == {"prefix_miss": 1, "prefix_hit": 2}


def test_round_robin_spreads_the_same_requests_so_the_affinity_comes_from_the_policy() -> None:
    with running_router("round_robin") as (router, _, _stubs):
        answered = [complete(router, SHARED_PREFIX + f" Task {i}") for i in range(3)]
    assert len(set(answered)) == 3
