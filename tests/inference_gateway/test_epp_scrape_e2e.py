"""The scale-from-zero seam, both sides together: a real Prometheus (tools/observability) runs the EKS scraper's
rendered annotated-pods job against a loopback stand-in of the rendered Endpoint Picker pod, and the KEDA demand
query the ScaledObject renders is evaluated against what it scraped.

The stand-in behaves as the pinned EPP does (gateway-api-inference-extension v1.5.0, commit df9f8909):
- it serves ``/metrics`` on the rendered metrics port; unless the rendered flags turn ``--metrics-endpoint-auth`` off
  (default true, pkg/epp/server/options.go:116,189), controller-runtime's filter refuses a scrape without a
  Kubernetes bearer token (cmd/epp/runner/runner.go:274-283), which the AMP scraper does not present: 401;
- a labelled counter has no series until its first increment (client_golang CounterVec);
- with no model-server pod a request fails in director.HandleRequest with ServiceUnavailable
  (pkg/epp/requestcontrol/director.go:172-177), so only ``inference_objective_request_error_total`` grows;
  ``inference_objective_request_total`` is recorded only after scheduling succeeds (pkg/epp/handlers/server.go:254).

Kubernetes pod discovery is replaced by static targets that carry the ``__meta_kubernetes_*`` labels the pod
role derives from the rendered pod (one target per declared container port, as the pod role makes them); every
relabel rule of the job is the rendered one.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from inference_tiers.k8s.inference_gateway import (
    EPP_REQUEST_ERROR_METRIC,
    EPP_REQUEST_METRIC,
    ModelPool,
    render_endpoint_picker,
)
from inference_tiers.k8s.inference_gateway_scaling import (
    PoolScaling,
    PrometheusMetrics,
    ScaledTarget,
    render_scaled_object,
)
from inference_tiers.observability import collectors
from tests.inference_gateway.support import DATA, listed
from tests.loopback import http_stand_in
from tests.observability.prometheus_server import Prometheus, running_prometheus

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
POOL = ModelPool(
    name="llama", namespace="inference", selector={"app.kubernetes.io/component": "decode"}, model_name=MODEL
)


def _rendered_epp() -> tuple[dict[str, Any], list[str]]:
    (deployment,) = (m for m in render_endpoint_picker(POOL) if m["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    return template, container["args"]


def _metrics_port(args: list[str]) -> int:
    """The port the EPP serves /metrics on: its ``--metrics-port`` flag (v1.5.0 pkg/epp/server/options.go:177,
    the metrics server's ``BindAddress: fmt.Sprintf(":%d", opts.MetricsPort)`` at cmd/epp/runner/runner.go:275)."""
    return int(args[args.index("--metrics-port") + 1])


def _demand_query(model_name: str) -> str:
    scaled = render_scaled_object(
        "inference",
        ScaledTarget("vllm-decode", {"namespace": "inference"}, PoolScaling(0, 4)),
        model_name=model_name,
        metrics=PrometheusMetrics(url="http://prometheus.invalid"),
        trigger_authentication=None,
    )
    (demand,) = (t for t in scaled["spec"]["triggers"] if t["name"] == "demand")
    assert demand["metadata"]["activationThreshold"] == "0"
    return str(demand["metadata"]["query"])


class EndpointPickerStandIn:
    """The EPP's metrics endpoint: counters by model, created on their first increment."""

    def __init__(self, args: list[str]) -> None:
        self.auth = "--metrics-endpoint-auth=false" not in args
        self.counters: dict[str, float] = {}
        self.unauthorized = 0
        self._lock = threading.Lock()

    def request_without_pods(self, model: str) -> None:
        with self._lock:
            series = (
                f'{EPP_REQUEST_ERROR_METRIC}{{model_name="{model}",target_model_name="{model}",'
                'error_code="ServiceUnavailable"}'
            )
            self.counters[series] = self.counters.get(series, 0) + 1

    def exposition(self) -> str:
        with self._lock:
            lines = [f"{series} {value}" for series, value in sorted(self.counters.items())]
        return (
            "\n".join(
                [
                    "# TYPE inference_extension_info gauge",
                    'inference_extension_info{commit="df9f8909"} 1',
                    *lines,
                ]
            )
            + "\n"
        )

    @contextmanager
    def serve(self, host: str, port: int) -> Iterator[None]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if stand_in.auth and not self.headers.get("Authorization", "").startswith("Bearer "):
                    stand_in.unauthorized += 1
                    status, body = 401, b"Unauthorized"
                elif self.path == "/metrics":
                    status, body = 200, stand_in.exposition().encode()
                else:
                    status, body = 404, b""
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
                return

        with http_stand_in(Handler, host, port):
            yield


def _meta(name: str) -> str:
    """Kubernetes SD's label name for a pod label or annotation key."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _pod_targets(template: dict[str, Any], pod_ip: str) -> list[dict[str, Any]]:
    """What the pod role discovers for the rendered pod: one target per declared container port."""
    labels = {
        "__meta_kubernetes_namespace": POOL.namespace,
        "__meta_kubernetes_pod_name": f"{POOL.epp_name}-0",
        "__meta_kubernetes_pod_node_name": "node-1",
        **{f"__meta_kubernetes_pod_label_{_meta(k)}": v for k, v in template["metadata"]["labels"].items()},
        **{
            f"__meta_kubernetes_pod_annotation_{_meta(k)}": v
            for k, v in template["metadata"].get("annotations", {}).items()
        },
    }
    ports = [p["containerPort"] for c in template["spec"]["containers"] for p in c["ports"]]
    return [{"targets": [f"{pod_ip}:{port}"], "labels": labels} for port in ports]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, EndpointPickerStandIn]]:
    template, args = _rendered_epp()
    stand_in = EndpointPickerStandIn(args)
    # A pod IP of its own on loopback, so the stand-in can listen on the port the relabelling rewrites to.
    pod_ip = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(1, 254)}"
    port = _metrics_port(args)  # where the real EPP listens, whatever the annotation says
    (pods,) = (j for j in collectors.eks_scrape_config("c")["scrape_configs"] if j["job_name"] == "pods")
    job = {k: v for k, v in pods.items() if k != "kubernetes_sd_configs"}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{**job, "static_configs": _pod_targets(template, pod_ip)}],
    }
    with stand_in.serve(pod_ip, port), running_prometheus(tmp_path_factory.mktemp("epp"), config) as server:
        yield server, stand_in


def _value(prometheus: Prometheus, query: str) -> float:
    (sample,) = prometheus.query(query)
    return float(sample["value"][1])


def _wait(prometheus: Prometheus, query: str, expected: float, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _value(prometheus, query) != expected:
        assert time.monotonic() < deadline, f"{query} stayed {_value(prometheus, query)}, not {expected}"
        time.sleep(0.5)


def test_the_stand_in_serves_names_of_the_pinned_epp() -> None:
    served = {
        line.split("{")[0] for line in EndpointPickerStandIn([]).exposition().splitlines() if line[0] != "#"
    }
    served |= {EPP_REQUEST_ERROR_METRIC, EPP_REQUEST_METRIC}
    assert served <= listed(DATA / "epp-v1.5.0-metrics.txt")


def test_the_scrape_annotation_names_the_port_the_epp_serves_metrics_on() -> None:
    template, args = _rendered_epp()
    (container,) = template["spec"]["containers"]
    (declared,) = (p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    annotated = int(template["metadata"]["annotations"]["prometheus.io/port"])
    assert annotated == _metrics_port(args) == declared


def test_the_scraper_keeps_the_epp_pod_once_on_its_metrics_port(
    scraped: tuple[Prometheus, EndpointPickerStandIn],
) -> None:
    prometheus, stand_in = scraped
    up = prometheus.wait_for('up{namespace="inference"} == 1')
    assert len(up) == 1  # three container ports, one target after relabelling to the annotated port
    assert up[0]["metric"]["pod"] == f"{POOL.epp_name}-0"
    assert stand_in.unauthorized == 0  # the rendered flags let an unauthenticated scraper in


def test_the_demand_query_wakes_the_pool_on_requests_that_find_no_pod(
    scraped: tuple[Prometheus, EndpointPickerStandIn],
) -> None:
    prometheus, stand_in = scraped
    prometheus.wait_for('inference_extension_info{namespace="inference"}')
    demand = _demand_query(MODEL)
    # Nothing asked yet: no counter series exists, and the query still answers 0 (KEDA: not active).
    assert _value(prometheus, demand) == 0
    for _ in range(3):
        stand_in.request_without_pods(MODEL)
        time.sleep(1.2)
    _wait(prometheus, demand, 1)  # activation: 1 > activationThreshold 0
    assert prometheus.query(f'{EPP_REQUEST_METRIC}{{model_name="{MODEL}"}}') == []  # never recorded at zero
    assert _value(prometheus, _demand_query("another-model")) == 0
