"""Construct API strictness: every misuse is an ArgumentError naming the class and parameter; deploy-time
values (tokens) are accepted where they make sense and reach the template unparsed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from inference_tiers.constructs.bedrock import CrossRegionProfile, Geography, Guardrail, ImportedGuardrail
from inference_tiers.constructs.gateway import (
    BedrockTarget,
    GatewayCache,
    GatewayDatabase,
    GatewayMonitoring,
    LiteLLMGateway,
    OpenAICompatibleTarget,
    SageMakerTarget,
)
from inference_tiers.constructs.gateway.proxy import FARGATE_MEMORY_MIB
from inference_tiers.litellm.config import (
    COOLDOWN_ERROR_CLASSES,
    FAILOVER_RETRY_POLICY,
    BedrockModel,
    GuardrailConfig,
    OpenAICompatibleModel,
    ProxyFeatures,
    RouterOptions,
    SageMakerModel,
    proxy_command,
    render_config,
    tracing_environment,
)
from inference_tiers.litellm.database import bootstrap_queries
from inference_tiers.validation import ArgumentError
from tests.bedrock.test_guardrail_contract import (
    CONSUMER,
    PARAMETER,
    POLICIES,
    PRODUCER,
    _exports,
    _imports,
    _ssm_reads,
    _versions,
    update_refusals,
)
from tests.gateway.test_stack import rendered_config

GUARDRAIL = ImportedGuardrail(
    guardrail_arn="arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", guardrail_version="2"
)
PROFILE = CrossRegionProfile(model_id="amazon.nova-2-lite-v1:0", geography=Geography.US)
CONFIG = GuardrailConfig("arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", "2")
URL = "http://10.1.0.5:30000/v1"


def bedrock() -> BedrockTarget:
    return BedrockTarget("nova", PROFILE, GUARDRAIL)


def make_stack(tmp_path: Any) -> tuple[cdk.Stack, ec2.Vpc]:
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Test")
    return stack, ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)


def certificate(stack: cdk.Stack) -> acm.ICertificate:
    return acm.Certificate.from_certificate_arn(
        stack, "Cert", "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    )


def expect(owner: str, param: str, call: Any) -> None:
    with pytest.raises(ArgumentError, match=rf"^{owner}: parameter '{re.escape(param)}"):
        call()


# --- props classes and pure functions: (owner, parameter, call) --------------------------------------------------
PURE_MISUSE = [
    ("ProxyFeatures", "tracing", lambda: ProxyFeatures(tracing="yes")),  # type: ignore[arg-type]
    ("tracing_environment", "endpoint", lambda: tracing_environment("127.0.0.1:4318")),
    ("GuardrailConfig", "guardrail_arn", lambda: GuardrailConfig("gr-123", "1")),
    ("GuardrailConfig", "version", lambda: GuardrailConfig(CONFIG.guardrail_arn, "DRAFT")),
    ("GuardrailConfig", "version", lambda: GuardrailConfig(CONFIG.guardrail_arn, 1)),
    ("GuardrailConfig", "guardrail_arn", lambda: GuardrailConfig(None, "1")),
    ("GuardrailConfig", "version", lambda: GuardrailConfig(CONFIG.guardrail_arn, "0")),
    (
        "BedrockModel",
        "name",
        lambda: BedrockModel("has space", "us.amazon.nova-2-lite-v1:0", CONFIG, "us-east-1"),
    ),
    ("BedrockModel", "model_id", lambda: BedrockModel("m", "", CONFIG, "us-east-1")),
    ("BedrockModel", "guardrail", lambda: BedrockModel("m", "us.a.b", "arn:guardrail", "us-east-1")),
    ("BedrockModel", "region", lambda: BedrockModel("m", "us.a.b", CONFIG, "useast1")),
    (
        "BedrockModel",
        "base_model_id",
        lambda: BedrockModel(
            "m",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x1",
            CONFIG,
            "us-east-1",
        ),
    ),
    (
        "BedrockModel",
        "runtime_endpoint",
        lambda: BedrockModel("m", "us.a.b", CONFIG, "us-east-1", None, "ftp://x"),
    ),
    ("SageMakerModel", "endpoint_name", lambda: SageMakerModel("m", "bad_name", "us-east-1")),
    ("SageMakerModel", "region", lambda: SageMakerModel("m", "ep", "")),
    ("SageMakerModel", "inference_component", lambda: SageMakerModel("m", "ep", "us-east-1", "ic/1")),
    ("SageMakerModel", "name", lambda: SageMakerModel("", "ep", "us-east-1")),
    (
        "SageMakerModel",
        "runtime_url",
        lambda: SageMakerModel("m", "ep", "us-east-1", None, None, "localhost"),
    ),
    ("OpenAICompatibleModel", "base_url", lambda: OpenAICompatibleModel("m", "10.0.0.1:8000", "llama")),
    ("OpenAICompatibleModel", "served_model", lambda: OpenAICompatibleModel("m", URL, "")),
    ("OpenAICompatibleModel", "api_key_env", lambda: OpenAICompatibleModel("m", URL, "llama", "lower")),
    ("OpenAICompatibleModel", "name", lambda: OpenAICompatibleModel(["m"], URL, "llama")),
    ("OpenAICompatibleModel", "served_model", lambda: OpenAICompatibleModel("m", URL, 7)),
    ("RouterOptions", "request_timeout_seconds", lambda: RouterOptions(request_timeout_seconds=0)),
    ("RouterOptions", "request_timeout_seconds", lambda: RouterOptions(request_timeout_seconds="600")),
    ("RouterOptions", "num_retries", lambda: RouterOptions(num_retries=-1)),
    ("RouterOptions", "fallbacks", lambda: RouterOptions(fallbacks={"a": "b"})),
    ("RouterOptions", "cooldown_seconds", lambda: RouterOptions(cooldown_seconds=True)),
    ("render_config", "models", lambda: render_config([])),
    ("render_config", "models", lambda: render_config(OpenAICompatibleModel("m", URL, "x"))),
    ("render_config", "models[0]", lambda: render_config(["nova"])),
    (
        "render_config",
        "models[1].name",
        lambda: render_config([OpenAICompatibleModel("m", URL, "x"), OpenAICompatibleModel("m", URL, "y")]),
    ),
    (
        "render_config",
        "router.fallbacks",
        lambda: render_config(
            [OpenAICompatibleModel("m", URL, "x")], router=RouterOptions(fallbacks={"m": ["z"]})
        ),
    ),
    (
        "render_config",
        "router.fallbacks",
        lambda: render_config(
            [OpenAICompatibleModel("m", URL, "x")], router=RouterOptions(fallbacks={"m": ["m"]})
        ),
    ),
    (
        "render_config",
        "router.fallbacks.m",
        lambda: render_config(
            [OpenAICompatibleModel("m", URL, "x"), OpenAICompatibleModel("n", URL, "y")],
            router=RouterOptions(fallbacks={"m": ["n"]}, requests_per_minute={"n": 60}),
        ),
    ),
    (
        "render_config",
        "router.fallbacks.nova",
        lambda: render_config(
            [BedrockModel("nova", "us.a.b", CONFIG, "us-east-1"), OpenAICompatibleModel("m", URL, "x")],
            router=RouterOptions(fallbacks={"nova": ["m"]}),
        ),
    ),
    ("RouterOptions", "allow_unguarded_fallbacks", lambda: RouterOptions(allow_unguarded_fallbacks="yes")),
    ("proxy_command", "workers", lambda: proxy_command(workers=0)),
    ("proxy_command", "port", lambda: proxy_command(workers=1, port=80)),
    ("proxy_command", "config_path", lambda: proxy_command(workers=1, config_path="relative.yaml")),
    (
        "bootstrap_queries",
        "username",
        lambda: bootstrap_queries(username="Li-te", database="x", password_placeholder=":password"),
    ),
    (
        "bootstrap_queries",
        "database",
        lambda: bootstrap_queries(username="x", database="1db", password_placeholder=":password"),
    ),
    (
        "bootstrap_queries",
        "password_placeholder",
        lambda: bootstrap_queries(username="x", database="y", password_placeholder="'pw'"),
    ),
    ("BedrockTarget", "name", lambda: BedrockTarget("", PROFILE, GUARDRAIL)),
    ("BedrockTarget", "model", lambda: BedrockTarget("n", "us.amazon.nova-2-lite-v1:0", GUARDRAIL)),
    ("BedrockTarget", "guardrail", lambda: BedrockTarget("n", PROFILE, GUARDRAIL.guardrail_arn)),
    ("BedrockTarget", "guardrail", lambda: BedrockTarget("n", PROFILE, None)),
    ("BedrockTarget", "base_model_id", lambda: BedrockTarget("n", PROFILE, GUARDRAIL, base_model_id=5)),
    ("SageMakerTarget", "name", lambda: SageMakerTarget("a b", "ep")),
    ("SageMakerModel", "endpoint_name", lambda: SageMakerTarget("n", "ep_1")),
    ("SageMakerModel", "endpoint_name", lambda: SageMakerTarget("n", None)),
    ("SageMakerModel", "inference_component", lambda: SageMakerTarget("n", "ep", inference_component="")),
    ("SageMakerModel", "served_model", lambda: SageMakerTarget("n", "ep", served_model=["x"])),
    ("OpenAICompatibleTarget", "name", lambda: OpenAICompatibleTarget("", URL, "m")),
    ("OpenAICompatibleModel", "base_url", lambda: OpenAICompatibleTarget("n", "not a url", "m")),
    ("OpenAICompatibleModel", "base_url", lambda: OpenAICompatibleTarget("n", None, "m")),
    ("OpenAICompatibleModel", "served_model", lambda: OpenAICompatibleTarget("n", URL, None)),
    ("OpenAICompatibleModel", "served_model", lambda: OpenAICompatibleTarget("n", URL, "x" * 300)),
]


@pytest.mark.parametrize(("owner", "param", "call"), PURE_MISUSE)
def test_props_misuse_is_an_argument_error_naming_the_parameter(owner: str, param: str, call: Any) -> None:
    expect(owner, param, call)


def test_every_props_class_has_at_least_five_misuse_cases() -> None:
    owners = [owner for owner, _, _ in PURE_MISUSE]
    for owner in (
        "GuardrailConfig",
        "BedrockModel",
        "SageMakerModel",
        "OpenAICompatibleModel",
        "RouterOptions",
        "render_config",
        "BedrockTarget",
    ):
        assert owners.count(owner) >= 5, owner


# --- constructs: (owner, parameter, keyword overrides) --------------------------------------------------------------
GATEWAY_MISUSE: list[tuple[str, dict[str, Any]]] = [
    ("vpc", {"vpc": "vpc-0123456789abcdef0"}),
    ("models", {"models": []}),
    ("models", {"models": bedrock()}),
    ("models[0]", {"models": ["nova"]}),
    ("certificate", {"certificate": None}),
    ("certificate", {"certificate": "arn:aws:acm:us-east-1:123456789012:certificate/x"}),
    ("allow_http", {"allow_http": "yes"}),
    ("domain_name", {"domain_name": "Not A Name"}),
    ("client_cidrs", {"client_cidrs": "10.0.0.0/16"}),
    ("client_cidrs[0]", {"client_cidrs": ["0.0.0.0/0"]}),
    ("admin_cidrs", {"admin_cidrs": []}),
    ("image", {"image": "ghcr.io/berriai/litellm-database:v1.104.0"}),
    ("image", {"image": "ghcr.io/berriai/litellm-database:v1.83.0@sha256:" + "a" * 64}),
    ("desired_count", {"desired_count": 1}),
    ("desired_count", {"desired_count": "2"}),
    ("max_count", {"desired_count": 4, "max_count": 3}),
    ("cpu", {"cpu": 3000}),
    # Fargate's own table, not a ratio: not a whole step (outside each cpu's range: test_memory_one_step_outside...)
    ("memory_mib", {"cpu": 4096, "memory_mib": 9000}),
    ("memory_mib", {"cpu": 8192, "memory_mib": 18432}),
    ("workers", {"cpu": 1024, "memory_mib": 2048, "workers": 8}),
    ("request_logging", {"request_logging": "on"}),
    ("router", {"router": {"num_retries": 1}}),
    ("encryption_key", {"encryption_key": "alias/gateway"}),
    ("upstream_api_key", {"upstream_api_key": "arn:aws:secretsmanager:us-east-1:123456789012:secret:x"}),
    ("database_capacity", {"database_capacity": (0.5,)}),
    ("database_capacity[0]", {"database_capacity": (0, 8)}),
]


@pytest.mark.parametrize(("param", "overrides"), GATEWAY_MISUSE)
def test_gateway_misuse_is_an_argument_error(tmp_path: Any, param: str, overrides: dict[str, Any]) -> None:
    stack, vpc = make_stack(tmp_path)
    props: dict[str, Any] = {
        "vpc": vpc,
        "models": [bedrock()],
        "certificate": certificate(stack),
        **overrides,
    }
    expect("LiteLLMGateway", param, lambda: LiteLLMGateway(stack, "Gateway", **props))


def documented_fargate_sizes() -> dict[int, list[int]]:
    """CPU units -> the task memory (MiB) Fargate accepts, from the vendored table of the ECS developer guide
    (tests/data/gateway/SOURCE.md), in its own words: a list of sizes or "Between A GB and B GB in C GB
    increments"."""
    sizes = {}
    for row in FARGATE_TABLE.read_text().splitlines()[2:]:
        cpu, memory, _ = (cell.strip() for cell in row.strip("|").split("|"))
        span = re.fullmatch(r"Between (\d+) GB and (\d+) GB in (\d+) GB increments", memory)
        if span:
            low, high, step = (int(n) * 1024 for n in span.groups())
            sizes[int(cpu.split()[0])] = list(range(low, high + 1, step))
        else:
            sizes[int(cpu.split()[0])] = [
                int(n) * (1024 if unit == "GB" else 1) for n, unit in re.findall(r"(\d+) (GB|MiB)", memory)
            ]
    return sizes


FARGATE_TABLE = Path(__file__).parents[1] / "data" / "gateway" / "fargate-task-sizes.md"
DOCUMENTED = documented_fargate_sizes()


def test_the_fargate_table_is_the_documented_one() -> None:
    """The gateway takes 1 to 16 vCPU (cpu 1024-16384), each with exactly the memory sizes the ECS developer
    guide lists."""
    assert {cpu: list(sizes) for cpu, sizes in FARGATE_MEMORY_MIB.items()} == {
        cpu: sizes for cpu, sizes in DOCUMENTED.items() if cpu >= 1024
    }


@pytest.mark.parametrize(
    ("cpu", "memory_mib"),
    [
        (cpu, memory)
        for cpu, sizes in DOCUMENTED.items()
        if cpu >= 1024
        for memory in (2 * sizes[0] - sizes[1], 2 * sizes[-1] - sizes[-2])
    ],
)
def test_memory_one_step_outside_fargates_range_for_each_cpu_is_refused(
    tmp_path: Any, cpu: int, memory_mib: int
) -> None:
    stack, vpc = make_stack(tmp_path)
    expect(
        "LiteLLMGateway",
        "memory_mib",
        lambda: LiteLLMGateway(
            stack,
            "Gateway",
            vpc=vpc,
            models=[bedrock()],
            certificate=certificate(stack),
            cpu=cpu,
            memory_mib=memory_mib,
            workers=1,
        ),
    )


def test_http_and_a_certificate_together_is_a_mistake(tmp_path: Any) -> None:
    stack, vpc = make_stack(tmp_path)
    expect(
        "LiteLLMGateway",
        "allow_http",
        lambda: LiteLLMGateway(
            stack, "G", vpc=vpc, models=[bedrock()], certificate=certificate(stack), allow_http=True
        ),
    )


STATE_MISUSE: list[tuple[type, str, dict[str, Any]]] = [
    (GatewayDatabase, "vpc", {"vpc": None}),
    (GatewayDatabase, "encryption_key", {"encryption_key": "arn:aws:kms:us-east-1:123456789012:key/x"}),
    (GatewayDatabase, "min_capacity", {"min_capacity": 0}),
    (GatewayDatabase, "max_capacity", {"min_capacity": 4, "max_capacity": 2}),
    (GatewayDatabase, "rotation", {"rotation": 30}),
    (GatewayDatabase, "rotation", {"rotation": cdk.Duration.days(400)}),
    (GatewayCache, "vpc", {"vpc": "vpc-1"}),
    (GatewayCache, "encryption_key", {"encryption_key": None}),
    (GatewayCache, "node_type", {"node_type": "t4g.small"}),
    (GatewayCache, "node_type", {"node_type": ["cache.t4g.small"]}),
    (GatewayCache, "engine_version", {"engine_version": "latest"}),
]


@pytest.mark.parametrize(("kind", "param", "overrides"), STATE_MISUSE)
def test_state_misuse_is_an_argument_error(
    tmp_path: Any, kind: type, param: str, overrides: dict[str, Any]
) -> None:
    stack, vpc = make_stack(tmp_path)
    props = {"vpc": vpc, "encryption_key": kms.Key(stack, "Key"), **overrides}
    expect(kind.__name__, param, lambda: kind(stack, "State", **props))


@pytest.fixture(scope="module")
def built_gateway(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, LiteLLMGateway]:
    """A gateway whose every external reference is a deploy-time value (CfnParameters)."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("tokens")))
    stack = cdk.Stack(app, "Tokens")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    param = lambda name: cdk.CfnParameter(stack, name).value_as_string  # noqa: E731
    guardrail = ImportedGuardrail(
        guardrail_arn=param("GuardrailArn"), guardrail_version=param("GuardrailVersion")
    )
    gateway = LiteLLMGateway(
        stack,
        "Gateway",
        vpc=vpc,
        models=[
            BedrockTarget("nova", PROFILE, guardrail),
            SageMakerTarget("sm", param("EndpointName"), inference_component=param("ComponentName")),
        ],
        certificate=acm.Certificate.from_certificate_arn(stack, "Cert", param("CertificateArn")),
        client_cidrs=[param("ClientCidr")],
    )
    return stack, gateway


def test_tokens_are_accepted_and_reach_the_template_unparsed(
    built_gateway: tuple[cdk.Stack, LiteLLMGateway],
) -> None:
    stack, _ = built_gateway
    text = json.dumps(Template.from_stack(stack).to_json())
    for name in (
        "GuardrailArn",
        "GuardrailVersion",
        "EndpointName",
        "ComponentName",
        "CertificateArn",
        "ClientCidr",
    ):
        assert f'{{"Ref": "{name}"}}' in text, name


def test_monitoring_misuse_is_an_argument_error(built_gateway: tuple[cdk.Stack, LiteLLMGateway]) -> None:
    stack, gateway = built_gateway
    cases: list[tuple[str, dict[str, Any]]] = [
        ("gateway", {"gateway": "arn:aws:elasticloadbalancing:..."}),
        ("error_rate_alarm_percent", {"error_rate_alarm_percent": 0}),
        ("latency_p99_alarm", {"latency_p99_alarm": 30000}),
        ("database_connections_alarm", {"database_connections_alarm": 0}),
        ("alarm_email", {"alarm_email": "nobody"}),
    ]
    for index, (param, overrides) in enumerate(cases):
        props = {"gateway": gateway, **overrides}
        expect("GatewayMonitoring", param, lambda p=props, i=index: GatewayMonitoring(stack, f"M{i}", **p))


def test_export_traces_turns_on_the_otel_callback_and_traceparent_forwarding(tmp_path: Any) -> None:
    stack, vpc = make_stack(tmp_path)
    model = OpenAICompatibleTarget("vllm", URL, "qwen")
    gateway = LiteLLMGateway(stack, "Gateway", vpc=vpc, models=[model], allow_http=True)
    untraced = gateway.config["litellm_settings"]
    assert untraced["callbacks"] == ["prometheus"]
    assert "forward_traceparent_to_llm_provider" not in untraced
    gateway.export_traces()
    (task,) = Template.from_stack(stack).find_resources("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert environment["OTEL_EXPORTER"] == "otlp_http"
    assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
    settings = json.loads(environment["LITELLM_CONFIG_YAML"])["litellm_settings"]
    assert settings["callbacks"] == ["prometheus", "otel"]
    assert settings["forward_traceparent_to_llm_provider"] is True


def test_a_guarded_model_falls_back_to_an_unguarded_one_only_when_allowed() -> None:
    models = [BedrockModel("nova", "us.a.b", CONFIG, "us-east-1"), OpenAICompatibleModel("m", URL, "x")]
    with pytest.raises(ArgumentError, match=r"guarded Bedrock models only \(not \['m'\]\)"):
        render_config(models, router=RouterOptions(fallbacks={"nova": ["m"]}))
    allowed = RouterOptions(fallbacks={"nova": ["m"]}, allow_unguarded_fallbacks=True)
    assert group(render_config(models, router=allowed), "nova") == [
        {**models[0].litellm_params(), "order": 1},
        {**models[1].litellm_params(), "order": 2},
    ]
    # the other way round keeps the guardrail: an unguarded model may fall back to a guarded one, whose
    # deployment in the unguarded model's group carries its guardrailConfig
    back = render_config(models, router=RouterOptions(fallbacks={"m": ["nova"]}))
    assert group(back, "m") == [
        {**models[1].litellm_params(), "order": 1},
        {**models[0].litellm_params(), "order": 2},
    ]
    assert group(back, "m")[1]["guardrailConfig"] == models[0].litellm_params()["guardrailConfig"]
    # a Bedrock model is priced by LiteLLM's cost map, never by its deployment's own (rate-less) entry
    assert all("base_model" not in d.get("model_info", {}) for d in back["model_list"])


def group(config: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The litellm_params of the deployments of model group ``name``, in the order they are tried."""
    found = [d for d in config["model_list"] if d["model_name"] == name]
    return [d["litellm_params"] for d in sorted(found, key=lambda d: d["litellm_params"].get("order", 0))]


def test_fallbacks_are_ordered_deployments_of_the_models_group_each_cooling_down() -> None:
    models = [OpenAICompatibleModel(n, URL, n) for n in ("a", "b", "c")]
    router = RouterOptions(fallbacks={"a": ["c", "b"]}, allowed_fails=4, cooldown_seconds=45)
    config = render_config(models, router=router)
    assert [p["model"] for p in group(config, "a")] == [
        models[i].litellm_params()["model"] for i in (0, 2, 1)
    ]
    assert [p["order"] for p in group(config, "a")] == [1, 2, 3]
    assert "fallbacks" not in config["router_settings"]  # no cross-group fallback: the group holds them
    assert group(config, "b") == [models[1].litellm_params()] and group(config, "c") == [
        models[2].litellm_params()
    ]
    cooldown = {
        "allowed_fails_policy": {f"{e}ErrorAllowedFails": 4 for e in COOLDOWN_ERROR_CLASSES},
        "cooldown_time": 45,
    }
    # b and c, self-hosted and fallbacks, are priced by each deployment's own entry (id "<group>#<order>",
    # unique), not by the shared one LiteLLM leaves without rates (tests/gateway/test_scale.py)
    priced_by_id = lambda id_: {"id": id_, "base_model": id_}  # noqa: E731
    assert [d.get("model_info") for d in config["model_list"]] == [
        cooldown,
        {**cooldown, **priced_by_id("a#2")},
        {**cooldown, **priced_by_id("a#3")},
        priced_by_id("b#1"),
        priced_by_id("c#1"),
    ]
    assert config["router_settings"]["model_group_retry_policy"] == {"a": FAILOVER_RETRY_POLICY}


def _guardrail_and_gateway_stacks(outdir: Path, policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A Guardrail with ``policy`` in one stack, passed as it is to a gateway's BedrockTarget in another."""
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []})
    safety, service = cdk.Stack(app, PRODUCER), cdk.Stack(app, CONSUMER)
    guardrail = Guardrail(safety, "Guardrail", **policy)
    vpc = ec2.Vpc(service, "Vpc", max_azs=2, nat_gateways=1)
    LiteLLMGateway(
        service, "Gateway", vpc=vpc, models=[BedrockTarget("nova", PROFILE, guardrail)], allow_http=True
    )
    return {s.stack_name: Template.from_stack(s).to_json() for s in (safety, service)}


def test_a_guardrail_of_another_stack_reaches_the_gateway_by_its_version_parameter(tmp_path: Path) -> None:
    """The guardrail contract (tests/bedrock/test_guardrail_contract.py) for the gateway: the version in the
    rendered config and in the task role's policy is the guardrail's SSM parameter, read by CloudFormation at
    the gateway stack's deploy, so a policy change of the guardrail deletes no export the gateway imports."""
    deploys = {name: _guardrail_and_gateway_stacks(tmp_path / name, p) for name, p in POLICIES.items()}
    before, after = deploys["before"], deploys["after"]
    assert _versions(before[PRODUCER]) != _versions(after[PRODUCER])
    assert update_refusals(before[PRODUCER], before[CONSUMER], after[PRODUCER]) == []
    assert _ssm_reads(before[CONSUMER]) == _ssm_reads(after[CONSUMER]) == [PARAMETER]
    assert _imports(before[CONSUMER]) == _imports(after[CONSUMER])
    exported = _exports(after[PRODUCER])
    for imported in _imports(after[CONSUMER]):
        assert "GuardrailVersion" not in json.dumps(exported[imported]), imported
    (read,) = (k for k, p in after[CONSUMER]["Parameters"].items() if p.get("Default") == PARAMETER)
    config = rendered_config(Template.from_json(after[CONSUMER]))
    guardrail = config["model_list"][0]["litellm_params"]["guardrailConfig"]
    assert json.dumps({"Ref": read}, sort_keys=True) in guardrail["guardrailVersion"]
