"""The proxy's added latency on loopback: p50/p99 over N requests (a benchmark, not a test).

Three targets in front of the same stub OpenAI-compatible backend (tests/gateway/stubs.py), all running at once
and measured side by side in one run: each round sends one request to each, in a rotating order, so that a busy
machine slows all three alike. One keep-alive client per target, each request sent in one write (Nagle plus
delayed ACK would add 40 ms):

1. the stub alone;
2. bare LiteLLM: a minimal config (one model, the master key, nothing else);
3. LiteLLM with the rendered production config (callbacks, metrics auth, retries, fallbacks, guardrailed
   Bedrock entries), minus the database and Redis, which need AWS.

Added latency = a LiteLLM target minus the stub alone; the last line is the rendered config over bare LiteLLM.
Run after ``bash tools/gateway/setup.sh``:

    /work/main/.venv/bin/python tools/gateway/bench.py --requests 500
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inference_tiers.litellm.config import (  # noqa: E402
    LITELLM_VERSION,
    MASTER_KEY_ENV,
    OpenAICompatibleModel,
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
    requests = max(500, parser.parse_args().requests)
    labels = ["stub alone", "bare LiteLLM", "LiteLLM, rendered config"]
    with StubBackend() as stub, tempfile.TemporaryDirectory() as folder:
        bare = {
            "model_list": [
                {
                    "model_name": "llama-eks",
                    "litellm_params": OpenAICompatibleModel(
                        "llama-eks", f"{stub.url}/v1", "llama"
                    ).litellm_params(),
                }
            ],
            "general_settings": {"master_key": f"os.environ/{MASTER_KEY_ENV}"},
        }
        production = render_config(
            loopback_models(stub.url),
            router=RouterOptions(fallbacks={"llama-down": ["llama-eks"]}),
            features=ProxyFeatures(database=False, redis=False),
        )
        env = {"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY}
        for name in ("bare", "rendered"):
            (Path(folder) / name).mkdir()
        with (
            run_proxy(render_text(bare), Path(folder) / "bare", extra_env=env) as bare_proxy,
            run_proxy(render_text(production), Path(folder) / "rendered", extra_env=env) as rendered_proxy,
        ):
            clients = [
                Client(stub.url, None),
                Client(bare_proxy.url, MASTER_KEY),
                Client(rendered_proxy.url, MASTER_KEY),
            ]
            rows = [percentiles(t) for t in measure(clients, requests)]
    base50, base99 = rows[0]
    print(
        f"LiteLLM {LITELLM_VERSION}, {requests} requests per target side by side, one worker each, loopback"
    )
    print(f"{'run':<28}{'p50 ms':>9}{'p99 ms':>9}{'added p50':>11}{'added p99':>11}")
    for label, (p50, p99) in zip(labels, rows, strict=True):
        print(f"{label:<28}{p50:>9.2f}{p99:>9.2f}{p50 - base50:>11.2f}{p99 - base99:>11.2f}")
    (bare50, bare99), (ours50, ours99) = rows[1], rows[2]
    print(
        f"rendered config over bare LiteLLM: p50 {ours50 / bare50 - 1:+.1%}, p99 {ours99 / bare99 - 1:+.1%}"
    )


if __name__ == "__main__":
    main()
