"""EksCluster: the GPU-ready EKS 1.35 base shared by the hyperpod and disaggregated tiers."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from inference_tiers.constructs.eks.cluster import (
    DEFAULT_ADDON_VERSIONS,
    EksCluster,
)
from inference_tiers.validation import ArgumentError
from tests.harness import cdk_json_context, nag_findings

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
    # Two keys: Kubernetes secrets, and the construct's log groups (kubectl provider, VPC flow logs).
    keys = _resources(template, "AWS::KMS::Key")
    assert len(keys) == 2
    for key in keys.values():
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
    assert nag_findings(app, AwsSolutionsChecks()) == []


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


def test_every_log_group_has_a_customer_managed_key_that_logs_may_use(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, cluster, template = default_build
    groups = _resources(template, "AWS::Logs::LogGroup")
    # The VPC's flow logs and the kubectl provider's two functions.
    assert len(groups) == 3
    log_key_id = cdk.Stack.of(cluster).get_logical_id(cluster.log_key.node.default_child)  # type: ignore[arg-type]
    for name, group in groups.items():
        assert group["Properties"].get("KmsKeyId") == {"Fn::GetAtt": [log_key_id, "Arn"]}, name
    statements = _resources(template, "AWS::KMS::Key")[log_key_id]["Properties"]["KeyPolicy"]["Statement"]
    logs_statements = [
        s
        for s in statements
        if s["Principal"].get("Service")
        == {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}
    ]
    assert logs_statements, statements
    for statement in logs_statements:
        assert "kms:EncryptionContext:aws:logs:arn" in statement["Condition"]["ArnLike"]


def test_flow_log_role_trusts_only_this_accounts_flow_logs(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, _, template = default_build
    roles = [
        r
        for r in _resources(template, "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "vpc-flow-logs.amazonaws.com"
    ]
    assert len(roles) == 1
    (statement,) = roles[0]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {
            "aws:SourceArn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":ec2:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":vpc-flow-log/*",
                    ],
                ]
            }
        },
    }


def _acknowledged(construct: IConstruct) -> dict[str, str]:
    """The cdk-nag acknowledgments recorded on ``construct`` itself: rule id -> reason."""
    found: dict[str, str] = {}
    for entry in construct.node.metadata:
        if entry.type == "aws:cdk:acknowledged-rules":
            found.update({k.removeprefix("Annotation::"): v for k, v in entry.data.items()})
    return found


def test_private_cluster_acknowledges_no_public_endpoint(
    default_build: tuple[cdk.App, EksCluster, Template],
) -> None:
    _, cluster, _ = default_build
    assert "AwsSolutions-EKS1" not in _acknowledged(cluster.cluster)


def test_public_endpoint_acknowledgment_names_each_cidr_given() -> None:
    _, stack = _stack()
    cidr = cdk.CfnParameter(stack, "OfficeCidr").value_as_string
    cluster = EksCluster(stack, "Eks", public_endpoint_cidrs=["203.0.113.0/24", "198.51.100.7/32", cidr])
    reason = _acknowledged(cluster.cluster)["AwsSolutions-EKS1"]
    assert reason.endswith(": 203.0.113.0/24, 198.51.100.7/32, a deploy-time value"), reason
    Template.from_stack(stack).has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {"PublicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32", {"Ref": "OfficeCidr"}]}
            )
        },
    )


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "10.0.0.0/7", "128.0.0.0/1"])
def test_public_endpoint_cidrs_wider_than_a_slash_8_are_refused(cidr: str) -> None:
    _, stack = _stack()
    with pytest.raises(
        ArgumentError, match=r"EksCluster: parameter 'public_endpoint_cidrs\[0\]' got"
    ) as raised:
        EksCluster(stack, "Eks", public_endpoint_cidrs=[cidr])
    assert "from /8 to /32" in str(raised.value) and "internet" in str(raised.value)
