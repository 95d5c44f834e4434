"""The load bench generates itself where aiperf 0.13.0 has no transport: SageMaker and Bedrock ConverseStream.

aiperf 0.13.0 speaks HTTP to OpenAI-style and other JSON APIs only (its aiperf/transports has the aiohttp
transport alone; no SigV4, no event-stream decoding), and no maintained engine drives Bedrock's ConverseStream.
boto3 signs (SigV4) and decodes the event stream; this module only paces the requests and times the tokens:

- SageMaker ``InvokeEndpointWithResponseStream`` with an OpenAI-style chat body (``stream: true``), optionally
  routed to an inference component; the ``PayloadPart`` bytes are the container's SSE lines;
- Bedrock ``ConverseStream``: ``contentBlockDelta`` events carry the text, ``metadata.usage`` the token counts.

Load: ``concurrency`` N runs N workers back to back (closed loop); ``rate`` R starts a request (an agentic
session) every 1/R seconds (open loop). Prompts are words drawn from a fixed list with a seeded generator. Tokens
are the server's usage, else the tokenizer's count of the text (never stream chunks: servers pack several tokens
into one), as aiperf counts them.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError, ConnectTimeoutError, EventStreamError, ReadTimeoutError

from inference_tiers.ops.bench.metrics import TOKENIZER, Record, error_kind_of_status
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
# (messages, max output tokens) -> (TTFT ms, time to the first answer token ms, (input, output) tokens of the
# server's usage or None, answer, reasoning): TTFT counts the first token, reasoning included.
Reply = tuple[float | None, float | None, tuple[int, int] | None, str, str]
Send = Callable[[list[Message], int], Reply]
# Texts -> their token counts by the model's tokenizer (what a request without usage is counted with).
Count = Callable[[list[str]], list[int]]

_COUNT_SCRIPT = (
    "import json, sys; from tokenizers import Tokenizer; tokenizer = Tokenizer.from_file(sys.argv[1]); "
    "print(json.dumps([len(e.ids) for e in tokenizer.encode_batch(json.load(sys.stdin), add_special_tokens=False)]))"
)


def tokenizer_count(python: Path, tokenizer: Path) -> Count:
    """Count with the Hugging Face tokenizer folder ``tokenizer`` (its tokenizer.json, aiperf's tokenizer too), in
    the tool venv's ``python``, which has ``tokenizers`` (aiperf's dependency) where the project's venv has not."""

    def count(texts: list[str]) -> list[int]:
        try:
            done = subprocess.run(
                [str(python), "-c", _COUNT_SCRIPT, str(tokenizer / "tokenizer.json")],
                input=json.dumps(texts), capture_output=True, text=True, check=False,
            )  # fmt: skip
        except FileNotFoundError:
            raise ValueError(f"tokenizer: {python} not found; run `bash tools/bench/setup.sh`") from None
        if done.returncode:
            raise ValueError(f"tokenizer {tokenizer}: counting failed: {done.stderr.strip()[-500:]}")
        counts: list[int] = json.loads(done.stdout)
        return counts

    return count


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


class StreamError(Exception):
    """An error payload inside a stream that began well (vLLM writes ``data: {"error": ...}`` mid-stream)."""


def error_kind(error: Exception) -> str:
    """How a request failed (metrics.Record.error_kind); botocore raises a stream's exception event as an
    EventStreamError, a ClientError whose code is the event's (a throttle mid-stream is still a throttle)."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        if "throttl" in code.lower() or code == "TooManyRequestsException":
            return "throttled"
        if isinstance(error, EventStreamError):
            return "stream_error"
        return error_kind_of_status(
            int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400))
        )
    if isinstance(error, StreamError):
        return "stream_error"
    if isinstance(error, ReadTimeoutError | ConnectTimeoutError | TimeoutError):
        return "timeout"
    return "error"


def run_level(send: Send, spec: WorkloadSpec, level: float, seed: int, count: Count) -> list[Record]:
    """Run one load level: every session of the spec (prompts drawn with ``seed``), paced by its load mode; a
    request the server reported no usage for is counted with ``count`` after the level, outside its timing."""
    sessions = _sessions(spec, random.Random(seed))
    records: list[Record] = []
    # (record index, prompt text, answer) of the successful requests without usage.
    uncounted: list[tuple[int, str, str]] = []
    lock = threading.Lock()

    def run_session(turns: list[tuple[str, int]]) -> None:
        messages: list[Message] = []
        for index, (text, max_tokens) in enumerate(turns):
            if index:
                time.sleep(spec.think_time_ms / 1000)
            messages.append({"role": "user", "content": text})
            start = time.perf_counter()
            usage: tuple[int, int] | None = (0, 0)
            try:
                ttft, ttfa, usage, answer, reasoning = send(list(messages), max_tokens)
                record = Record(start, time.perf_counter(), ttft, *(usage or (0, 0)), ttfa_ms=ttfa)
            except Exception as error:  # noqa: BLE001  every failure is a failed request of the run
                end, message = time.perf_counter(), f"{type(error).__name__}: {error}"
                record = Record(start, end, None, 0, 0, message, error_kind=error_kind(error))
                answer = reasoning = ""
            prompt = " ".join(str(m["content"]) for m in messages)
            messages.append({"role": "assistant", "content": answer})
            with lock:
                if usage is None:
                    uncounted.append((len(records), prompt, reasoning + answer))
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
    if uncounted:
        counts = count([prompt for _, prompt, _ in uncounted] + [answer for _, _, answer in uncounted])
        for (index, _, _), sent, received in zip(uncounted, counts, counts[len(uncounted) :], strict=False):
            records[index] = replace(
                records[index], input_tokens=sent, output_tokens=received, token_unit=TOKENIZER
            )
    return records


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


@dataclass
class _Timed:
    """A streamed answer and reasoning, with the times to their first token (ms from ``start``)."""

    start: float
    answer: str = ""
    reasoning: str = ""
    ttft: float | None = None
    ttfa: float | None = None

    def add(self, answer: str, reasoning: str) -> None:
        if not (answer or reasoning):
            return
        now = _ms(self.start)
        self.ttft = now if self.ttft is None else self.ttft
        if answer and self.ttfa is None:
            self.ttfa = now
        self.answer += answer
        self.reasoning += reasoning


def sagemaker_sender(runtime: Any, endpoint: str, component: str | None, model: str | None) -> Send:
    """Send through SageMaker Runtime ``InvokeEndpointWithResponseStream`` (an OpenAI-style container)."""

    def send(messages: list[Message], max_tokens: int) -> Reply:
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
        stream = _Timed(start)
        usage: dict[str, Any] = {}
        for event in sse_events(parts):
            if event.get("error"):
                raise StreamError(json.dumps(event["error"])[:500])
            usage = event.get("usage") or usage
            for choice in event.get("choices", []):
                delta = choice.get("delta", {})
                # vLLM's reasoning parsers write reasoning_content (older) or reasoning (newer releases).
                stream.add(
                    delta.get("content") or "", delta.get("reasoning_content") or delta.get("reasoning") or ""
                )
        # Read the stream to its end (sse_events stops at [DONE]): urllib3 returns only a drained connection to the
        # pool, and an undrained one costs the next request a new TCP (and TLS) handshake inside its TTFT.
        for _ in parts:
            pass
        # OpenAI usage (vLLM's with stream_options.include_usage); chunks are no token unit (a server packs several).
        counts = (
            (int(usage.get("prompt_tokens", 0)), int(usage["completion_tokens"]))
            if "completion_tokens" in usage
            else None
        )
        return stream.ttft, stream.ttfa, counts, stream.answer, stream.reasoning

    return send


def bedrock_sender(runtime: Any, model_id: str, guardrail: dict[str, str] | None = None) -> Send:
    """Send through Bedrock Runtime ``ConverseStream`` (with the tier's guardrail when it has one)."""

    def send(messages: list[Message], max_tokens: int) -> Reply:
        request: dict[str, Any] = {
            "modelId": model_id,
            "messages": [{"role": m["role"], "content": [{"text": m["content"] or "."}]} for m in messages],
            "inferenceConfig": {"maxTokens": max_tokens},
        }
        if guardrail:
            request["guardrailConfig"] = {**guardrail, "streamProcessingMode": "async"}
        start = time.perf_counter()
        stream, usage = _Timed(start), dict[str, Any]()
        for event in runtime.converse_stream(**request)["stream"]:
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            stream.add(delta.get("text", ""), delta.get("reasoningContent", {}).get("text", ""))
            usage = event.get("metadata", {}).get("usage", usage)
        counts = (
            (int(usage.get("inputTokens", 0)), int(usage["outputTokens"]))
            if "outputTokens" in usage
            else None
        )
        return stream.ttft, stream.ttfa, counts, stream.answer, stream.reasoning

    return send
