"""W3C trace context through the real LiteLLM proxy (the release the image pins) on loopback.

A client sends ``traceparent``; the proxy, configured as ``LiteLLMGateway.export_traces()`` configures it
(``ProxyFeatures(tracing=True)`` and ``tracing_environment``, pointed at a loopback OTLP/HTTP receiver instead
of the ADOT sidecar), must forward it to an OpenAI-compatible backend (the ``hosted_vllm/`` route of the EKS
tiers) and export its own spans in the client's trace. The untraced gateway (the ``gateway`` fixture, tracing
off) must not forward it: that is what makes the first test able to fail.

The tool venv's OpenTelemetry SDK is 1.45.2, not the image's 1.33.1 (tools/gateway/requirements.in says why):
this runs LiteLLM 1.104.0's tracing code, not the image's SDK build.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from inference_tiers.litellm.config import (
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    render_config,
    render_text,
    tracing_environment,
)
from tests.gateway.conftest import UPSTREAM_KEY, Gateway
from tests.gateway.otlp import TRACES_PATH, OtlpReceiver, Span, ancestors, decode, require_exporter
from tests.gateway.proxy import MASTER_KEY, RunningProxy, run_proxy
from tests.gateway.stubs import Captured, StubBackend

MODEL = "llama-eks"
# The proxy's span for the whole request and LiteLLM's span for the call to the backend (LiteLLM 1.104.0's
# names, integrations/opentelemetry.py); both must be in the client's trace.
REQUEST_SPAN = "Received Proxy Server Request"
BACKEND_CALL_SPAN = "raw_gen_ai_request"
EXPORT_TIMEOUT_S = 30


@dataclass
class TracedGateway:
    proxy: RunningProxy
    stub: StubBackend
    otlp: OtlpReceiver


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracedGateway]:
    require_exporter()
    with StubBackend() as stub, OtlpReceiver() as otlp:
        backend = OpenAICompatibleModel(
            name=MODEL, base_url=f"{stub.url}/v1", served_model="meta-llama/Llama-3.3"
        )
        config = render_config(
            [backend],
            router=RouterOptions(num_retries=0),
            features=ProxyFeatures(database=False, redis=False, tracing=True),
        )
        environment = {
            "GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY,
            **tracing_environment(otlp.endpoint),
            # The SDK exports in batches every 5 s by default; 100 ms keeps the test short.
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        folder = tmp_path_factory.mktemp("traced-proxy")
        with run_proxy(render_text(config), folder, extra_env=environment) as proxy:
            yield TracedGateway(proxy, stub, otlp)


def new_traceparent() -> tuple[str, str, str]:
    """(header, trace id, span id) of a sampled client span, random so that each test finds its own."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def chat_with_traceparent(proxy_url: str, traceparent: str | None) -> tuple[str, int]:
    """A chat completion carrying ``traceparent`` (none if None); returns (its unique prompt, HTTP status)."""
    prompt = f"trace {secrets.token_hex(8)}"
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {MASTER_KEY}"}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    request = urllib.request.Request(
        f"{proxy_url}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return prompt, response.status


def backend_request(stub: StubBackend, prompt: str) -> Captured:
    sent = stub.received(
        lambda r: r.path == "/v1/chat/completions" and r.body["messages"][-1]["content"] == prompt
    )
    assert len(sent) == 1, f"expected one backend call for {prompt!r}, got {len(sent)}"
    return sent[0]


def exported_trace(otlp: OtlpReceiver, trace_id: str, client_span_id: str) -> list[Span]:
    """The spans of ``trace_id`` once the proxy's request span (the child of the client's span, which ends
    after every span below it and so is exported last) has arrived."""
    deadline = time.monotonic() + EXPORT_TIMEOUT_S
    decoded: list[Span] = []
    count = -1
    while time.monotonic() < deadline:
        bodies = otlp.received()
        if len(bodies) != count:
            count = len(bodies)
            decoded = [s for s in decode(bodies) if s.trace_id == trace_id]
            if any(s.name == REQUEST_SPAN and s.parent_span_id == client_span_id for s in decoded):
                return decoded
        time.sleep(0.2)
    pytest.fail(
        f"no {REQUEST_SPAN!r} span under the client's span {client_span_id} within {EXPORT_TIMEOUT_S} s; "
        f"the receiver got {count} export request(s) at {sorted(set(otlp.paths))} (expected {TRACES_PATH}); "
        f"spans of the trace: {[(s.scope, s.name, s.parent_span_id) for s in decoded]}",
        pytrace=False,
    )


def test_the_traced_gateway_forwards_traceparent_to_the_backend(traced: TracedGateway) -> None:
    traceparent, trace_id, _ = new_traceparent()
    prompt, status = chat_with_traceparent(traced.proxy.url, traceparent)
    assert status == 200
    forwarded = backend_request(traced.stub, prompt).headers.get("traceparent")
    assert forwarded is not None, "the backend received no traceparent"
    assert forwarded.split("-")[1] == trace_id
    # LiteLLM 1.104.0 forwards the client's header as received (docs/observability.md, step 4): a backend
    # that continues the trace makes its spans children of the client's span, siblings of LiteLLM's.
    assert forwarded == traceparent


def test_the_traced_gateway_exports_its_spans_in_the_clients_trace(traced: TracedGateway) -> None:
    traceparent, trace_id, span_id = new_traceparent()
    assert chat_with_traceparent(traced.proxy.url, traceparent)[1] == 200
    spans = exported_trace(traced.otlp, trace_id, span_id)
    litellm_spans = [s for s in spans if s.scope == "litellm"]
    assert {REQUEST_SPAN, BACKEND_CALL_SPAN} <= {s.name for s in litellm_spans}, litellm_spans
    for span in litellm_spans:
        assert span_id in ancestors(span, spans), f"{span.name} does not descend from the client's span"


def test_without_a_client_traceparent_the_traced_gateway_forwards_none(traced: TracedGateway) -> None:
    """LiteLLM 1.104.0 forwards the client's header only; it does not inject its own span's context, so a
    backend's spans join a trace only when the client started one (docs/observability.md, step 4)."""
    prompt, status = chat_with_traceparent(traced.proxy.url, None)
    assert status == 200
    assert "traceparent" not in backend_request(traced.stub, prompt).headers


def test_the_untraced_gateway_does_not_forward_traceparent(gateway: Gateway) -> None:
    traceparent, _, _ = new_traceparent()
    prompt, status = chat_with_traceparent(gateway.proxy.url, traceparent)
    assert status == 200
    assert "traceparent" not in backend_request(gateway.stub, prompt).headers
