"""A stub exporter on loopback that serves every series name of an allow-list in Prometheus' text format.

Types follow the names (``<h>_bucket``/``_sum``/``_count`` -> histogram ``h``, ``*_total`` -> counter, else gauge).
Every name is served once per label set of ``series`` (two by default: vLLM V1's ``model_name`` and an
``engine``). Counters and histograms grow by a fixed amount on every scrape so that rates, ratios and quantiles
over any window are known exactly: each scrape adds ``counter_steps[name]`` (default ``COUNTER_STEP``) to a
counter and ``OBSERVATIONS`` to one bucket of every histogram (``histogram_bucket`` picks which).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.loopback import http_stand_in

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OBSERVATIONS = 10
COUNTER_STEP = 100
ENGINES = ("0", "1")


class MetricsStub:
    def __init__(
        self,
        names: Iterable[str],
        *,
        series: Sequence[Mapping[str, str]],
        gauges: Mapping[str, Sequence[float]] | None = None,
        counter_steps: Mapping[str, float] | None = None,
        histogram_bucket: Mapping[str, int] | None = None,
    ) -> None:
        self.names = sorted(names)
        self.series = series
        self.gauges = gauges or {}  # gauge -> its value on each label set (others: 1)
        self.counter_steps = counter_steps or {}
        self.histogram_bucket = histogram_bucket or {}  # histogram -> index in BUCKETS receiving observations
        self.histograms = sorted({n.removesuffix("_bucket") for n in self.names if n.endswith("_bucket")})
        self.scrapes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _labels(labels: Mapping[str, str], **extra: str) -> str:
        return "{" + ",".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items()) + "}"

    def exposition(self) -> str:
        with self._lock:
            self.scrapes += 1
            n = self.scrapes
        lines: list[str] = []
        in_histogram = {f"{h}{s}" for h in self.histograms for s in ("_bucket", "_sum", "_count")}
        for h in self.histograms:
            lines.append(f"# TYPE {h} histogram")
            target = self.histogram_bucket.get(h, 0)
            count = n * OBSERVATIONS
            for labels in self.series:
                for index, le in enumerate((*map(str, BUCKETS), "+Inf")):
                    value = count if index >= target else 0
                    lines.append(f"{h}_bucket{self._labels(labels, le=le)} {value}")
                lines.append(f"{h}_sum{self._labels(labels)} {count * BUCKETS[target]}")
                lines.append(f"{h}_count{self._labels(labels)} {count}")
        for name in self.names:
            if name in in_histogram:
                continue
            kind = "counter" if name.endswith("_total") else "gauge"
            lines.append(f"# TYPE {name} {kind}")
            for index, labels in enumerate(self.series):
                if kind == "counter":
                    value = n * self.counter_steps.get(name, COUNTER_STEP)
                else:
                    value = self.gauges.get(name, [1.0] * len(self.series))[index]
                lines.append(f"{name}{self._labels(labels)} {value}")
        return "\n".join(lines) + "\n"


@contextmanager
def serve(stub: MetricsStub) -> Iterator[str]:
    """Serve ``stub`` on 127.0.0.1 (a free port); yields ``host:port``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = stub.exposition().encode() if self.path == "/metrics" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
            return

    with http_stand_in(Handler) as server:
        yield f"127.0.0.1:{server.server_address[1]}"
