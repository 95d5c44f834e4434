"""Deploy-time values are accepted where they make sense and reach the template unparsed (an alarm email or a
guardrail version from a CfnParameter, ARNs and keys from other stacks), the synth succeeds with cdk-nag clean;
and they are refused, by name, where a value must be known at synth time (the guardrail's policy, whose hash
names its version; model ids, from which ARNs and acknowledged findings are derived)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    ApplicationProfile,
    BedrockMonitoring,
    CrossRegionProfile,
    DeniedTopic,
    FoundationModel,
    Geography,
    Guardrail,
    ImportedGuardrail,
    ModelInvocationLogging,
    ModelInvokeAccess,
    WordFilter,
)
from inference_tiers.validation import ArgumentError
from tests.harness import nag_findings

MODEL = "amazon.nova-2-lite-v1:0"


def _parameter(stack: cdk.Stack, name: str) -> str:
    return cdk.CfnParameter(stack, name).value_as_string


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out"))), "Tokens")
    role = iam.Role(stack, "AppRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    shared_key = kms.Key.from_key_arn(stack, "SharedKey", cdk.Fn.import_value("SharedKeyArn"))
    guardrail = Guardrail(
        stack, "Guardrail", guardrail_name=_parameter(stack, "GuardrailName"), kms_key=shared_key
    )
    imported = ImportedGuardrail(
        guardrail_arn=cdk.Fn.import_value("TeamGuardrailArn"),
        guardrail_version=_parameter(stack, "TeamGuardrailVersion"),
        kms_key_arn=cdk.Fn.import_value("TeamGuardrailKeyArn"),
        cross_region_guardrail_profile=_parameter(stack, "TeamGuardrailProfile"),
    )
    profile = ApplicationInferenceProfile(
        stack,
        "Profile",
        model_source=CrossRegionProfile(model_id=MODEL, geography=Geography.US),
        profile_name=_parameter(stack, "ProfileName"),
        description=_parameter(stack, "ProfileDescription"),
        cost_tags={"team": _parameter(stack, "Team"), "cost-center": "genai"},
    )
    ModelInvokeAccess(stack, "OwnAccess", grantee=role, model=profile.model_source, guardrail=guardrail)
    ModelInvokeAccess(
        stack,
        "TeamAccess",
        grantee=role,
        model=ApplicationProfile(
            profile_arn=cdk.Fn.import_value("TeamProfileArn"), source=FoundationModel(MODEL)
        ),
        guardrail=imported,
    )
    ModelInvocationLogging(stack, "Logging", key_prefix=_parameter(stack, "LogPrefix"), kms_key=shared_key)
    BedrockMonitoring(
        stack,
        "Monitoring",
        model_id=_parameter(stack, "MonitoredModelId"),
        tpm_quota=1000,
        guardrail=guardrail,
        alarm_email=_parameter(stack, "AlarmEmail"),
    )
    return {"stack": stack, "template": Template.from_stack(stack).to_json()}


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_the_synth_succeeds_and_nag_finds_nothing(built: dict[str, Any]) -> None:
    assert nag_findings(built["stack"], AwsSolutionsChecks()) == []


def test_the_alarm_email_from_a_parameter_is_the_subscription_endpoint(built: dict[str, Any]) -> None:
    (subscription,) = _resources(built["template"], "AWS::SNS::Subscription")
    assert subscription["Protocol"] == "email"
    assert subscription["Endpoint"] == {"Ref": "AlarmEmail"}


def test_the_monitored_model_id_from_a_parameter_is_every_alarms_dimension(built: dict[str, Any]) -> None:
    dimensions = [
        d
        for alarm in _resources(built["template"], "AWS::CloudWatch::Alarm")
        for d in alarm.get("Dimensions", [])
        + [
            d
            for m in alarm.get("Metrics", [])
            for d in m.get("MetricStat", {}).get("Metric", {}).get("Dimensions", [])
        ]
        if d["Name"] == "ModelId"
    ]
    assert dimensions and all(d["Value"] == {"Ref": "MonitoredModelId"} for d in dimensions)


def test_the_profile_takes_its_name_description_and_a_tag_value_from_parameters(
    built: dict[str, Any],
) -> None:
    (profile,) = _resources(built["template"], "AWS::Bedrock::ApplicationInferenceProfile")
    assert profile["InferenceProfileName"] == {"Ref": "ProfileName"}
    assert profile["Description"] == {"Ref": "ProfileDescription"}
    assert {"Key": "team", "Value": {"Ref": "Team"}} in profile["Tags"]


def test_the_guardrail_name_and_an_imported_key_are_used_as_given(built: dict[str, Any]) -> None:
    (guardrail,) = _resources(built["template"], "AWS::Bedrock::Guardrail")
    assert guardrail["Name"] == {"Ref": "GuardrailName"}
    assert guardrail["KmsKeyArn"] == {"Fn::ImportValue": "SharedKeyArn"}
    # No key of its own: the shared one encrypts the guardrail and the invocation logs.
    assert _resources(built["template"], "AWS::KMS::Key") == [
        p for p in _resources(built["template"], "AWS::KMS::Key") if "alarm topic" in p["Description"]
    ]


def test_the_imported_guardrail_and_profile_reach_the_policy_unparsed(built: dict[str, Any]) -> None:
    rendered = json.dumps(_resources(built["template"], "AWS::IAM::Policy"))
    for reference in (
        '{"Fn::ImportValue": "TeamProfileArn"}',
        '{"Fn::ImportValue": "TeamGuardrailArn"}',
        '{"Fn::ImportValue": "TeamGuardrailKeyArn"}',
        '{"Ref": "TeamGuardrailVersion"}',
        '{"Ref": "TeamGuardrailProfile"}',
    ):
        assert reference in rendered, reference


def test_the_log_prefix_from_a_parameter_is_used_in_the_call_and_the_bucket_policy(
    built: dict[str, Any],
) -> None:
    (call,) = [
        r
        for r in built["template"]["Resources"].values()
        if r["Type"] == "Custom::BedrockModelInvocationLogging"
    ]
    assert '{"Ref": "LogPrefix"}' in json.dumps(call["Properties"]["Create"])
    (bucket_policy,) = [
        p
        for p in _resources(built["template"], "AWS::S3::BucketPolicy")
        if "BedrockModelInvocationLogs" in json.dumps(p)
    ]
    assert '{"Ref": "LogPrefix"}' in json.dumps(bucket_policy)


# ---------------------------------------------------------------------------------- refused, by name


def _stack(tmp_path: Path) -> cdk.Stack:
    return cdk.Stack(cdk.App(outdir=str(tmp_path)), "Refused")


@pytest.mark.parametrize(
    ("build", "owner", "param"),
    [
        (lambda s: Guardrail(s, "G", blocked_input_message=_parameter(s, "M")), "Guardrail", "blocked_input_message"),
        (lambda s: Guardrail(s, "G", description=_parameter(s, "D")), "Guardrail", "description"),
        (
            lambda s: Guardrail(s, "G", tier="STANDARD", cross_region_guardrail_profile=_parameter(s, "P")),
            "Guardrail",
            "cross_region_guardrail_profile",
        ),
        (lambda s: Guardrail(s, "G", word_filters=[_parameter(s, "W")]), "Guardrail", "word_filters[0]"),
        (lambda s: WordFilter(text=_parameter(s, "W")), "WordFilter", "text"),
        (lambda s: DeniedTopic(name="t", definition=_parameter(s, "D")), "DeniedTopic", "definition"),
        (lambda s: FoundationModel(_parameter(s, "Model")), "FoundationModel", "model_id"),
        (
            lambda s: CrossRegionProfile(model_id=_parameter(s, "Model"), geography="us"),
            "CrossRegionProfile",
            "model_id",
        ),
        (
            lambda s: BedrockMonitoring(
                s, "M", model_id="us." + MODEL, tpm_quota=cdk.CfnParameter(s, "Q", type="Number").value_as_number
            ),
            "BedrockMonitoring",
            "tpm_quota",
        ),
        (
            lambda s: BedrockMonitoring(
                s,
                "M",
                model_id="us." + MODEL,
                tpm_quota=1000,
                latency_p99_alarm=cdk.Duration.seconds(cdk.CfnParameter(s, "L", type="Number").value_as_number),
            ),
            "BedrockMonitoring",
            "latency_p99_alarm",
        ),
        (
            lambda s: ModelInvocationLogging(
                s, "L", object_expiration=cdk.Duration.days(cdk.CfnParameter(s, "E", type="Number").value_as_number)
            ),
            "ModelInvocationLogging",
            "object_expiration",
        ),
    ],
)  # fmt: skip
def test_tokens_are_refused_where_a_synth_time_value_is_needed(
    tmp_path: Path, build: Any, owner: str, param: str
) -> None:
    with pytest.raises(ArgumentError) as raised:
        build(_stack(tmp_path))
    assert (raised.value.owner, raised.value.param) == (owner, param)
    assert "got a deploy-time token" in str(raised.value)
