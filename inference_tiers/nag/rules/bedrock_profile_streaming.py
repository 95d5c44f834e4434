"""BR4: a grant on an application inference profile includes the streaming action.

Applications reach a profile through Converse and ConverseStream alike; ConverseStream is authorized by
``bedrock:InvokeModelWithResponseStream``, so a grant of ``bedrock:InvokeModel`` alone fails every streamed
call through the profile at run time, long after deploy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdk_nag import NagMessageLevel

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

PROFILE_TYPE = "AWS::Bedrock::ApplicationInferenceProfile"


def _profile_references(resource: Resource, facts: AppFacts) -> set[str]:
    """How this stack's own application inference profiles appear in its policies (``<Id.InferenceProfileArn>``)."""
    return {
        f"<{p.logical_id}.{attribute}>"
        for p in facts.of_type(PROFILE_TYPE)
        if p.stack == resource.stack
        for attribute in ("InferenceProfileArn", "InferenceProfileIdentifier")
    } | {f"<{p.logical_id}>" for p in facts.of_type(PROFILE_TYPE) if p.stack == resource.stack}


def _is_profile(arn: str, own_profiles: set[str]) -> bool:
    return ":application-inference-profile/" in arn or arn in own_profiles


def _streamless_profiles(statements: list[Mapping[str, Any]], own_profiles: set[str]) -> list[str]:
    allows = [s for s in statements if iam.is_allow(s)]
    streamable = {r for s in allows if iam.covers_action(s, iam.INVOKE_STREAM) for r in iam.resources(s)}
    return [
        f"Resource::{arn}"
        for s in allows
        if iam.covers_action(s, iam.INVOKE_MODEL)
        for arn in iam.resources(s)
        if _is_profile(arn, own_profiles) and arn not in streamable and "*" not in streamable
    ]


def check(resource: Resource, facts: AppFacts) -> Result:
    documents = iam.identity_documents(resource)
    if not documents:
        return findings([])
    own_profiles = _profile_references(resource, facts)
    return findings([f for d in documents for f in _streamless_profiles(iam.statements(d), own_profiles)])


RULE = Rule(
    suffix="BR4",
    level=NagMessageLevel.ERROR,
    info="The policy allows bedrock:InvokeModel on an application inference profile but not streaming.",
    explanation=(
        "ConverseStream and InvokeModelWithResponseStream through the profile are denied without "
        "bedrock:InvokeModelWithResponseStream on the same profile ARN. Grant both actions on the profile "
        "(and on the models it routes to)."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html",
    resource_types=iam.IDENTITY_POLICY_TYPES,
    check=check,
)
