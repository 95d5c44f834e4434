"""Give each platform tenant a LiteLLM team and a virtual key, written as a Secret in the tenant's namespace, and
register models (the elastic inference pool) with LiteLLM's model management API.

Runs as a Kubernetes Job in the gateway's namespace (the master key never leaves it) on the pinned LiteLLM image,
with its Python and the standard library only. Inputs: the JSON spec at ``SPEC_FILE`` (team, key and model bodies
rendered at synth time by ``inference_tiers.k8s.tenant_keys``), ``LITELLM_URL``, ``LITELLM_MASTER_KEY`` (from a
secretKeyRef) and, with tenants, the pod's service-account token for the Kubernetes API. No key is ever printed.

Idempotent: a tenant's team is created or updated; a working key (the Secret's, of the spec's generation) is
updated in place, never rotated; otherwise the key with the tenant's alias is deleted and a new one written.
Teams this provisioner made that are no longer in the spec are blocked: their keys stop working at once, their
spend history stays. A model is updated in place when its id is already served, else added (stored in the
database: every proxy replica loads it).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

GENERATION_ANNOTATION = "inference-tiers/key-generation"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(RuntimeError):
    """A call answered with an unexpected status (the message names the call, never a key)."""


def request(
    method: str, url: str, token: str, body: Any = None, context: ssl.SSLContext | None = None
) -> tuple[int, Any]:
    """One JSON request with a bearer token; returns (status, decoded body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    call = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(call, timeout=30, context=context) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


class Gateway:
    """LiteLLM's management API, called with the master key."""

    def __init__(self, url: str, master_key: str) -> None:
        self.url = url.rstrip("/")
        self.master_key = master_key

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> tuple[int, Any]:
        status, payload = request(method, self.url + path, self.master_key, body)
        if status not in ok:
            raise ApiError(f"{method} {path.split('?')[0]}: HTTP {status}")
        return status, payload

    def wait_ready(self, deadline: float) -> None:
        """Until /health/readiness answers 200 (the proxy and its database are up), or fail at ``deadline``."""
        while True:
            try:
                if request("GET", self.url + "/health/readiness", self.master_key)[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ApiError("the gateway did not become ready before the deadline")
            time.sleep(2)


class Kubernetes:
    """The Kubernetes API with the pod's service-account token (``KUBE_API_URL`` overrides the address)."""

    def __init__(self) -> None:
        self.url = os.environ.get("KUBE_API_URL", "https://kubernetes.default.svc")
        folder = os.environ.get("SERVICE_ACCOUNT_DIR", SERVICE_ACCOUNT_DIR)
        with open(os.path.join(folder, "token")) as file:
            self.token = file.read().strip()
        ca = os.path.join(folder, "ca.crt")
        self.context = ssl.create_default_context(cafile=ca) if self.url.startswith("https") else None

    def secret_path(self, namespace: str, name: str = "") -> str:
        return f"{self.url}/api/v1/namespaces/{namespace}/secrets" + (f"/{name}" if name else "")

    def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        status, body = request("GET", self.secret_path(namespace, name), self.token, context=self.context)
        if status != 200:
            raise ApiError(f"GET secret {namespace}/{name}: HTTP {status}")
        return dict(body)

    def replace_secret(self, secret: dict[str, Any]) -> None:
        meta = secret["metadata"]
        path = self.secret_path(meta["namespace"], meta["name"])
        status, _ = request("PUT", path, self.token, secret, context=self.context)
        if status != 200:
            raise ApiError(f"PUT secret {meta['namespace']}/{meta['name']}: HTTP {status}")


def stored_key(secret: dict[str, Any], field: str, generation: str) -> str | None:
    """The Secret's key if it was written for ``generation`` (a new generation asks for a new key)."""
    annotations = secret["metadata"].get("annotations") or {}
    value = (secret.get("data") or {}).get(field)
    if not value or annotations.get(GENERATION_ANNOTATION) != generation:
        return None
    return base64.b64decode(value).decode()


def ensure_team(gateway: Gateway, team: dict[str, Any]) -> str:
    query = urllib.parse.urlencode({"team_id": team["team_id"]})
    status, _ = gateway.call("GET", f"/team/info?{query}", ok=(200, 404))
    if status == 404:
        gateway.call("POST", "/team/new", team)
        return "created"
    gateway.call("POST", "/team/update", team)
    return "updated"


def ensure_key(
    gateway: Gateway, kube: Kubernetes, tenant: dict[str, Any], secret_name: str, field: str
) -> str:
    namespace, key_body, generation = tenant["namespace"], tenant["key"], str(tenant["generation"])
    secret = kube.get_secret(namespace, secret_name)
    existing = stored_key(secret, field, generation)
    if existing is not None:
        status, _ = gateway.call("POST", "/key/update", {**key_body, "key": existing}, ok=(200, 404))
        if status == 200:
            return "kept"
    # Aliases are unique: remove the stale key (rotation, or a key deleted by hand) before generating.
    gateway.call("POST", "/key/delete", {"key_aliases": [key_body["key_alias"]]}, ok=(200, 404))
    _, generated = gateway.call("POST", "/key/generate", key_body)
    secret["data"] = {field: base64.b64encode(generated["key"].encode()).decode()}
    secret["metadata"].setdefault("annotations", {})[GENERATION_ANNOTATION] = generation
    kube.replace_secret(secret)
    return "generated"


def block_removed(gateway: Gateway, managed_by: str, wanted: set[str]) -> list[str]:
    _, teams = gateway.call("GET", "/team/list")
    removed = [
        team["team_id"]
        for team in teams or []
        if (team.get("metadata") or {}).get("managed_by") == managed_by
        and team["team_id"] not in wanted
        and not team.get("blocked")
    ]
    for team_id in removed:
        gateway.call("POST", "/team/block", {"team_id": team_id})
    return removed


def ensure_model(gateway: Gateway, model: dict[str, Any]) -> str:
    """Update the model whose ``model_info.id`` the proxy already serves, else add it."""
    model_id = model["model_info"]["id"]
    query = urllib.parse.urlencode({"litellm_model_id": model_id})
    # 400 "Model id = ... not found on litellm proxy" for an id the proxy does not serve.
    status, _ = gateway.call("GET", f"/model/info?{query}", ok=(200, 400))
    if status == 200:
        gateway.call("PATCH", f"/model/{urllib.parse.quote(model_id, safe='')}/update", model)
        return "updated"
    gateway.call("POST", "/model/new", model)
    return "added"


def provision_tenants(gateway: Gateway, spec: dict[str, Any]) -> None:
    kube = Kubernetes()
    for tenant in spec["tenants"]:
        team = ensure_team(gateway, tenant["team"])
        key = ensure_key(gateway, kube, tenant, spec["secret"], spec["field"])
        print(f"{tenant['namespace']}: team {team}, key {key}", flush=True)
    wanted = {tenant["team"]["team_id"] for tenant in spec["tenants"]}
    for team_id in block_removed(gateway, spec["managed_by"], wanted):
        print(f"team {team_id}: blocked (tenant removed)", flush=True)


def main() -> int:
    with open(os.environ["SPEC_FILE"]) as file:
        spec = json.load(file)
    gateway = Gateway(os.environ["LITELLM_URL"], os.environ["LITELLM_MASTER_KEY"])
    gateway.wait_ready(time.monotonic() + int(os.environ.get("READY_DEADLINE_SECONDS", "480")))
    if "tenants" in spec:
        provision_tenants(gateway, spec)
    for model in spec.get("models", []):
        print(f"model {model['model_name']}: {ensure_model(gateway, model)}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ApiError, OSError) as error:
        print(f"provisioning failed: {error}", file=sys.stderr)
        sys.exit(1)
