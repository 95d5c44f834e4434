"""Two real proxies share one real Redis (Debian's redis-server, TLS and AUTH on loopback, as ElastiCache /
Valkey in non-cluster mode requires) with the rendered Redis settings: a cooldown one proxy sets holds on the
other, a budget is enforced across both, and so is a rate limit (gateway.requests_per_minute). Without Redis
(neither the rendered settings nor the REDIS_* environment) all three fail: each proxy then counts alone
(checked by hand, last with the one configuration the three tests now share)."""

from __future__ import annotations

import contextlib
import datetime
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.litellm.config import (
    REDIS_ENV,
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    render_config,
    render_text,
)
from tests.gateway.conftest import UPSTREAM_KEY
from tests.gateway.proxy import MASTER_KEY, RunningProxy, http, missing, run_proxy
from tests.gateway.stubs import StubBackend
from tests.loopback import free_port

REDIS_PASSWORD = "redis-auth-token-0123456789"
ALLOWED_FAILS = 2
# 5 prompt + 2 completion tokens per stub reply at 0.001 each: 0.007 per call, so the third call spends it.
BUDGET = 0.02
RATE_LIMIT = 5


@dataclass
class Redis:
    port: int
    ca: Path


def _tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 (ElastiCache's are signed by a public CA)."""
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)  # noqa: E731
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    extensions = folder / "san.cnf"
    extensions.write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(extensions),
        "-out",
        str(cert),
    )
    return ca, cert, key


@contextlib.contextmanager
def run_redis(folder: Path) -> Iterator[Redis]:
    server = shutil.which("redis-server")
    if server is None or shutil.which("openssl") is None:
        missing("redis-server (Debian package redis-server) and openssl")
    ca, cert, key = _tls_files(folder)
    port = free_port()
    process = subprocess.Popen(
        [
            str(server),
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(ca),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            REDIS_PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        ping = [
            "redis-cli",
            "--tls",
            "--cacert",
            str(ca),
            "-p",
            str(port),
            "-a",
            REDIS_PASSWORD,
            "--no-auth-warning",
            "ping",
        ]
        while subprocess.run(ping, capture_output=True, text=True, check=False).stdout.strip() != "PONG":
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("redis-server did not answer PING over TLS", pytrace=False)
            time.sleep(0.2)
        yield Redis(port, ca)
    finally:
        process.terminate()
        process.wait(timeout=10)


def config(stub: StubBackend) -> dict[str, Any]:
    """One configuration for every test, so that the module starts one pair of proxies (each start takes seconds):
    a primary that fails over to its fallback, a budgeted model and a rate-limited one, rendered together as a
    gateway with all three features renders them."""
    rendered = render_config(
        [
            OpenAICompatibleModel("primary", f"{stub.url}/down/v1", "served-by-primary"),
            OpenAICompatibleModel("fallback", f"{stub.url}/v1", "served-by-fallback"),
            OpenAICompatibleModel("budgeted", f"{stub.url}/v1", "served-budgeted"),
            OpenAICompatibleModel("limited", f"{stub.url}/v1", "served-limited"),
        ],
        router=RouterOptions(
            allowed_fails=ALLOWED_FAILS,
            cooldown_seconds=300,
            fallbacks={"primary": ["fallback"]},
            requests_per_minute={"limited": RATE_LIMIT},
        ),
        features=ProxyFeatures(database=False, redis=True),
    )
    # Budgets on keys and teams need the database, which cannot start here (docs/gateway.md); a deployment
    # budget (LiteLLM 1.104.0 router_strategy/budget_limiter.py, spend synced through Redis every second) is the
    # database-free budget that the same Redis settings must share.
    (budgeted,) = [d["litellm_params"] for d in rendered["model_list"] if d["model_name"] == "budgeted"]
    budgeted.update(
        {
            "max_budget": BUDGET,
            "budget_duration": "1d",
            "input_cost_per_token": 0.001,
            "output_cost_per_token": 0.001,
        }
    )
    return rendered


@pytest.fixture(scope="module")
def proxies(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[StubBackend, RunningProxy, RunningProxy]]:
    """Two proxies with the rendered configuration, sharing one Redis."""
    with StubBackend() as stub, run_redis(tmp_path_factory.mktemp("redis")) as redis:
        # What LiteLLMGateway gives the container (constructs/gateway/proxy.py): host, port, AUTH token, TLS on;
        # plus the test CA (ElastiCache's certificates chain to a CA the image already trusts).
        env = {
            "GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "REDIS_HOST": "127.0.0.1",
            "REDIS_PORT": str(redis.port),
            "REDIS_PASSWORD": REDIS_PASSWORD,
            "REDIS_SSL": "True",
            "REDIS_SSL_CA_CERTS": str(redis.ca),
        }
        text = render_text(config(stub))
        with (
            run_proxy(text, tmp_path_factory.mktemp("a"), extra_env=env) as a,
            run_proxy(text, tmp_path_factory.mktemp("b"), extra_env=env) as b,
        ):
            yield stub, a, b


def chat(proxy: RunningProxy, model: str) -> tuple[int, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}]}
    return http("POST", f"{proxy.url}/v1/chat/completions", key=MASTER_KEY, body=body)


def test_the_rendered_redis_settings_are_non_cluster_with_auth() -> None:
    with StubBackend() as stub:
        settings = config(stub)["router_settings"]
    assert {key: settings[key.lower()] for key in REDIS_ENV} == {
        key: f"os.environ/{key}" for key in REDIS_ENV
    }
    assert not {"redis_url", "redis_startup_nodes", "cache_kwargs"} & set(settings)


def test_a_cooldown_set_by_one_proxy_holds_on_the_other(
    proxies: tuple[StubBackend, RunningProxy, RunningProxy],
) -> None:
    stub, a, b = proxies
    down = lambda: len(stub.received(lambda r: r.path.startswith("/down/")))  # noqa: E731
    for _ in range(ALLOWED_FAILS + 1):
        assert chat(a, "primary")[0] == 200
    assert down() == ALLOWED_FAILS + 1
    time.sleep(2)
    for _ in range(3):
        status, reply = chat(b, "primary")
        assert status == 200, reply
    assert down() == ALLOWED_FAILS + 1, "proxy b called a backend that proxy a had cooled down"


def test_a_budget_is_enforced_across_both_proxies(
    proxies: tuple[StubBackend, RunningProxy, RunningProxy],
) -> None:
    _, a, b = proxies
    for proxy in (a, b, a):  # 0.021 spent in all; at most 0.014 on either proxy alone
        assert chat(proxy, "budgeted")[0] == 200
        time.sleep(2.5)  # the budget limiter syncs its spend with Redis every second
    for proxy in (a, b):
        status, reply = chat(proxy, "budgeted")
        assert status != 200, reply
        assert "budget" in str(reply).lower(), reply


def test_a_rate_limit_is_enforced_across_both_proxies(
    proxies: tuple[StubBackend, RunningProxy, RunningProxy],
) -> None:
    stub, a, b = proxies
    # The limit counts calls per UTC minute (LiteLLM 1.104.0 router_strategy/lowest_tpm_rpm_v2.py:153-158): start
    # early in a minute so that the whole run falls within one.
    if datetime.datetime.now(datetime.UTC).second > 40:
        time.sleep(61 - datetime.datetime.now(datetime.UTC).second)
    statuses: list[int] = []
    refusal_seconds: list[float] = []
    for proxy in (a, b) * (RATE_LIMIT + 1):
        started = time.monotonic()
        status, reply = chat(proxy, "limited")
        assert status in (200, 429), reply
        statuses.append(status)
        if status == 429:
            refusal_seconds.append(time.monotonic() - started)
        time.sleep(0.3)  # each proxy pushes its count to Redis, and reads the sum back, every 0.1 s
    accepted = statuses.count(200)
    assert accepted == len(stub.received(lambda r: r.body.get("model") == "served-limited"))
    # Alone, each proxy accepts RATE_LIMIT - 1 calls: it picks a deployment only while count + 1 < rpm
    # (lowest_tpm_rpm_v2.py:341-346), so 2 x (RATE_LIMIT - 1) without Redis. Shared, the two accept the one limit
    # between them (RATE_LIMIT - 1 if each proxy's count is already the sum when it decides, as for one proxy).
    assert RATE_LIMIT - 1 <= accepted <= RATE_LIMIT, statuses
    assert 429 in statuses[::2] and 429 in statuses[1::2], statuses
    # Refused at once: with retries a 429 would first wait its retry-after of 60 s (router.py:7907-7948).
    assert max(refusal_seconds) < 5, refusal_seconds
