"""InferenceTiers-AgentSandbox as synthesized: a private EKS cluster with a core node group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.harness import TierBuild

STACK = "InferenceTiers-AgentSandbox"


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> Template:
    return tier_build("agent-sandbox").template(STACK)


def resources(template: Template, kind: str) -> dict[str, Any]:
    return dict(template.find_resources(kind))


def test_cluster_endpoint_is_private_by_default(template: Template) -> None:
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "Version": "1.35",
            "ResourcesVpcConfig": Match.object_like(
                {"EndpointPrivateAccess": True, "EndpointPublicAccess": False}
            ),
        },
    )


def test_core_node_group_is_the_only_managed_node_group(template: Template) -> None:
    groups = list(resources(template, "AWS::EKS::Nodegroup").values())
    assert len(groups) == 1
    props = groups[0]["Properties"]
    assert props["Labels"] == {"inference-tiers/node-pool": "system"}
    assert props["InstanceTypes"] == ["m7i.xlarge"]
    assert props["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 2}
    assert "Taints" not in props


def test_vpc_uses_the_configured_cidr(template: Template) -> None:
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.70.0.0/16"})


def test_outputs_name_the_cluster_and_the_kubeconfig_command(template: Template) -> None:
    outputs = template.to_json()["Outputs"]
    assert {"EksClusterName", "KubeconfigCommand"} <= set(outputs)
    command = outputs["KubeconfigCommand"]["Value"]["Fn::Join"][1]
    assert command[0] == "aws eks update-kubeconfig --region "
