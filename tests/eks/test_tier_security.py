"""Security properties of the EKS tiers' synthesized templates: encrypted log groups, confused-deputy trust.

Read from the default-configured templates of every tier built on EksCluster (one synth per tier per session),
so a construct that adds an unencrypted log group or a bare service trust anywhere in them fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.harness import TierBuild

EKS_TIERS = ["hyperpod", "disaggregated", "agent-sandbox"]

# Services whose trust carries aws:SourceAccount and aws:SourceArn in these tiers.
CONFUSED_DEPUTY_SERVICES = {
    "vpc-flow-logs.amazonaws.com",
    "sagemaker.amazonaws.com",
    "pods.eks.amazonaws.com",
    "grafana.amazonaws.com",
    "states.amazonaws.com",
}
# Services for whose roles AWS documents no source keys, so a condition on them could lock the service out:
# Lambda execution roles, EC2 instance profiles (node roles) and the EKS cluster service role.
NO_SOURCE_KEYS = {
    "lambda.amazonaws.com",
    "ec2.amazonaws.com",
    "eks.amazonaws.com",
}


def _template(tier_build: Callable[[str], TierBuild], tier: str) -> dict[str, Any]:
    (template,) = tier_build(tier).templates().values()
    return template


def _resources(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


@pytest.mark.parametrize("tier", EKS_TIERS)
def test_every_log_group_is_encrypted_with_a_key_cloudwatch_logs_may_use(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    template = _template(tier_build, tier)
    keys = _resources(template, "AWS::KMS::Key")
    groups = _resources(template, "AWS::Logs::LogGroup")
    assert groups
    for name, group in groups.items():
        key_arn = group["Properties"].get("KmsKeyId")
        assert key_arn is not None, f"{tier}: log group {name} has no KMS key"
        (key_id, attribute) = key_arn["Fn::GetAtt"]
        assert attribute == "Arn"
        statements = keys[key_id]["Properties"]["KeyPolicy"]["Statement"]
        logs_statements = [s for s in statements if "logs." in str(s["Principal"].get("Service"))]
        assert logs_statements, f"{tier}: key {key_id} of {name} does not admit CloudWatch Logs"
        for statement in logs_statements:
            # Scoped by the log group ARN in the encryption context, never to every caller of logs.
            assert set(statement["Condition"]) == {"ArnLike"}
            assert set(statement["Condition"]["ArnLike"]) == {"kms:EncryptionContext:aws:logs:arn"}


def _service_trusts(template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for name, role in _resources(template, "AWS::IAM::Role").items():
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            services = statement["Principal"].get("Service", [])
            for service in [services] if isinstance(services, str) else services:
                found.append((name, service, statement))
    return found


@pytest.mark.parametrize("tier", EKS_TIERS)
def test_service_trusts_carry_source_account_and_source_arn(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    trusts = _service_trusts(_template(tier_build, tier))
    services = {service for _, service, _ in trusts}
    assert services <= CONFUSED_DEPUTY_SERVICES | NO_SOURCE_KEYS, services - NO_SOURCE_KEYS
    checked = 0
    for name, service, statement in trusts:
        if service not in CONFUSED_DEPUTY_SERVICES:
            continue
        condition = statement.get("Condition", {})
        assert condition.get("StringEquals", {}).get("aws:SourceAccount") == {"Ref": "AWS::AccountId"}, name
        assert "aws:SourceArn" in condition.get("ArnLike", {}), f"{tier}: {name} ({service}) has no SourceArn"
        checked += 1
    # Flow logs in both tiers; HyperPod adds its execution role, the operator's SageMaker trust and the
    # observability collector; disaggregated adds the monitoring agent.
    assert checked >= 2


def test_pod_identity_roles_are_bound_to_their_own_cluster(tier_build: Callable[[str], TierBuild]) -> None:
    for tier in EKS_TIERS:
        template = _template(tier_build, tier)
        (cluster_id,) = _resources(template, "AWS::EKS::Cluster")
        pod_trusts = [t for t in _service_trusts(template) if t[1] == "pods.eks.amazonaws.com"]
        assert pod_trusts, tier
        for name, _, statement in pod_trusts:
            assert statement["Condition"]["ArnLike"]["aws:SourceArn"] == {
                "Fn::GetAtt": [cluster_id, "Arn"]
            }, name
            # Pod Identity tags the session: TagSession is allowed under the same conditions, not apart.
            assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"], name


def test_sagemaker_trusts_are_limited_to_this_accounts_sagemaker_resources(
    tier_build: Callable[[str], TierBuild],
) -> None:
    template = _template(tier_build, "hyperpod")
    sagemaker = [t for t in _service_trusts(template) if t[1] == "sagemaker.amazonaws.com"]
    # The HyperPod execution role and the inference operator role (which SageMaker uses for the endpoint).
    assert {name.rstrip("0123456789ABCDEF") for name, _, _ in sagemaker} == {
        "HyperPodExecutionRole",
        "InferenceOperatorOperatorRole",
    }
    for name, _, statement in sagemaker:
        assert statement["Condition"]["ArnLike"]["aws:SourceArn"] == {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:", {"Ref": "AWS::Region"}, ":",
                 {"Ref": "AWS::AccountId"}, ":*"],
            ]
        }, name  # fmt: skip


def test_operator_role_keeps_the_network_interface_permissions_of_vpc_endpoints(
    tier_build: Callable[[str], TierBuild],
) -> None:
    # Without them SageMaker cannot create the endpoint variant in the VPC ("... sufficient permissions for
    # creating an endpoint variant within a VPC", HyperPod inference troubleshooting).
    template = _template(tier_build, "hyperpod")
    (role_id,) = [
        k for k in _resources(template, "AWS::IAM::Role") if k.startswith("InferenceOperatorOperatorRole")
    ]
    granted: set[str] = set()
    for policy in _resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            actions = statement["Action"]
            resources = statement["Resource"]
            resource_list = resources if isinstance(resources, list) else [resources]
            if any("network-interface/" in str(r) for r in resource_list):
                granted.update([actions] if isinstance(actions, str) else actions)
    assert {"ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission"} <= granted
