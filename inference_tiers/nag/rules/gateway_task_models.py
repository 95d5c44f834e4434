"""GW1: a container task role (an inference gateway's) may invoke only the Bedrock models it names.

Applies to identity policies of roles trusted by ``ecs-tasks.amazonaws.com``: each resource of an Allow on a
Bedrock invoke action must name one model or profile (no wildcard in the ARN's resource part; a Region
wildcard, which cross-Region inference profiles need, is fine). The guardrail condition on those grants is
BR2's check. One finding per wildcard resource: ``Resource::<arn>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

TASKS = "ecs-tasks.amazonaws.com"


def _attached_task_roles(policy: Resource, facts: AppFacts) -> bool:
    roles = {iam.render(r) for r in iam.as_list(policy.properties.get("Roles"))}
    return any(
        role.stack == policy.stack and f"<{role.logical_id}>" in roles and iam.trusts_service(role, TASKS)
        for role in facts.of_type("AWS::IAM::Role")
    )


def _names_one_model(arn: str) -> bool:
    # arn:<partition>:bedrock:<region>:<account>:<type>/<id>, intrinsics rendered as <...> (which may hold
    # '::' themselves); a value that is only an intrinsic is a resource of the app, so one resource.
    parts = re.sub(r"<[^>]*>", "token", arn).split(":", 5)
    return arn != "*" and (len(parts) < 6 or ("*" not in parts[5] and "?" not in parts[5]))


def _wildcards(document: Mapping[str, Any]) -> list[str]:
    return [
        f"Resource::{arn}"
        for s in iam.statements(document)
        if iam.is_allow(s) and iam.action_patterns(s, iam.BEDROCK_INVOKE)
        for arn in iam.resources(s)
        if not _names_one_model(arn)
    ]


def check(resource: Resource, facts: AppFacts) -> Result:
    if resource.type == "AWS::IAM::Role":
        applies = iam.trusts_service(resource, TASKS)
    else:
        applies = _attached_task_roles(resource, facts)
    if not applies:
        return NagRuleCompliance.NOT_APPLICABLE
    return findings([f for d in iam.identity_documents(resource) for f in _wildcards(d)])


RULE = Rule(
    suffix="GW1",
    level=NagMessageLevel.ERROR,
    info="The container task role may invoke Bedrock models it does not name.",
    explanation=(
        "An inference gateway's task role is the one principal every team's traffic goes through; a wildcard "
        "model resource lets any virtual key reach any model in the account, unapproved ones included. List "
        "the configured models' ARNs (foundation model, system or application inference profile), each with "
        "the guardrail condition (BR2)."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/security_iam_id-based-policy-examples.html",
    resource_types=frozenset({"AWS::IAM::Policy", "AWS::IAM::Role"}),
    check=check,
)
