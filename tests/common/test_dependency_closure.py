"""Every custom resource (Lambda-backed step) of every tier's default template depends, through DependsOn or a
Ref/GetAtt chain, on everything its handler calls (tests/dependency_closure.py says what that is).

The gateway's migration step is expected to fail here until the Aurora writer dependency (issue 20, W3) lands
from the h1-gateway-defects branch: it connects to the cluster through the RDS Data API, which answers nothing
before the writer instance exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inference_tiers.app_factory import TIERS
from tests.dependency_closure import HELM_CHART, closure, custom_resources, missing_dependencies
from tests.harness import TierBuild, build_tier

# The HyperPod node barrier stands for the HyperPod nodes joining the EKS cluster (constructs/hyperpod/cluster.py).
NODE_BARRIERS = ("Custom::HyperPodNodesReady",)


# Opted-in configurations that add Lambda-backed steps of their own (the defaults are every tier's cdk.json).
OPTED_IN: dict[str, tuple[str, dict[str, Any]]] = {
    "bedrock invocation logging": ("bedrock", {"bedrock.invocation_logging": True}),
    "hyperpod gateway": (
        "hyperpod",
        {
            "hyperpod.inference_gateway": {"pools": {"model": {"min_replicas": 1, "max_replicas": 2}}},
            "hyperpod.scaling_metric": "prometheus",
            "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
        },
    ),
    "disaggregated gateway with LoRA": (
        "disaggregated",
        {
            "disaggregated.inference_gateway": {
                "pools": {
                    "prefill": {"min_replicas": 1, "max_replicas": 1},
                    "decode": {"min_replicas": 1, "max_replicas": 1, "waiting_per_replica": 2},
                },
                "lora_adapters": {"sql-lora": "s3://adapters-bucket/tenants/sql-lora"},
            }
        },
    ),
}


def _unordered(build: TierBuild) -> dict[str, dict[str, str]]:
    failures = {}
    for stack, template in build.templates().items():
        resources = template["Resources"]
        for step in custom_resources(resources):
            missing = missing_dependencies(resources, step, node_barrier_types=NODE_BARRIERS)
            if missing:
                failures[f"{stack}/{step} ({resources[step]['Type']})"] = missing
    return failures


@pytest.mark.parametrize("tier", list(TIERS))
def test_every_custom_resource_depends_on_what_its_handler_calls(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    assert _unordered(tier_build(tier)) == {}


@pytest.mark.parametrize("configuration", list(OPTED_IN))
def test_opted_in_steps_depend_on_what_their_handlers_call(configuration: str) -> None:
    tier, overrides = OPTED_IN[configuration]
    build = build_tier(tier, **overrides)
    assert custom_resources(build.templates()[build.stacks[0].stack_name]["Resources"])
    assert _unordered(build) == {}


@pytest.mark.parametrize("tier", ["agent-sandbox", "disaggregated", "hyperpod", "platform"])
def test_each_eks_tier_has_helm_charts_that_reach_a_node_group(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    """The node rule above is not vacuous: every EKS tier renders charts, and each reaches a node group."""
    (template,) = tier_build(tier).templates().values()
    resources = template["Resources"]
    charts = [name for name in custom_resources(resources) if resources[name]["Type"] == HELM_CHART]
    assert charts
    for chart in charts:
        reach = closure(resources, chart)
        assert any(resources[name]["Type"] == "AWS::EKS::Nodegroup" for name in reach), chart


def _role(name: str, policy: bool) -> dict[str, Any]:
    resources: dict[str, Any] = {name: {"Type": "AWS::IAM::Role", "Properties": {}}}
    if policy:
        resources[f"{name}Policy"] = {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": name}], "PolicyDocument": {}},
        }
    return resources


def _network() -> dict[str, Any]:
    return {
        "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {}},
        "Table": {"Type": "AWS::EC2::RouteTable", "Properties": {}},
        "Association": {
            "Type": "AWS::EC2::SubnetRouteTableAssociation",
            "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": {"Ref": "Table"}},
        },
        "DefaultRoute": {
            "Type": "AWS::EC2::Route",
            "Properties": {"RouteTableId": {"Ref": "Table"}, "DestinationCidrBlock": "0.0.0.0/0"},
        },
        "Database": {"Type": "AWS::RDS::DBCluster", "Properties": {}},
        "Writer": {
            "Type": "AWS::RDS::DBInstance",
            "Properties": {"DBClusterIdentifier": {"Ref": "Database"}},
        },
        "Reader": {
            "Type": "AWS::RDS::DBInstance",
            "Properties": {"DBClusterIdentifier": {"Ref": "Database"}},
            "DependsOn": ["Writer"],
        },
    }


def _step(depends_on: list[str]) -> dict[str, Any]:
    return {
        **_role("HandlerRole", policy=True),
        **_network(),
        "Handler": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Role": {"Fn::GetAtt": ["HandlerRole", "Arn"]},
                "VpcConfig": {"SubnetIds": [{"Ref": "Subnet"}]},
                "Environment": {"Variables": {"DB": {"Fn::GetAtt": ["Database", "Endpoint.Address"]}}},
            },
            "DependsOn": ["HandlerRole"],
        },
        "Step": {
            "Type": "Custom::Step",
            "Properties": {"ServiceToken": {"Fn::GetAtt": ["Handler", "Arn"]}},
            "DependsOn": depends_on,
        },
    }


def test_helper_names_each_missing_dependency_and_accepts_a_complete_closure() -> None:
    """The helper can fail: a step whose handler runs in a subnet, as a role with a policy, against a database,
    with none of those ordered, is missing each (the database's writer, not its reader); ordered, none."""
    missing = missing_dependencies(_step([]), "Step")
    assert set(missing) == {"HandlerRolePolicy", "Association", "DefaultRoute", "Writer"}
    complete = ["HandlerRolePolicy", "Association", "DefaultRoute", "Writer"]
    assert missing_dependencies(_step(complete), "Step") == {}
