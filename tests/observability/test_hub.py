"""ObservabilityHub in an app of its own: the collectors, Grafana, the grants and the misuse checks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_eks_v2 as eks_v2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.observability import ObservabilityHub
from inference_tiers.observability import collectors
from inference_tiers.observability.scraper_rbac import SCRAPER_USER, scraper_rbac
from inference_tiers.stacks.observability import ObservabilityStack
from inference_tiers.validation import ArgumentError
from tests.harness import DATA_DIR, cfn_lint_errors, nag_findings, render_sub, tier_settings

CLUSTER = "arn:aws:eks:us-east-1:111122223333:cluster/inference"
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
GROUPS = ["sg-0123456789abcdef0"]


@pytest.fixture(scope="module")
def app_and_hub(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.App, cdk.Stack, ObservabilityHub]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("hub")))
    stack = cdk.Stack(app, "Hub", env=cdk.Environment(account="111122223333", region="us-east-1"))
    hub = ObservabilityHub(stack, "Observability", grafana=True, alarm_email="ops@example.com")
    task = ecs.FargateTaskDefinition(stack, "Task", cpu=1024, memory_limit_mib=2048)
    log_group = logs.LogGroup(stack, "Logs", removal_policy=cdk.RemovalPolicy.RETAIN)
    task.add_container(
        "App",
        image=ecs.ContainerImage.from_registry("example/app:1.0"),
        logging=ecs.LogDrivers.aws_logs(stream_prefix="app", log_group=log_group),
    )
    hub.add_ecs_collector(task, metrics_port=4000, log_group=log_group)
    hub.add_eks_scraper(
        "Scraper",
        cluster_arn=CLUSTER,
        subnet_ids=SUBNETS,
        security_group_ids=GROUPS,
        cluster_label="inference",
    )
    return app, stack, hub


@pytest.fixture(scope="module")
def template(app_and_hub: tuple[cdk.App, cdk.Stack, ObservabilityHub]) -> dict[str, Any]:
    return Template.from_stack(app_and_hub[1]).to_json()


def _of_type(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_scraper_reads_the_cluster_into_the_workspace_with_the_rendered_config(
    template: dict[str, Any],
) -> None:
    (scraper,) = _of_type(template, "AWS::APS::Scraper")
    props = scraper["Properties"]
    assert props["Source"]["EksConfiguration"] == {
        "ClusterArn": CLUSTER,
        "SubnetIds": SUBNETS,
        "SecurityGroupIds": GROUPS,
    }
    assert "WorkspaceArn" in props["Destination"]["AmpConfiguration"]
    blob = props["ScrapeConfiguration"]["ConfigurationBlob"]
    # Fn::Base64 of the rendered text (CloudFormation encodes it at deploy time)
    assert yaml.safe_load(blob["Fn::Base64"]) == collectors.eks_scrape_config("inference")


def test_collector_sidecar_is_optional_read_only_and_configured_for_the_workspace(
    template: dict[str, Any],
) -> None:
    (task,) = _of_type(template, "AWS::ECS::TaskDefinition")
    sidecar = next(c for c in task["Properties"]["ContainerDefinitions"] if c["Name"] == "OtelCollector")
    assert sidecar["Essential"] is False
    assert sidecar["ReadonlyRootFilesystem"] is True
    assert sidecar["User"] == "10001"
    (env,) = sidecar["Environment"]
    assert env["Name"] == "AOT_CONFIG_CONTENT"
    endpoint = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/"

    def deployed(value: Any) -> str:  # the Region, or the workspace's endpoint in this stack
        if value == {"Ref": "AWS::Region"}:
            return "us-east-1"
        assert value["Fn::GetAtt"][1] == "PrometheusEndpoint"
        return endpoint

    # what the container receives once CloudFormation fills in the deploy-time values: exactly the rendered text
    assert render_sub(env["Value"], deployed) == collectors.to_yaml(
        collectors.ecs_collector_config(
            remote_write_url=f"{endpoint}api/v1/remote_write", region="us-east-1", metrics_port=4000
        )
    )


def test_task_role_may_write_only_to_this_workspace(template: dict[str, Any]) -> None:
    statements = [
        s
        for p in _of_type(template, "AWS::IAM::Policy")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "aps:RemoteWrite"
    ]
    (statement,) = statements
    assert statement["Resource"]["Fn::GetAtt"][1] == "Arn"
    workspace_id = statement["Resource"]["Fn::GetAtt"][0]
    assert template["Resources"][workspace_id]["Type"] == "AWS::APS::Workspace"


def test_grafana_role_trusts_only_grafana_of_this_account(template: dict[str, Any]) -> None:
    (role,) = [
        r
        for r in _of_type(template, "AWS::IAM::Role")
        if "grafana" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "grafana.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    source_arn = statement["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1]
    assert source_arn[-1] == ":grafana:us-east-1:111122223333:/workspaces/*"
    (workspace,) = _of_type(template, "AWS::Grafana::Workspace")
    props = workspace["Properties"]
    assert props["PermissionType"] == "CUSTOMER_MANAGED"
    assert props["AuthenticationProviders"] == ["AWS_SSO"]
    assert set(props["DataSources"]) == {"PROMETHEUS", "CLOUDWATCH", "XRAY"}


def test_email_is_subscribed(template: dict[str, Any]) -> None:
    (subscription,) = _of_type(template, "AWS::SNS::Subscription")
    assert subscription["Properties"]["Endpoint"] == "ops@example.com"


def test_no_unacknowledged_nag_findings_and_no_cfn_lint_errors(
    app_and_hub: tuple[cdk.App, cdk.Stack, ObservabilityHub], template: dict[str, Any]
) -> None:
    assert nag_findings(app_and_hub[0], AwsSolutionsChecks()) == []
    assert cfn_lint_errors(template) == []


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"retention_days": 0}, "retention_days"),
        ({"alarm_email": "ops"}, "alarm_email"),
        ({"grafana": "yes"}, "grafana"),
        ({"thresholds": {"queue_depth": 3}}, "thresholds"),
        ({"encryption_key": "arn:aws:kms:us-east-1:111122223333:key/x"}, "encryption_key"),
    ],
)
def test_hub_refuses_misuse_naming_the_parameter(kwargs: dict[str, Any], param: str, tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    with pytest.raises(ArgumentError, match=rf"ObservabilityHub: parameter '{param}'"):
        ObservabilityHub(stack, "Hub", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"cluster_arn": "inference"}, "cluster_arn"),
        ({"subnet_ids": SUBNETS[:1]}, "subnet_ids"),
        ({"subnet_ids": [SUBNETS[0], SUBNETS[0]]}, r"subnet_ids\[1\]"),
        ({"security_group_ids": []}, "security_group_ids"),
        ({"security_group_ids": ["default"]}, r"security_group_ids\[0\]"),
    ],
)
def test_scraper_refuses_misuse_naming_the_parameter(
    kwargs: dict[str, Any], param: str, tmp_path: Path
) -> None:
    hub = ObservabilityHub(cdk.Stack(cdk.App(outdir=str(tmp_path)), "S"), "Hub")
    arguments = {"cluster_arn": CLUSTER, "subnet_ids": SUBNETS, "security_group_ids": GROUPS, **kwargs}
    with pytest.raises(ArgumentError, match=rf"ObservabilityHub.add_eks_scraper: parameter '{param}'"):
        hub.add_eks_scraper("Scraper", cluster_label="c", **arguments)


def test_scraper_accepts_deploy_time_ids(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    subnet = cdk.CfnParameter(stack, "Subnets", type="List<AWS::EC2::Subnet::Id>").value_as_list
    group = cdk.CfnParameter(stack, "Group").value_as_string
    cluster = cdk.CfnParameter(stack, "Cluster").value_as_string
    hub.add_eks_scraper(
        "Scraper",
        cluster_arn=cluster,
        subnet_ids=[cdk.Fn.select(0, subnet), cdk.Fn.select(1, subnet)],
        security_group_ids=[group],
        cluster_label="c",
    )
    assert len(hub.scrapers) == 1


@pytest.mark.parametrize("pass_scope", [False, True], ids=["default", "scope"])
def test_hub_in_its_own_stack_scrapes_a_cluster_whose_stack_also_queries_it(
    tmp_path: Path, pass_scope: bool
) -> None:
    """A foreign app: the hub in one stack, an EksCluster in another whose KEDA role queries the hub. The
    scraper is created in the cluster's stack, by default (the cluster ARN refers to that stack's resource) or
    with ``scope=``, which keeps the dependency one way; created in the hub's stack it would point back at the
    cluster's stack (CDK's DependencyCycle)."""
    from inference_tiers.constructs.eks.cluster import EksCluster

    app = cdk.App(outdir=str(tmp_path), context={"aws:cdk:bundling-stacks": []})
    env = cdk.Environment(account="111122223333", region="us-east-1")
    cluster_stack = cdk.Stack(app, "Cluster", env=env)
    eks = EksCluster(cluster_stack, "Eks")
    hub_stack = cdk.Stack(app, "Observability", env=env)
    hub = ObservabilityHub(hub_stack, "Hub")
    hub.grant_query(
        iam.Role(cluster_stack, "Keda", assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"))
    )
    subnets = eks.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, one_per_az=True)
    scraper = hub.add_eks_scraper(
        "Scraper",
        cluster_arn=eks.cluster.cluster_arn,
        subnet_ids=subnets.subnet_ids,
        security_group_ids=[eks.cluster_security_group_id],
        cluster_label="inference",
        cluster=eks.cluster,
        **({"scope": eks} if pass_scope else {}),
    )
    assembly = app.synth()
    # Given the cluster, the hub applies the scraper's RBAC to it (in the cluster's stack) and warns of nothing.
    assert eks.cluster.node.try_find_child("manifest-AmpScraperRbac") is not None
    assert _rbac_warnings(cluster_stack) == _rbac_warnings(hub_stack) == []
    assert cdk.Stack.of(scraper) is cluster_stack and hub.scrapers == [scraper]
    assert [s.stack_name for s in cluster_stack.dependencies] == ["Observability"]
    assert hub_stack.dependencies == []
    template = assembly.get_stack_by_name("Cluster").template
    (resource,) = (r for r in template["Resources"].values() if r["Type"] == "AWS::APS::Scraper")
    destination = resource["Properties"]["Destination"]["AmpConfiguration"]["WorkspaceArn"]
    assert "Fn::ImportValue" in destination  # the hub's workspace, read from the cluster's stack


def test_scraper_of_a_cluster_in_the_hubs_own_stack_stays_in_the_hub(tmp_path: Path) -> None:
    """A cluster ARN that refers to a resource of the hub's own stack keeps the default: the hub."""
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    cluster = cdk.CfnParameter(stack, "Cluster").value_as_string
    scraper = hub.add_eks_scraper(
        "Scraper", cluster_arn=cluster, subnet_ids=SUBNETS, security_group_ids=GROUPS, cluster_label="c"
    )
    assert scraper.node.scope is hub


def test_scraper_id_already_used_in_its_scope_is_refused_by_name(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    arguments = {"cluster_arn": CLUSTER, "subnet_ids": SUBNETS, "security_group_ids": GROUPS}
    hub.add_eks_scraper("Scraper", cluster_label="c", scope=stack, **arguments)
    with pytest.raises(ArgumentError, match="parameter 'construct_id' got 'Scraper'.*not yet used under S"):
        hub.add_eks_scraper("Scraper", cluster_label="c", scope=stack, **arguments)
    with pytest.raises(ArgumentError, match="parameter 'scope'"):
        hub.add_eks_scraper("Other", cluster_label="c", scope="S", **arguments)  # type: ignore[arg-type]


def test_collector_refuses_an_unpinned_image(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    task = ecs.FargateTaskDefinition(stack, "Task")
    with pytest.raises(ArgumentError, match="add_ecs_collector: parameter 'adot_image'"):
        hub.add_ecs_collector(
            task, metrics_port=4000, log_group=logs.LogGroup(stack, "L"), adot_image="otel/collector:latest"
        )


def test_stack_wires_the_disaggregated_cluster_and_the_gateway_task(tmp_path: Path) -> None:
    """The tier's wiring with stand-ins for the two stacks (the real combination is synthesized by
    `-c tier=disaggregated,gateway,observability`; it costs two minutes, too much for the suite)."""
    app = cdk.App(outdir=str(tmp_path))
    env = cdk.Environment(account="111122223333", region="us-east-1")
    other = cdk.Stack(app, "Other", env=env)
    vpc = ec2.Vpc(other, "Vpc", max_azs=3)
    manifests: list[tuple[str, tuple[Any, ...]]] = []
    # A reference to the other stack, as eks.cluster.cluster_arn is: the tier still keeps the scraper in its hub.
    cluster_name = cdk.CfnParameter(other, "ClusterName").value_as_string
    cluster = eks_v2.Cluster.from_cluster_attributes(other, "Cluster", cluster_name=cluster_name)
    cluster_arn = cluster.cluster_arn
    cluster.add_manifest = lambda name, *docs: manifests.append((name, docs))  # type: ignore[method-assign]
    task = ecs.FargateTaskDefinition(other, "Task")
    task.add_container("Proxy", image=ecs.ContainerImage.from_registry("example/litellm:1.0"))
    other.vpc = vpc  # type: ignore[attr-defined]
    other.eks = SimpleNamespace(cluster=cluster, cluster_security_group_id="sg-0123456789abcdef0")  # type: ignore[attr-defined]
    traced: list[bool] = []
    other.gateway = SimpleNamespace(  # type: ignore[attr-defined]
        task_definition=task,
        log_group=logs.LogGroup(other, "Logs"),
        master_key_secret=secretsmanager.Secret(other, "MasterKey"),
        export_traces=lambda: traced.append(True),
    )
    settings = tier_settings("observability")
    stack = ObservabilityStack(app, "Obs", settings=settings, disaggregated=other, gateway=other, env=env)
    (scraper,) = stack.hub.scrapers
    assert scraper.node.scope is stack.hub
    source = stack.resolve(scraper.source)["eksConfiguration"]
    assert source["clusterArn"] == other.resolve(cluster_arn)
    assert source["securityGroupIds"] == ["sg-0123456789abcdef0"]
    assert len(source["subnetIds"]) == 3  # one private subnet per AZ
    assert manifests == [("AmpScraperRbac", tuple(scraper_rbac()))]
    assert _rbac_warnings(stack) == []  # the cluster was given: its RBAC is applied
    assert [c.container_name for c in [task.default_container, *[task.find_container("OtelCollector")]]] == [
        "Proxy",
        "OtelCollector",
    ]
    assert traced == [True]  # the gateway is told to export its traces to the sidecar


def test_scraper_rbac_binds_the_scraper_user_to_read_only_verbs() -> None:
    role, binding = scraper_rbac()
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs <= {"describe", "get", "list", "watch"}
    assert binding["subjects"] == [
        {"kind": "User", "name": SCRAPER_USER, "apiGroup": "rbac.authorization.k8s.io"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_xray_wildcard_is_acknowledged_on_its_own_policy_only(tmp_path: Path) -> None:
    """Another Resource-* statement on the same task role is still reported: the acknowledgment is narrow."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="111122223333", region="us-east-1"))
    hub = ObservabilityHub(stack, "Hub")
    task = ecs.FargateTaskDefinition(stack, "Task")
    log_group = logs.LogGroup(stack, "Logs")
    task.add_container(
        "App",
        image=ecs.ContainerImage.from_registry("example/app:1.0"),
        logging=ecs.LogDrivers.aws_logs(stream_prefix="app", log_group=log_group),
    )
    hub.add_ecs_collector(task, metrics_port=4000, log_group=log_group)
    task.task_role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    ]
    assert [s["Sid"] for s in next(p for p in policies if any(s.get("Sid") == "XRayTraces" for s in p))] == [
        "XRayTraces"
    ]
    report = AwsSolutionsChecks().validate_scope(app)
    flagged = [(v.rule_name, r.construct_path) for v in report.violations for r in v.violating_resources]
    assert ("AwsSolutions-IAM5[Resource::*]", "S/Task/TaskRole/DefaultPolicy/Resource") in flagged
    assert not any("OtelCollectorXRay" in path for _, path in flagged)


def _rbac_warnings(scope: cdk.Stack) -> list[str]:
    """The scraper-RBAC warnings of ``scope``'s constructs (read from their metadata: no synth)."""
    return [
        str(entry.data)
        for construct in scope.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:warning" and "apply the scraper's RBAC" in str(entry.data)
    ]


def test_a_cluster_known_only_by_arn_gets_a_warning_naming_the_rbac_to_apply(tmp_path: Path) -> None:
    """AMP user guide, "Using an AWS managed collector" > "Configuring your Amazon EKS cluster": the scraper needs
    the ClusterRole/ClusterRoleBinding for ``aps-collector-user`` in the cluster; nothing applies them to a cluster
    given by ARN only, so the synth says what to apply."""
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "S")
    hub = ObservabilityHub(stack, "Hub")
    hub.add_eks_scraper(
        "Scraper", cluster_arn=CLUSTER, subnet_ids=SUBNETS, security_group_ids=GROUPS, cluster_label="c"
    )
    (warning,) = _rbac_warnings(stack)
    assert "ClusterRole aps-collector-role" in warning and f"user {SCRAPER_USER}" in warning
    assert "scraper_rbac()" in warning and "API_AND_CONFIG_MAP" in warning


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", ["<url>"])
        for resource in rule.get("resources", rule.get("nonResourceURLs", []))
        for verb in rule["verbs"]
    }


def test_scraper_rbac_is_the_aws_documented_cluster_role_or_less() -> None:
    """``scraper_rbac()`` against AMP's documented ClusterRole (tests/data/observability/aps-collector-role.json,
    its "source" names the page): the same user and role, and no grant beyond it."""
    documented = json.loads((DATA_DIR / "observability" / "aps-collector-role.json").read_text())
    role, binding = scraper_rbac()
    assert role["metadata"]["name"] == binding["roleRef"]["name"] == documented["cluster_role"]
    assert binding["subjects"] == [
        {"kind": "User", "name": documented["user"], "apiGroup": "rbac.authorization.k8s.io"}
    ]
    assert _grants(role["rules"]) - _grants(documented["rules"]) == set()
    # What the scrape configuration needs: pod discovery (every job is kubernetes_sd role "pod") and /metrics.
    assert {("", "pods", v) for v in ("get", "list", "watch")} <= _grants(role["rules"])
