"""PlatformGateway in a user's plain app: LiteLLM's chart on an EksCluster, its state, identity and secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from inference_tiers.constructs.bedrock import (
    CrossRegionProfile,
    Geography,
    ImportedGuardrail,
    ModelInvocationLogging,
)
from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.gateway import BedrockTarget
from inference_tiers.constructs.platform.gateway import CHART_TIMEOUT, PlatformGateway
from inference_tiers.k8s import litellm_chart
from inference_tiers.k8s.platform_names import GATEWAY_NAMESPACE
from tests.harness import FLAG_SETS, cdk_json_context, cfn_lint_errors, foreign_app_findings
from tests.misuse import assert_refused
from tests.platform.test_gateway_chart import CHART_DATA, secret_literals
from tests.sandbox.helpers import by_kind, helm_charts, manifests

GUARDRAIL = ImportedGuardrail(
    guardrail_arn="arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", guardrail_version="2"
)
MODELS = [
    BedrockTarget(
        "nova", CrossRegionProfile(model_id="amazon.nova-2-lite-v1:0", geography=Geography.US), GUARDRAIL
    )
]
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def compose(app: cdk.App, **overrides: Any) -> PlatformGateway:
    stack = cdk.Stack(app, "UserPlatform", env=cdk.Environment(account="123456789012", region="us-east-1"))
    eks = EksCluster(stack, "Eks")
    arguments: dict[str, Any] = {"cluster": eks.cluster, "vpc": eks.vpc, "models": MODELS, **overrides}
    return PlatformGateway(stack, "Gateway", **arguments)


def new_app(tmp_path: Path) -> cdk.App:
    return cdk.App(outdir=str(tmp_path), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    gateway = compose(new_app(tmp_path_factory.mktemp("cdk.out")), certificate_arn=CERTIFICATE)
    stack = cdk.Stack.of(gateway)
    return {"gateway": gateway, "stack": stack, "template": Template.from_stack(stack)}


def _logical_ids(construct: Any) -> set[str]:
    stack = cdk.Stack.of(construct)
    return {stack.get_logical_id(c) for c in construct.node.find_all() if isinstance(c, cdk.CfnResource)}


def test_chart_waits_for_state_rules_identity_and_objects(built: dict[str, Any]) -> None:
    """Trap 1: the migration hook needs the database reachable (security-group rule) and the ServiceAccount, its
    Pod Identity association and the SecretProviderClass before it runs; the chart's wait ends before the
    kubectl handler's 15 minutes."""
    gateway: PlatformGateway = built["gateway"]
    template = built["template"].to_json()
    (chart_id,) = _logical_ids(gateway.chart)
    depends = set(template["Resources"][chart_id].get("DependsOn", []))
    ingress = {
        name
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and r["Properties"]
        .get("SourceSecurityGroupId", {})
        .get("Fn::GetAtt", [""])[0]
        .startswith("EksCluster")
    }
    assert len(ingress) == 2 and ingress <= depends
    association = gateway.identity.association.logical_id
    for needed in (association, *_logical_ids(gateway.objects), *_logical_ids(gateway.bootstrap.resource)):
        assert cdk.Stack.of(gateway).resolve(needed) in depends
    assert CHART_TIMEOUT.to_minutes() < 15
    assert template["Resources"][chart_id]["Properties"]["Timeout"] == f"{int(CHART_TIMEOUT.to_seconds())}s"


def test_the_database_role_exists_before_the_chart_and_no_ecs_task_is_run(built: dict[str, Any]) -> None:
    """The chart's migration hook and pods log in as the proxy's role: DatabaseBootstrap creates it (and its
    database) through the Data API as the master user first; the hook migrates, so the custom resource names no
    ECS task (assets/gateway/migrate/index.py runs one only with ``TaskDefinitionArn``)."""
    gateway: PlatformGateway = built["gateway"]
    (bootstrap,) = built["template"].find_resources("Custom::LiteLLMMigration").values()
    properties = bootstrap["Properties"]
    assert "TaskDefinitionArn" not in properties and properties["Database"] == gateway.database.database_name
    assert any(gateway.database.username in query for query in properties["Queries"])
    statements = [
        s
        for p in built["template"].find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(s["Action"] == "rds-data:ExecuteStatement" for s in statements)
    assert not any("ecs:RunTask" in json.dumps(s["Action"]) for s in statements)


def test_secrets_store_driver_is_installed_pinned_with_sync_and_rotation(
    built: dict[str, Any], tmp_path: Path
) -> None:
    """The provider chart (aws/secrets-store-csi-driver-provider-aws 3.1.1, bundling the driver 1.6.0) installs the
    SecretProviderClass CRD, so the gateway's objects wait for it; ``install_secrets_store=False`` skips it.
    Repository and namespace: the provider's README.md @3.1.1 :28-29 (``helm repo add aws-secrets-manager
    https://aws.github.io/secrets-store-csi-driver-provider-aws``, ``helm install -n kube-system``)."""
    gateway: PlatformGateway = built["gateway"]
    store = helm_charts(built["template"])[litellm_chart.SECRETS_STORE_RELEASE]
    assert store["Repository"] == litellm_chart.SECRETS_STORE_CHART_REPOSITORY
    assert (store["Chart"], store["Version"]) == ("secrets-store-csi-driver-provider-aws", "3.1.1")
    assert store["Namespace"] == "kube-system"
    assert store["Values"] == litellm_chart.secrets_store_values()
    assert gateway.secrets_store is not None
    (store_id,) = _logical_ids(gateway.secrets_store)
    (objects_id,) = _logical_ids(gateway.objects)
    assert store_id in built["template"].to_json()["Resources"][objects_id]["DependsOn"]
    skipped = compose(new_app(tmp_path), install_secrets_store=False)
    assert skipped.secrets_store is None
    releases = helm_charts(Template.from_stack(cdk.Stack.of(skipped)))
    assert litellm_chart.SECRETS_STORE_RELEASE not in releases


def test_the_gateway_owns_its_pods_network_policy(tmp_path: Path) -> None:
    """One owner (TenantModelKeys no longer renders it): from stage gateway on the proxy pods are isolated, with
    the load balancer's and the scraper's subnets admitted to their own ports."""
    gateway = compose(new_app(tmp_path), alb_cidrs=["10.0.1.0/24"], scraper_cidrs=["10.0.8.0/24"])
    (policy,) = by_kind(manifests(Template.from_stack(cdk.Stack.of(gateway))), "NetworkPolicy")
    assert policy["metadata"]["namespace"] == GATEWAY_NAMESPACE
    assert policy["spec"]["podSelector"]["matchLabels"] == dict(gateway.endpoint.pod_labels)
    peers = {
        (peer["ipBlock"]["cidr"], rule["ports"][0]["port"])
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
        if "ipBlock" in peer
    }
    assert peers == {("10.0.1.0/24", gateway.endpoint.port), ("10.0.8.0/24", gateway.endpoint.metrics_port)}
    assert gateway.objects in gateway.network_policy.node.dependencies


def test_pod_identity_binds_the_charts_service_account(built: dict[str, Any]) -> None:
    (association,) = built["template"].find_resources("AWS::EKS::PodIdentityAssociation").values()
    assert association["Properties"]["Namespace"] == GATEWAY_NAMESPACE
    assert association["Properties"]["ServiceAccount"] == litellm_chart.SERVICE_ACCOUNT
    (account,) = by_kind(manifests(built["template"]), "ServiceAccount")
    values = helm_charts(built["template"])[litellm_chart.RELEASE]["Values"]
    assert account["metadata"]["name"] == values["serviceAccounts"]["gateway"]["name"]
    assert values["migrationJob"]["serviceAccountName"] == account["metadata"]["name"]


def test_bedrock_is_allowed_only_with_the_guardrail(built: dict[str, Any]) -> None:
    """Guardrail enforced in IAM as the gateway tier does (ModelInvokeAccess: Allow with, Deny without
    bedrock:GuardrailIdentifier), on the proxy's Pod Identity role."""
    role_id = built["gateway"].identity.role.node.default_child.logical_id
    role_ref = built["stack"].resolve(role_id)
    statements = [
        s
        for p in built["template"].find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_ref} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    conditions = {
        s["Effect"]: s.get("Condition", {}) for s in statements if "bedrock:InvokeModel" in s["Action"]
    }
    guardrail = f"{GUARDRAIL.guardrail_arn}:{GUARDRAIL.guardrail_version}"
    assert conditions["Allow"]["StringEquals"]["bedrock:GuardrailIdentifier"] == guardrail
    assert conditions["Deny"]["StringNotEquals"]["bedrock:GuardrailIdentifier"] == guardrail


def test_no_secret_value_in_the_template_manifests_or_values(built: dict[str, Any]) -> None:
    template = built["template"]
    assert secret_literals(template.to_json()) == []
    for manifest in manifests(template):
        assert secret_literals(manifest) == []
    values = helm_charts(template)[litellm_chart.RELEASE]["Values"]
    assert secret_literals(values) == []
    for model in values["gateway"]["config"]["proxy_config"]["model_list"]:
        assert model["litellm_params"]["guardrailConfig"]["guardrailIdentifier"] == GUARDRAIL.guardrail_arn


def test_internal_alb_only_with_a_certificate(built: dict[str, Any], tmp_path: Path) -> None:
    values = helm_charts(built["template"])[litellm_chart.RELEASE]["Values"]
    assert values["ingress"]["annotations"]["alb.ingress.kubernetes.io/certificate-arn"] == CERTIFICATE
    plain = compose(new_app(tmp_path))
    assert (
        "ingress"
        not in helm_charts(Template.from_stack(cdk.Stack.of(plain)))[litellm_chart.RELEASE]["Values"]
    )


def test_unfetched_chart_warns_and_blocks_the_deploy(built: dict[str, Any]) -> None:
    assert Annotations.from_stack(built["stack"]).find_warning("/UserPlatform/Gateway", Match.any_value())
    assert [r for r in built["template"].to_json()["Rules"] if r.startswith("GatewayChartFetched")]


def test_endpoint_is_the_charts(built: dict[str, Any]) -> None:
    assert built["gateway"].endpoint == litellm_chart.gateway_endpoint()


@pytest.mark.parametrize(
    ("param", "overrides", "match"),
    [
        (
            "certificate_arn",
            {"certificate_arn": "arn:aws:acm:us-east-1:123:certificate/x"},
            "ACM certificate",
        ),
        ("models", {"models": []}, "1 to 50 items"),
        ("models[0]", {"models": ["nova"]}, "BedrockTarget"),
        ("replicas", {"replicas": 1}, "from 2"),
        ("max_replicas", {"max_replicas": 1}, "from 2"),
        ("node_selector", {"node_selector": {}}, "node label"),
        ("chart_directory", {"chart_directory": CHART_DATA.parent}, "helm/litellm chart"),
        ("alb_cidrs[0]", {"alb_cidrs": ["10.0.0.0/33"]}, "IPv4 CIDR"),
        ("scraper_cidrs", {"scraper_cidrs": "10.0.0.0/24"}, "a string is not a list"),
        ("install_secrets_store", {"install_secrets_store": "no"}, "True or False"),
    ],
)
def test_bad_input_names_the_parameter(
    tmp_path: Path, param: str, overrides: dict[str, Any], match: str
) -> None:
    owner = "chart_values" if param == "node_selector" else "PlatformGateway"
    assert_refused(lambda: compose(new_app(tmp_path), **overrides), owner, param, match)


def test_a_chart_of_another_release_is_refused(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("name: litellm\nappVersion: '1.90.0'\n")
    assert_refused(
        lambda: compose(new_app(tmp_path / "out"), chart_directory=chart),
        "PlatformGateway",
        "chart_directory",
        "1.104.0",
    )


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_nag_clean_in_a_users_app(flags: str) -> None:
    def user_app(app: cdk.App) -> list[Any]:
        gateway = compose(app, certificate_arn=CERTIFICATE)
        # Invoking Bedrock without invocation logging is the app's finding (InferenceTiers-BR5), not the
        # library's: the documented composition turns logging on (as the gateway tier's foreign-app test does).
        return [gateway, ModelInvocationLogging(cdk.Stack.of(gateway), "Logging")]

    assert foreign_app_findings(user_app, flags) == []


def test_template_passes_cfn_lint(built: dict[str, Any]) -> None:
    assert cfn_lint_errors(built["template"].to_json()) == []
