"""A real Prometheus server (Debian's package) on loopback for the end-to-end tests, and its HTTP API."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.loopback import free_port
from tests.observability.tools import binary


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"query": promql, **({"time": str(at)} if at else {})})
        return list(self.get(f"/api/v1/query?{query}")["result"])

    def wait_for(self, promql: str, timeout: float = 40) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(promql)
            if result:
                return result
            time.sleep(0.5)
        raise AssertionError(f"Prometheus returned nothing for {promql} within {timeout} s")


@contextmanager
def running_prometheus(folder: Path, config: dict[str, Any]) -> Iterator[Prometheus]:
    """Prometheus with ``config`` (written to ``folder``, with its TSDB and log), ready; stopped on exit."""
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (folder / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            str(binary("prometheus")),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        server = Prometheus(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{server.url}/-/ready", timeout=2).close()
                break
            except OSError:
                assert process.poll() is None, (folder / "prometheus.log").read_text()
                assert time.monotonic() < deadline, "Prometheus did not become ready in 30 s"
                time.sleep(0.3)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
