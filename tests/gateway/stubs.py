"""Loopback stand-ins for the gateway's upstreams, recording every request the real proxy sends them.

One HTTP server on 127.0.0.1 answers three shapes:
- ``POST .../chat/completions``: an OpenAI-compatible server (vLLM on EKS, and SageMaker's OpenAI messages
  container behind ``sagemaker_chat``'s invocation URL);
- ``POST /model/<model id>/converse``: the Bedrock runtime's Converse API;
- ``/down/...``: 503, an upstream that is out (for fallbacks);
- anything else: 404, so a wrong route fails the test instead of passing silently.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

REPLY = "stub reply"


@dataclass(frozen=True)
class Captured:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def chat_completion(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


CONVERSE_REPLY: dict[str, Any] = {
    "output": {"message": {"role": "assistant", "content": [{"text": REPLY}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7},
    "metrics": {"latencyMs": 1},
}


class StubBackend:
    """The server and what it received; ``url`` is its base URL (``port`` 0: a free one)."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Captured] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # replies in one segment: no 40 ms delayed-ACK stall

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                path = unquote(self.path)
                with stub._lock:
                    stub.requests.append(
                        Captured(path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                if path.startswith("/down/"):
                    self._send(503, {"message": "stub upstream is down"})
                elif path.endswith("/chat/completions") or path.endswith("/invocations"):
                    self._send(200, chat_completion(str(body.get("model", "stub"))))
                elif path.startswith("/model/") and path.endswith("/converse"):
                    self._send(200, CONVERSE_REPLY)
                else:
                    self._send(404, {"message": f"stub has no route {path}"})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubBackend:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def received(self, predicate: Any) -> list[Captured]:
        with self._lock:
            return [r for r in self.requests if predicate(r)]
