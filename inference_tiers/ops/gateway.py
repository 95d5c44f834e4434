"""``inference-tiers gateway keys``: create a team and a virtual key with a budget on a deployed gateway.

Teams and keys are runtime state in the proxy's database, not CloudFormation resources: this command reads the
stack's ``AdminUrl`` and ``MasterKeySecretArn`` outputs, the master key from Secrets Manager, and calls the
proxy's admin API (``POST /team/new``, ``POST /key/generate``). The admin listener is internal: run it from
inside the VPC (or through a tunnel, passing ``--admin-url``).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from inference_tiers.litellm.config import MASTER_KEY_PREFIX
from inference_tiers.ops.checks import Clients
from inference_tiers.ops.smoke import StackError, _require, stack_outputs


class AdminApiError(StackError):
    """The proxy refused or failed an admin call: carries its status and message."""


@dataclass(frozen=True)
class KeyRequest:
    """A team and its first key. ``budget`` in USD per ``budget_duration`` (``30d``, ``1h``...)."""

    team: str
    budget: float
    budget_duration: str
    models: tuple[str, ...]
    key_alias: str
    rpm_limit: int | None = None
    tpm_limit: int | None = None

    def __post_init__(self) -> None:
        if not self.team or len(self.team) > 128:
            raise ValueError(f"--team: got {self.team!r}; expected 1 to 128 characters")
        if not self.budget > 0:
            raise ValueError(f"--budget: got {self.budget!r}; expected a number of USD > 0")
        if not (self.budget_duration[:-1].isdigit() and self.budget_duration[-1:] in ("s", "m", "h", "d")):
            raise ValueError(
                f"--budget-duration: got {self.budget_duration!r}; expected such as 30d, 24h, 60m"
            )
        if not self.models:
            raise ValueError("--models: got none; expected the model names the team may call")


class AdminClient:
    """The proxy's admin API with the master key."""

    def __init__(self, base_url: str, master_key: str, *, timeout: float = 30, ca_bundle: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.master_key = master_key
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.master_key}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            raise AdminApiError(f"POST {path}: HTTP {error.code}: {detail}") from None
        except urllib.error.URLError as error:
            raise AdminApiError(
                f"POST {path}: cannot reach {self.base_url} ({error.reason}); the admin listener is internal: "
                "run from inside the VPC or pass --admin-url through a tunnel"
            ) from None

    def create_team_and_key(self, spec: KeyRequest) -> dict[str, Any]:
        team = self.post(
            "/team/new",
            {
                "team_alias": spec.team,
                "models": list(spec.models),
                "max_budget": spec.budget,
                "budget_duration": spec.budget_duration,
                **({"rpm_limit": spec.rpm_limit} if spec.rpm_limit else {}),
                **({"tpm_limit": spec.tpm_limit} if spec.tpm_limit else {}),
            },
        )
        team_id = team.get("team_id")
        if not team_id:
            raise AdminApiError(f"POST /team/new: no team_id in the answer {team}")
        key = self.post(
            "/key/generate",
            {
                "team_id": team_id,
                "key_alias": spec.key_alias,
                "models": list(spec.models),
                "max_budget": spec.budget,
                "budget_duration": spec.budget_duration,
            },
        )
        if not key.get("key"):
            raise AdminApiError(f"POST /key/generate: no key in the answer {key}")
        return {"team_id": team_id, "team_alias": spec.team, "key_alias": spec.key_alias, "key": key["key"]}


def master_key(clients: Clients, secret_arn: str) -> str:
    """The proxy's master key: ``sk-`` and the generated secret (see ``proxy_command``)."""
    value = clients.client("secretsmanager").get_secret_value(SecretId=secret_arn)["SecretString"]
    return MASTER_KEY_PREFIX + str(value)


def create_keys(
    clients: Clients,
    stack: str,
    spec: KeyRequest,
    *,
    admin_url: str | None = None,
    timeout: float = 30,
    ca_bundle: str | None = None,
) -> dict[str, Any]:
    outputs = stack_outputs(clients, stack)
    _require(outputs, stack, "AdminUrl", "MasterKeySecretArn")
    client = AdminClient(
        admin_url or outputs["AdminUrl"],
        master_key(clients, outputs["MasterKeySecretArn"]),
        timeout=timeout,
        ca_bundle=ca_bundle,
    )
    return client.create_team_and_key(spec)
