"""ApplicationInferenceProfile: model source, cost tags, generated names, and CloudFormation pattern checks."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    CrossRegionProfile,
    FoundationModel,
    Geography,
)

MODEL = "amazon.nova-2-lite-v1:0"
CRIS = CrossRegionProfile(model_id=MODEL, geography=Geography.US)


def _profile(**kwargs: Any) -> tuple[cdk.Stack, dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "Stack")
    ApplicationInferenceProfile(stack, "Profile", **{"model_source": CRIS, **kwargs})
    (resource,) = (
        Template.from_stack(stack).find_resources("AWS::Bedrock::ApplicationInferenceProfile").values()
    )
    return stack, resource["Properties"]


def test_copies_the_cross_region_profile_and_carries_the_cost_tags() -> None:
    stack, props = _profile(
        profile_name="support bot_prod-1",
        description="Support bot: Nova 2 Lite v1.0",
        cost_tags={"cost-center": "1234", "app": "support bot"},
    )
    assert props["InferenceProfileName"] == "support bot_prod-1"
    assert props["Description"] == "Support bot: Nova 2 Lite v1.0"
    assert props["ModelSource"] == {
        "CopyFrom": stack.resolve(
            f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/us.{MODEL}"
        )
    }
    assert props["Tags"] == [{"Key": "app", "Value": "support bot"}, {"Key": "cost-center", "Value": "1234"}]


def test_copies_a_foundation_model() -> None:
    stack, props = _profile(model_source=FoundationModel(MODEL))
    assert props["ModelSource"] == {
        "CopyFrom": stack.resolve(f"arn:{stack.partition}:bedrock:{stack.region}::foundation-model/{MODEL}")
    }


def test_generated_name_matches_the_pattern_and_changes_with_the_model_source() -> None:
    import re

    from inference_tiers.constructs.bedrock.inference_profile import NAME_PATTERN

    _, us = _profile()
    _, eu = _profile(model_source=CrossRegionProfile(model_id=MODEL, geography=Geography.EU))
    for name in (us["InferenceProfileName"], eu["InferenceProfileName"]):
        assert re.fullmatch(NAME_PATTERN, name) and len(name) <= 64, name
    # A new model source replaces the profile; a new name avoids a clash with the one being replaced.
    assert us["InferenceProfileName"] != eu["InferenceProfileName"]


def test_model_source_exposes_the_profile_for_invoke_access() -> None:
    stack = cdk.Stack(cdk.App(), "Stack")
    profile = ApplicationInferenceProfile(stack, "Profile", model_source=CRIS)
    source = profile.model_source
    assert source.source == CRIS
    assert stack.resolve(source.profile_arn) == {
        "Fn::GetAtt": [stack.get_logical_id(profile.resource), "InferenceProfileArn"]
    }
