"""A loopback inference server with a known latency model, for `inference-tiers bench`'s tests and docs.

It speaks the two streaming protocols bench drives:

- OpenAI-compatible ``POST /v1/chat/completions`` (SSE, ``data: {...}`` chunks, ``data: [DONE]``) and
  ``GET /v1/models``;
- SageMaker's ``POST /endpoints/<name>/invocations-response-stream``: it checks the request's SigV4 signature
  against known test credentials and answers in the AWS event-stream framing (``PayloadPart`` events carrying the
  same SSE bytes a vLLM container writes), which botocore decodes as it does for the real service.

A token is one whitespace-separated word (the unit of bench's offline tokenizer, tools/bench/make_tokenizer.py).
Time to first token = ``ttft_base_ms + prefill_ms_per_token * uncached prompt tokens``; each further token after
``decode_ms_per_token``. With ``slots`` set, at most that many requests are served at once and the others wait
for a slot (an engine's maximum batch), which is what bends a latency-throughput curve. The prefix cache keeps every ``BLOCK``-word prefix it has seen: a prompt's cached tokens
are its longest seen prefix in whole blocks, as vLLM's automatic prefix caching counts them. Requests in slots
do not slow each other down (the server is a test double, not a simulator).

    python tools/bench/loopback.py --port 8000     # serve until interrupted
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.ops.helpers import event_stream_message  # noqa: E402

BLOCK = 16
WORD = "lorem "
# Test credentials the SigV4 check verifies against (botocore's signer computes the same signature).
ACCESS_KEY, SECRET_KEY, REGION = "AKIDLOOPBACKTEST", "loopback-secret-key", "us-east-1"


@dataclass
class LatencyModel:
    ttft_base_ms: float = 20.0
    prefill_ms_per_token: float = 0.2
    decode_ms_per_token: float = 10.0
    default_max_tokens: int = 16
    slots: int | None = None
    # What one token's text is (two words: a tokenizer counting words reads twice the tokens the server made),
    # and whether the server reports usage when asked (some containers never do).
    token_text: str = WORD
    usage: bool = True

    def ttft_ms(self, uncached_tokens: int) -> float:
        return self.ttft_base_ms + self.prefill_ms_per_token * uncached_tokens


@dataclass
class PrefixCache:
    seen: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # (prompt tokens, cached tokens) of every request, in arrival order: what tests compare with the model.
    requests: list[tuple[int, int]] = field(default_factory=list)

    def lookup_and_insert(self, words: list[str]) -> int:
        digest, keys = hashlib.sha256(), []
        for start in range(0, len(words) - len(words) % BLOCK, BLOCK):
            digest.update(" ".join(words[start : start + BLOCK]).encode())
            keys.append(digest.copy().hexdigest())
        with self.lock:
            cached = 0
            for key in keys:
                if key not in self.seen:
                    break
                cached += BLOCK
            self.seen.update(keys)
            self.requests.append((len(words), cached))
        return cached


def prompt_words(body: dict[str, Any]) -> list[str]:
    """Every word of every message, in order (string content or a list of text parts)."""
    words: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content") or ""
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        for part in parts:
            words.extend(part.split())
    return words


def sse_chunks(model: str, tokens: int, usage: tuple[int, int] | None, text: str = WORD) -> list[bytes]:
    """One ``data:`` event per token (``text`` each), then the usage chunk when asked for, then ``[DONE]``."""
    events = [
        {"id": "loopback", "object": "chat.completion.chunk", "model": model,
         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        for _ in range(tokens)
    ]  # fmt: skip
    events[-1]["choices"][0]["finish_reason"] = "length"
    if usage:
        prompt, completion = usage
        events.append({"id": "loopback", "object": "chat.completion.chunk", "model": model, "choices": [],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}})  # fmt: skip
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def sigv4_valid(method: str, url: str, headers: dict[str, str], body: bytes) -> bool:
    """Recompute the request's SigV4 signature (service ``sagemaker``) with the test credentials."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    authorization = headers.get("authorization", "")
    fields = dict(
        part.strip().split("=", 1) for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(",")
    )
    if not authorization.startswith("AWS4-HMAC-SHA256 ") or "SignedHeaders" not in fields:
        return False
    if not fields.get("Credential", "").startswith(f"{ACCESS_KEY}/"):
        return False
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(method=method, url=url, data=body, headers={k: headers[k] for k in signed})
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sagemaker", REGION)
    string_to_sign = signer.string_to_sign(request, signer.canonical_request(request))
    return bool(signer.signature(string_to_sign, request) == fields.get("Signature"))


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0, model: LatencyModel | None = None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.latency = model or LatencyModel()
        self.slots = threading.BoundedSemaphore(self.latency.slots) if self.latency.slots else None
        self.cache = PrefixCache()
        self.rejected_signatures = 0
        # TCP connections accepted: a client that reuses its connections opens about one per concurrent request.
        self.connections = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> LoopbackServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.cache.lock:
            self.server.connections += 1

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "loopback", "object": "model"}]})
        else:  # /health, /get_server_info, /get_model_info: what vllm-router probes its workers with
            self._json(200, {"model_path": "loopback"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") == "/v1/chat/completions":
            self._chat(json.loads(raw), sagemaker=False)
        elif self.path.startswith("/endpoints/") and self.path.endswith("/invocations-response-stream"):
            headers = {k.lower(): v for k, v in self.headers.items()}
            if not sigv4_valid("POST", f"{self.server.url}{self.path}", headers, raw):
                self.server.rejected_signatures += 1
                self._json(403, {"message": "The request signature we calculated does not match"})
                return
            self._chat(json.loads(raw), sagemaker=True)
        else:
            self._json(404, {"error": "not found"})

    def _chat(self, body: dict[str, Any], *, sagemaker: bool) -> None:
        if self.server.slots is None:
            self._serve(body, sagemaker=sagemaker)
            return
        with self.server.slots:
            self._serve(body, sagemaker=sagemaker)

    def _serve(self, body: dict[str, Any], *, sagemaker: bool) -> None:
        latency = self.server.latency
        words = prompt_words(body)
        cached = self.server.cache.lookup_and_insert(words)
        tokens = int(
            body.get("max_completion_tokens") or body.get("max_tokens") or latency.default_max_tokens
        )
        include_usage = latency.usage and bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = sse_chunks(
            str(body.get("model", "loopback")),
            tokens,
            (len(words), tokens) if include_usage else None,
            latency.token_text,
        )
        start = time.perf_counter()
        content_type = "application/vnd.amazon.eventstream" if sagemaker else "text/event-stream"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        due = start + latency.ttft_ms(len(words) - cached) / 1000
        for index, chunk in enumerate(chunks):
            if index < tokens:
                time.sleep(max(0.0, due - time.perf_counter()))
                due += latency.decode_ms_per_token / 1000
            self._chunk(event_stream_message("PayloadPart", chunk) if sagemaker else chunk)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--ttft-base-ms", type=float, default=LatencyModel.ttft_base_ms)
    parser.add_argument("--prefill-ms-per-token", type=float, default=LatencyModel.prefill_ms_per_token)
    parser.add_argument("--decode-ms-per-token", type=float, default=LatencyModel.decode_ms_per_token)
    parser.add_argument("--slots", type=int, help="requests served at once (default: no limit)")
    args = parser.parse_args()
    model = LatencyModel(
        args.ttft_base_ms, args.prefill_ms_per_token, args.decode_ms_per_token, slots=args.slots
    )
    with LoopbackServer(args.port, model) as server:
        print(f"loopback server on {server.url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
