"""The gateway at scale, against the real LiteLLM proxy (the release the image pins) on loopback: a dead backend
is cooled down and served by its fallback at once, and a worker past its capacity refuses instead of queueing.
tools/gateway/failover.py is the load script for the same behaviour under a burst (docs/gateway.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.litellm.config import (
    FAILOVER_RETRY_POLICY,
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    SageMakerModel,
    proxy_environment,
    render_config,
    render_text,
)
from tests.gateway.conftest import UPSTREAM_KEY
from tests.gateway.proxy import MASTER_KEY, RunningProxy, http, litellm_bin, run_proxy
from tests.gateway.stubs import StubBackend

ALLOWED_FAILS = 2
COOLDOWN_SECONDS = 300
ROUTER_WIDE_COOLDOWN_SECONDS = 1


def models(stub: StubBackend) -> list[OpenAICompatibleModel]:
    return [
        OpenAICompatibleModel("primary", f"{stub.url}/down/v1", "served-by-primary"),
        OpenAICompatibleModel("fallback", f"{stub.url}/v1", "served-by-fallback"),
    ]


def config(stub: StubBackend) -> dict[str, Any]:
    return render_config(
        models(stub),
        router=RouterOptions(
            allowed_fails=ALLOWED_FAILS,
            cooldown_seconds=COOLDOWN_SECONDS,
            fallbacks={"primary": ["fallback"]},
        ),
        features=ProxyFeatures(database=False, redis=False),
    )


@pytest.fixture(scope="module")
def stub() -> Iterator[StubBackend]:
    with StubBackend() as server:
        yield server


def chat(proxy: RunningProxy, model: str) -> tuple[int, object]:
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}]}
    return http("POST", f"{proxy.url}/v1/chat/completions", key=MASTER_KEY, body=body)


# Run in the tool venv (LiteLLM 1.104.0): the Router's arguments, and each rendered policy validated by the pinned
# pydantic model it is loaded into (types/router.py: RetryPolicy :114-130, AllowedFailsPolicy :742-759), with
# extra="forbid" (the models themselves ignore an unknown key, which is how a misspelt one goes unnoticed).
PINNED_PROBE = """
import json, sys
from litellm import Router
from litellm.types import router
from pydantic import ConfigDict, ValidationError

policies = json.load(sys.stdin)

def refusal(name, policy):
    model = getattr(router, name)
    strict = type(name, (model,), {"model_config": ConfigDict(extra="forbid", strict=True)})
    try:
        strict.model_validate(policy)
    except ValidationError as error:
        return f"{name} {policy}: {error}"

print(json.dumps({
    "router_args": Router.get_valid_args(),
    "fields": {name: list(getattr(router, name).model_fields) for name in policies},
    "refused": [r for name, found in policies.items() for p in found if (r := refusal(name, p))],
}))
"""


def run_pinned(probe: str, payload: Any) -> Any:
    """Run ``probe`` in the tool venv's Python (the pinned LiteLLM) with ``payload`` as JSON on stdin; its last
    line, decoded. The container's environment: without LITELLM_LOCAL_MODEL_COST_MAP the import fetches the cost
    map, and offline its warning reaches a logging filter that, under load, imports litellm.rust_bridge.catalog
    while it is half initialised (ImportError, seen with three workers)."""
    found = subprocess.run(
        [str(litellm_bin() / "python"), "-c", probe],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **proxy_environment(render_text({})), "GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY},
    ).stdout
    return json.loads(found.strip().splitlines()[-1])


def rendered_policies(configs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every retry and allowed-fails policy the configs carry, by the LiteLLM model that reads it."""
    return {
        "RetryPolicy": [
            policy
            for c in configs
            for policy in c["router_settings"].get("model_group_retry_policy", {}).values()
        ],
        "AllowedFailsPolicy": [
            d["model_info"]["allowed_fails_policy"]
            for c in configs
            for d in c["model_list"]
            if "allowed_fails_policy" in d.get("model_info", {})
        ],
    }


def answered_by(proxy: RunningProxy, model: str) -> tuple[int, dict[str, str]]:
    """One call's status and the proxy's response headers (which deployment answered, fallbacks attempted)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "ping"}]}).encode()
    request = urllib.request.Request(
        f"{proxy.url}/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {MASTER_KEY}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
        return response.status, {k.lower(): v for k, v in response.headers.items()}


def test_the_rendered_router_settings_are_what_litellm_reads(stub: StubBackend) -> None:
    """Every router_settings key is a Router.__init__ argument (the proxy ignores others with a warning,
    proxy/proxy_server.py:6725-6745); every rendered retry and allowed-fails policy validates against the pinned
    RetryPolicy / AllowedFailsPolicy with unknown keys forbidden; a model with a fallback sets every RetryPolicy
    field to 0 (get_retry_from_policy.py:52-66 reads them; one left unset would take num_retries)."""
    rate_limited = render_config(
        models(stub),
        router=RouterOptions(requests_per_minute={"fallback": 60}),
        features=ProxyFeatures(database=False, redis=False),
    )
    configs = [config(stub), rate_limited]
    policies = rendered_policies(configs)
    # one retry policy per group with a limit or fallbacks; one allowed-fails policy per deployment of the group
    # with fallbacks (primary and the fallback's copy)
    assert len(policies["RetryPolicy"]) == 2 and len(policies["AllowedFailsPolicy"]) == 2, policies
    pinned = run_pinned(PINNED_PROBE, policies)
    assert pinned["refused"] == []
    for rendered in configs:
        assert set(rendered["router_settings"]) <= set(pinned["router_args"])
    assert dict.fromkeys(pinned["fields"]["RetryPolicy"], 0) == FAILOVER_RETRY_POLICY


def test_a_model_with_a_fallback_carries_its_own_cooldown(stub: StubBackend) -> None:
    """The deployment's model_info, exactly: LiteLLM 1.104.0 reads allowed_fails_policy there
    (router_utils/cooldown_handlers.py:103-123, one key per error class :76-87) and cooldown_time before the
    response's retry-after and the router-wide value (router.py:8190-8211, cooldown_handlers.py:175-187)."""
    primary, fallback_copy, fallback = config(stub)["model_list"]
    assert primary["model_name"] == fallback_copy["model_name"] == "primary"
    cooldown = {
        "allowed_fails_policy": {
            "TimeoutErrorAllowedFails": ALLOWED_FAILS,
            "RateLimitErrorAllowedFails": ALLOWED_FAILS,
            "InternalServerErrorAllowedFails": ALLOWED_FAILS,
            "ServiceUnavailableErrorAllowedFails": ALLOWED_FAILS,
            "BadGatewayErrorAllowedFails": ALLOWED_FAILS,
        },
        "cooldown_time": COOLDOWN_SECONDS,
    }
    assert primary["model_info"] == cooldown
    # the fallback's deployments are also priced by their own entries (see the diagnostic test below)
    assert fallback_copy["model_info"] == {**cooldown, "id": "primary#2", "base_model": "primary#2"}
    assert fallback["model_info"] == {"id": "fallback#1", "base_model": "fallback#1"}


def test_a_dead_backend_is_not_retried_then_cooled_down_while_its_fallback_answers(
    stub: StubBackend, tmp_path: Path
) -> None:
    """The cooldown is the deployment's own (model_info.cooldown_time): with the router-wide cooldown_time cut
    to 1 s here, the deployment stays cooled down after it (router.py:8190-8211 reads the deployment's first)."""
    down = lambda: len(stub.received(lambda r: r.path.startswith("/down/")))  # noqa: E731
    rendered = config(stub)
    rendered["router_settings"]["cooldown_time"] = ROUTER_WIDE_COOLDOWN_SECONDS
    with run_proxy(
        render_text(rendered), tmp_path, extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY}
    ) as proxy:
        status, reply = chat(proxy, "primary")
        assert status == 200, reply
        assert reply["model"].endswith("served-by-fallback")  # type: ignore[index]
        assert down() == 1, "a model with a fallback must not retry its own dead backend"
        for _ in range(ALLOWED_FAILS):
            assert chat(proxy, "primary")[0] == 200
        assert down() == ALLOWED_FAILS + 1
        # Past allowed_fails the deployment cools down for its own cooldown_time, longer than the router-wide
        # one: the backend gets nothing, every call is answered by the fallback's deployment in the same group,
        # picked at once (no error raised, so no fallback attempted: LiteLLM 1.104.0 reports one in
        # x-litellm-attempted-fallbacks, proxy/common_request_processing.py:1330).
        time.sleep(ROUTER_WIDE_COOLDOWN_SECONDS + 1)
        for _ in range(5):
            status, headers = answered_by(proxy, "primary")
            assert status == 200
            assert headers["x-litellm-model-api-base"] == models(stub)[1].base_url
            assert int(headers.get("x-litellm-attempted-fallbacks") or 0) == 0, headers
        assert down() == ALLOWED_FAILS + 1, "a cooled-down backend must get no request"


def test_a_worker_past_its_capacity_refuses_at_once(stub: StubBackend, tmp_path: Path) -> None:
    """Idle connections hold the capacity (uvicorn counts connections and requests): the next request gets
    503 without waiting, and is served again once they close."""
    capacity = 3
    with run_proxy(
        render_text(config(stub)),
        tmp_path,
        extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY},
        concurrency_per_worker=capacity,
    ) as proxy:
        port = int(proxy.url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(capacity)]
        try:
            time.sleep(0.5)  # the server has accepted them
            start = time.monotonic()
            status, _ = chat(proxy, "fallback")
            assert status == 503
            assert time.monotonic() - start < 5
        finally:
            for connection in held:
                connection.close()
        time.sleep(0.5)
        assert chat(proxy, "fallback")[0] == 200


# Loaded by the proxy as a callback from its config's folder (LiteLLM 1.104.0 proxy/types_utils/utils.py:38-50),
# it records each zero-cost diagnostic (litellm_logging.py:2027, as the module's diagnose_zero_cost) and the rate
# keys of each pricing entry it walks (llm_cost_calc/zero_cost_diagnostic.py:77-83, from :98).
DIAGNOSTIC_PROBE = """
import json, os
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils import litellm_logging
from litellm.litellm_core_utils.llm_cost_calc import zero_cost_diagnostic as diagnostic

diagnose, walk = litellm_logging.diagnose_zero_cost, diagnostic._declares_a_rate

def record(line):
    with open(os.environ["DIAGNOSTIC_LOG"], "a") as log:
        log.write(json.dumps(line) + "\\n")

def diagnosed(**kwargs):
    record({"priced_by": kwargs["pricing_model"]})
    return diagnose(**kwargs)

def walked(entry):
    record({"walked": sorted(key for key in entry if diagnostic._is_rate_key(key))})
    return walk(entry)

litellm_logging.diagnose_zero_cost = diagnosed
diagnostic._declares_a_rate = walked
probe = CustomLogger()
"""


def test_a_self_hosted_fallback_is_priced_without_walking_a_rate_less_entry(
    stub: StubBackend, tmp_path: Path
) -> None:
    """The real proxy prices each $0 call of a self-hosted model that is also a fallback (``fallback``, and
    its copy in ``primary``'s group once ``primary`` cools down; ``sagemaker``, ``fallback``'s fallback) by the
    deployment's own entry, which has no rate key, so LiteLLM's zero-cost diagnostic walks nothing. Priced by
    the shared ``<provider>/<model>`` entry, which the pinned Router fills with every rate None once the model
    is in two groups (router.py:9886-9959), the diagnostic would walk its rate keys on every call, about 2 ms
    (docs/gateway.md, "Proxy overhead")."""
    sagemaker = SageMakerModel(
        "sagemaker",
        "qwen-endpoint",
        "us-east-1",
        runtime_url=f"{stub.url}/endpoints/qwen-endpoint/invocations",
    )
    rendered = render_config(
        [*models(stub), sagemaker],
        router=RouterOptions(
            allowed_fails=ALLOWED_FAILS,
            cooldown_seconds=COOLDOWN_SECONDS,
            fallbacks={"primary": ["fallback"], "fallback": ["sagemaker"]},
        ),
        features=ProxyFeatures(database=False, redis=False),
    )
    rendered["litellm_settings"]["callbacks"].append("diagnostic_probe.probe")
    (tmp_path / "diagnostic_probe.py").write_text(DIAGNOSTIC_PROBE)
    log = tmp_path / "diagnostic.jsonl"
    env = {"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY, "DIAGNOSTIC_LOG": str(log)}
    calls = ["fallback"] * 3 + ["sagemaker"] * 3 + ["primary"] * (ALLOWED_FAILS + 3)
    with run_proxy(render_text(rendered), tmp_path, extra_env=env) as proxy:
        for model in calls:
            status, reply = chat(proxy, model)
            assert status == 200, reply
        time.sleep(2)  # the success handler, which diagnoses again, runs after the answer
    records = [json.loads(line) for line in log.read_text().splitlines()]
    priced_by = [r["priced_by"] for r in records if "priced_by" in r]
    assert len(priced_by) >= len(calls), records  # the diagnostic ran on every call
    assert set(priced_by) == {"fallback#1", "sagemaker#1", "primary#2"}
    assert [r["walked"] for r in records if r.get("walked")] == []


# The pinned proxy's test whether a model is free, which waives every budget check of a key, team or user
# (proxy/auth/auth_checks.py:452-577, used at user_api_key_auth.py:1797-1799 and :2239-2241).
BUDGET_PROBE = """
import json, sys
import litellm
from litellm.proxy.auth.auth_checks import _is_model_cost_zero
router = litellm.Router(model_list=json.load(sys.stdin))
print(json.dumps({group: _is_model_cost_zero(group, router) for group in ("primary", "fallback")}))
"""


def test_budgets_apply_to_a_self_hosted_fallback(stub: StubBackend) -> None:
    """Priced by its own rate-less entry, a self-hosted model is not free: a key over its budget is refused
    (explicit zero prices would make it free, auth_checks.py:580-599)."""
    assert run_pinned(BUDGET_PROBE, config(stub)["model_list"]) == {"primary": False, "fallback": False}
