"""The load bench generates itself where aiperf 0.13.0 has no transport: SageMaker and Bedrock ConverseStream.

aiperf 0.13.0 speaks HTTP to OpenAI-style and other JSON APIs only (its aiperf/transports has the aiohttp
transport alone; no SigV4, no event-stream decoding), and no maintained engine drives Bedrock's ConverseStream.
boto3 signs (SigV4) and decodes the event stream; this module only paces the requests and times the tokens:

- SageMaker ``InvokeEndpointWithResponseStream`` with an OpenAI-style chat body (``stream: true``), optionally
  routed to an inference component; the ``PayloadPart`` bytes are the container's SSE lines;
- Bedrock ``ConverseStream``: ``contentBlockDelta`` events carry the text, ``metadata.usage`` the token counts.

Load: ``concurrency`` N runs N workers back to back (closed loop); ``rate`` R starts a request (an agentic
session) every 1/R seconds (open loop). Prompts are words drawn from a fixed list with a seeded generator, the
same unit as the offline tokenizer (one word = one token).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from inference_tiers.ops.bench.metrics import Record
from inference_tiers.ops.bench.workload import Distribution, WorkloadSpec
from inference_tiers.ops.smoke import sse_events

_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "rain",
    "falls",
    "on",
    "green",
    "hills",
    "and",
    "rivers",
    "run",
    "past",
    "old",
    "stone",
    "bridges",
    "toward",
    "quiet",
    "towns",
    "where",
    "people",
    "read",
    "books",
    "drink",
    "tea",
    "plan",
    "journeys",
    "write",
    "letters",
    "build",
    "boats",
    "paint",
    "walls",
    "sing",
    "songs",
    "count",
    "stars",
    "mend",
    "nets",
    "bake",
    "bread",
]

Message = dict[str, Any]
# (messages, max output tokens) -> (TTFT ms or None, input tokens, output tokens, answer text)
Send = Callable[[list[Message], int], tuple[float | None, int, int, str]]


@dataclass(frozen=True)
class Sampler:
    rng: random.Random

    def count(self, dist: Distribution) -> int:
        return max(1, round(self.rng.gauss(dist.mean, dist.stddev))) if dist.stddev else dist.mean

    def words(self, count: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(count))


def _sessions(spec: WorkloadSpec, rng: random.Random) -> list[list[tuple[str, int]]]:
    """Each session's turns as (new user text, max output tokens), ``requests_per_level`` turns in all."""
    sampler = Sampler(rng)
    prefix = sampler.words(spec.prefix_tokens) + " " if spec.prefix_tokens else ""
    sessions, left = [], spec.load.requests_per_level
    while left > 0:
        turns = min(left, sampler.count(spec.turns))
        sessions.append(
            [
                (prefix + sampler.words(sampler.count(spec.input_tokens)), sampler.count(spec.output_tokens))
                for _ in range(turns)
            ]
        )
        left -= turns
    return sessions


def run_level(send: Send, spec: WorkloadSpec, level: float, seed: int) -> list[Record]:
    """Run one load level: every session of the spec (prompts drawn with ``seed``), paced by its load mode."""
    sessions = _sessions(spec, random.Random(seed))
    records: list[Record] = []
    lock = threading.Lock()

    def run_session(turns: list[tuple[str, int]]) -> None:
        messages: list[Message] = []
        for index, (text, max_tokens) in enumerate(turns):
            if index:
                time.sleep(spec.think_time_ms / 1000)
            messages.append({"role": "user", "content": text})
            start = time.perf_counter()
            try:
                ttft, sent, received, answer = send(list(messages), max_tokens)
                record = Record(start, time.perf_counter(), ttft, sent, received)
            except Exception as error:  # noqa: BLE001  every failure is a failed request of the run
                record = Record(start, time.perf_counter(), None, 0, 0, f"{type(error).__name__}: {error}")
                answer = ""
            messages.append({"role": "assistant", "content": answer})
            with lock:
                records.append(record)

    if spec.load.mode == "concurrency":
        queue: Iterator[list[tuple[str, int]]] = iter(sessions)

        def worker() -> None:
            while True:
                with lock:
                    turns = next(queue, None)
                if turns is None:
                    return
                run_session(turns)

        with ThreadPoolExecutor(int(level)) as pool:
            for future in [pool.submit(worker) for _ in range(int(level))]:
                future.result()
    else:
        with ThreadPoolExecutor(max(1, len(sessions))) as pool:
            begin = time.perf_counter()
            futures = []
            for index, turns in enumerate(sessions):
                time.sleep(max(0.0, begin + index / level - time.perf_counter()))
                futures.append(pool.submit(run_session, turns))
            for future in futures:
                future.result()
    return records


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def sagemaker_sender(runtime: Any, endpoint: str, component: str | None, model: str | None) -> Send:
    """Send through SageMaker Runtime ``InvokeEndpointWithResponseStream`` (an OpenAI-style container)."""

    def send(messages: list[Message], max_tokens: int) -> tuple[float | None, int, int, str]:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if model:
            body["model"] = model
        target = {"EndpointName": endpoint, "ContentType": "application/json"}
        if component:
            target["InferenceComponentName"] = component
        start = time.perf_counter()
        response = runtime.invoke_endpoint_with_response_stream(Body=json.dumps(body), **target)
        parts = (e["PayloadPart"]["Bytes"] for e in response["Body"] if "PayloadPart" in e)
        ttft, text, deltas, usage = None, "", 0, dict[str, Any]()
        for event in sse_events(parts):
            usage = event.get("usage") or usage
            for choice in event.get("choices", []):
                delta = choice.get("delta", {}).get("content") or ""
                if delta:
                    ttft = ttft if ttft is not None else _ms(start)
                    text, deltas = text + delta, deltas + 1
        words = sum(len(str(m["content"]).split()) for m in messages)
        return ttft, int(usage.get("prompt_tokens", words)), int(usage.get("completion_tokens", deltas)), text

    return send


def bedrock_sender(runtime: Any, model_id: str, guardrail: dict[str, str] | None = None) -> Send:
    """Send through Bedrock Runtime ``ConverseStream`` (with the tier's guardrail when it has one)."""

    def send(messages: list[Message], max_tokens: int) -> tuple[float | None, int, int, str]:
        request: dict[str, Any] = {
            "modelId": model_id,
            "messages": [{"role": m["role"], "content": [{"text": m["content"] or "."}]} for m in messages],
            "inferenceConfig": {"maxTokens": max_tokens},
        }
        if guardrail:
            request["guardrailConfig"] = {**guardrail, "streamProcessingMode": "async"}
        start = time.perf_counter()
        ttft, text, usage = None, "", dict[str, Any]()
        for event in runtime.converse_stream(**request)["stream"]:
            delta = event.get("contentBlockDelta", {}).get("delta", {}).get("text", "")
            if delta:
                ttft = ttft if ttft is not None else _ms(start)
                text += delta
            usage = event.get("metadata", {}).get("usage", usage)
        return ttft, int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0)), text

    return send
