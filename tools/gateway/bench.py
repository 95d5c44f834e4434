"""The proxy's added latency on loopback: p50/p99 over N sequential requests (a benchmark, not a test).

Three runs against the same stub OpenAI-compatible backend (tests/gateway/stubs.py), one client, keep-alive,
each request sent in one write (Nagle plus delayed ACK would add 40 ms):

1. the stub alone;
2. bare LiteLLM: a minimal config (one model, the master key, nothing else);
3. LiteLLM with the rendered production config (callbacks, metrics auth, retries, fallbacks, guardrailed
   Bedrock entries), minus the database and Redis, which need AWS.

Added latency = a LiteLLM run minus the stub alone. Run after ``bash tools/gateway/setup.sh``:

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


def measure(base_url: str, path: str, key: str | None, requests: int) -> list[float]:
    """Milliseconds per request, after 20 warm-up requests."""
    url = urlparse(base_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = json.dumps({"model": "llama-eks", "messages": [{"role": "user", "content": "ping"}]}).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timings: list[float] = []
    for index in range(requests + 20):
        start = time.perf_counter()
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200:
            raise SystemExit(f"{base_url}{path}: HTTP {response.status}: {payload[:300]!r}")
        if index >= 20:
            timings.append(elapsed)
    connection.close()
    return timings


def percentiles(timings: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(timings, n=100, method="inclusive")
    return statistics.median(timings), cuts[98]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per run (at least 500)")
    requests = max(500, parser.parse_args().requests)
    rows: list[tuple[str, float, float]] = []
    with StubBackend() as stub, tempfile.TemporaryDirectory() as folder:
        rows.append(("stub alone", *percentiles(measure(stub.url, "/v1/chat/completions", None, requests))))
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
        for label, config in (("bare LiteLLM", bare), ("LiteLLM, rendered config", production)):
            run = Path(folder) / f"run{len(rows)}"
            run.mkdir()
            with run_proxy(
                render_text(config), run, extra_env={"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY}
            ) as proxy:
                rows.append(
                    (label, *percentiles(measure(proxy.url, "/v1/chat/completions", MASTER_KEY, requests)))
                )
    base50, base99 = rows[0][1], rows[0][2]
    print(f"LiteLLM {LITELLM_VERSION}, {requests} sequential requests per run, one worker, loopback")
    print(f"{'run':<28}{'p50 ms':>9}{'p99 ms':>9}{'added p50':>11}{'added p99':>11}")
    for label, p50, p99 in rows:
        print(f"{label:<28}{p50:>9.2f}{p99:>9.2f}{p50 - base50:>11.2f}{p99 - base99:>11.2f}")


if __name__ == "__main__":
    main()
