"""``inference-tiers dashboards push`` against a loopback Grafana stub (the HTTP API it calls), the AMG token
flow with stubbed AWS calls, and ``dashboards export``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.observability.dashboards import all_dashboards
from inference_tiers.ops import cli, dashboards
from inference_tiers.ops.dashboards import GrafanaApiError
from tests.ops.helpers import StubClients

TOKEN = "glsa_test_token"


class GrafanaStub:
    """Grafana's POST /api/dashboards/db: checks the bearer token, records what it receives."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.status = 200

    @contextmanager
    def serve(self) -> Iterator[str]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.received.append((dict(self.headers), body))
                authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
                if self.path != "/api/dashboards/db":
                    status, answer = 404, {"message": "not found"}
                elif not authorized:
                    status, answer = 401, {"message": "invalid API key"}
                elif stub.status != 200:
                    status, answer = stub.status, {"message": "version-mismatch"}
                else:
                    uid = body["dashboard"]["uid"]
                    status, answer = (
                        200,
                        {"status": "success", "uid": uid, "url": f"/d/{uid}/x", "version": 1},
                    )
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


@pytest.fixture
def grafana() -> Iterator[tuple[GrafanaStub, str]]:
    stub = GrafanaStub()
    with stub.serve() as url:
        yield stub, url


def test_push_posts_every_dashboard_with_overwrite_and_the_token(grafana: tuple[GrafanaStub, str]) -> None:
    stub, url = grafana
    results = dashboards.push(url, TOKEN, folder_uid="platform")
    assert [r["status"] for r in results] == ["success"] * len(all_dashboards())
    assert [body["dashboard"] for _, body in stub.received] == list(all_dashboards().values())
    assert all(body["overwrite"] is True and body["folderUid"] == "platform" for _, body in stub.received)
    assert {headers["Content-Type"] for headers, _ in stub.received} == {"application/json"}
    assert results[0]["url"] == f"/d/{results[0]['uid']}/x"


def test_a_refused_token_stops_the_push_with_grafanas_message(grafana: tuple[GrafanaStub, str]) -> None:
    _, url = grafana
    with pytest.raises(GrafanaApiError, match=r"HTTP 401: .*invalid API key"):
        dashboards.push(url, "wrong")


def test_a_conflict_names_the_dashboard(grafana: tuple[GrafanaStub, str]) -> None:
    stub, url = grafana
    stub.status = 412
    with pytest.raises(GrafanaApiError, match=r"refused inference-tiers-overview.json: HTTP 412"):
        dashboards.push(url, TOKEN)


def test_unreachable_grafana_is_a_clear_error() -> None:
    with pytest.raises(GrafanaApiError, match="unreachable"):
        dashboards.push("http://127.0.0.1:9", TOKEN, timeout=2)


@pytest.mark.parametrize(
    ("url", "token", "match"), [("grafana", TOKEN, "--grafana-url"), ("http://g", "", "GRAFANA_TOKEN")]
)
def test_bad_url_or_missing_token_is_a_usage_error(url: str, token: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dashboards.push(url, token)


def test_cli_reads_the_token_from_the_environment(
    grafana: tuple[GrafanaStub, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stub, url = grafana
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    assert cli.main(["dashboards", "push", "--grafana-url", url, "--json"]) == cli.EXIT_OK
    assert len(json.loads(capsys.readouterr().out)) == len(all_dashboards())
    monkeypatch.delenv("GRAFANA_TOKEN")
    assert cli.main(["dashboards", "push", "--grafana-url", url]) == cli.EXIT_USAGE
    assert "GRAFANA_TOKEN" in capsys.readouterr().err


def test_cli_needs_exactly_one_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dashboards", "push"]) == cli.EXIT_USAGE
    assert "exactly one of --grafana-url or --grafana-workspace" in capsys.readouterr().err


def test_managed_grafana_token_is_made_for_the_push_and_deleted_after(
    grafana: tuple[GrafanaStub, str],
) -> None:
    _, url = grafana
    workspace = "g-0123456789"
    clients = StubClients()
    stub = clients.stub("grafana")
    stub.add_response(
        "describe_workspace",
        {
            "workspace": {
                "id": workspace,
                "endpoint": url.removeprefix("http://"),
                "created": "2026-12-01T00:00:00Z",
                "modified": "2026-12-01T00:00:00Z",
                "status": "ACTIVE",
                "dataSources": [],
                "grafanaVersion": "12.4",
                "authentication": {"providers": ["AWS_SSO"]},
            }
        },
        {"workspaceId": workspace},
    )
    stub.add_response(
        "list_workspace_service_accounts",
        {"serviceAccounts": [], "workspaceId": workspace},
        {"workspaceId": workspace},
    )
    stub.add_response(
        "create_workspace_service_account",
        {"id": "7", "name": dashboards.SERVICE_ACCOUNT, "grafanaRole": "EDITOR", "workspaceId": workspace},
        {"workspaceId": workspace, "name": dashboards.SERVICE_ACCOUNT, "grafanaRole": "EDITOR"},
    )
    stub.add_response(
        "create_workspace_service_account_token",
        {
            "serviceAccountToken": {"id": "t1", "name": "n", "key": TOKEN},
            "serviceAccountId": "7",
            "workspaceId": workspace,
        },
        {
            "workspaceId": workspace,
            "serviceAccountId": "7",
            "name": f"{dashboards.SERVICE_ACCOUNT}-push",
            "secondsToLive": 600,
        },
    )
    stub.add_response(
        "delete_workspace_service_account_token",
        {"tokenId": "t1", "serviceAccountId": "7", "workspaceId": workspace},
        {"workspaceId": workspace, "serviceAccountId": "7", "tokenId": "t1"},
    )
    with dashboards.workspace_token(clients, workspace) as (endpoint, token):
        assert endpoint == "https://" + url.removeprefix("http://")
        assert token == TOKEN
        # the stub serves plain HTTP: push to it directly with the token the workspace issued
        assert dashboards.push(url, token)[0]["status"] == "success"
    stub.assert_no_pending_responses()


def test_a_bad_workspace_id_is_refused_before_any_aws_call() -> None:
    with (
        pytest.raises(ValueError, match=r"--grafana-workspace: got 'g-1'"),
        dashboards.workspace_token(StubClients(), "g-1"),
    ):
        pass


def test_export_writes_importable_files(tmp_path: Path) -> None:
    paths = dashboards.export(tmp_path / "boards")
    assert sorted(p.name for p in paths) == sorted(all_dashboards())
    assert json.loads(paths[0].read_text()) == all_dashboards()[paths[0].name]


@pytest.mark.parametrize("out", ["existing.json", "existing.json/boards"])
def test_export_to_a_file_is_a_usage_error_not_a_traceback(
    tmp_path: Path, out: str, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    assert cli.main(["dashboards", "export", "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out: got '{tmp_path / out}'")
    assert "expected a folder" in err and "Traceback" not in err
    assert existing.read_text() == "{}"  # left as it was
