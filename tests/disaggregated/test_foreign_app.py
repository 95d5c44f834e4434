"""The tier-4 building blocks composed in a user's own app, across its own stacks and its own VPC: the
library adds nothing the user would have to acknowledge (no cdk-nag finding: tests/nag/test_foreign_apps.py; no cfn-lint finding such as an
unreferenced ConsoleHosts mapping, W7001, when the dashboard URL is not used)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from inference_tiers.constructs import (
    DisaggregatedMonitoring,
    DisaggregatedServing,
    EfaNodeGroup,
    EksCluster,
    GpuDevicePlugins,
)
from tests.disaggregated.helpers import MODEL, make_cluster


def _lint(template: dict[str, Any]) -> list[tuple[str, str]]:
    """Every cfn-lint finding (errors, warnings and informational) as (rule id, path)."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    return [(m.rule.id, "/".join(map(str, m.path))) for m in matches]


def user_stacks(app: cdk.App) -> dict[str, cdk.Stack]:
    """The user's stacks, by name (tests/nag/test_foreign_apps.py checks them under both packs and flag sets)."""
    network = cdk.Stack(app, "UserNetwork")
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=1)
    vpc.add_flow_log("FlowLog")
    platform = cdk.Stack(app, "UserPlatform")
    eks = EksCluster(platform, "Eks", vpc=vpc)
    nodes = EfaNodeGroup(
        platform, "Gpu", cluster=eks.cluster, subnet=vpc.private_subnets[0], node_role=eks.node_role
    )
    plugins = GpuDevicePlugins(platform, "Plugins", cluster=eks.cluster)
    serving_stack = cdk.Stack(app, "UserServing")
    serving = DisaggregatedServing(
        serving_stack,
        "Serving",
        cluster=eks.cluster,
        model_id=MODEL,
        instance_type="p5.48xlarge",
        efa_devices=nodes.efa_interfaces,
    )
    serving.node.add_dependency(plugins)
    DisaggregatedMonitoring(serving_stack, "Monitoring", cluster=eks.cluster, serving=serving)
    return {s.stack_name: s for s in (network, platform, serving_stack)}


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, cdk.Stack]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context={"aws:cdk:bundling-stacks": []})
    return user_stacks(app)


@pytest.fixture(scope="module")
def lint_findings(user_app: dict[str, cdk.Stack]) -> dict[str, list[tuple[str, str]]]:
    # The user's network and the library's serving stack (the platform stack holds the EKS base, linted with
    # its own tests; the console mapping could only land next to the dashboard).
    return {
        name: _lint(Template.from_stack(user_app[name]).to_json()) for name in ("UserNetwork", "UserServing")
    }


def test_an_unused_dashboard_url_adds_no_mapping_and_no_lint_finding(
    user_app: dict[str, cdk.Stack], lint_findings: dict[str, list[tuple[str, str]]]
) -> None:
    assert "Mappings" not in Template.from_stack(user_app["UserServing"]).to_json()
    assert lint_findings["UserServing"] == []
    assert lint_findings["UserNetwork"] == []


def test_reading_the_url_adds_the_mapping_that_the_url_uses(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path), context={"aws:cdk:bundling-stacks": []}), "WithUrl")
    cluster = make_cluster(stack)
    serving = DisaggregatedServing(
        stack, "Serving", cluster=cluster, model_id=MODEL, instance_type="p5.48xlarge"
    )
    monitoring = DisaggregatedMonitoring(stack, "Monitoring", cluster=cluster, serving=serving)
    assert stack.node.try_find_child("ConsoleHosts") is None
    cdk.CfnOutput(stack, "DashboardUrl", value=monitoring.dashboard_url)
    template = Template.from_stack(stack).to_json()
    assert set(template["Mappings"]) == {"ConsoleHosts"}
    assert '"Fn::FindInMap": ["ConsoleHosts"' in json.dumps(template["Outputs"]["DashboardUrl"])
