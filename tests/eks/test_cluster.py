"""EksCluster: the GPU-ready EKS 1.35 base shared by the hyperpod and disaggregated tiers."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    AddonVersions,
    EksCluster,
)
from tests.harness import cdk_json_context

ADMIN = "arn:aws:iam::123456789012:role/PlatformAdmin"


def _stack() -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
    return app, cdk.Stack(app, "Test")


@pytest.fixture(scope="module")
def default_build() -> tuple[cdk.App, EksCluster, Template]:
    app, stack = _stack()
    cluster = EksCluster(stack, "Eks", admin_principal_arns=[ADMIN])
    return app, cluster, Template.from_stack(stack)


def _resources(template: Template, kind: str) -> dict[str, Any]:
    return dict(template.find_resources(kind))


def test_cluster_is_1_35_with_api_auth_private_endpoint_logging_and_kms(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, _, template = default_build
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "Version": "1.35",
            "AccessConfig": {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False},
            "ComputeConfig": {"Enabled": False},
            "ResourcesVpcConfig": Match.object_like(
                {"EndpointPrivateAccess": True, "EndpointPublicAccess": False}
            ),
            "Logging": {
                "ClusterLogging": {
                    "EnabledTypes": [
                        {"Type": t}
                        for t in ("api", "audit", "authenticator", "controllerManager", "scheduler")
                    ]
                }
            },
            "EncryptionConfig": [{"Provider": {"KeyArn": Match.any_value()}, "Resources": ["secrets"]}],
        },
    )
    keys = _resources(template, "AWS::KMS::Key")
    assert len(keys) == 1
    (key,) = keys.values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"


def test_no_auto_mode_and_no_default_capacity(default_build: tuple[cdk.App, EksCluster, Template]) -> None:
    _, _, template = default_build
    nodegroups = _resources(template, "AWS::EKS::Nodegroup")
    # Only the system node group: no CDK default capacity.
    assert len(nodegroups) == 1


def test_admin_principal_and_kubectl_role_get_cluster_admin_access_entries(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, cluster, template = default_build
    entries = _resources(template, "AWS::EKS::AccessEntry")
    principals = [e["Properties"]["PrincipalArn"] for e in entries.values()]
    assert ADMIN in principals
    assert len(entries) == 2
    for entry in entries.values():
        (policy,) = entry["Properties"]["AccessPolicies"]
        assert policy["AccessScope"] == {"Type": "cluster"}
        assert "AmazonEKSClusterAdminPolicy" in str(policy["PolicyArn"])
    assert Annotations.from_stack(cdk.Stack.of(cluster)).find_warning("*", Match.any_value()) == []
    assert cluster.kubectl_role is not None
    stack = cdk.Stack.of(cluster)
    kubectl_role_arn = stack.resolve(cluster.kubectl_role.role_arn)
    assert kubectl_role_arn in principals


def test_kubectl_provider_uses_the_1_35_layer_inside_the_vpc(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, _, template = default_build
    handlers = {
        name: r
        for name, r in _resources(template, "AWS::Lambda::Function").items()
        if r["Properties"].get("Description") == "onEvent handler for EKS kubectl resource provider"
    }
    assert len(handlers) == 1
    (handler,) = handlers.values()
    assert len(handler["Properties"]["Layers"]) == 2  # aws cli + kubectl v35
    assert handler["Properties"]["VpcConfig"]["SubnetIds"]
    layers = _resources(template, "AWS::Lambda::LayerVersion")
    kubectl_layers = [
        name
        for name, layer in layers.items()
        if "kubectl 1.35." in layer["Properties"].get("Description", "")
    ]
    assert len(kubectl_layers) == 1
    assert {"Ref": kubectl_layers[0]} in handler["Properties"]["Layers"]


def test_core_addons_are_pinned_and_take_over_self_managed_copies(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, cluster, template = default_build
    addons = {r["Properties"]["AddonName"]: r for r in _resources(template, "AWS::EKS::Addon").values()}
    assert {name: a["Properties"]["AddonVersion"] for name, a in addons.items()} == {
        "vpc-cni": DEFAULT_ADDON_VERSIONS.vpc_cni,
        "kube-proxy": DEFAULT_ADDON_VERSIONS.kube_proxy,
        "coredns": DEFAULT_ADDON_VERSIONS.coredns,
        "eks-pod-identity-agent": DEFAULT_ADDON_VERSIONS.pod_identity_agent,
    }
    for name in ("vpc-cni", "kube-proxy", "coredns"):
        assert addons[name]["Properties"]["ResolveConflicts"] == "OVERWRITE"
    system_ng = cdk.Stack.of(cluster).get_logical_id(cluster.system_nodegroup.node.default_child)  # type: ignore[arg-type]
    assert system_ng in addons["coredns"]["DependsOn"]
    assert set(cluster.addons) == set(addons)


def test_system_node_group_is_on_demand_al2023_x86_with_imdsv2_and_encrypted_root(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, _, template = default_build
    template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "AmiType": "AL2023_x86_64_STANDARD",
            "CapacityType": "ON_DEMAND",
            "InstanceTypes": ["m7i.xlarge"],
            "ScalingConfig": {"MinSize": 2, "DesiredSize": 2, "MaxSize": 2},
            "Labels": {"inference-tiers/node-pool": "system"},
            "LaunchTemplate": Match.object_like({"Id": Match.any_value()}),
        },
    )
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
                    "BlockDeviceMappings": [
                        {"DeviceName": "/dev/xvda", "Ebs": Match.object_like({"Encrypted": True})}
                    ],
                }
            )
        },
    )


def test_created_vpc_has_flow_logs_and_private_subnets(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, cluster, template = default_build
    assert len(_resources(template, "AWS::EC2::FlowLog")) == 1
    assert len(cluster.vpc.private_subnets) == 2
    # Control plane ENIs go to the private subnets only.
    (eks_cluster,) = _resources(template, "AWS::EKS::Cluster").values()
    subnet_ids = eks_cluster["Properties"]["ResourcesVpcConfig"]["SubnetIds"]
    stack = cdk.Stack.of(cluster)
    assert subnet_ids == [stack.resolve(s.subnet_id) for s in cluster.vpc.private_subnets]


def test_default_cluster_passes_cdk_nag(default_build: tuple[cdk.App, EksCluster, Template]) -> None:
    app, _, _ = default_build
    report = AwsSolutionsChecks().validate_scope(app)
    assert report.success, [v.rule_name for v in report.violations]


def test_existing_vpc_and_public_endpoint_cidrs() -> None:
    app, stack = _stack()
    vpc = ec2.Vpc(stack, "Existing", max_azs=2)
    cluster = EksCluster(stack, "Eks", vpc=vpc, public_endpoint_cidrs=["203.0.113.0/24"])
    template = Template.from_stack(stack)
    assert cluster.vpc is vpc
    assert len(_resources(template, "AWS::EC2::VPC")) == 1
    # Without an admin principal nobody but the kubectl provider can use the API: say so at synth time.
    Annotations.from_stack(stack).has_warning(
        "/Test/Eks", Match.string_like_regexp("no admin_principal_arns: only the kubectl provider")
    )
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {
                    "EndpointPrivateAccess": True,
                    "EndpointPublicAccess": True,
                    "PublicAccessCidrs": ["203.0.113.0/24"],
                }
            )
        },
    )
    report = AwsSolutionsChecks().validate_scope(app)
    # The public endpoint is the user's explicit choice and is acknowledged; the example VPC's missing flow
    # logs are not the construct's to fix.
    assert [v.rule_name for v in report.violations] == ["AwsSolutions-VPC7"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"admin_principal_arns": ["not-an-arn"]}, r"admin_principal_arns: got 'not-an-arn'"),
        (
            {"admin_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Admin/session"]},
            r"admin_principal_arns: .*IAM role or user ARN",
        ),
        ({"public_endpoint_cidrs": ["0.0.0.0/33"]}, r"public_endpoint_cidrs: got '0.0.0.0/33'"),
        ({"system_node_count": 0}, r"system_node_count: got 0; expected an integer from 1 to 10"),
        # Not a JavaScript deserialization error from jsii: bool and float are rejected like any bad count.
        ({"system_node_count": True}, r"system_node_count: got True; expected an integer from 1 to 10"),
        ({"system_node_count": 2.5}, r"system_node_count: got 2.5; expected an integer from 1 to 10"),
        ({"system_node_instance_type": "c7g.large"}, r"system_node_instance_type: got 'c7g.large'.*x86_64"),
        ({"system_node_instance_type": "large"}, r"system_node_instance_type: got 'large'"),
        (
            {
                "addon_versions": AddonVersions(
                    "1.21", "v1.35.0-eksbuild.2", "v1.13.2-eksbuild.1", "v1.3.10-eksbuild.3"
                )
            },
            r"addon_versions.vpc_cni: got '1.21'",
        ),
        (
            {
                "addon_versions": AddonVersions(
                    "v1.18.3-eksbuild.3", "v1.35.0-eksbuild.2", "v1.13.2-eksbuild.1", "v1.3.10-eksbuild.3"
                )
            },
            r"vpc_cni: got 'v1.18.3-eksbuild.3'; expected v1.18.5 or later",
        ),
    ],
)
def test_invalid_props_are_rejected_with_the_prop_and_value(kwargs: dict[str, Any], message: str) -> None:
    _, stack = _stack()
    with pytest.raises(ValueError, match=message):
        EksCluster(stack, "Eks", **kwargs)
