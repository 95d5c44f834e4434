"""The InferenceTiers-Bedrock stack: outputs, application role, settings validation, variants, and reuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.app_factory import parse_app_config
from inference_tiers.config import AccountRequirements, ConfigError
from inference_tiers.nag import InferenceChecks
from inference_tiers.stacks.bedrock import BedrockSettings
from tests.harness import PROJECT_ROOT, TierBuild, build_tier, cdk_json_context, cfn_lint_errors, nag_findings

OUTPUTS = {
    "GuardrailId",
    "GuardrailVersion",
    "GuardrailArn",
    "GuardrailVersionParameter",
    "InferenceProfileArn",
    "ModelId",
    "ApplicationRoleArn",
    "DashboardUrl",
    "ConverseExample",
}


def _role_trust(template: Template) -> list[dict[str, Any]]:
    roles = template.find_resources(
        "AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp("^Application role")}}
    )
    (role,) = roles.values()
    statements: list[dict[str, Any]] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return statements


def _nag_and_lint(build: TierBuild) -> None:
    # Both packs add_nag_checks runs (the logging variant needs no BR5 acknowledgment: it turns logging on).
    for pack in (AwsSolutionsChecks(), InferenceChecks()):
        assert nag_findings(build.app, pack) == []
    for name, template in build.templates().items():
        assert cfn_lint_errors(template) == [], name


# ------------------------------------------------------------------------------------------ default tier


def test_outputs_are_exactly_the_agreed_ones(tier_build: Callable[[str], TierBuild]) -> None:
    build = tier_build("bedrock")
    assert [s.stack_name for s in build.stacks] == ["InferenceTiers-Bedrock"]
    assert set(build.template().find_outputs("*")) == OUTPUTS


def test_model_id_and_profile_outputs_are_the_application_profile(
    tier_build: Callable[[str], TierBuild],
) -> None:
    build = tier_build("bedrock")
    stack = build.stacks[0]
    outputs = build.template().find_outputs("*")
    profile = stack.resolve(stack.inference_profile.profile_arn)  # type: ignore[attr-defined]
    assert outputs["ModelId"]["Value"] == outputs["InferenceProfileArn"]["Value"] == profile
    build.template().has_resource_properties(
        "AWS::Bedrock::ApplicationInferenceProfile",
        {
            "ModelSource": {
                "CopyFrom": Match.object_like(
                    {"Fn::Join": ["", Match.array_with([":inference-profile/us.amazon.nova-2-lite-v1:0"])]}
                )
            },
            "Tags": Match.array_with([{"Key": "cost-center", "Value": "generative-ai"}]),
        },
    )


def _alarm_model_ids(template: Template) -> dict[str, list[Any]]:
    """Each alarm's ModelId dimension values (alarms on metrics without one, guardrail or log delivery, left out)."""
    found: dict[str, list[Any]] = {}
    for logical_id, alarm in template.find_resources("AWS::CloudWatch::Alarm").items():
        props = alarm["Properties"]
        metrics = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m] or [
            props
        ]
        ids = [d["Value"] for m in metrics for d in m.get("Dimensions", []) if d["Name"] == "ModelId"]
        if ids:
            found[logical_id] = ids
    return found


def test_every_model_alarm_and_graph_watches_the_application_profile_the_app_calls(
    tier_build: Callable[[str], TierBuild],
) -> None:
    """The app calls the application profile's ARN, and Bedrock reports those calls under the profile's id
    (evidence: tests/bedrock/test_monitoring.py); direct system-profile callers stay watched too."""
    build = tier_build("bedrock")
    stack = build.stacks[0]
    profile_id = stack.resolve(stack.inference_profile.profile_id)  # type: ignore[attr-defined]
    assert profile_id["Fn::GetAtt"][1] == "InferenceProfileId"
    alarms = _alarm_model_ids(build.template())
    assert len(alarms) == 5
    for logical_id, ids in alarms.items():
        assert profile_id in ids and "us.amazon.nova-2-lite-v1:0" in ids, logical_id
    (dashboard,) = build.template().find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    system = "".join(p for p in parts if isinstance(p, str)).count('"ModelId","us.amazon.nova-2-lite-v1:0"')
    assert system > 0 and parts.count(profile_id) == system


def test_converse_example_passes_the_guardrail_version(tier_build: Callable[[str], TierBuild]) -> None:
    build = tier_build("bedrock")
    stack = build.stacks[0]
    parts = build.template().find_outputs("ConverseExample")["ConverseExample"]["Value"]["Fn::Join"][1]
    assert parts[0] == "aws bedrock-runtime converse --region "
    assert stack.resolve(stack.guardrail.guardrail_version) in parts  # type: ignore[attr-defined]
    assert any("--guardrail-config guardrailIdentifier=" in p for p in parts if isinstance(p, str))


def test_application_role_trusts_the_account_and_holds_only_the_guarded_access(
    tier_build: Callable[[str], TierBuild],
) -> None:
    build = tier_build("bedrock")
    template = build.template()
    (trust,) = _role_trust(template)
    assert trust["Principal"] == {
        "AWS": {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
            ]
        }
    }
    policies = template.find_resources("AWS::IAM::Policy")
    (policy,) = [p for name, p in policies.items() if name.startswith("ApplicationRole")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = {
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "bedrock:ApplyGuardrail",
        "kms:Decrypt",
    }
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert len(denies) == 1 and "bedrock:GuardrailIdentifier" in denies[0]["Condition"]["StringNotEquals"]
    for statement in statements:
        if (
            statement["Effect"] == "Allow"
            and statement["Action"] != "bedrock:ApplyGuardrail"
            and statement["Action"] != "kms:Decrypt"
        ):
            assert "bedrock:GuardrailIdentifier" in statement["Condition"]["StringEquals"]


def test_invocation_logging_is_off_by_default(tier_build: Callable[[str], TierBuild]) -> None:
    template = tier_build("bedrock").template()
    assert template.find_resources("Custom::BedrockModelInvocationLogging") == {}
    template.resource_count_is("AWS::CloudWatch::Alarm", 6)


def test_an_empty_cost_tag_value_is_accepted_as_bedrock_allows() -> None:
    build = build_tier("bedrock", **{"bedrock.cost_tags": '{"team": ""}'})
    build.template().has_resource_properties(
        "AWS::Bedrock::ApplicationInferenceProfile",
        {"Tags": Match.array_with([{"Key": "team", "Value": ""}])},
    )


def test_account_requirements_name_the_model_and_profile() -> None:
    config = parse_app_config(cdk_json_context())
    requirements = config.for_tier("bedrock", BedrockSettings).account_requirements()
    assert requirements == AccountRequirements(
        bedrock_model_id="amazon.nova-2-lite-v1:0", bedrock_inference_profile_id="us.amazon.nova-2-lite-v1:0"
    )


# ------------------------------------------------------------------------------------------ variants


def test_logging_variant_passes_nag_and_cfn_lint_and_alarms_on_delivery_failures() -> None:
    build = build_tier(
        "bedrock", **{"bedrock.invocation_logging": "true", "bedrock.alarm_email": "ops@example.com"}
    )
    _nag_and_lint(build)
    template = build.template()
    template.resource_count_is("Custom::BedrockModelInvocationLogging", 1)
    template.resource_count_is("AWS::CloudWatch::Alarm", 7)
    template.has_resource(
        "AWS::Logs::LogGroup", {"DeletionPolicy": "Retain", "Properties": {"RetentionInDays": 365}}
    )


def test_global_profile_without_application_profile_variant() -> None:
    build = build_tier(
        "bedrock", **{"bedrock.inference_profile": "global", "bedrock.application_inference_profile": "false"}
    )
    _nag_and_lint(build)
    template = build.template()
    template.resource_count_is("AWS::Bedrock::ApplicationInferenceProfile", 0)
    assert template.find_outputs("ModelId")["ModelId"]["Value"] == "global.amazon.nova-2-lite-v1:0"
    alarms = _alarm_model_ids(template)
    assert len(alarms) == 5
    assert {model_id for ids in alarms.values() for model_id in ids} == {"global.amazon.nova-2-lite-v1:0"}


def test_foundation_model_through_an_application_profile_and_a_standard_guardrail() -> None:
    build = build_tier(
        "bedrock",
        **{
            "bedrock.inference_profile": "none",
            "bedrock.guardrail_tier": "STANDARD",
            "bedrock.guardrail_profile": "us.guardrail.v1:0",
        },
    )
    _nag_and_lint(build)
    template = build.template()
    template.has_resource_properties(
        "AWS::Bedrock::Guardrail",
        {
            "ContentPolicyConfig": {"ContentFiltersTierConfig": {"TierName": "STANDARD"}},
            "CrossRegionConfig": Match.any_value(),
        },
    )
    template.has_resource_properties(
        "AWS::Bedrock::ApplicationInferenceProfile",
        {
            "ModelSource": {
                "CopyFrom": Match.object_like(
                    {"Fn::Join": ["", Match.array_with(["::foundation-model/amazon.nova-2-lite-v1:0"])]}
                )
            }
        },
    )


@pytest.mark.parametrize("model_id", ["acme.model--preview-v1:0", f"acme.{'m' * 63}.{'n' * 63}.{'o' * 63}"])
def test_any_model_id_the_setting_accepts_builds_the_application_profile(model_id: str) -> None:
    # Double hyphens and ids over 171 characters match MODEL_ID_PATTERN but not the profile description's
    # pattern, so the description must not be derived from the model id.
    build = build_tier("bedrock", **{"bedrock.model_id": model_id})
    build.template().has_resource_properties(
        "AWS::Bedrock::ApplicationInferenceProfile",
        {
            "ModelSource": {
                "CopyFrom": Match.object_like(
                    {"Fn::Join": ["", Match.array_with([Match.string_like_regexp(model_id)])]}
                )
            }
        },
    )


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        (
            "444455556666",
            {"AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::444455556666:root"]]}},
        ),
        ("arn:aws:iam::444455556666:role/app", {"AWS": "arn:aws:iam::444455556666:role/app"}),
        ("lambda.amazonaws.com", {"Service": "lambda.amazonaws.com"}),
    ],
)
def test_application_role_principal_is_configurable(principal: str, expected: dict[str, Any]) -> None:
    template = build_tier("bedrock", **{"bedrock.application_role_principal": principal}).template()
    (trust,) = _role_trust(template)
    assert trust["Principal"] == expected


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"bedrock.guardrail_tier": "STANDARD"},
            r"'bedrock.guardrail_tier': got 'STANDARD'; expected CLASSIC, or STANDARD together with bedrock.guardrail_profile",
        ),
        (
            {"bedrock.guardrail_tier": "premium"},
            r"'bedrock.guardrail_tier': got 'premium'; expected one of CLASSIC, STANDARD",
        ),
        ({"bedrock.guardrail_profile": "us-guardrail"}, r"'bedrock.guardrail_profile': got 'us-guardrail'"),
        (
            {"bedrock.model_id": "us.amazon.nova-2-lite-v1:0"},
            r"'bedrock.model_id': got 'us.amazon.nova-2-lite-v1:0'; expected a foundation-model id without the geography prefix",
        ),
        ({"bedrock.model_id": "Nova Lite"}, r"'bedrock.model_id': got 'Nova Lite'"),
        (
            {"bedrock.inference_profile": "mars"},
            r"'bedrock.inference_profile': got 'mars'; expected one of us, eu",
        ),
        (
            {"bedrock.inference_profile": "none", "bedrock.application_inference_profile": "false"},
            r"'bedrock.inference_profile': got 'none'; expected a geography, or 'none' only with",
        ),
        (
            {"bedrock.log_retention_days": "100"},
            r"'bedrock.log_retention_days': got 100; expected one of CloudWatch Logs' retention periods",
        ),
        ({"bedrock.tpm_quota": "0"}, r"'bedrock.tpm_quota': got '0'; expected an integer from 1"),
        ({"bedrock.tpm_alarm_percent": "120"}, r"'bedrock.tpm_alarm_percent': got '120'"),
        (
            {"bedrock.application_role_principal": "everyone"},
            r"'bedrock.application_role_principal': got 'everyone'",
        ),
        ({"bedrock.alarm_email": "ops"}, r"'bedrock.alarm_email': got 'ops'; expected an email address"),
        ({"bedrock.cost_tags": '{"team": "a&b"}'}, r"'bedrock.cost_tags.team': got 'a&b'"),
        ({"bedrock.cost_tags": "not json"}, r"'bedrock.cost_tags': got 'not json'"),
        ({"bedrock.cost_tags": '{"team": 7}'}, r"'bedrock.cost_tags.team': got 7; expected a tag value"),
        ({"bedrock.cost_tags": f'{{"team": "{"t" * 257}"}}'}, r"'bedrock.cost_tags.team': got 't+'"),
        (
            {"bedrock.cost_tags": '{"team": "a", "AWS:createdBy": "me"}'},
            r"'bedrock.cost_tags': got \{.*\}; expected tag keys that do not start with 'aws:' .*got AWS:createdBy",
        ),
        (
            {"bedrock.invocation_logging": "maybe"},
            r"'bedrock.invocation_logging': got 'maybe'; expected true or false",
        ),
        (
            {"bedrock.no_such_setting": "1"},
            r"'bedrock.no_such_setting': got '1'; expected a known key: bedrock.alarm_email",
        ),
        ({"tier": "bedrok"}, r"context key 'tier': got 'bedrok'; expected a comma-separated list of bedrock"),
    ],
)
def test_bad_settings_raise_a_clear_value_error(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_tier(**{"tier": "bedrock", **overrides})


# ------------------------------------------------------------------------------------------ reuse


def test_the_stack_module_imports_on_its_own() -> None:
    """Another app may import the stack module before app_factory (which imports it to register the tier)."""
    import subprocess
    import sys

    code = "import inference_tiers.stacks.bedrock as b; print(b.TIER.spec.name, b.BedrockStack.__name__)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=PROJECT_ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["bedrock", "BedrockStack"]
