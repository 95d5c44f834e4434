"""Traces on the platform: LiteLLM exports its spans to an in-cluster OpenTelemetry collector (ADOT), which sends
them to AWS X-Ray. The proxy side runs for real: LiteLLM 1.104.0 with the environment the platform's chart values
give it and the tracing configuration, pointed at a loopback OTLP/HTTP receiver standing in for the collector.

Evidence: the collector's configuration is the gateway tier's ECS trace pipeline (otlp receiver, batch and
resourcedetection processors, awsxray exporter, health_check extension; aws-otel-collector v0.49.0 ships them),
listening on the pod's address; ``health_check`` takes ``endpoint`` (collector-contrib extension/
healthcheckextension config). LiteLLM reads ``OTEL_EXPORTER``/``OTEL_EXPORTER_OTLP_ENDPOINT`` and appends
``/v1/traces`` (litellm/integrations/opentelemetry.py, tests/gateway/test_trace_context.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aws_cdk as cdk
import kubernetes_validate
import pytest
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.platform.observability import PlatformObservability
from inference_tiers.k8s import litellm_chart, sandbox_tenancy, trace_collector
from inference_tiers.k8s.sandbox_tenancy import TENANT_LABEL
from inference_tiers.k8s.tenant_keys import gateway_network_policies
from inference_tiers.k8s.trace_collector import TraceCollector, collector_config, collector_objects
from inference_tiers.litellm.config import (
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    render_config,
    render_text,
)
from inference_tiers.nag import InferenceChecks
from inference_tiers.observability.collectors import OTLP_GRPC, OTLP_HTTP, ecs_collector_config
from tests.gateway.conftest import UPSTREAM_KEY
from tests.gateway.otlp import OtlpReceiver, require_exporter
from tests.gateway.proxy import run_proxy
from tests.gateway.stubs import StubBackend
from tests.gateway.test_trace_context import (
    MODEL,
    REQUEST_SPAN,
    chat_with_traceparent,
    exported_trace,
    new_traceparent,
)
from tests.harness import nag_findings
from tests.iam_policy import listed
from tests.platform.netpol import Cluster, Pod, allows
from tests.platform.tenant_keys_data import GATEWAY, TEAM_A, TENANCY

COLLECTOR = TraceCollector()
VPC = "10.0.0.0/16"


def _state() -> litellm_chart.GatewayState:
    return litellm_chart.GatewayState(
        database_host="db",
        database_port="5432",
        database_name="litellm",
        redis_host="cache",
        redis_port="6379",
    )


def _chart_env(trace_endpoint: str | None) -> dict[str, str]:
    config = render_config([OpenAICompatibleModel(name=MODEL, base_url="http://x/v1", served_model="m")])
    values = litellm_chart.chart_values(
        config,
        state=_state(),
        node_selector={"node-role": "core"},
        secret_provider_class="spc",
        trace_endpoint=trace_endpoint,
    )
    return {e["name"]: e["value"] for e in values["gateway"]["extraEnv"]}


@pytest.fixture(scope="module")
def proxy_with_platform_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, OtlpReceiver]]:
    require_exporter()
    with StubBackend() as stub, OtlpReceiver() as otlp:
        otel = {k: v for k, v in _chart_env(otlp.endpoint).items() if k.startswith("OTEL_")}
        config = render_config(
            [OpenAICompatibleModel(name=MODEL, base_url=f"{stub.url}/v1", served_model="m")],
            router=RouterOptions(num_retries=0),
            features=ProxyFeatures(database=False, redis=False, tracing=True),
        )
        env = {"GATEWAY_UPSTREAM_API_KEY": UPSTREAM_KEY, **otel, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with run_proxy(
            render_text(config), tmp_path_factory.mktemp("platform-traces"), extra_env=env
        ) as proxy:
            yield proxy, otlp


def test_the_chart_points_the_proxy_at_the_collector_only_with_traces() -> None:
    env = _chart_env(COLLECTOR.endpoint)
    assert env["OTEL_EXPORTER"] == "otlp_http"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.otel.svc.cluster.local:4318"
    assert not {k for k in _chart_env(None) if k.startswith("OTEL_")}


def test_the_proxy_with_the_platform_environment_exports_its_spans(
    proxy_with_platform_env: tuple[Any, OtlpReceiver],
) -> None:
    proxy, otlp = proxy_with_platform_env
    traceparent, trace_id, span_id = new_traceparent()
    assert chat_with_traceparent(proxy.url, traceparent)[1] == 200
    spans = exported_trace(otlp, trace_id, span_id)
    assert any(s.name == REQUEST_SPAN for s in spans)


def test_the_collector_runs_the_gateway_tiers_trace_pipeline_on_the_pods_address() -> None:
    config = collector_config("us-east-1")
    sidecar = ecs_collector_config(
        remote_write_url="https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/remote_write",
        region="us-east-1",
        metrics_port=4001,
    )
    assert config["service"]["pipelines"] == {"traces": sidecar["service"]["pipelines"]["traces"]}
    assert config["exporters"] == {"awsxray": {"region": "us-east-1"}}
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols == {"grpc": {"endpoint": "0.0.0.0:4317"}, "http": {"endpoint": "0.0.0.0:4318"}}
    assert sidecar["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == OTLP_HTTP  # loopback on ECS
    assert sidecar["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == OTLP_GRPC
    # No instance metadata from a pod (IMDSv2 hop limit 1): the env detector only.
    assert config["processors"]["resourcedetection"] == {"detectors": ["env"]}


def test_collector_objects_are_valid_and_probe_the_health_port_it_binds() -> None:
    objects = collector_objects("us-east-1", image="public.ecr.aws/x/collector:1", clients=GATEWAY)
    for manifest in objects:
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35", manifest["kind"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    health = collector_config("us-east-1")["extensions"]["health_check"]["endpoint"]
    assert health == f"0.0.0.0:{container['readinessProbe']['httpGet']['port']}"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == trace_collector.SERVICE_ACCOUNT
    service = next(o for o in objects if o["kind"] == "Service")
    names = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= names
    assert COLLECTOR.port in {p["port"] for p in service["spec"]["ports"]}


# --- who may send spans ------------------------------------------------------------------------------------

PROXY = Pod(GATEWAY.namespace, dict(GATEWAY.pod_labels), "10.0.20.10")
COLLECTOR_POD = Pod(trace_collector.NAMESPACE, COLLECTOR.pod_labels, "10.0.20.30")
SANDBOX = Pod(TEAM_A.namespace, {TENANT_LABEL: TEAM_A.name}, "10.0.30.5")


def cluster(traces: bool = True) -> Cluster:
    namespaces = {
        GATEWAY.namespace: {},
        trace_collector.NAMESPACE: {},
        TEAM_A.namespace: {TENANT_LABEL: "team-a"},
        "default": {},
    }
    policies = [
        *sandbox_tenancy.network_policies(TEAM_A, TENANCY),
        *gateway_network_policies(
            GATEWAY,
            vpc_cidr=VPC,
            alb_cidrs=[VPC],
            scraper_cidrs=[VPC],
            trace_collector=COLLECTOR if traces else None,
        ),
        *(o for o in collector_objects("r", image="x/y:1", clients=GATEWAY) if o["kind"] == "NetworkPolicy"),
    ]
    return Cluster(namespaces, policies)


def test_only_the_proxies_reach_the_collector_and_only_its_otlp_ports() -> None:
    assert allows(cluster(), PROXY, COLLECTOR_POD, 4318)
    assert not allows(
        cluster(traces=False), PROXY, COLLECTOR_POD, 4318
    )  # the proxy's egress is opened for it
    assert not allows(cluster(), PROXY, COLLECTOR_POD, 13133)
    assert not allows(cluster(), SANDBOX, COLLECTOR_POD, 4318)
    assert not allows(cluster(), Pod("default", {"app": "x"}, "10.0.40.4"), COLLECTOR_POD, 4318)


# --- the construct -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, PlatformObservability]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("traces")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(account="111122223333", region="us-east-1"))
    eks = EksCluster(stack, "Eks")
    observability = PlatformObservability(
        stack, "Observability", cluster=eks.cluster, gateway=GATEWAY, grafana=False, traces=True
    )
    return stack, observability


def test_the_collector_may_only_write_to_x_ray_with_its_pod_identity(
    traced: tuple[cdk.Stack, PlatformObservability],
) -> None:
    stack, observability = traced
    resources = cdk.assertions.Template.from_stack(stack).to_json()["Resources"]
    assert observability.trace_identity is not None
    role = stack.get_logical_id(observability.trace_identity.role.node.default_child)  # type: ignore[arg-type]
    actions = {
        action
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        for action in listed(s["Action"])
    }
    assert actions == {
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
    }
    (association,) = (r for r in resources.values() if r["Type"] == "AWS::EKS::PodIdentityAssociation")
    assert association["Properties"]["Namespace"] == trace_collector.NAMESPACE
    assert association["Properties"]["ServiceAccount"] == trace_collector.SERVICE_ACCOUNT


def test_the_traced_construct_is_nag_clean(traced: tuple[cdk.Stack, PlatformObservability]) -> None:
    stack, _ = traced
    assert nag_findings(stack, AwsSolutionsChecks()) == []
    assert nag_findings(stack, InferenceChecks()) == []
