"""Seam: the Karpenter controller's IAM policy against upstream's reference policy of the pinned release.

Upstream evidence: ``tests/data/sandbox/karpenter/cloudformation.yaml``, a byte-identical copy of
aws/karpenter-provider-aws @ v1.14.1 (bde00654) ``website/content/en/docs/getting-started/
getting-started-with-karpenter/cloudformation.yaml`` (see SOURCE.md). Every action it grants must be granted
here too, or be in ``NOT_GRANTED`` with the reason, checked against the controller's source at that tag.
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
