"""The proxy's added latency on loopback: p50/p99 over N requests (a benchmark, not a test).

Targets in front of the same stub OpenAI-compatible backend (tests/gateway/stubs.py), all running at once
and measured side by side in one run: each round sends one request to each, in a rotating order, so that a busy
machine slows them all alike. One keep-alive client per target, each request sent in one write (Nagle plus
delayed ACK would add 40 ms):

1. the stub alone;
2. bare LiteLLM: a minimal config (the same deployment the requests go to, the master key, nothing else);
3. LiteLLM with the rendered production config (callbacks, metrics auth, retries, fallbacks, guardrailed
   Bedrock entries), minus the database and Redis, which need AWS;
4. with ``--variant NAME`` (repeatable): the rendered config with one group of settings changed (``VARIANTS``),
   to find what a difference from bare LiteLLM costs.

Added latency = a LiteLLM target minus the stub alone; the last columns are each target over bare LiteLLM.
Run after ``bash tools/gateway/setup.sh``:

    /work/main/.venv/bin/python tools/gateway/bench.py --requests 500
    /work/main/.venv/bin/python tools/gateway/bench.py --variant shared-pricing --variant no-fallback-copies
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inference_tiers.litellm.config import (  # noqa: E402
    LITELLM_VERSION,
    MASTER_KEY_ENV,
    ProxyFeatures,
    RouterOptions,
    render_config,
    render_text,
)
from tests.gateway.conftest import UPSTREAM_KEY, loopback_models  # noqa: E402
from tests.gateway.proxy import MASTER_KEY, run_proxy  # noqa: E402
from tests.gateway.stubs import StubBackend  # noqa: E402


class Client:
    """One keep-alive connection to a target; ``send`` returns the milliseconds of one request."""

    def __init__(self, base_url: str, key: str | None) -> None:
        url = urlparse(base_url)
        self.name = base_url
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        self.body = json.dumps(
            {"model": "llama-eks", "messages": [{"role": "user", "content": "ping"}]}
        ).encode()
        self.headers = {"Content-Type": "application/json", "Content-Length": str(len(self.body))}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def send(self) -> float:
        try:
            return self._send()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the idle keep-alive connection (uvicorn: after 5 s); a new one, timed afresh.
            self.connection.close()
            return self._send()

    def _send(self) -> float:
        start = time.perf_counter()
        self.connection.request("POST", "/v1/chat/completions", body=self.body, headers=self.headers)
        response = self.connection.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200:
            raise SystemExit(f"{self.name}: HTTP {response.status}: {payload[:300]!r}")
        return elapsed


def _without(section: str, *keys: str) -> Callable[[dict[str, Any]], None]:
    def drop(config: dict[str, Any]) -> None:
        for key in keys or list(config[section]):
            config[section].pop(key, None)
        if not keys and section == "general_settings":
            config[section]["master_key"] = f"os.environ/{MASTER_KEY_ENV}"

    return drop


def _one_model(config: dict[str, Any]) -> None:
    config["model_list"] = [e for e in config["model_list"] if e["model_name"] == "llama-eks"]


def _no_fallback_copies(config: dict[str, Any]) -> None:
    config["model_list"] = [e for e in config["model_list"] if e["litellm_params"].get("order", 1) == 1]


def _shared_pricing(config: dict[str, Any]) -> None:
    for entry in config["model_list"]:
        info = entry.get("model_info", {})
        for key in ("id", "base_model"):
            info.pop(key, None)
        if not info:
            entry.pop("model_info", None)


def _free_self_hosted(config: dict[str, Any]) -> None:
    for entry in config["model_list"]:
        if not entry["litellm_params"]["model"].startswith("bedrock/"):
            entry["litellm_params"].update(input_cost_per_token=0, output_cost_per_token=0)


# Variants of the rendered config (--variant NAME, repeatable), each one more proxy in the same run, to find
# what a difference from bare LiteLLM costs: each drops (or, free-self-hosted, adds) one group of settings.
VARIANTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "no-prometheus": _without("litellm_settings", "callbacks", "require_auth_for_metrics_endpoint"),
    "no-json-logs": _without("litellm_settings", "json_logs"),
    "no-litellm-settings": _without("litellm_settings"),
    "no-router-settings": _without("router_settings"),
    "no-general-settings": _without("general_settings"),
    "one-model": _one_model,
    # A model without a price that is also another model's fallback: priced by the shared cost-map entry LiteLLM
    # leaves without rates (shared-pricing, the rendering before each deployment got its own), its calls walk
    # that entry in LiteLLM's zero-cost diagnostic (docs/gateway.md, "Proxy overhead"); without the fallback
    # copies, or with explicit zero prices (which waive budgets), they do not.
    "shared-pricing": _shared_pricing,
    "no-fallback-copies": _no_fallback_copies,
    "free-self-hosted": _free_self_hosted,
}


def measure(clients: list[Client], requests: int) -> list[list[float]]:
    """Milliseconds per request for each client, after 20 warm-up rounds; round r starts at client r mod n."""
    timings: list[list[float]] = [[] for _ in clients]
    for round_ in range(requests + 20):
        for step in range(len(clients)):
            index = (round_ + step) % len(clients)
            elapsed = clients[index].send()
            if round_ >= 20:
                timings[index].append(elapsed)
    return timings


def percentiles(timings: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(timings, n=100, method="inclusive")
    return statistics.median(timings), cuts[98]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per target (at least 500)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        choices=sorted(VARIANTS),
        help="one more target (repeatable)",
    )
    options = parser.parse_args()
    requests = max(500, options.requests)
    with StubBackend() as stub, tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as proxies:
        models = loopback_models(stub.url)
        # The same deployment as the rendered config's llama-eks (the one the requests go to).
        llama = next(m for m in models if m.name == "llama-eks")
        bare = {
            "model_list": [{"model_name": llama.name, "litellm_params": llama.litellm_params()}],
            "general_settings": {"master_key": f"os.environ/{MASTER_KEY_ENV}"},
        }
        production = render_config(
            models,
            router=RouterOptions(fallbacks={"llama-down": ["llama-eks"]}),
            features=ProxyFeatures(database=False, redis=False),
        )
        configs = {"bare LiteLLM": bare, "LiteLLM, rendered config": production}
        for name in options.variant:
            configs[f"rendered, {name}"] = variant = copy.deepcopy(production)
            VARIANTS[name](variant)
        clients = [Client(stub.url, None)]
        for index, config in enumerate(configs.values()):
            (Path(folder) / str(index)).mkdir()
            proxy = proxies.enter_context(
                run_proxy(
                    render_text(config),
                    Path(folder) / str(index),
                    extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY},
                )
            )
            clients.append(Client(proxy.url, MASTER_KEY))
        rows = [percentiles(t) for t in measure(clients, requests)]
    labels = ["stub alone", *configs]
    base50, base99 = rows[0]
    print(
        f"LiteLLM {LITELLM_VERSION}, {requests} requests per target side by side, one worker each, loopback"
    )
    print(
        f"{'run':<36}{'p50 ms':>9}{'p99 ms':>9}{'added p50':>11}{'added p99':>11}{'/bare p50':>11}{'/bare p99':>11}"
    )
    bare50, bare99 = rows[1]
    for label, (p50, p99) in zip(labels, rows, strict=True):
        print(
            f"{label:<36}{p50:>9.2f}{p99:>9.2f}{p50 - base50:>11.2f}{p99 - base99:>11.2f}"
            f"{p50 / bare50:>10.3f}x{p99 / bare99:>10.3f}x"
        )
    (ours50, ours99) = rows[2]
    print(f"rendered config over bare LiteLLM: p50 {ours50 / bare50:.3f}x, p99 {ours99 / bare99:.3f}x")


if __name__ == "__main__":
    main()
