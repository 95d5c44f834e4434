"""What the loopback tests that start real components share: a free port, an HTTP stand-in served from a thread,
and the pinned vllm-router."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_stand_in(
    handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0
) -> Iterator[ThreadingHTTPServer]:
    """``handler`` served on ``host``:``port`` (0: a free port) from a thread while the block runs."""
    server = ThreadingHTTPServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def vllm_router(args: Sequence[str], port: int) -> Iterator[str]:
    """The dev extra's vllm-router (beside this interpreter) with ``args``, which must make it listen on
    127.0.0.1:``port``; yields its base URL once ``/health`` answers and stops it on exit."""
    # The router switches to Kubernetes service discovery when it finds the in-cluster variables.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    executable = Path(sys.executable).with_name("vllm-router")
    process = subprocess.Popen([executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            log = (
                process.communicate(timeout=10)[0].decode(errors="replace")
                if process.poll() is not None
                else ""
            )
            pytest.fail(f"vllm-router exited with {process.poll()} or never became healthy: {log[-2000:]}")
        yield url
    finally:
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
