"""The provisioner script (assets/platform/provision_keys.py), run as the Job runs it, against a stateful stand-in of
LiteLLM's management API and a stand-in Kubernetes API on loopback that records the Secret writes.

Every call the script makes is a route (method and path) of LiteLLM 1.104.0's routers, and every body it sends
is validated by the request model LiteLLM 1.104.0 reads it into (tool venv,
litellm/proxy/_types.py: GenerateKeyRequest :1295, UpdateKeyRequest :1360, KeyRequest :1431, NewTeamRequest
:2083, UpdateTeamRequest :2138, BlockTeamRequest :2234), with extra="forbid" (the models themselves ignore an
unknown key). The stand-in answers as 1.104.0 does where the script depends on it: /health/readiness without
authentication (health_endpoints/_health_endpoints.py :1851, no user_api_key_auth), /team/info 404 for an unknown
team (management_endpoints/team_endpoints.py :4854), /key/update 404 "Key not found" (key_management_endpoints.py
:2642), /key/delete 404 "No keys found" for an alias no key has (:5013), unique key aliases (:7789
_enforce_unique_key_alias, HTTP 400).

The real proxy cannot hold teams and keys here: it needs Prisma's engine, which cannot be downloaded in this
environment (tests/gateway/test_keys.py), so a call with the written key is not made in these tests.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import subprocess
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.k8s.gpu_pool import GpuPoolSpec, litellm_models
from inference_tiers.k8s.platform_names import TENANT_KEY_FIELD, TENANT_KEY_SECRET
from inference_tiers.k8s.tenant_keys import PROVISIONER_SCRIPT, provisioner_spec, tenant_key_objects
from tests.gateway.proxy import litellm_bin
from tests.loopback import http_stand_in
from tests.platform.tenant_keys_data import ACCESS, GATEWAY, TEAM_A, TEAM_B, TENANTS

MASTER = "sk-platform-master-0123456789"
SA_TOKEN = "service-account-token"
GENERATION = "inference-tiers/key-generation"
MODELS = {
    "/team/new": "NewTeamRequest",
    "/team/update": "UpdateTeamRequest",
    "/team/block": "BlockTeamRequest",
    "/key/generate": "GenerateKeyRequest",
    "/key/update": "UpdateKeyRequest",
    "/key/delete": "KeyRequest",
}
PINNED_PROBE = """
import json, sys
from litellm.proxy import _types
from litellm.proxy.health_endpoints import _health_endpoints
from litellm.proxy.management_endpoints import key_management_endpoints, team_endpoints
from pydantic import ConfigDict, ValidationError

sent = json.load(sys.stdin)
refused = []
for name, body in sent["bodies"]:
    model = getattr(_types, name)
    strict = type(name, (model,), {"model_config": ConfigDict(extra="forbid", protected_namespaces=())})
    try:
        strict.model_validate(body)
    except ValidationError as error:
        refused.append(f"{name} {body}: {error}")
routes = {
    (method, route.path)
    for module in (_health_endpoints, key_management_endpoints, team_endpoints)
    for route in module.router.routes
    for method in route.methods
}
print(json.dumps({"refused": refused, "unknown": [c for c in sent["calls"] if tuple(c) not in routes]}))
"""


class LiteLLMStandIn:
    """Teams and keys in memory; every request recorded as (method, path, body)."""

    def __init__(self) -> None:
        self.teams: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, dict[str, Any]] = {}
        self.models: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.not_ready = 0
        self.fail: set[str] = set()

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        route, _, query = path.partition("?")
        self.requests.append((method, route, body))
        if route == "/health/readiness":
            self.not_ready -= 1
            return (503, {}) if self.not_ready >= 0 else (200, {"status": "healthy"})
        if route in self.fail:
            return 500, {"error": "boom"}
        if route == "/model/info":
            model_id = urllib.parse.parse_qs(query)["litellm_model_id"][0]
            if model_id not in self.models:  # proxy_server.py:15905-15911
                return 400, {"detail": {"error": f"Model id = {model_id} not found on litellm proxy"}}
            return 200, {"data": [self.models[model_id]]}
        if route == "/model/new":
            self.models[body["model_info"]["id"]] = body
            return 200, body
        if method == "PATCH" and route.startswith("/model/") and route.endswith("/update"):
            model_id = urllib.parse.unquote(route.removeprefix("/model/").removesuffix("/update"))
            self.requests[-1] = (method, "/model/{model_id}/update", body)
            if model_id not in self.models:
                return 404, {}
            self.models[model_id] = body
            return 200, body
        if route == "/team/info":
            team_id = urllib.parse.parse_qs(query)["team_id"][0]
            return (200, {"team_id": team_id}) if team_id in self.teams else (404, {"detail": "not found"})
        if route == "/team/list":
            return 200, list(self.teams.values())
        if route in ("/team/new", "/team/update"):
            self.teams[body["team_id"]] = {**self.teams.get(body["team_id"], {}), **body}
            return 200, {"team_id": body["team_id"]}
        if route == "/team/block":
            self.teams[body["team_id"]]["blocked"] = True
            return 200, {}
        if route == "/key/update":
            if body["key"] not in self.keys:
                return 404, {"error": {"message": "Key not found."}}
            self.keys[body["key"]].update(body)
            return 200, {}
        if route == "/key/delete":
            gone = [k for k, v in self.keys.items() if v["key_alias"] in body["key_aliases"]]
            for key in gone:
                del self.keys[key]
            return (200, {"deleted_keys": len(gone)}) if gone else (404, {})
        if route == "/key/generate":
            if any(v["key_alias"] == body["key_alias"] for v in self.keys.values()):
                return 400, {"error": {"message": "Unique key aliases across all keys are required."}}
            key = f"sk-generated-{len(self.requests)}"
            self.keys[key] = dict(body)
            return 200, {"key": key}
        return 404, {}


class KubernetesStandIn:
    """The Secrets of tenant namespaces, as the tenant manifests create them; any other object is forbidden."""

    def __init__(self) -> None:
        self.secrets = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): json.loads(json.dumps(o))
            for tenant in (TEAM_A, TEAM_B)
            for o in tenant_key_objects(tenant, GATEWAY)
            if o["kind"] == "Secret"
        }
        self.writes: list[tuple[str, str]] = []

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = path.split("/")  # /api/v1/namespaces/<ns>/secrets/<name>
        if len(parts) != 7 or parts[:4] != ["", "api", "v1", "namespaces"] or parts[5] != "secrets":
            return 403, {}
        slot = (parts[4], parts[6])
        if parts[6] != TENANT_KEY_SECRET or slot not in self.secrets:
            return 403, {}  # the Role allows only this Secret name
        if method == "GET":
            return 200, self.secrets[slot]
        if method == "PUT":
            self.secrets[slot] = body
            self.writes.append(slot)
            return 200, body
        return 403, {}

    def key(self, namespace: str) -> str | None:
        data = self.secrets[(namespace, TENANT_KEY_SECRET)].get("data") or {}
        return base64.b64decode(data[TENANT_KEY_FIELD]).decode() if TENANT_KEY_FIELD in data else None


def _serve(stand_in: Any, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            # LiteLLM's readiness probe is unauthenticated; everything else needs the token.
            if self.path != "/health/readiness" and self.headers.get("Authorization") != f"Bearer {token}":
                status, payload = 401, {}
            else:
                status, payload = stand_in.answer(self.command, self.path, body)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PUT = do_PATCH = _handle  # noqa: N815 (http.server's naming)

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


def pinned_litellm(probe: str, sent: list[tuple[str, Any]], calls: list[tuple[str, str]]) -> Any:
    """``probe`` run in the pinned LiteLLM's venv on the bodies sent and the calls made: what it refused."""
    result = subprocess.run(
        [str(litellm_bin() / "python"), "-c", probe],
        input=json.dumps({"bodies": sent, "calls": calls}),
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.splitlines()[-1])


@dataclasses.dataclass
class Platform:
    litellm: LiteLLMStandIn
    kube: KubernetesStandIn
    env: dict[str, str]
    folder: Path

    def run(
        self, tenants: Any = TENANTS, spec_body: dict[str, Any] | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        spec = self.folder / "spec.json"
        spec.write_text(json.dumps(provisioner_spec(tenants) if spec_body is None else spec_body))
        result = subprocess.run(
            [str(litellm_bin() / "python"), str(PROVISIONER_SCRIPT)],
            env={**self.env, "SPEC_FILE": str(spec), **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        output = result.stdout + result.stderr
        for secret in [MASTER, SA_TOKEN, *self.litellm.keys]:
            assert secret not in output and base64.b64encode(secret.encode()).decode() not in output, (
                "the provisioner printed a secret"
            )
        return result


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    litellm, kube = LiteLLMStandIn(), KubernetesStandIn()
    (tmp_path / "token").write_text(SA_TOKEN)
    with http_stand_in(_serve(litellm, MASTER)) as gateway, http_stand_in(_serve(kube, SA_TOKEN)) as api:
        env = {
            "PATH": os.environ["PATH"],
            "LITELLM_URL": f"http://127.0.0.1:{gateway.server_address[1]}",
            "LITELLM_MASTER_KEY": MASTER,
            "KUBE_API_URL": f"http://127.0.0.1:{api.server_address[1]}",
            "SERVICE_ACCOUNT_DIR": str(tmp_path),
        }
        yield Platform(litellm, kube, env, tmp_path)


def test_first_run_creates_teams_and_keys_and_writes_each_tenants_secret(platform: Platform) -> None:
    result = platform.run()
    assert result.returncode == 0, result.stderr
    spec = provisioner_spec(TENANTS)["tenants"]
    for tenant in spec:
        team = platform.litellm.teams[tenant["team"]["team_id"]]
        assert team == tenant["team"]
        key = platform.kube.key(tenant["namespace"])
        assert key is not None and platform.litellm.keys[key]["team_id"] == tenant["team"]["team_id"]
        assert platform.litellm.keys[key]["models"] == tenant["team"]["models"]
        secret = platform.kube.secrets[(tenant["namespace"], TENANT_KEY_SECRET)]
        assert secret["metadata"]["annotations"][GENERATION] == "0"
    assert platform.litellm.teams[TEAM_A.namespace]["rpm_limit"] == 60
    assert "sandbox-team-a: team created, key generated" in result.stdout


def test_a_rerun_updates_teams_and_keeps_working_keys(platform: Platform) -> None:
    assert platform.run().returncode == 0
    keys = {t.namespace: platform.kube.key(t.namespace) for t in (TEAM_A, TEAM_B)}
    platform.kube.writes.clear()
    before = len(platform.litellm.requests)
    changed = ((TEAM_A, dataclasses.replace(ACCESS, rpm_limit=5)), TENANTS[1])
    result = platform.run(changed)
    assert result.returncode == 0, result.stderr
    routes = [r[1] for r in platform.litellm.requests[before:]]
    assert "/key/generate" not in routes and "/team/new" not in routes
    assert platform.kube.writes == []
    assert {t.namespace: platform.kube.key(t.namespace) for t in (TEAM_A, TEAM_B)} == keys
    assert platform.litellm.teams[TEAM_A.namespace]["rpm_limit"] == 5
    assert "team updated, key kept" in result.stdout


def test_a_rotation_replaces_only_that_tenants_key_and_deletes_the_old_one(platform: Platform) -> None:
    assert platform.run().returncode == 0
    old_a, old_b = platform.kube.key(TEAM_A.namespace), platform.kube.key(TEAM_B.namespace)
    rotated = ((TEAM_A, dataclasses.replace(ACCESS, key_rotation=1)), TENANTS[1])
    assert platform.run(rotated).returncode == 0
    new_a = platform.kube.key(TEAM_A.namespace)
    assert new_a != old_a and old_a not in platform.litellm.keys and new_a in platform.litellm.keys
    assert platform.kube.key(TEAM_B.namespace) == old_b


def test_a_key_deleted_in_litellm_is_replaced(platform: Platform) -> None:
    assert platform.run().returncode == 0
    old = platform.kube.key(TEAM_A.namespace)
    assert old is not None
    del platform.litellm.keys[old]
    assert platform.run().returncode == 0
    assert platform.kube.key(TEAM_A.namespace) in platform.litellm.keys


def test_a_removed_tenants_team_is_blocked_and_other_teams_are_left_alone(platform: Platform) -> None:
    platform.litellm.teams["hand-made"] = {"team_id": "hand-made", "metadata": {}}
    assert platform.run().returncode == 0
    result = platform.run(TENANTS[:1])
    assert result.returncode == 0, result.stderr
    assert platform.litellm.teams[TEAM_B.namespace].get("blocked") is True
    assert not platform.litellm.teams[TEAM_A.namespace].get("blocked")
    assert not platform.litellm.teams["hand-made"].get("blocked")
    assert f"team {TEAM_B.namespace}: blocked (tenant removed)" in result.stdout


def test_it_waits_for_the_gateway_and_gives_up_at_its_deadline(platform: Platform) -> None:
    platform.litellm.not_ready = 1
    assert platform.run().returncode == 0
    assert [r[1] for r in platform.litellm.requests[:2]] == ["/health/readiness"] * 2
    platform.litellm.not_ready = 10_000
    result = platform.run(READY_DEADLINE_SECONDS="1")
    assert result.returncode == 1
    assert "the gateway did not become ready before the deadline" in result.stderr


def test_a_refused_call_fails_the_job_naming_the_call(platform: Platform) -> None:
    platform.litellm.fail.add("/key/generate")
    result = platform.run()
    assert result.returncode == 1
    assert "provisioning failed: POST /key/generate: HTTP 500" in result.stderr


def test_the_master_key_is_required_by_the_stand_in(platform: Platform) -> None:
    """The stand-in checks the bearer token, so the tests above prove the script sends the master key."""
    result = platform.run(LITELLM_MASTER_KEY="sk-wrong")
    assert result.returncode == 1 and "HTTP 401" in result.stderr


def test_every_call_is_a_route_and_every_body_validates_against_litellm_1_104(platform: Platform) -> None:
    platform.litellm.teams["hand-made"] = {"team_id": "hand-made", "metadata": {}}
    for tenants in (TENANTS, TENANTS, ((TEAM_A, dataclasses.replace(ACCESS, key_rotation=1)),)):
        assert platform.run(tenants).returncode == 0
    sent = [(MODELS[path], body) for method, path, body in platform.litellm.requests if method == "POST"]
    assert {name for name, _ in sent} == set(MODELS.values())
    calls = sorted({(method, path) for method, path, _ in platform.litellm.requests})
    assert pinned_litellm(PINNED_PROBE, sent, calls) == {"refused": [], "unknown": []}


MODEL_PROBE = """
import json, sys
from litellm.proxy import proxy_server
from litellm.proxy.health_endpoints import _health_endpoints
from litellm.proxy.management_endpoints import model_management_endpoints
from litellm.types import router
from pydantic import ConfigDict, ValidationError

sent = json.load(sys.stdin)
refused = []
for name, body in sent["bodies"]:
    strict = type(name, (getattr(router, name),), {"model_config": ConfigDict(extra="forbid", protected_namespaces=())})
    try:
        strict.model_validate(body)
    except ValidationError as error:
        refused.append(f"{name}: {error}")
    # LiteLLM_Params and ModelInfo take any key: every key sent must be one of their fields.
    for part, model in (("litellm_params", router.LiteLLM_Params), ("model_info", router.ModelInfo)):
        refused += [f"{name}.{part}.{k}" for k in body.get(part, {}) if k not in model.model_fields]
routes = {
    (method, route.path)
    for module in (model_management_endpoints, proxy_server, _health_endpoints)
    for route in module.router.routes
    for method in getattr(route, "methods", ())
}
print(json.dumps({"refused": refused, "unknown": [c for c in sent["calls"] if tuple(c) not in routes]}))
"""


def test_models_are_added_then_updated_in_place_with_bodies_litellm_1_104_reads(platform: Platform) -> None:
    """The pool's registration (the same script, a spec with models only): /model/new when the proxy does not
    serve the id, PATCH /model/{id}/update when it does; no Kubernetes call (the Job has no token). Bodies:
    router.Deployment (what /model/new reads, model_management_endpoints.py:2359-2362) and updateDeployment (the
    PATCH, :1088-1095), strict, and every litellm_params/model_info key a field of LiteLLM_Params/ModelInfo."""
    entry, *_ = litellm_models(
        GpuPoolSpec(model_id="Qwen/Qwen3-8B", served_model_name="pool-q"),
        "http://inference-gateway-istio.inference-pool.svc.cluster.local:80/v1",
    )
    spec = {"models": [entry]}
    first = platform.run(spec_body=spec)
    assert first.returncode == 0, first.stderr
    assert "model pool-q: added" in first.stdout
    changed = copy.deepcopy(entry)
    changed["litellm_params"]["api_base"] = "http://other-istio.inference-pool.svc.cluster.local:80/v1"
    second = platform.run(spec_body={"models": [changed]})
    assert second.returncode == 0, second.stderr
    assert "model pool-q: updated" in second.stdout
    assert platform.litellm.models == {entry["model_info"]["id"]: changed}
    assert platform.kube.writes == []
    names = {"/model/new": "Deployment", "/model/{model_id}/update": "updateDeployment"}
    sent = [(names[path], body) for _, path, body in platform.litellm.requests if path in names]
    assert {name for name, _ in sent} == set(names.values())
    calls = sorted({(method, path.split("?")[0]) for method, path, _ in platform.litellm.requests})
    assert pinned_litellm(MODEL_PROBE, sent, calls) == {"refused": [], "unknown": []}
