"""Print the Prometheus series names the pinned vllm-router exports (tests/data/observability allow-list).

Runs the real router from this environment (the dev extra pins vllm-router==0.1.17) on loopback in front of a
stub OpenAI-compatible worker, sends one chat completion through it and reads its /metrics:

    .venv/bin/python tools/observability/router_metric_names.py > tests/data/observability/vllm-router-metrics.txt

The router registers most series on first use, so the list is what one successful request produces: a lower
bound (error and retry counters appear only on errors and are not listed, so no rule or panel may read them).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "stub-model"


class _Worker(BaseHTTPRequestHandler):
    def _answer(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        message = {"role": "assistant", "content": "ok"}
        self._answer(
            {
                "id": "stub",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
        return


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, data: bytes | None = None, timeout: float = 60) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            headers = {"Content-Type": "application/json"}
            request = urllib.request.Request(
                url, data=data, headers=headers, method="POST" if data else "GET"
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                return bytes(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def series_names() -> list[str]:
    # the router next to this interpreter (the project venv) first, then PATH
    beside = Path(sys.executable).parent / "vllm-router"
    router = str(beside) if beside.is_file() else shutil.which("vllm-router")
    if router is None:
        raise SystemExit("vllm-router is not installed: pip install -e '.[dev]'")
    worker = ThreadingHTTPServer(("127.0.0.1", 0), _Worker)
    threading.Thread(target=worker.serve_forever, daemon=True).start()
    port, metrics_port = _free_port(), _free_port()
    process = subprocess.Popen(
        [
            router,
            "--worker-urls",
            f"http://127.0.0.1:{worker.server_address[1]}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            str(metrics_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).encode()
        _wait(f"http://127.0.0.1:{port}/v1/chat/completions", body)
        text = _wait(f"http://127.0.0.1:{metrics_port}/metrics").decode()
    finally:
        process.terminate()
        process.wait(timeout=20)
        worker.shutdown()
        worker.server_close()
    names = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")
    }
    return sorted(names)


def main() -> None:
    version = importlib.metadata.version("vllm-router")
    print(
        f"# Series names vllm-router {version} exports on its Prometheus port after one successful chat completion. "
        "Source: the PyPI wheel run on loopback in front of a stub worker by tools/observability/router_metric_names.py "
        "(its /metrics read back). A lower bound: series registered only on errors or retries are not listed."
    )
    for name in series_names():
        print(name)


if __name__ == "__main__":
    main()
