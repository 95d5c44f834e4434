"""``inference-tiers dashboards push``: import the rendered dashboards into Grafana; ``dashboards export`` writes
them as files for a by-hand import.

Dashboards are not CloudFormation resources. Any Grafana: ``--grafana-url`` with a service-account token in the
``GRAFANA_TOKEN`` environment variable (never an argument: it would land in the shell history). Amazon Managed
Grafana: ``--grafana-workspace g-...`` makes a service account ``inference-tiers-dashboards`` (Editor) when the
workspace has none, a token that lives ten minutes, pushes, and deletes the token. Each dashboard is a
``POST /api/dashboards/db`` with ``overwrite: true`` (Grafana's dashboard HTTP API), so a push is idempotent.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inference_tiers.observability.dashboards import all_dashboards
from inference_tiers.ops.checks import Clients
from inference_tiers.ops.smoke import StackError

SERVICE_ACCOUNT = "inference-tiers-dashboards"
TOKEN_SECONDS = 600
_WORKSPACE_ID = re.compile(r"g-[0-9a-f]{10}")


class GrafanaApiError(StackError):
    """Grafana refused a call: carries its status and message."""


def push(
    grafana_url: str,
    token: str,
    *,
    dashboards: Mapping[str, dict[str, Any]] | None = None,
    folder_uid: str | None = None,
    timeout: float = 30,
    ca_bundle: str | None = None,
) -> list[dict[str, Any]]:
    """POST every dashboard; returns Grafana's answer for each (uid, url, version, status)."""
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", grafana_url):
        raise ValueError(
            f"--grafana-url: got {grafana_url!r}; expected an http(s) URL such as https://g.example"
        )
    if not token:
        raise ValueError("GRAFANA_TOKEN: empty; expected a Grafana service-account token")
    context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
    results = []
    for name, board in (dashboards or all_dashboards()).items():
        body: dict[str, Any] = {
            "dashboard": board,
            "overwrite": True,
            "message": "inference-tiers dashboards push",
        }
        if folder_uid:
            body["folderUid"] = folder_uid
        request = urllib.request.Request(
            grafana_url.rstrip("/") + "/api/dashboards/db",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise GrafanaApiError(f"Grafana refused {name}: HTTP {error.code}: {detail}") from None
        except urllib.error.URLError as error:
            raise GrafanaApiError(f"Grafana at {grafana_url} unreachable: {error.reason}") from None
        results.append({"file": name, **{k: answer.get(k) for k in ("uid", "url", "version", "status")}})
    return results


@contextmanager
def workspace_token(clients: Clients, workspace_id: str) -> Iterator[tuple[str, str]]:
    """(Grafana URL, a short-lived token) of an Amazon Managed Grafana workspace; the token is deleted after."""
    if not _WORKSPACE_ID.fullmatch(workspace_id):
        raise ValueError(
            f"--grafana-workspace: got {workspace_id!r}; expected a workspace id such as g-0123456789"
        )
    grafana = clients.client("grafana")
    endpoint = grafana.describe_workspace(workspaceId=workspace_id)["workspace"]["endpoint"]
    accounts = grafana.list_workspace_service_accounts(workspaceId=workspace_id)["serviceAccounts"]
    account = next((a for a in accounts if a["name"] == SERVICE_ACCOUNT), None)
    account_id = (
        account["id"]
        if account
        else grafana.create_workspace_service_account(
            workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole="EDITOR"
        )["id"]
    )
    token = grafana.create_workspace_service_account_token(
        workspaceId=workspace_id,
        serviceAccountId=account_id,
        name=f"{SERVICE_ACCOUNT}-push",
        secondsToLive=TOKEN_SECONDS,
    )["serviceAccountToken"]
    try:
        yield f"https://{endpoint}", token["key"]
    finally:
        grafana.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token["id"]
        )


def export(folder: Path) -> list[Path]:
    """Write every dashboard as ``<uid>.json`` into ``folder`` (Grafana: Dashboards > New > Import)."""
    expected = "a folder to write <uid>.json files into (an existing one, or a new one to create)"
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out: got {str(folder)!r}, which is a file; expected {expected}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"--out: got {str(folder)!r}, which cannot be created ({error.strerror}); expected {expected}"
        ) from None
    written = []
    for name, board in all_dashboards().items():
        path = folder / name
        path.write_text(json.dumps(board, indent=2) + "\n")
        written.append(path)
    return written
