"""The seam between the ADOT sidecar and the proxy, both sides real (audit W1): Prometheus (tools/observability)
scrapes the real LiteLLM proxy (tools/gateway) through the scrape job that the sidecar's configuration renders
(same key, port and path), and the rendered recording rules turn what it scrapes into the gateway's series.

LiteLLM 1.104.0 answers /metrics only with a key: ``require_auth_for_metrics_endpoint`` defaults to True
(litellm/__init__.py:187 in the 1.104.0 wheel the tool venv installs) and PrometheusAuthMiddleware runs
user_api_key_auth on every /metrics request, answering 401 when it fails
(litellm/proxy/middleware/prometheus_auth_middleware.py:50-101). The master key passes user_api_key_auth.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs

from inference_tiers.constructs.observability import ObservabilityHub
from inference_tiers.litellm.config import MASTER_KEY_PREFIX, PORT
from inference_tiers.observability import collectors, rules
from inference_tiers.validation import ArgumentError
from tests.gateway.conftest import Gateway
from tests.gateway.proxy import MASTER_KEY, MASTER_SECRET, http
from tests.harness import build_tier, render_sub
from tests.observability.prometheus_server import Prometheus, running_prometheus

REGION = "us-east-1"
WORKSPACE_ENDPOINT = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/"
REMOTE_WRITE = f"{WORKSPACE_ENDPOINT}api/v1/remote_write"
SCRAPE_SECONDS = 10  # the shortest interval ecs_collector_config takes
NO_KEY_JOB = "litellm-without-key"


def expand_env(value: Any, environment: dict[str, str]) -> Any:
    """What the collector does to its configuration before the Prometheus receiver reads it: replace every
    ${env:NAME}, also inside a string (aws-otel-collector v0.49.0: pkg/config/config_factory.go:36-59 resolves
    AOT_CONFIG_CONTENT with confmap's env provider; vendor/go.opentelemetry.io/collector/confmap/expand.go:148-187
    replaces an embedded URI with its value)."""
    if isinstance(value, str):
        return re.sub(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: environment[m.group(1)], value)
    if isinstance(value, dict):
        return {k: expand_env(v, environment) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, environment) for v in value]
    return value


def collector_config(port: int, scrape_interval_seconds: int = 30) -> dict[str, Any]:
    """The sidecar's configuration as ObservabilityHub.add_ecs_collector renders it for the gateway."""
    return collectors.ecs_collector_config(
        remote_write_url=REMOTE_WRITE,
        region=REGION,
        metrics_port=port,
        scrape_interval_seconds=scrape_interval_seconds,
        metrics_key_prefix=MASTER_KEY_PREFIX,
    )


def collector_job(port: int, scrape_interval_seconds: int = 30) -> dict[str, Any]:
    """Its scrape job."""
    (job,) = collector_config(port, scrape_interval_seconds)["receivers"]["prometheus"]["config"][
        "scrape_configs"
    ]
    return dict(job)


def rendered_scrape_job(gateway: Gateway) -> dict[str, Any]:
    """That job on the test proxy's port, with the sidecar's METRICS_KEY secret (the master key's secret value,
    without the ``sk-`` the container's command adds) expanded as the collector expands it."""
    port = urlsplit(gateway.proxy.url).port
    assert port is not None
    job = collector_job(port, SCRAPE_SECONDS)
    return dict(expand_env(job, {collectors.METRICS_KEY_ENV: MASTER_SECRET}))


def test_the_gateway_sidecar_gets_that_job_and_the_master_key_as_an_ecs_secret() -> None:
    """`-c tier=gateway,observability`: the sidecar's configuration holds the job above (port 4000, /metrics,
    the key's prefix and a reference to its variable) and ECS fills the variable from the master key's secret."""
    build = build_tier("gateway,observability")
    template = build.template("InferenceTiers-Gateway").to_json()
    (task,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ECS::TaskDefinition"]
    containers = {c["Name"]: c for c in task["Properties"]["ContainerDefinitions"]}
    sidecar = containers["OtelCollector"]
    master = next(
        s["ValueFrom"] for s in containers["litellm"]["Secrets"] if s["Name"] == "LITELLM_MASTER_KEY"
    )
    assert sidecar["Secrets"] == [{"Name": collectors.METRICS_KEY_ENV, "ValueFrom": master}]
    content = next(e["Value"] for e in sidecar["Environment"] if e["Name"] == "AOT_CONFIG_CONTENT")
    # What the container receives once CloudFormation fills in the deploy-time values (the Region, the workspace's
    # endpoint from the observability stack): exactly the rendered text, ${env:METRICS_KEY} included.
    received = render_sub(content, deployed)
    assert received == collectors.to_yaml(collector_config(PORT))
    (job,) = yaml.safe_load(received)["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert job["authorization"]["credentials"] == f"{MASTER_KEY_PREFIX}${{env:{collectors.METRICS_KEY_ENV}}}"


def deployed(value: Any) -> str:
    """A variable of the sidecar's configuration at deploy time: the Region, or the workspace's endpoint (exported
    by the observability stack)."""
    if value == {"Ref": "AWS::Region"}:
        return REGION
    assert "PrometheusEndpoint" in value["Fn::ImportValue"]
    return WORKSPACE_ENDPOINT


def chat(gateway: Gateway, model: str) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
    return http("POST", f"{gateway.proxy.url}/v1/chat/completions", key=MASTER_KEY, body=body)[0]


def traffic(gateway: Gateway) -> None:
    """Calls that succeed, calls whose first backend fails (llama-down falls back to llama-eks) and a call the
    proxy refuses (an unknown model)."""
    assert chat(gateway, "llama-eks") == 200
    assert chat(gateway, "llama-down") == 200
    assert chat(gateway, "no-such-model") >= 400


@dataclass
class Scraped:
    prometheus: Prometheus
    job: dict[str, Any]


@pytest.fixture(scope="module")
def scraped(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    folder = tmp_path_factory.mktemp("metrics-seam")
    (folder / "rules.yaml").write_text(rules.rules_yaml())
    job = rendered_scrape_job(gateway)
    without_key = {k: v for k, v in job.items() if k != "authorization"} | {"job_name": NO_KEY_JOB}
    config = {
        "global": {"evaluation_interval": "1s"},
        "rule_files": [str(folder / "rules.yaml")],
        "scrape_configs": [job, without_key],
    }
    traffic(gateway)  # every series exists before the first scrape
    with running_prometheus(folder, config) as prometheus:
        prometheus.wait_for('up{job="litellm"} == 1', timeout=4 * SCRAPE_SECONDS)
        traffic(gateway)  # and grows before the next one, so the rules' rates are not zero
        yield Scraped(prometheus, job)


def test_the_rendered_job_scrapes_the_proxy_with_the_master_key(scraped: Scraped) -> None:
    assert scraped.job["metrics_path"] == "/metrics"
    assert scraped.job["authorization"] == {"type": "Bearer", "credentials": MASTER_KEY}
    names = scraped.prometheus.wait_for('count by (__name__) ({job="litellm", __name__=~"litellm_.+"})')
    assert {"litellm_proxy_total_requests_metric_total", "litellm_deployment_total_requests_total"} <= {
        series["metric"]["__name__"] for series in names
    }


def test_the_same_job_without_the_key_is_down(scraped: Scraped) -> None:
    """What the sidecar did before (W1): LiteLLM answers 401, so the target is down and nothing is scraped."""
    down = scraped.prometheus.wait_for(f'up{{job="{NO_KEY_JOB}"}} == 0', timeout=3 * SCRAPE_SECONDS)
    assert down
    assert not scraped.prometheus.query(f'{{job="{NO_KEY_JOB}", __name__=~"litellm_.+"}}')


@pytest.mark.parametrize("record", [rules.GATEWAY_ERROR_RATIO, rules.BACKEND_ERROR_RATIO])
def test_the_recording_rules_produce_the_gateway_series(scraped: Scraped, record: str) -> None:
    produced = scraped.prometheus.wait_for(record, timeout=6 * SCRAPE_SECONDS)
    assert all(0 <= float(series["value"][1]) <= 1 for series in produced), produced


def test_a_prefix_that_is_not_a_plain_word_is_refused() -> None:
    with pytest.raises(ArgumentError, match="ecs_collector_config: parameter 'metrics_key_prefix'"):
        collectors.ecs_collector_config(
            remote_write_url=REMOTE_WRITE, region="us-east-1", metrics_port=PORT, metrics_key_prefix="sk ${x}"
        )


def test_the_hub_takes_the_key_only_as_an_ecs_secret(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    task = ecs.FargateTaskDefinition(stack, "Task")
    plaintext = "sk-0123456789"  # what a template must never hold
    with pytest.raises(ArgumentError, match="add_ecs_collector: parameter 'metrics_key'"):
        hub.add_ecs_collector(
            task,
            metrics_port=PORT,
            log_group=logs.LogGroup(stack, "Logs"),
            metrics_key=plaintext,  # type: ignore[arg-type]
        )
