"""smoke: Bedrock and SageMaker steps against botocore Stubbers / raw responses, EKS tiers against a loopback server."""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inference_tiers.ops import smoke
from inference_tiers.ops.smoke import StackError
from tests.ops.helpers import StubClients, client_error, event_stream_message, respond_raw

ROLE = "arn:aws:iam::123456789012:role/InferenceTiers-Bedrock-AppRole"
BEDROCK_OUTPUTS = {
    "ApplicationRoleArn": ROLE,
    "GuardrailId": "gr-abc123",
    "GuardrailVersion": "1",
    "ModelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
}
CREDENTIALS = {
    "AccessKeyId": "ASIAEXAMPLEEXAMPLE",
    "SecretAccessKey": "secret-secret-secret",
    "SessionToken": "token-token-token",
    "Expiration": datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC),
}


def _stack(outputs: dict[str, str]) -> dict[str, object]:
    return {
        "Stacks": [
            {
                "StackName": "s",
                "CreationTime": datetime.datetime(2026, 12, 1),
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }


# --- stack outputs -------------------------------------------------------------------------------------------


def test_missing_stack_names_it_and_the_override() -> None:
    clients = StubClients()
    client_error(
        clients.stub("cloudformation"),
        "describe_stacks",
        "ValidationError",
        "Stack with id InferenceTiers-Bedrock does not exist",
        expected_params={"StackName": "InferenceTiers-Bedrock"},
    )
    with pytest.raises(
        StackError, match=r"stack InferenceTiers-Bedrock not found in us-east-1: deploy it first"
    ):
        smoke.run_smoke(clients, "bedrock")


def test_missing_output_lists_what_the_stack_has() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response(
        "describe_stacks", _stack({"DashboardUrl": "https://x"}), {"StackName": "MySageMaker"}
    )
    with pytest.raises(
        StackError, match=r"stack MySageMaker has no output EndpointName \(has: DashboardUrl\)"
    ):
        smoke.run_smoke(clients, "sagemaker", "MySageMaker")


# --- bedrock ----------------------------------------------------------------------------------------------------

JSON = {"Content-Type": "application/json"}
BLOCKED_ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Sorry, I can't help."}]}},
    "stopReason": "guardrail_intervened",
    "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    "metrics": {"latencyMs": 90},
}
ANSWER = {**BLOCKED_ANSWER, "stopReason": "end_turn"}


def _error(code: str, status: int, message: str = "denied") -> tuple[int, dict[str, str], bytes]:
    return (
        status,
        {**JSON, "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        json.dumps({"message": message}).encode(),
    )


def _converse_stream(*pieces: str, stop: str = "end_turn") -> tuple[int, dict[str, str], bytes]:
    events = [("messageStart", {"role": "assistant"})]
    events += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}}) for p in pieces]
    events += [("contentBlockStop", {"contentBlockIndex": 0}), ("messageStop", {"stopReason": stop})]
    body = b"".join(event_stream_message(t, json.dumps(p).encode(), "application/json") for t, p in events)
    return 200, {"Content-Type": "application/vnd.amazon.eventstream"}, body


def _bedrock_clients(assume_ok: bool = True) -> StubClients:
    clients = StubClients()
    clients.stub("cloudformation").add_response(
        "describe_stacks", _stack(BEDROCK_OUTPUTS), {"StackName": "InferenceTiers-Bedrock"}
    )
    if assume_ok:
        clients.stub("sts").add_response(
            "assume_role",
            {"Credentials": CREDENTIALS},
            {"RoleArn": ROLE, "RoleSessionName": "inference-tiers-smoke"},
        )
    else:
        client_error(
            clients.stub("sts"), "assume_role", "AccessDenied", "not authorized to perform sts:AssumeRole"
        )
    clients.assumed = StubClients(unstubbed=("bedrock-runtime",))
    return clients


def _queue_bedrock(
    clients: StubClients,
    benign: tuple[int, dict[str, str], bytes],
    blocked: tuple[int, dict[str, str], bytes],
    unguarded: tuple[int, dict[str, str], bytes],
) -> list[Any]:
    """Raw responses for the benign ConverseStream, then the blocked and the unguarded Converse calls."""
    runtime = clients.assumed.client("bedrock-runtime")  # type: ignore[union-attr]
    sent = respond_raw(runtime, "ConverseStream", benign)
    return respond_raw(runtime, "Converse", blocked, unguarded, sent=sent)


def test_bedrock_all_steps_pass() -> None:
    clients = _bedrock_clients()
    sent = _queue_bedrock(
        clients,
        _converse_stream("Par", "is."),
        (200, JSON, json.dumps(BLOCKED_ANSWER).encode()),
        _error("AccessDeniedException", 403),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert [(r.check, r.status) for r in results] == [
        ("assume application role", "pass"),
        ("benign request with guardrail", "pass"),
        ("harmful request is blocked", "pass"),
        ("request without guardrail is denied", "pass"),
    ]
    assert results[1].detail == "stopReason end_turn: 'Paris.'" and results[1].ttft_ms is not None
    assert clients.assumed_with == CREDENTIALS
    assert all(r.total_ms is not None for r in results[1:])
    bodies = [json.loads(r.body) for r in sent]
    guardrail = {"guardrailIdentifier": "gr-abc123", "guardrailVersion": "1"}
    assert bodies[0]["guardrailConfig"] == {**guardrail, "streamProcessingMode": "sync"}
    assert bodies[1]["guardrailConfig"] == guardrail
    assert bodies[1]["messages"][0]["content"][0]["text"] == smoke.BLOCKED_PROMPT
    assert "guardrailConfig" not in bodies[2]
    assert all(BEDROCK_OUTPUTS["ModelId"] in r.url.replace("%3A", ":") for r in sent)
    clients.assert_done()


def test_bedrock_assume_role_denied_stops_the_run() -> None:
    clients = _bedrock_clients(assume_ok=False)
    [result] = smoke.run_smoke(clients, "bedrock")
    assert result.status == "fail" and "sts:AssumeRole" in result.fix
    clients.assert_done()


def test_bedrock_benign_request_blocked_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _converse_stream("Sorry.", stop="guardrail_intervened"),
        (200, JSON, json.dumps(BLOCKED_ANSWER).encode()),
        _error("AccessDeniedException", 403),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[1].status == "fail" and "relax its filters" in results[1].fix


def test_bedrock_benign_request_error_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _error("AccessDeniedException", 403, "no InvokeModelWithResponseStream"),
        (200, JSON, json.dumps(BLOCKED_ANSWER).encode()),
        _error("AccessDeniedException", 403),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[1].status == "fail" and results[1].detail.startswith("AccessDeniedException")


def test_bedrock_harmful_request_answered_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _converse_stream("Paris."),
        (200, JSON, json.dumps(ANSWER).encode()),
        _error("AccessDeniedException", 403),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[2].status == "fail" and "content-filter" in results[2].fix


def test_bedrock_harmful_request_error_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _converse_stream("Paris."),
        _error("ValidationException", 400, "bad guardrail version"),
        _error("AccessDeniedException", 403),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[2].status == "fail" and results[2].detail == "ValidationException: bad guardrail version"


def test_bedrock_unguarded_request_allowed_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _converse_stream("Paris."),
        (200, JSON, json.dumps(BLOCKED_ANSWER).encode()),
        (200, JSON, json.dumps(ANSWER).encode()),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[3].status == "fail" and "bedrock:GuardrailIdentifier" in results[3].fix


def test_bedrock_unguarded_request_other_error_fails() -> None:
    clients = _bedrock_clients()
    _queue_bedrock(
        clients,
        _converse_stream("Paris."),
        (200, JSON, json.dumps(BLOCKED_ANSWER).encode()),
        _error("ValidationException", 400),
    )
    results = smoke.run_smoke(clients, "bedrock")
    assert results[3].status == "fail" and "expected AccessDeniedException" in results[3].fix


# --- sagemaker -----------------------------------------------------------------------------------------------------

SM_OUTPUTS = {"EndpointName": "llm-endpoint", "InferenceComponentName": "llm-ic"}
CHAT = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris is the capital."}}]}


def _sse(*pieces: str) -> list[bytes]:
    lines = [f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': p}}]})}\n\n" for p in pieces]
    return [line.encode() for line in [*lines, "data: [DONE]\n\n"]]


def _sm_clients(status: str = "InService", outputs: dict[str, str] = SM_OUTPUTS) -> StubClients:
    endpoint = outputs.get("EndpointName") or outputs["SageMakerEndpointName"]
    clients = StubClients(unstubbed=("sagemaker-runtime",))
    clients.stub("cloudformation").add_response("describe_stacks", _stack(outputs))
    clients.stub("sagemaker").add_response(
        "describe_endpoint",
        {
            "EndpointName": endpoint,
            "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/x",
            "EndpointStatus": status,
            "CreationTime": datetime.datetime(2026, 12, 1),
            "LastModifiedTime": datetime.datetime(2026, 12, 1),
        },
        {"EndpointName": endpoint},
    )
    return clients


def _serve_runtime(
    clients: StubClients, chat: bytes, stream_parts: list[bytes], status: int = 200
) -> list[Any]:
    runtime = clients.client("sagemaker-runtime")
    headers = {"Content-Type": "application/json"}
    if status != 200:  # how SageMaker names the error in a real response
        headers["x-amzn-ErrorType"] = "ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/"
    sent = respond_raw(runtime, "InvokeEndpoint", (status, headers, chat))
    # Split the SSE text across PayloadParts at odd places, as the container's flushes do.
    joined = b"".join(stream_parts)
    parts = [joined[i : i + 11] for i in range(0, len(joined), 11)]
    body = b"".join(event_stream_message("PayloadPart", part) for part in parts)
    stream_headers = {"Content-Type": "application/vnd.amazon.eventstream"}
    return respond_raw(runtime, "InvokeEndpointWithResponseStream", (200, stream_headers, body), sent=sent)


def test_sagemaker_all_steps_pass_and_route_to_the_inference_component() -> None:
    clients = _sm_clients()
    sent = _serve_runtime(clients, json.dumps(CHAT).encode(), _sse("Par", "is", "."))
    results = smoke.run_smoke(clients, "sagemaker")
    assert [(r.check, r.status) for r in results] == [
        ("endpoint InService", "pass"),
        ("chat request", "pass"),
        ("streamed chat request", "pass"),
    ]
    assert results[0].detail == "llm-endpoint / llm-ic"
    assert results[2].detail == "'Paris.'" and results[2].ttft_ms is not None
    assert results[2].ttft_ms <= results[2].total_ms  # type: ignore[operator]
    assert [r.headers["X-Amzn-SageMaker-Inference-Component"] for r in sent] == [b"llm-ic", b"llm-ic"]
    bodies = [json.loads(r.body) for r in sent]
    assert bodies[0]["messages"][0]["content"] == smoke.BENIGN_PROMPT and "stream" not in bodies[0]
    assert bodies[1]["stream"] is True
    clients.assert_done()


def test_sagemaker_single_model_endpoint_sends_no_component() -> None:
    clients = _sm_clients(outputs={"EndpointName": "llm-endpoint"})
    sent = _serve_runtime(clients, json.dumps(CHAT).encode(), _sse("Hi"))
    results = smoke.run_smoke(clients, "sagemaker")
    assert all(r.status == "pass" for r in results)
    assert all("X-Amzn-SageMaker-Inference-Component" not in r.headers for r in sent)


def test_sagemaker_not_in_service_fails() -> None:
    [result] = smoke.run_smoke(_sm_clients("Creating"), "sagemaker")
    assert result.status == "fail" and result.detail == "llm-endpoint is Creating"


def test_sagemaker_describe_error_fails() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response("describe_stacks", _stack(SM_OUTPUTS))
    client_error(
        clients.stub("sagemaker"), "describe_endpoint", "ValidationException", "Could not find endpoint"
    )
    [result] = smoke.run_smoke(clients, "sagemaker")
    assert result.status == "fail" and "Could not find endpoint" in result.detail


def test_sagemaker_model_error_and_empty_stream_fail() -> None:
    clients = _sm_clients()
    error = json.dumps(
        {"ErrorCode": "ModelError", "Message": "Received server error (500) from primary"}
    ).encode()
    _serve_runtime(clients, error, [b"data: [DONE]\n\n"], status=424)
    results = smoke.run_smoke(clients, "sagemaker")
    assert results[1].status == "fail" and results[1].detail.startswith("ModelError")
    assert results[2].status == "fail" and results[2].detail == "no tokens in the response"


def test_sagemaker_non_openai_response_fails() -> None:
    clients = _sm_clients()
    _serve_runtime(clients, b"<html>not json</html>", [b"data: {not json}\n\n"])
    results = smoke.run_smoke(clients, "sagemaker")
    assert results[1].status == "fail" and "not OpenAI-style JSON" in results[1].detail
    assert results[2].status == "fail" and "not OpenAI-style SSE" in results[2].detail


def test_sse_parser_joins_split_chunks_and_stops_at_done() -> None:
    chunks = [
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"cho',
        b'ices":[{"delta":{"content":"b"}}]}\n',
        b"\ndata: [DONE]\n\ndata: {ignored}\n",
    ]
    text, ttft = smoke.stream_tokens(chunks, time.perf_counter())
    assert text == "ab" and ttft is not None


# --- EKS tiers: a loopback OpenAI-compatible server ---------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    models: list[str] = ["meta-llama/Llama-3.1-70B-Instruct"]
    chat_pieces: list[str] = ["Paris", " is", " the capital."]
    models_status = 200
    requests: list[tuple[str, Any]] = []

    def log_message(self, *_: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        self.requests.append((self.path, None))
        body = json.dumps(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
        ).encode()
        self.send_response(self.models_status if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, payload))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for line in _sse(*self.chat_pieces):
            self.wfile.write(line)
            self.wfile.flush()
            time.sleep(0.01)


@pytest.fixture
def server() -> Iterator[type[_Handler]]:
    handler = type("Handler", (_Handler,), {"requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    yield handler
    httpd.shutdown()
    httpd.server_close()


def _eks_clients(tier: str, url: str) -> StubClients:
    clients = StubClients()
    key = "RouterEndpoint" if tier == "disaggregated" else "InvokeUrl"
    clients.stub("cloudformation").add_response(
        "describe_stacks", _stack({key: url, "EksClusterName": "c"}), {"StackName": smoke.STACK_NAMES[tier]}
    )
    return clients


@pytest.mark.parametrize("tier", ["hyperpod", "disaggregated"])
def test_eks_tiers_answer_models_and_a_streamed_chat(server: type[_Handler], tier: str) -> None:
    results = smoke.run_smoke(_eks_clients(tier, server.url + "/"), tier)  # type: ignore[attr-defined]
    assert [(r.check, r.status) for r in results] == [
        ("GET /v1/models", "pass"),
        ("streamed chat request", "pass"),
    ]
    assert results[1].detail == "'Paris is the capital.'"
    assert results[1].ttft_ms is not None and results[1].total_ms is not None
    assert results[1].ttft_ms < results[1].total_ms  # the server sleeps between chunks
    path, payload = server.requests[-1]
    assert path == "/v1/chat/completions"
    assert payload["model"] == "meta-llama/Llama-3.1-70B-Instruct" and payload["stream"] is True


def test_eks_url_without_scheme_gets_http(server: type[_Handler]) -> None:
    host = server.url.removeprefix("http://")  # type: ignore[attr-defined]
    results = smoke.smoke_http(host, timeout=5)
    assert results[0].status == "pass"


def test_eks_models_error_fails(server: type[_Handler]) -> None:
    server.models_status = 503
    [result] = smoke.smoke_http(server.url, timeout=5)  # type: ignore[attr-defined]
    assert result.status == "fail" and "503" in result.detail


def test_eks_no_models_fails(server: type[_Handler]) -> None:
    server.models = []
    [result] = smoke.smoke_http(server.url, timeout=5)  # type: ignore[attr-defined]
    assert result.status == "fail" and result.detail == "no models served"


def test_eks_chat_without_tokens_fails(server: type[_Handler]) -> None:
    server.chat_pieces = []
    results = smoke.smoke_http(server.url, timeout=5)  # type: ignore[attr-defined]
    assert results[1].status == "fail" and results[1].detail == "no tokens in the response"


def test_eks_unreachable_router_fails() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = httpd.server_address[1]
    httpd.server_close()  # nothing listens on this port now
    [result] = smoke.smoke_http(f"http://127.0.0.1:{port}", timeout=5)
    assert result.status == "fail" and "kubectl get pods" in result.fix


def test_hyperpod_with_a_registered_sagemaker_endpoint_checks_both(server: type[_Handler]) -> None:
    clients = _sm_clients(outputs={"InvokeUrl": server.url, "SageMakerEndpointName": "hp-endpoint"})  # type: ignore[attr-defined]
    _serve_runtime(clients, json.dumps(CHAT).encode(), _sse("Hi"))
    results = smoke.run_smoke(clients, "hyperpod")
    assert [r.check for r in results] == [
        "GET /v1/models",
        "streamed chat request",
        "endpoint InService",
        "chat request",
        "streamed chat request",
    ]
    assert all(r.status == "pass" for r in results) and results[2].detail == "hp-endpoint"
    clients.assert_done()


def test_hyperpod_without_url_or_endpoint_is_a_stack_error() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response("describe_stacks", _stack({"EksClusterName": "c"}))
    with pytest.raises(StackError, match=r"has no output InvokeUrl"):
        smoke.run_smoke(clients, "hyperpod")
