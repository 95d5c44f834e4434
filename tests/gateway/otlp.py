"""A loopback OTLP/HTTP trace receiver, and the real decoder of what it received.

The receiver answers ``POST /v1/traces`` with 200 and an empty body (an empty ``ExportTraceServiceResponse``)
and keeps each request body as sent. The bodies are protobuf ``ExportTraceServiceRequest`` messages; the
package's own environment has no protobuf runtime, so they are decoded by ``opentelemetry-proto`` in the
LiteLLM tool venv (the OTLP exporter installs it there), in a subprocess of that venv's Python.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.gateway.proxy import VENV, litellm_bin, missing

TRACES_PATH = "/v1/traces"  # what the exporter appends to OTEL_EXPORTER_OTLP_ENDPOINT
EXPORTER = "opentelemetry-exporter-otlp-proto-http"

# Runs in the tool venv: base64 bodies (JSON list) on stdin, one JSON object per span on stdout.
_DECODE = """
import base64, json, sys
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
for body in json.load(sys.stdin):
    request = ExportTraceServiceRequest.FromString(base64.b64decode(body))
    for resource_spans in request.resource_spans:
        resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                print(json.dumps({
                    "service": resource.get("service.name", ""),
                    "scope": scope_spans.scope.name,
                    "name": span.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                }))
"""


@dataclass(frozen=True)
class Span:
    service: str
    scope: str  # the instrumentation scope (tracer name): "litellm" for LiteLLM's own spans
    name: str
    trace_id: str  # lower-case hex, as in traceparent
    span_id: str
    parent_span_id: str  # "" for a root span


def require_exporter() -> None:
    """Fail (not skip), with the command that installs it, unless the tool venv has the OTLP/HTTP exporter that
    LiteLLM's ``otel`` callback imports (a tool venv from before it was added lacks it)."""
    found = subprocess.run(
        [
            str(litellm_bin() / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({EXPORTER!r}))",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not found:
        missing(f"{EXPORTER} in {VENV}")


def decode(bodies: list[bytes]) -> list[Span]:
    """Every span in ``bodies`` (ExportTraceServiceRequest messages), decoded by opentelemetry-proto."""
    result = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", _DECODE],
        input=json.dumps([base64.b64encode(b).decode() for b in bodies]),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"decoding the OTLP export requests failed:\n{result.stderr[-3000:]}")
    return [Span(**json.loads(line)) for line in result.stdout.splitlines()]


def ancestors(span: Span, spans: list[Span]) -> Iterator[str]:
    """The ids above ``span``, nearest first, following parent ids through ``spans`` and then one step beyond
    (the parent that is not among them: the remote caller's span, for a request that came with a traceparent)."""
    by_id = {s.span_id: s for s in spans}
    seen: set[str] = set()
    parent = span.parent_span_id
    while parent and parent not in seen:
        seen.add(parent)
        yield parent
        above = by_id.get(parent)
        if above is None:
            return
        parent = above.parent_span_id


class OtlpReceiver:
    """The server and the bodies it received; ``endpoint`` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.paths.append(self.path)
                    if self.path == TRACES_PATH:
                        receiver.bodies.append(body)
                status = 200 if self.path == TRACES_PATH else 404
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def received(self) -> list[bytes]:
        with self._lock:
            return list(self.bodies)
