"""Failover under load on loopback: the real proxy, the rendered config, two backends, the primary killed
mid-burst (a load script, not a timed test).

The proxy (the pinned release, from tools/gateway/.venv) runs the configuration ``render_config`` produces for
production, minus the database and Redis (which need AWS), in front of two OpenAI-compatible backends, each its
own process (tests/gateway/stubs.py): ``primary`` falls back to ``fallback``. The script

1. measures the fallback's own latency (a burst straight to the ``fallback`` model);
2. sends a bounded burst to ``primary`` from concurrent clients and SIGKILLs the primary backend a third of the
   way in (later connections to it are refused, as from a task or pod that died);

and prints requests answered, answered by the fallback, refused (429/503), lost (any other answer or a broken
connection) and hung (no answer within --hang-seconds), and p50/p99 before and after the kill. Run after
``bash tools/gateway/setup.sh``:

    /work/main/.venv/bin/python tools/gateway/failover.py --requests 600 --clients 32
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inference_tiers.litellm.config import (  # noqa: E402
    LITELLM_VERSION,
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    render_config,
    render_text,
)
from tests.gateway.proxy import MASTER_KEY, run_proxy  # noqa: E402
from tests.loopback import free_port  # noqa: E402

UPSTREAM_KEY = "upstream-key-for-vllm"
SERVED = {"primary": "served-by-primary", "fallback": "served-by-fallback"}
# One backend process: tests/gateway/stubs.py's server on a given port until killed.
SERVE = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); from tests.gateway.stubs import StubBackend; "
    "stub = StubBackend(port=int(sys.argv[2])); stub.__enter__(); time.sleep(10**6)"
)


@dataclass(frozen=True)
class Outcome:
    kind: str  # answered, fallback, refused, lost, hung
    after_kill: bool  # sent after the kill
    before_kill: bool  # answered before the kill
    milliseconds: float


def backend(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", SERVE, str(ROOT), str(port)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
            return process
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the backend on port {port} did not start")


def call(
    base_url: str, model: str, fallback_base: str, hang_seconds: float, killed: threading.Event
) -> Outcome:
    """One request on its own connection (as from many independent clients). An answer to ``primary`` came
    from the fallback when the proxy's ``x-litellm-model-api-base`` header (LiteLLM 1.104.0
    proxy/common_request_processing.py:1761-1766: the deployment that answered) is ``fallback_base``: the body's
    ``model`` names the backend's model after an error but the requested group once the primary has cooled
    down."""
    url = urlparse(base_url)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "ping"}]}).encode()
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Authorization": f"Bearer {MASTER_KEY}",
    }
    after_kill = killed.is_set()
    start = time.perf_counter()
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=hang_seconds)
    try:
        connection.request("POST", "/v1/chat/completions", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
    except TimeoutError:
        kind = "hung"
    except OSError:
        kind = "lost"
    else:
        if response.status in (429, 503):
            kind = "refused"
        elif response.status != 200:
            kind = "lost"
        elif model == "primary" and response.getheader("x-litellm-model-api-base") == fallback_base:
            kind = "fallback"
        else:
            kind = "answered"
    finally:
        connection.close()
    return Outcome(kind, after_kill, not killed.is_set(), (time.perf_counter() - start) * 1000)


def burst(
    base_url: str,
    model: str,
    fallback_base: str,
    requests: int,
    clients: int,
    hang_seconds: float,
    kill: subprocess.Popen[bytes] | None,
) -> list[Outcome]:
    killed = threading.Event()
    sent = Counter[str]()
    lock = threading.Lock()

    def one(_: int) -> Outcome:
        with lock:
            sent["n"] += 1
            if kill is not None and sent["n"] == requests // 3:
                os.kill(kill.pid, signal.SIGKILL)
                kill.wait()
                killed.set()
        return call(base_url, model, fallback_base, hang_seconds, killed)

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(requests)))


def percentiles(outcomes: list[Outcome]) -> str:
    timings = sorted(o.milliseconds for o in outcomes if o.kind in ("answered", "fallback"))
    if not timings:
        return "      -        -"
    p50 = timings[len(timings) // 2]
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
    return f"{p50:>8.1f} {p99:>8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=600, help="requests in the burst to primary")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument(
        "--hang-seconds", type=float, default=30, help="a request with no answer by then hung"
    )
    options = parser.parse_args()
    ports = {name: free_port() for name in SERVED}
    processes = {name: backend(port) for name, port in ports.items()}
    try:
        models = [
            OpenAICompatibleModel(name, f"http://127.0.0.1:{ports[name]}/v1", SERVED[name], "UPSTREAM_KEY")
            for name in SERVED
        ]
        config = render_config(
            models,
            router=RouterOptions(fallbacks={"primary": ["fallback"]}),
            features=ProxyFeatures(database=False, redis=False),
        )
        with (
            tempfile.TemporaryDirectory() as folder,
            run_proxy(render_text(config), Path(folder), extra_env={"UPSTREAM_KEY": UPSTREAM_KEY}) as proxy,
        ):
            fallback_base = models[1].base_url
            args = (options.clients, options.hang_seconds)
            burst(proxy.url, "fallback", fallback_base, 64, *args, None)  # warm-up: connections, first calls
            own = burst(proxy.url, "fallback", fallback_base, options.requests, *args, None)
            run = burst(proxy.url, "primary", fallback_base, options.requests, *args, processes["primary"])
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    before = [o for o in run if o.before_kill]
    after = [o for o in run if o.after_kill]
    counts = Counter(o.kind for o in run)
    print(
        f"LiteLLM {LITELLM_VERSION}, rendered config (no database/Redis), one worker, loopback; "
        f"{options.requests} requests from {options.clients} clients, primary killed after {options.requests // 3}"
    )
    print(
        f"answered {counts['answered'] + counts['fallback']}  by fallback {counts['fallback']}  "
        f"refused {counts['refused']}  lost {counts['lost']}  hung {counts['hung']}"
    )
    print(f"{'latency (ms)':<34}{'p50':>8} {'p99':>8}")
    print(f"{'fallback model alone':<34}{percentiles(own)}")
    print(f"{'primary, answered before the kill':<34}{percentiles(before)}")
    print(f"{'primary, sent after the kill':<34}{percentiles(after)}")


if __name__ == "__main__":
    main()
