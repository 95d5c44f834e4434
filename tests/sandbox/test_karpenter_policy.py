"""Seam: the Karpenter controller's IAM policy against upstream's reference policy of the pinned release.

Upstream evidence: ``tests/data/sandbox/karpenter/cloudformation.yaml``, a byte-identical copy of
aws/karpenter-provider-aws @ v1.14.1 (bde00654) ``website/content/en/docs/getting-started/
getting-started-with-karpenter/cloudformation.yaml`` (see SOURCE.md). Every action it grants must be granted
here too, or be in ``NOT_GRANTED`` with the reason, checked against the controller's source at that tag; and each
statement's Condition (operators, keys, values) must equal its upstream counterpart's but for ``DIFFERENCES``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Template

from tests.harness import TierBuild
from tests.sandbox.helpers import DATA, karpenter_role_id, policy_statements

STACK = "InferenceTiers-AgentSandbox"

# Upstream actions the project's policy leaves out on purpose, each with the evidence that Karpenter v1.14.1 never
# calls it in this tier (paths in aws/karpenter-provider-aws @ v1.14.1).
NOT_GRANTED = {
    # Karpenter creates, tags and fills instance profiles only for an EC2NodeClass with spec.role
    # (pkg/controllers/nodeclass/instanceprofile.go:59-60); the tier's EC2NodeClass names spec.instanceProfile,
    # a profile the stack owns. The finalizer deletes only profiles it finds under its own path prefix or by the
    # legacy name (pkg/controllers/nodeclass/controller.go:175-201), neither of which exists here, and a
    # NotFound from GetInstanceProfile ends the deletion (pkg/providers/instanceprofile/instanceprofile.go:188-194).
    "iam:CreateInstanceProfile": "no spec.role: Karpenter makes no instance profile",
    "iam:TagInstanceProfile": "no spec.role: Karpenter makes no instance profile",
    "iam:AddRoleToInstanceProfile": "no spec.role: Karpenter makes no instance profile",
    "iam:RemoveRoleFromInstanceProfile": "no spec.role: Karpenter makes no instance profile",
    "iam:DeleteInstanceProfile": "no spec.role: no profile of Karpenter's to delete",
    # Only called when settings.enableZonalShift is on (pkg/operator/operator.go:145-147); the chart values the
    # tier renders (inference_tiers/k8s/sandbox_nodes.py karpenter_values) leave it off.
    "arc-zonal-shift:GetManagedResource": "zonal shift is not enabled",
}


class _CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (``!Sub``, ``!GetAtt``, ``!Ref``) as their plain values."""


_CloudFormationLoader.add_multi_constructor(
    "!",
    lambda loader, _suffix, node: (
        loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None
    ),
)


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return yaml.load((DATA / "karpenter" / "cloudformation.yaml").read_text(), Loader=_CloudFormationLoader)


@pytest.fixture(scope="module")
def upstream_actions(reference: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every action of upstream's controller policies, with the statements that grant it."""
    found: dict[str, list[dict[str, Any]]] = {}
    for resource in reference["Resources"].values():
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            for statement in json.loads(resource["Properties"]["PolicyDocument"])["Statement"]:
                assert statement["Effect"] == "Allow"
                for action in _as_list(statement["Action"]):
                    found.setdefault(action, []).append(statement)
    return found


@pytest.fixture(scope="module")
def granted(tier_build: Callable[[str], TierBuild]) -> dict[str, list[dict[str, Any]]]:
    """Every action of the project's Karpenter controller role, with the statements that grant it."""
    template: Template = tier_build("agent-sandbox").template(STACK)
    found: dict[str, list[dict[str, Any]]] = {}
    for statement in policy_statements(template, karpenter_role_id(template)).values():
        assert statement["Effect"] == "Allow"
        for action in _as_list(statement["Action"]):
            found.setdefault(action, []).append(statement)
    return found


def test_every_upstream_action_is_granted_or_left_out_with_a_reason(
    upstream_actions: dict[str, list[dict[str, Any]]], granted: dict[str, list[dict[str, Any]]]
) -> None:
    assert len(upstream_actions) > 20  # the five managed policies were read, not an empty document
    missing = sorted(set(upstream_actions) - set(granted) - set(NOT_GRANTED))
    assert missing == []


def test_the_exceptions_are_upstream_actions_that_stay_ungranted(
    upstream_actions: dict[str, list[dict[str, Any]]], granted: dict[str, list[dict[str, Any]]]
) -> None:
    assert sorted(set(NOT_GRANTED) - set(upstream_actions)) == []
    assert sorted(set(NOT_GRANTED) & set(granted)) == []


def test_instance_profiles_are_listed_and_read_as_upstream_scopes_them(
    upstream_actions: dict[str, list[dict[str, Any]]], granted: dict[str, list[dict[str, Any]]]
) -> None:
    # W4: the EC2NodeClass finalizer lists profiles and reads the legacy one by name; both denied, it never ends.
    (upstream_read,) = upstream_actions["iam:GetInstanceProfile"]
    assert upstream_read["Resource"] == "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"
    (read,) = granted["iam:GetInstanceProfile"]
    assert read["Resource"] == {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":instance-profile/*"],
        ]
    }
    (listing,) = granted["iam:ListInstanceProfiles"]
    assert listing["Resource"] == "*" and "Condition" not in listing


def test_instance_status_is_readable_in_the_region(granted: dict[str, list[dict[str, Any]]]) -> None:
    # W5: without it the instance-status controller turns its health checks off
    # (pkg/controllers/interruption/instancestatus_controller.go:95-100).
    (describe,) = granted["ec2:DescribeInstanceStatus"]
    assert describe["Resource"] == "*"
    assert describe["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


def test_every_upstream_interruption_rule_feeds_the_queue(
    reference: dict[str, Any], tier_build: Callable[[str], TierBuild]
) -> None:
    # W11: upstream's five rules (cloudformation.yaml:410-464), the capacity-reservation one included.
    upstream = {
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in reference["Resources"].values()
        if r["Type"] == "AWS::Events::Rule"
    }
    rules = tier_build("agent-sandbox").template(STACK).find_resources("AWS::Events::Rule").values()
    ours = {
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in rules
    }
    assert len(upstream) == 5
    assert ours == upstream


# The upstream statement (Sid in cloudformation.yaml) each statement of the project's policy narrows; None: no
# upstream counterpart. CDK's grants (queue, queue key) have no Sid: they are matched by their actions.
COUNTERPART: dict[str, str | None] = {
    "LaunchFromImagesSubnetsAndSecurityGroups": "AllowScopedEC2InstanceAccessActions",
    "LaunchWithOwnLaunchTemplates": "AllowScopedEC2LaunchTemplateAccessActions",
    "CreateTaggedInstances": "AllowScopedEC2InstanceActionsWithTags",
    "TagOnCreate": "AllowScopedResourceCreationTagging",
    "TagOwnInstances": "AllowScopedResourceTagging",
    "DeleteOwnInstancesAndTemplates": "AllowScopedDeletion",
    "ReadRegionalCatalogue": "AllowRegionalReadActions",
    "ReadAmiParameters": "AllowSSMReadActions",
    "ReadPrices": "AllowPricingReadActions",
    "PassNodeRole": "AllowPassingInstanceRole",
    "DescribeCluster": "AllowAPIServerEndpointDiscovery",
    "ListInstanceProfiles": "AllowUnscopedInstanceProfileListAction",
    "ReadInstanceProfiles": "AllowInstanceProfileReadActions",
    "EncryptNodeVolumes": None,
}

_CLUSTER_NAME = "${ClusterName}"
# Upstream's legacy cluster tag: its key holds the cluster name, a deploy-time token here, and CDK cannot render a
# token inside a policy's condition key. The project conditions on eks:eks-cluster-name instead, which names the same
# cluster and which Karpenter 1.14.1 sets on everything it creates (upstream's AllowScopedEC2InstanceActionsWithTags
# requires it as a request tag).
_OWNED = "kubernetes.io/cluster/${ClusterName}"
_BY_CLUSTER_TAG = "the cluster is named by eks:eks-cluster-name, not by the kubernetes.io/cluster/<name> key (a token in a key)"


def _condition(operator: str, key: str, value: str) -> list[tuple[str, str, str]]:
    return [(operator, key, value)]


# How each statement's Condition differs from its upstream counterpart's (operator, key, value triples, the cluster
# name and Region as upstream writes them), with the reason. The test asserts exactly this list.
DIFFERENCES: dict[str, dict[str, Any]] = {
    "CreateTaggedInstances": {
        "extra": [],
        "missing": _condition("StringEquals", f"aws:RequestTag/{_OWNED}", "owned"),
        "reason": _BY_CLUSTER_TAG + " (upstream requires both request tags)",
    },
    "TagOnCreate": {
        "extra": [],
        "missing": _condition("StringEquals", f"aws:RequestTag/{_OWNED}", "owned"),
        "reason": _BY_CLUSTER_TAG + " (upstream requires both request tags)",
    },
    **{
        sid: {
            "extra": _condition("StringEquals", "aws:ResourceTag/eks:eks-cluster-name", _CLUSTER_NAME),
            "missing": _condition("StringEquals", f"aws:ResourceTag/{_OWNED}", "owned"),
            "reason": _BY_CLUSTER_TAG,
        }
        for sid in ("LaunchWithOwnLaunchTemplates", "TagOwnInstances", "DeleteOwnInstancesAndTemplates")
    },
    "PassNodeRole": {
        "extra": [],
        "missing": _condition("StringEquals", "iam:PassedToService", "ec2.amazonaws.com.cn"),
        "reason": "EC2's service name in the China partition; the tier's stacks are for the aws partition",
    },
    "EncryptNodeVolumes": {
        # kms:ViaService names a service endpoint with its Region (AWS KMS Developer Guide, "Condition keys for
        # AWS KMS", kms:ViaService, example ec2.us-west-2.amazonaws.com); ec2.amazonaws.com would match no request.
        "extra": _condition("StringEquals", "kms:ViaService", "ec2.${AWS::Region}.amazonaws.com"),
        "missing": [],
        "reason": "upstream's nodes use the default EBS key; the tier's node volumes use their own key, only via EC2",
    },
}

Condition = frozenset[tuple[str, str, str]]


def _flat(condition: dict[str, dict[str, Any]], tokens: dict[str, str]) -> Condition:
    """A Condition block as (operator, key, value) triples, CloudFormation references as upstream's ``${...}``."""

    def text(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Ref" in value:
            return tokens.get(value["Ref"], f"${{{value['Ref']}}}")
        separator, parts = value["Fn::Join"]
        return str(separator).join(text(p) for p in parts)

    return frozenset(
        (operator, key, text(value))
        for operator, pairs in condition.items()
        for key, values in pairs.items()
        for value in (values if isinstance(values, list) else [values])
    )


def _counterparts(reference: dict[str, Any], template: Template) -> list[tuple[str, dict[str, Any], Any]]:
    """(our Sid, our statement, upstream statement or None) for every statement of the controller role."""
    upstream = {
        s["Sid"]: s
        for r in reference["Resources"].values()
        if r["Type"] == "AWS::IAM::ManagedPolicy"
        for s in json.loads(r["Properties"]["PolicyDocument"])["Statement"]
    }
    found = []
    for sid, statement in policy_statements(template, karpenter_role_id(template)).items():
        actions = set(_as_list(statement["Action"]))
        if sid in COUNTERPART:
            other = COUNTERPART[sid]
        else:  # a CDK grant without Sid: the upstream statement granting any of its actions, named after either
            (other,) = {u for u, s in upstream.items() if actions & set(_as_list(s["Action"]))} or {None}
            sid = other or " ".join(sorted(actions))
        found.append((sid, statement, upstream[other] if other else None))
    return found


@pytest.fixture(scope="module")
def paired(reference: dict[str, Any], tier_build: Callable[[str], TierBuild]) -> list[tuple[str, Any, Any]]:
    return _counterparts(reference, tier_build("agent-sandbox").template(STACK))


def test_each_statement_is_compared_with_the_upstream_statement_granting_its_actions(
    paired: list[tuple[str, Any, Any]], upstream_actions: dict[str, list[dict[str, Any]]]
) -> None:
    assert {sid for sid, _, _ in paired} >= set(COUNTERPART)
    for sid, ours, theirs in paired:
        upstream = {a for a in _as_list(ours["Action"]) if a in upstream_actions}
        assert upstream <= set(_as_list(theirs["Action"]) if theirs else []), sid


def test_conditions_differ_from_upstream_exactly_as_recorded(
    paired: list[tuple[str, Any, Any]], tier_build: Callable[[str], TierBuild]
) -> None:
    template = tier_build("agent-sandbox").template(STACK)
    (cluster_id,) = template.find_resources("AWS::EKS::Cluster")
    tokens = {cluster_id: "${ClusterName}"}
    found = {}
    for sid, ours, theirs in paired:
        mine = _flat(ours.get("Condition", {}), tokens)
        upstream = _flat(theirs.get("Condition", {}), {}) if theirs else frozenset()
        if mine != upstream:
            found[sid] = {"extra": sorted(mine - upstream), "missing": sorted(upstream - mine)}
    assert found == {sid: {"extra": d["extra"], "missing": d["missing"]} for sid, d in DIFFERENCES.items()}
    assert all(d["reason"] for d in DIFFERENCES.values())


def test_eventbridge_may_encrypt_what_it_sends_to_the_interruption_queue(
    tier_build: Callable[[str], TierBuild],
) -> None:
    """An SSE-KMS queue accepts a service's message only if the key lets that service call kms:GenerateDataKey and
    kms:Decrypt (Amazon SQS Developer Guide, "Amazon SQS key management", "Enable compatibility between event sources
    from AWS services and encrypted queues"). Without them EventBridge's deliveries fail silently."""
    template = tier_build("agent-sandbox").template(STACK)
    (queue,) = template.find_resources("AWS::SQS::Queue").values()
    key_id = queue["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    statements = template.to_json()["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    to_events = [s for s in statements if s["Principal"] == {"Service": "events.amazonaws.com"}]
    assert {a for s in to_events for a in _as_list(s["Action"])} >= {"kms:Decrypt", "kms:GenerateDataKey*"}
    # Only for rules of this account (no confused deputy).
    assert [s["Condition"] for s in to_events] == [
        {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    ]
