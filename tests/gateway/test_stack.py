"""InferenceTiers-Gateway as synthesized: the properties that make it private, least-privilege and governed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template

from inference_tiers.litellm.config import LITELLM_IMAGE, LITELLM_VERSION
from inference_tiers.nag import InferenceChecks
from tests.dependency_closure import _attached_to, _network, references
from tests.harness import TierBuild, build_tier, nag_findings
from tests.hyperpod.support import depends_on

STACK = "InferenceTiers-Gateway"


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> Template:
    return tier_build("gateway").template(STACK)


def resources(template: Template, kind: str) -> dict[str, Any]:
    return dict(template.find_resources(kind))


def only(template: Template, kind: str) -> dict[str, Any]:
    found = list(resources(template, kind).values())
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return dict(found[0]["Properties"])


def container(template: Template) -> dict[str, Any]:
    definitions = only(template, "AWS::ECS::TaskDefinition")["ContainerDefinitions"]
    assert len(definitions) == 1
    return dict(definitions[0])


def environment(template: Template) -> dict[str, Any]:
    return {e["Name"]: e["Value"] for e in container(template)["Environment"]}


def rendered_config(template: Template) -> dict[str, Any]:
    """The config the container receives, with deploy-time values shown as their CloudFormation intrinsic."""
    value = environment(template)["LITELLM_CONFIG_YAML"]
    if isinstance(value, str):
        return dict(json.loads(value))
    parts = value["Fn::Join"][1]
    # Each intrinsic becomes its JSON text inside the string it sits in (escaped, so the whole still parses).
    text = "".join(
        p if isinstance(p, str) else json.dumps(json.dumps(p, sort_keys=True))[1:-1] for p in parts
    )
    return dict(json.loads(text))


def statements(template: Template, role_fragment: str) -> list[dict[str, Any]]:
    found = [
        s
        for logical_id, policy in resources(template, "AWS::IAM::Policy").items()
        if role_fragment in logical_id
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert found, f"no policy for {role_fragment}"
    return found


def test_the_proxy_runs_two_tasks_in_private_subnets_with_rollback(template: Template) -> None:
    service = only(template, "AWS::ECS::Service")
    assert service["DesiredCount"] >= 2
    assert service["LaunchType"] == "FARGATE"
    assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"
    subnets = service["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert len(subnets) == 2 and all("PrivateSubnet" in s["Ref"] for s in subnets)
    assert service["DeploymentConfiguration"]["DeploymentCircuitBreaker"] == {
        "Enable": True,
        "Rollback": True,
    }
    assert service["DeploymentConfiguration"]["MinimumHealthyPercent"] == 100


def test_the_image_is_the_pinned_release_by_digest(template: Template) -> None:
    image = container(template)["Image"]
    assert image == LITELLM_IMAGE
    assert f":v{LITELLM_VERSION}@sha256:" in image


def test_secrets_come_from_secrets_manager_and_never_from_the_environment(template: Template) -> None:
    secrets = {s["Name"] for s in container(template)["Secrets"]}
    assert secrets == {"LITELLM_MASTER_KEY", "LITELLM_SALT_KEY", "DATABASE_PASSWORD", "REDIS_PASSWORD"}
    env = environment(template)
    assert not secrets & set(env)
    config = json.dumps(rendered_config(template))
    assert "os.environ/LITELLM_MASTER_KEY" in config
    assert "aws_access_key_id" not in config and "aws_secret_access_key" not in config


def test_serving_tasks_never_migrate_and_a_custom_resource_does_once_per_task_definition(
    template: Template,
) -> None:
    env = environment(template)
    assert env["DISABLE_SCHEMA_UPDATE"] == "true"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    migration = only(template, "Custom::LiteLLMMigration")
    assert migration["TaskDefinitionArn"]["Ref"].startswith("GatewayTaskDefinition")
    assert "--skip_server_startup" in migration["MigrateCommand"]
    assert any("CREATE DATABASE" in q for q in migration["Queries"])
    service_id = next(iter(resources(template, "AWS::ECS::Service")))
    migration_id = next(iter(resources(template, "Custom::LiteLLMMigration")))
    assert migration_id in template.to_json()["Resources"][service_id]["DependsOn"]


def test_the_migration_waits_for_the_aurora_writer_and_the_nat_routes(template: Template) -> None:
    """W3: the handler's first Data API call needs an available writer ("DatabaseNotFoundException: The DB
    cluster doesn't have a DB instance", botocore rds-data 2018-08-01), and the migration task pulls the image
    from ghcr.io through the private subnets' default routes to the NAT gateways."""
    whole = template.to_json()
    closure = depends_on(whole, next(iter(resources(template, "Custom::LiteLLMMigration"))))
    instances = set(resources(template, "AWS::RDS::DBInstance"))
    assert any("Writer" in i for i in instances) and instances <= closure, sorted(instances - closure)
    assert set(resources(template, "AWS::RDS::DBCluster")) <= closure
    subnets = set(only(template, "Custom::LiteLLMMigration")["Subnets"][i]["Ref"] for i in range(2))
    nat_routes = {
        logical_id
        for logical_id, route in resources(template, "AWS::EC2::Route").items()
        if "NatGatewayId" in route["Properties"]
        and any(
            association["Properties"]["SubnetId"]["Ref"] in subnets
            and association["Properties"]["RouteTableId"] == route["Properties"]["RouteTableId"]
            for association in resources(template, "AWS::EC2::SubnetRouteTableAssociation").values()
        )
    }
    assert len(nat_routes) == len(subnets) and nat_routes <= closure, sorted(nat_routes - closure)


def test_the_migration_directly_waits_for_its_tasks_role_policies_and_nat_routes(template: Template) -> None:
    """G2, G3: the migration's RunTask starts the task definition as its execution role (image pull, logs, the
    four ECS secrets: GetSecretValue and kms:Decrypt in its DefaultPolicy, or the task stops with
    ResourceInitializationError) and its task role, in the private subnets whose default routes reach ghcr.io
    through NAT. Each is a DependsOn of the migration itself, not only reached through something else: the routes
    are also in its closure through the Aurora instances today (CDK makes them wait for internet connectivity),
    which a change of the database's subnets would undo."""
    whole = template.to_json()["Resources"]
    (migration,) = resources(template, "Custom::LiteLLMMigration")
    direct = set(whole[migration]["DependsOn"])
    task = only(template, "AWS::ECS::TaskDefinition")
    roles = references([task["TaskRoleArn"], task["ExecutionRoleArn"]])
    policies = {p for role in roles for p in _attached_to(whole, "AWS::IAM::Policy", "Roles", role)}
    assert len(roles) == len(policies) == 2, (roles, policies)
    routes = {
        name
        for subnet in references(whole[migration]["Properties"]["Subnets"])
        for name in _network(whole, subnet)
        if whole[name]["Type"] == "AWS::EC2::Route"
    }
    assert len(routes) == 2 and all("NatGatewayId" in whole[r]["Properties"] for r in routes), routes
    assert policies | routes <= direct, sorted((policies | routes) - direct)


def test_no_function_reserves_concurrency(template: Template) -> None:
    """W7: new accounts have 10 concurrent executions and Lambda keeps 10 unreserved, so any reservation fails
    there ("decreases account's UnreservedConcurrentExecution below its minimum value of [10]")."""
    functions = resources(template, "AWS::Lambda::Function")
    assert any("Migration" in logical_id for logical_id in functions)
    reserved = {
        i: f["Properties"]["ReservedConcurrentExecutions"]
        for i, f in functions.items()
        if "ReservedConcurrentExecutions" in f["Properties"]
    }
    assert reserved == {}


def test_the_container_health_check_uses_python_on_the_liveness_route(template: Template) -> None:
    check = container(template)["HealthCheck"]["Command"]
    assert check[0] == "CMD-SHELL" and "python3 -c" in check[1] and "/health/liveliness" in check[1]
    group = only(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group["HealthCheckPath"] == "/health/readiness"


def test_every_bedrock_model_carries_the_guardrail_and_the_role_enforces_it(template: Template) -> None:
    models = rendered_config(template)["model_list"]
    bedrock = [m for m in models if m["litellm_params"]["model"].startswith("bedrock/")]
    assert bedrock
    for model in bedrock:
        guardrail = model["litellm_params"]["guardrailConfig"]
        assert '"Ref": "GuardrailArn"' in guardrail["guardrailIdentifier"]
        assert '"Ref": "GuardrailVersion"' in guardrail["guardrailVersion"]
    invoke = [s for s in statements(template, "GatewayTaskRole") if "bedrock:InvokeModel" in s["Action"]]
    allows = [s for s in invoke if s["Effect"] == "Allow"]
    denies = [s for s in invoke if s["Effect"] == "Deny"]
    assert allows and len(denies) == 1
    for statement in allows:
        assert "bedrock:GuardrailIdentifier" in statement["Condition"]["StringEquals"]
    assert "bedrock:GuardrailIdentifier" in denies[0]["Condition"]["StringNotEquals"]


def test_the_task_role_may_do_nothing_but_its_models(template: Template) -> None:
    actions = {
        action
        for s in statements(template, "GatewayTaskRole")
        for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "bedrock:ApplyGuardrail",
        "kms:Decrypt",
    }
    for statement in statements(template, "GatewayTaskRole"):
        assert statement["Resource"] != "*"


def test_the_load_balancer_is_internal_https_and_forwards_only_api_routes(template: Template) -> None:
    assert only(template, "AWS::ElasticLoadBalancingV2::LoadBalancer")["Scheme"] == "internal"
    listeners = resources(template, "AWS::ElasticLoadBalancingV2::Listener")
    by_port = {x["Properties"]["Port"]: x["Properties"] for x in listeners.values()}
    assert set(by_port) == {443, 8443}
    for listener in by_port.values():
        assert listener["Protocol"] == "HTTPS"
        assert listener["Certificates"] == [{"CertificateArn": {"Ref": "CertificateArn"}}]
    api = by_port[443]
    assert api["DefaultActions"][0]["Type"] == "fixed-response"
    api_id = next(k for k, v in listeners.items() if v["Properties"]["Port"] == 443)
    admin_id = next(k for k, v in listeners.items() if v["Properties"]["Port"] == 8443)
    rules = resources(template, "AWS::ElasticLoadBalancingV2::ListenerRule").values()
    api_paths = [
        path
        for rule in rules
        if rule["Properties"]["ListenerArn"] == {"Ref": api_id}
        for condition in rule["Properties"]["Conditions"]
        for path in condition.get("PathPatternConfig", {}).get("Values", [])
    ]
    assert "/v1/*" in api_paths and "/health/readiness" in api_paths
    assert not [p for p in api_paths if p.startswith(("/metrics", "/key", "/team", "/user", "/spend", "/ui"))]
    admin_rules = [r["Properties"] for r in rules if r["Properties"]["ListenerArn"] == {"Ref": admin_id}]
    assert len(admin_rules) == 1
    assert admin_rules[0]["Actions"][0]["FixedResponseConfig"]["StatusCode"] == "403"
    assert admin_rules[0]["Conditions"][0]["PathPatternConfig"]["Values"] == ["/metrics", "/metrics/*"]
    config = rendered_config(template)
    assert config["litellm_settings"]["require_auth_for_metrics_endpoint"] is True


def test_the_idle_timeout_outlasts_the_proxy_timeout(template: Template) -> None:
    attributes = {
        a["Key"]: a["Value"]
        for a in only(template, "AWS::ElasticLoadBalancingV2::LoadBalancer")["LoadBalancerAttributes"]
    }
    timeout = rendered_config(template)["litellm_settings"]["request_timeout"]
    assert int(attributes["idle_timeout.timeout_seconds"]) > timeout


def test_autoscaling_tracks_requests_per_target(template: Template) -> None:
    policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    spec = policy["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"]
    assert spec["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["MinCapacity"] >= 2


def test_aurora_is_serverless_v2_encrypted_private_retained_and_rotated(template: Template) -> None:
    cluster = next(iter(resources(template, "AWS::RDS::DBCluster").values()))
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    assert props["StorageEncrypted"] is True and "KmsKeyId" in props
    assert props["EnableHttpEndpoint"] is True  # the Data API the migration resource provisions through
    assert props["DeletionProtection"] is True and cluster["DeletionPolicy"] == "Retain"
    assert props["BackupRetentionPeriod"] >= 7
    instances = resources(template, "AWS::RDS::DBInstance").values()
    assert len(instances) == 2
    assert all(i["Properties"]["DBInstanceClass"] == "db.serverless" for i in instances)
    assert all(i["Properties"]["PubliclyAccessible"] is False for i in instances)
    assert len(resources(template, "AWS::SecretsManager::RotationSchedule")) == 2


def test_valkey_is_a_tls_auth_replication_group_with_cluster_mode_disabled(template: Template) -> None:
    group = only(template, "AWS::ElastiCache::ReplicationGroup")
    assert group["Engine"] == "valkey" and group["ClusterMode"] == "disabled"
    assert group["TransitEncryptionEnabled"] is True and group["TransitEncryptionMode"] == "required"
    assert group["AtRestEncryptionEnabled"] is True and "KmsKeyId" in group
    assert "resolve:secretsmanager" in json.dumps(group["AuthToken"])
    assert group["NumCacheClusters"] == 2 and group["MultiAZEnabled"] is True
    assert environment(template)["REDIS_SSL"] == "True"


def test_request_logs_are_encrypted_and_retained(template: Template) -> None:
    log_driver = container(template)["LogConfiguration"]
    group_id = log_driver["Options"]["awslogs-group"]["Ref"]
    group = template.to_json()["Resources"][group_id]
    assert "KmsKeyId" in group["Properties"] and group["DeletionPolicy"] == "Retain"


def test_alarms_cover_errors_latency_connections_and_budgets(template: Template) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    described = " | ".join(a["Properties"]["AlarmDescription"] for a in alarms)
    for topic in ("5xx", "p99", "connections", "budget"):
        assert topic in described
    metric_filter = only(template, "AWS::Logs::MetricFilter")
    assert "Budget has been exceeded" in metric_filter["FilterPattern"]
    assert all(a["Properties"]["AlarmActions"] for a in alarms)


def test_with_the_bedrock_tier_the_gateway_takes_its_guardrail_and_profile() -> None:
    build = build_tier("bedrock,gateway")
    template = build.template(STACK)
    assert "GuardrailArn" not in template.to_json().get("Parameters", {})
    guardrail = rendered_config(template)["model_list"][0]["litellm_params"]["guardrailConfig"]
    assert "Fn::ImportValue" in guardrail["guardrailIdentifier"]
    params = rendered_config(template)["model_list"][0]["litellm_params"]
    assert "Fn::ImportValue" in params["model_id"]  # the bedrock stack's application inference profile


def test_with_the_sagemaker_tier_the_role_may_invoke_exactly_its_endpoint() -> None:
    # create_endpoint=true: the sagemaker defaults build no endpoint until its weights are uploaded.
    build = build_tier("sagemaker,gateway", **{"sagemaker.create_endpoint": "true"})
    template = build.template(STACK)
    sagemaker = [
        s for s in statements(template, "GatewayTaskRole") if "sagemaker:InvokeEndpoint" in s["Action"]
    ]
    assert len(sagemaker) == 1 and sagemaker[0]["Action"] == "sagemaker:InvokeEndpoint"
    assert ":endpoint/" in json.dumps(sagemaker[0]["Resource"])
    names = [m["model_name"] for m in rendered_config(template)["model_list"]]
    assert names == ["nova-lite", "qwen3-8b"]


def test_plain_http_only_when_asked_and_then_loudly() -> None:
    build = build_tier("gateway", **{"gateway.allow_http": "true"})
    stack = next(s for s in build.stacks if s.stack_name == STACK)
    ports = {
        x["Properties"]["Port"]: x["Properties"]["Protocol"]
        for x in Template.from_stack(stack).find_resources("AWS::ElasticLoadBalancingV2::Listener").values()
    }
    assert ports == {80: "HTTP", 8080: "HTTP"}
    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp("PLAIN HTTP"))
    # The tier acknowledges the inference pack's HTTPS rule (GW2) for this test-only opt-in, and nothing else.
    assert nag_findings(build.app, InferenceChecks()) == []


def test_context_settings_replace_the_stack_parameters() -> None:
    build = build_tier(
        "gateway",
        **{
            "gateway.certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/"
            "12345678-1234-1234-1234-123456789012",
            "gateway.guardrail_arn": "arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123def456",
            "gateway.guardrail_version": "4",
            "gateway.guardrail_kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/"
            "12345678-1234-1234-1234-123456789012",
            "gateway.openai_models": '{"llama-pd": {"base_url": "http://10.1.0.10:30000/v1", '
            '"served_model": "meta-llama/Llama-3.3-70B-Instruct"}}',
            "gateway.fallbacks": '{"llama-pd": ["nova-lite"]}',
        },
    )
    template = build.template(STACK)
    assert set(template.to_json().get("Parameters", {})) == {"BootstrapVersion"}
    config = rendered_config(template)
    assert config["model_list"][0]["litellm_params"]["guardrailConfig"]["guardrailVersion"] == "4"
    assert config["model_list"][1]["litellm_params"]["api_base"] == "http://10.1.0.10:30000/v1"
    fallback = [d for d in config["model_list"] if d["model_name"] == "llama-pd"]
    assert [d["litellm_params"]["order"] for d in fallback] == [1, 2]
    assert fallback[1]["litellm_params"] == {**config["model_list"][0]["litellm_params"], "order": 2}
