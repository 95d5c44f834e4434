"""``inference-tiers gateway keys`` against a loopback stub of the admin API, and against the real proxy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inference_tiers.ops import cli
from inference_tiers.ops.gateway import AdminApiError, AdminClient, KeyRequest, create_keys
from tests.gateway.conftest import Gateway
from tests.gateway.proxy import MASTER_KEY

SPEC = KeyRequest(
    team="search", budget=25.0, budget_duration="30d", models=("nova-lite",), key_alias="search-ci"
)


class AdminStub:
    """/team/new and /key/generate as LiteLLM answers them; records each call."""

    def __init__(self, status: int = 200) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.calls.append((self.path, self.headers["Authorization"], body))
                reply = {"/team/new": {"team_id": "team-123"}, "/key/generate": {"key": "sk-generated"}}.get(
                    self.path, {}
                )
                data = json.dumps(reply if status == 200 else {"error": {"message": "not allowed"}}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def admin() -> Iterator[AdminStub]:
    stub = AdminStub()
    yield stub
    stub.close()


class FakeClients:
    """CloudFormation outputs and the master-key secret of a deployed gateway."""

    region = "us-east-1"

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.secret_ids: list[str] = []

    def client(self, service: str) -> Any:
        clients = self

        class CloudFormation:
            def describe_stacks(self, StackName: str) -> dict[str, Any]:  # noqa: N803 (boto3's names)
                outputs = {
                    "AdminUrl": clients.admin_url,
                    "MasterKeySecretArn": "arn:aws:secretsmanager:x:1:secret:mk",
                }
                return {
                    "Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()]}]
                }

        class SecretsManager:
            def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803
                clients.secret_ids.append(SecretId)
                return {"SecretString": "generated-secret"}

        return {"cloudformation": CloudFormation, "secretsmanager": SecretsManager}[service]()


def test_creates_a_team_then_a_key_with_its_budget_and_models(admin: AdminStub) -> None:
    clients = FakeClients(admin.url)
    created = create_keys(clients, "InferenceTiers-Gateway", SPEC)  # type: ignore[arg-type]
    assert created == {
        "team_id": "team-123",
        "team_alias": "search",
        "key_alias": "search-ci",
        "key": "sk-generated",
    }
    assert clients.secret_ids == ["arn:aws:secretsmanager:x:1:secret:mk"]
    (team_path, team_auth, team), (key_path, _, key) = admin.calls
    assert (team_path, key_path) == ("/team/new", "/key/generate")
    assert team_auth == "Bearer sk-generated-secret"  # the container prefixes the secret with sk- too
    assert team == {
        "team_alias": "search",
        "models": ["nova-lite"],
        "max_budget": 25.0,
        "budget_duration": "30d",
    }
    assert key["team_id"] == "team-123" and key["models"] == ["nova-lite"] and key["max_budget"] == 25.0


def test_a_refusal_names_the_call_and_the_proxys_message() -> None:
    stub = AdminStub(status=403)
    try:
        with pytest.raises(AdminApiError, match=r"POST /team/new: HTTP 403: .*not allowed"):
            AdminClient(stub.url, "sk-x").create_team_and_key(SPEC)
    finally:
        stub.close()


def test_an_unreachable_listener_says_it_is_internal() -> None:
    with pytest.raises(AdminApiError, match="the admin listener is internal"):
        AdminClient("http://127.0.0.1:9", "sk-x", timeout=2).create_team_and_key(SPEC)


def test_the_real_proxy_authorises_the_master_key_and_needs_its_database(gateway: Gateway) -> None:
    """The tests' proxy runs without a database (Prisma's engine cannot be fetched here): the admin API accepts
    the master key and answers that teams need the database, which only a real deploy has (docs/gateway.md)."""
    # The master key passes authentication and reaches /team/new's handler, which needs the database...
    with pytest.raises(AdminApiError, match=r"POST /team/new: HTTP 500: .*No db connected"):
        AdminClient(gateway.proxy.url, MASTER_KEY).create_team_and_key(SPEC)
    # ...while any other key stops in authentication (which, without a database, cannot look keys up).
    with pytest.raises(AdminApiError, match=r"POST /team/new: HTTP 400: .*no_db_connection"):
        AdminClient(gateway.proxy.url, "sk-wrong").create_team_and_key(SPEC)


def keys_args(**overrides: str) -> list[str]:
    flags = {"--team": "t", "--budget": "5", "--budget-duration": "30d", "--models": "nova-lite", **overrides}
    return ["gateway", "keys", *[x for pair in flags.items() for x in pair], "--region", "us-east-1"]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--budget-duration", "monthly", "expected such as 30d"), ("--models", ",", "expected the model names")],
)
def test_bad_values_are_usage_errors(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(keys_args(**{flag: value})) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_a_non_positive_budget_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(keys_args(**{"--budget": "0"}))
    assert exit_info.value.code == 2
    assert "expected a number > 0" in capsys.readouterr().err
