"""Each third-party controller whose IAM the project writes is allowed what its pinned release's reference policy
grants (tests/iam_policy.py; the vendored policies and their SOURCE notes are in tests/data/iam_reference), or the
test says why not in an exceptions map. Karpenter's policy is checked in tests/sandbox.

Controllers without a role of the project's are checked facts here, not skips: the AMP managed scraper runs
under its service-linked role, no tier installs the EBS CSI driver, and the HyperPod inference operator's role
is the AWS managed policy itself (vendored too), plus what the project adds to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, TypeVar

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from constructs import IConstruct

from inference_tiers.constructs.eks.inference_gateway import InferenceGateway
from inference_tiers.constructs.hyperpod.inference_operator import (
    DEFAULT_ADDON_VERSIONS,
    OPERATOR_ROLE_PREFIX,
    TLS_BUCKET_PREFIX,
    HyperPodInferenceOperator,
)
from inference_tiers.constructs.observability import ObservabilityHub
from inference_tiers.k8s.inference_gateway import KEDA_VERSION
from tests.harness import TierBuild, build_tier
from tests.iam_policy import Grant, assert_covers, listed, missing_grants, reference_policy, role_grants

HYPERPOD = "InferenceTiers-HyperPod"
OPERATOR_MANAGED_POLICY = "AmazonSageMakerHyperPodInferenceAccess-v3"
DISAGGREGATED = "InferenceTiers-Disaggregated"
EKS_TIERS = ("hyperpod", "disaggregated", "agent-sandbox", "platform")
# tests/inference_gateway/test_stack.py's gateway: the disaggregated tier's own KEDA (CloudWatch triggers).
GATEWAY = {
    "pools": {
        "prefill": {"min_replicas": 1, "max_replicas": 1},
        "decode": {"min_replicas": 1, "max_replicas": 1, "waiting_per_replica": 2},
    }
}

T = TypeVar("T")


def _one(build: TierBuild, kind: type[T]) -> T:
    (found,) = [c for stack in build.stacks for c in stack.node.find_all() if isinstance(c, kind)]
    return found


def _logical_id(construct: IConstruct) -> str:
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    return cdk.Stack.of(construct).get_logical_id(resource)


@pytest.fixture(scope="module")
def hyperpod(tier_build: Callable[[str], TierBuild]) -> tuple[HyperPodInferenceOperator, dict[str, Any]]:
    build = tier_build("hyperpod")
    return _one(build, HyperPodInferenceOperator), build.templates()[HYPERPOD]


def test_pinned_add_ons_are_the_vendored_releases() -> None:
    """The reference files are named for the versions the package pins: a version bump without a new
    reference fails here."""
    for addon, name in (
        ("aws-fsx-csi-driver", "aws-fsx-csi-driver"),
        ("aws-mountpoint-s3-csi-driver", "aws-mountpoint-s3-csi-driver"),
    ):
        release = DEFAULT_ADDON_VERSIONS[addon].split("-eksbuild")[0]
        assert reference_policy(f"{name}-{release}")["Statement"]
    assert reference_policy(f"keda-{KEDA_VERSION}")["Statement"]


def test_load_balancer_controller_has_every_reference_action(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """aws-load-balancer-controller v2.13.2 docs/install/iam_policy.json (the chart 1.13.2 the operator bundles).
    No exceptions: the project scopes resources to this account and region, never drops an action."""
    operator, template = hyperpod
    assert_covers(
        "aws-load-balancer-controller-v2.13.2",
        template,
        _logical_id(operator.load_balancer_controller_role),
        exceptions={},
    )


def test_load_balancer_controller_keeps_ownership_conditions(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """Where upstream conditions a change on the controller's ownership tag, so does the project (conditions
    are not compared by assert_covers)."""
    operator, template = hyperpod
    policy = next(
        r["Properties"]["PolicyDocument"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        and {"Ref": _logical_id(operator.load_balancer_controller_role)} in r["Properties"]["Roles"]
    )
    conditioned = {
        action
        for statement in policy["Statement"]
        if "aws:ResourceTag/elbv2.k8s.aws/cluster" in json.dumps(statement.get("Condition", {}))
        for action in listed(statement["Action"])
    }
    # v2.13.2 iam_policy.json: the statement of DeleteLoadBalancer ... ModifyIpPools (Null ResourceTag "false").
    upstream = next(
        set(s["Action"])
        for s in reference_policy("aws-load-balancer-controller-v2.13.2")["Statement"]
        if "elasticloadbalancing:DeleteLoadBalancer" in s["Action"]
    )
    assert upstream <= conditioned


def test_fsx_csi_driver_reads_file_systems_only(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """aws-fsx-csi-driver v1.6.0 docs/install.md: the reference covers dynamic provisioning. The project mounts
    existing file systems (static PersistentVolumes, no StorageClass), so the controller never creates,
    resizes or deletes one; it only validates volumes (pkg/driver/controller.go:404, DescribeFileSystem)."""
    operator, template = hyperpod
    dynamic_provisioning = "no StorageClass is rendered: models are read from existing file systems"
    assert_covers(
        "aws-fsx-csi-driver-v1.6.0",
        template,
        _logical_id(operator.fsx_csi_role),
        exceptions={
            # pkg/cloud/cloud.go:250 CreateFileSystem (CreateVolume), :288 UpdateFileSystem (expansion),
            # :310 DeleteFileSystem (DeleteVolume): all dynamic provisioning.
            "fsx:CreateFileSystem": dynamic_provisioning,
            "fsx:UpdateFileSystem": dynamic_provisioning,
            "fsx:DeleteFileSystem": dynamic_provisioning,
            "fsx:TagResource": dynamic_provisioning,
            # The S3 data repository association (and its service-linked role) is set up with the file system.
            "s3:ListBucket": dynamic_provisioning,
            "iam:CreateServiceLinkedRole": dynamic_provisioning,
            "iam:AttachRolePolicy": dynamic_provisioning,
            "iam:PutRolePolicy": dynamic_provisioning,
        },
    )
    assert not [r for r in template["Resources"].values() if "StorageClass" in json.dumps(r)]


def test_mountpoint_s3_csi_driver_reads_the_model_bucket(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """aws-mountpoint-s3-csi-driver v1.14.1 docs/CONFIGURATION.md:423-445 (read-only bucket access)."""
    operator, template = hyperpod
    assert_covers(
        "aws-mountpoint-s3-csi-driver-v1.14.1", template, _logical_id(operator.s3_csi_role), exceptions={}
    )


def test_hyperpod_keda_may_use_both_scalers_the_operator_renders(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """keda 2.17.1 (the operator's bundled chart): aws-cloudwatch and, with the AMP workspace, prometheus."""
    operator, template = hyperpod
    assert_covers("keda-2.17.1", template, _logical_id(operator.keda_role), exceptions={})


def test_gateway_keda_may_read_cloudwatch() -> None:
    """keda 2.20.2 (the gateway's own chart) in the disaggregated tier, which scales on CloudWatch only."""
    build = build_tier("disaggregated", **{"disaggregated.inference_gateway": GATEWAY})
    gateway = _one(build, InferenceGateway)
    assert gateway.keda_role is not None
    assert_covers(
        f"keda-{KEDA_VERSION}",
        build.templates()[DISAGGREGATED],
        _logical_id(gateway.keda_role),
        exceptions={"aps:QueryMetrics": "the disaggregated gateway renders aws-cloudwatch triggers only"},
    )


def test_operator_role_is_the_managed_policy_within_its_naming_scope(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """The HyperPod inference add-on's execution role carries the AWS managed policy
    AmazonSageMakerHyperPodInferenceAccess itself (so it is allowed every action the policy grants), plus one
    statement the troubleshooting guide asks for. The policy passes only roles named SageMakerHyperPodInference*
    and writes only to hyperpod-tls* buckets (its vendored v3: AllowPassRoleToSageMaker, S3PutObjectAccess)."""
    operator, template = hyperpod
    statements = {s["Sid"]: s for s in reference_policy(OPERATOR_MANAGED_POLICY)["Statement"]}
    (passed_roles,) = listed(statements["AllowPassRoleToSageMaker"]["Resource"])
    assert fnmatchcase(f"arn:aws:iam::111122223333:role/{OPERATOR_ROLE_PREFIX}-x", passed_roles)
    assert not fnmatchcase("arn:aws:iam::111122223333:role/Other", passed_roles)
    (tls_objects,) = listed(statements["S3PutObjectAccess"]["Resource"])
    assert fnmatchcase(f"arn:aws:s3:::{TLS_BUCKET_PREFIX}x-111122223333-us-west-2/cert.pem", tls_objects)
    role = template["Resources"][_logical_id(operator.operator_role)]["Properties"]
    (arn,) = role["ManagedPolicyArns"]
    assert arn["Fn::Join"][1][-1] == ":iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess"
    assert role["RoleName"].startswith(OPERATOR_ROLE_PREFIX)
    bucket = template["Resources"][_logical_id(operator.tls_bucket)]["Properties"]["BucketName"]
    assert bucket["Fn::Join"][1][0].startswith(TLS_BUCKET_PREFIX)


def test_operator_role_adds_to_the_managed_policy_only_what_it_lacks(
    hyperpod: tuple[HyperPodInferenceOperator, dict[str, Any]],
) -> None:
    """The project's own statements on the operator role, checked against the vendored managed policy (v3,
    tests/data/iam_reference/AmazonSageMakerHyperPodInferenceAccess-v3.json.SOURCE): what they allow beyond it is
    exactly the documented additions. ec2:CreateNetworkInterfacePermission, granted inline too, is already in the
    managed policy's EC2NetworkInterfaceActions statement (network-interface/*)."""
    operator, template = hyperpod
    # The managed policy names the aws partition; the template's partition is a token (a wildcard here).
    managed = [
        Grant(
            tuple(listed(s["Action"])),
            tuple(r.replace("arn:aws:", "arn:*:", 1) for r in listed(s["Resource"])),
        )
        for s in reference_policy(OPERATOR_MANAGED_POLICY)["Statement"]
    ]
    inline = {
        "Statement": [
            {"Effect": "Allow", "Action": list(g.actions), "Resource": list(g.resources)}
            for g in role_grants(template, _logical_id(operator.operator_role))
        ]
    }
    additions = {
        # SageMaker removes the permission it created on the ALB's VPC interfaces when the registered endpoint
        # is deleted or updated; the managed policy grants only the Create half (EC2NetworkInterfaceActions).
        "ec2:DeleteNetworkInterfacePermission": ["arn:*:ec2:*:*:network-interface/*"],
    }
    assert missing_grants(inline, managed) == additions


def test_amp_scraper_has_no_role_of_the_project(tmp_path: Path) -> None:
    """The AMP managed scraper reads the cluster and writes the workspace as the service-linked role
    AWSServiceRoleForAmazonPrometheusScraper (https://docs.aws.amazon.com/prometheus/latest/userguide/
    using-service-linked-roles.html); the project only binds its Kubernetes user (scraper_rbac). So the
    scraper carries no role configuration and no role of the stack trusts the scraper service."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Hub", env=cdk.Environment(account="111122223333", region="us-east-1"))
    hub = ObservabilityHub(stack, "Observability")
    hub.add_eks_scraper(
        "Scraper",
        cluster_arn="arn:aws:eks:us-east-1:111122223333:cluster/inference",
        subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        security_group_ids=["sg-0123456789abcdef0"],
        cluster_label="inference",
    )
    resources = Template.from_stack(stack).to_json()["Resources"]
    (scraper,) = [r for r in resources.values() if r["Type"] == "AWS::APS::Scraper"]
    assert "RoleConfiguration" not in scraper["Properties"]
    trusts = [
        json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Role"
    ]
    assert not [t for t in trusts if "aps.amazonaws.com" in t]


@pytest.mark.parametrize("tier", EKS_TIERS)
def test_no_tier_installs_the_ebs_csi_driver(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    """No EKS tier installs the EBS CSI driver (node root volumes come from launch templates), so there is no
    EBS CSI policy of the project's to check."""
    for template in tier_build(tier).templates().values():
        assert "ebs-csi" not in json.dumps(template).lower()


def test_helper_reports_a_dropped_action_and_a_narrowed_resource() -> None:
    """The helper itself can fail: a missing action and a grant on the wrong resource type are both reported."""
    reference = {
        "Statement": [
            {"Effect": "Allow", "Action": ["ec2:DescribeVpcs", "ec2:DescribeSubnets"], "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": "elasticloadbalancing:AddTags",
                "Resource": "arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*",
            },
        ]
    }
    template = {
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "Role"}],
                    "PolicyDocument": {
                        "Statement": [
                            {"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"},
                            {
                                "Effect": "Allow",
                                "Action": "elasticloadbalancing:AddTags",
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        [
                                            "arn:",
                                            {"Ref": "AWS::Partition"},
                                            ":elasticloadbalancing:*:*:targetgroup/*",
                                        ],
                                    ]
                                },
                            },
                        ]
                    },
                },
            },
        }
    }
    assert missing_grants(reference, role_grants(template, "Role")) == {
        "elasticloadbalancing:AddTags": ["arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*"]
    }
