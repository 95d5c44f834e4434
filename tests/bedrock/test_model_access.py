"""Invoke access: the exact IAM statements per model-source kind, guardrail enforcement (misuse: test_misuse.py)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
    Geography,
    Guardrail,
    ImportedGuardrail,
    ModelInvokeAccess,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")
MODEL = "amazon.nova-2-lite-v1:0"
INVOKE = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]


class Fixture:
    def __init__(self) -> None:
        self.stack = cdk.Stack(cdk.App(), "Stack", env=ENV)
        self.role = iam.Role(self.stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    def arn(self, rest: str) -> Any:
        return self.stack.resolve(f"arn:{self.stack.partition}:{rest}")

    def statements(self) -> list[dict[str, Any]]:
        (policy,) = Template.from_stack(self.stack).find_resources("AWS::IAM::Policy").values()
        statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
        return statements

    def resolve(self, value: Any) -> Any:
        return self.stack.resolve(value)


@pytest.fixture
def f() -> Fixture:
    return Fixture()


def _allow(resource: Any, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    statement = {"Action": INVOKE, "Effect": "Allow", "Resource": resource}
    if condition:
        statement["Condition"] = {"StringEquals": condition}
    return statement


# ---------------------------------------------------------------------------------- without a guardrail


def test_foundation_model_grants_invoke_and_stream_on_the_regional_model_only(f: Fixture) -> None:
    access = ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=FoundationModel(MODEL))
    assert f.statements() == [_allow(f.arn(f"bedrock:us-east-1::foundation-model/{MODEL}"))]
    assert access.model_id == MODEL


@pytest.mark.parametrize("geography", [Geography.US, Geography.EU, Geography.APAC, Geography.JP])
def test_geographic_profile_grants_the_profile_and_the_model_in_every_region_pinned_to_it(
    f: Fixture, geography: Geography
) -> None:
    access = ModelInvokeAccess(
        f.stack, "Access", grantee=f.role, model=CrossRegionProfile(model_id=MODEL, geography=geography)
    )
    profile = f.arn(f"bedrock:us-east-1:111122223333:inference-profile/{geography.value}.{MODEL}")
    assert f.statements() == [
        _allow(profile),
        _allow(f.arn(f"bedrock:*::foundation-model/{MODEL}"), {"bedrock:InferenceProfileArn": profile}),
    ]
    assert access.model_id == f"{geography.value}.{MODEL}"


def test_global_profile_grants_the_source_region_and_regionless_model_pinned_to_it(f: Fixture) -> None:
    ModelInvokeAccess(
        f.stack,
        "Access",
        grantee=f.role,
        model=CrossRegionProfile(model_id=MODEL, geography=Geography.GLOBAL),
    )
    profile = f.arn(f"bedrock:us-east-1:111122223333:inference-profile/global.{MODEL}")
    assert f.statements() == [
        _allow(profile),
        _allow(
            [
                f.arn(f"bedrock:us-east-1::foundation-model/{MODEL}"),
                f.arn(f"bedrock:::foundation-model/{MODEL}"),
            ],
            {"bedrock:InferenceProfileArn": profile},
        ),
    ]


def test_application_profile_on_a_cross_region_profile_grants_the_chain_pinned_to_the_profiles(
    f: Fixture,
) -> None:
    aip = ApplicationInferenceProfile(
        f.stack, "Profile", model_source=CrossRegionProfile(model_id=MODEL, geography=Geography.EU)
    )
    access = ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=aip.model_source)
    aip_arn = f.resolve(aip.profile_arn)
    system = f.arn(f"bedrock:us-east-1:111122223333:inference-profile/eu.{MODEL}")
    assert f.statements() == [
        _allow(aip_arn),
        _allow(system, {"bedrock:InferenceProfileArn": aip_arn}),
        _allow(
            f.arn(f"bedrock:*::foundation-model/{MODEL}"), {"bedrock:InferenceProfileArn": [aip_arn, system]}
        ),
    ]
    assert f.resolve(access.model_id) == aip_arn


def test_application_profile_on_a_foundation_model_grants_the_model_through_the_profile_only(
    f: Fixture,
) -> None:
    aip = ApplicationInferenceProfile(f.stack, "Profile", model_source=FoundationModel(MODEL))
    ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=aip.model_source)
    aip_arn = f.resolve(aip.profile_arn)
    assert f.statements() == [
        _allow(aip_arn),
        _allow(
            f.arn(f"bedrock:us-east-1::foundation-model/{MODEL}"), {"bedrock:InferenceProfileArn": aip_arn}
        ),
    ]


def test_granting_without_a_guardrail_adds_a_synth_warning(f: Fixture) -> None:
    ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=FoundationModel(MODEL))
    Annotations.from_stack(f.stack).has_warning(
        "/Stack/Access", Match.string_like_regexp("may invoke amazon.nova-2-lite-v1:0 without a guardrail")
    )


# ---------------------------------------------------------------------------------- with a guardrail


def test_guardrail_is_enforced_with_an_allow_and_deny_pair_plus_apply_guardrail(f: Fixture) -> None:
    guardrail = Guardrail(f.stack, "Guardrail")
    ModelInvokeAccess(
        f.stack,
        "Access",
        grantee=f.role,
        model=CrossRegionProfile(model_id=MODEL, geography=Geography.US),
        guardrail=guardrail,
    )
    versioned = f.resolve(guardrail.versioned_arn)
    profile = f.arn(f"bedrock:us-east-1:111122223333:inference-profile/us.{MODEL}")
    models = f.arn(f"bedrock:*::foundation-model/{MODEL}")
    assert f.statements() == [
        _allow(profile, {"bedrock:GuardrailIdentifier": versioned}),
        _allow(models, {"bedrock:InferenceProfileArn": profile, "bedrock:GuardrailIdentifier": versioned}),
        {
            "Action": INVOKE,
            "Effect": "Deny",
            "Resource": [profile, models],
            # StringNotEquals (not ...IfExists, not Null) also matches requests that carry no guardrail.
            "Condition": {"StringNotEquals": {"bedrock:GuardrailIdentifier": versioned}},
        },
        {
            "Action": "bedrock:ApplyGuardrail",
            "Effect": "Allow",
            "Resource": f.resolve(guardrail.guardrail_arn),
        },
        {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": f.resolve(guardrail.kms_key.key_arn)},
    ]
    Annotations.from_stack(f.stack).has_no_warning("*", Match.string_like_regexp("without a guardrail"))


def test_the_required_guardrail_identifier_is_the_numbered_version_arn(f: Fixture) -> None:
    guardrail = Guardrail(f.stack, "Guardrail")
    ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=FoundationModel(MODEL), guardrail=guardrail)
    condition = f.statements()[0]["Condition"]["StringEquals"]["bedrock:GuardrailIdentifier"]
    version_id = f.stack.get_logical_id(guardrail.version)  # type: ignore[arg-type]
    assert condition == {
        "Fn::Join": [
            ":",
            [
                {"Fn::GetAtt": [f.stack.get_logical_id(guardrail.resource), "GuardrailArn"]},
                {"Fn::GetAtt": [version_id, "Version"]},
            ],
        ]
    }


def test_every_allow_is_conditioned_and_the_deny_covers_every_allowed_resource(f: Fixture) -> None:
    guardrail = Guardrail(f.stack, "Guardrail")
    aip = ApplicationInferenceProfile(
        f.stack, "Profile", model_source=CrossRegionProfile(model_id=MODEL, geography=Geography.GLOBAL)
    )
    ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=aip.model_source, guardrail=guardrail)
    invokes = [s for s in f.statements() if s["Action"] == INVOKE]
    allows = [s for s in invokes if s["Effect"] == "Allow"]
    (deny,) = [s for s in invokes if s["Effect"] == "Deny"]
    allowed: list[Any] = []
    for statement in allows:
        assert "bedrock:GuardrailIdentifier" in statement["Condition"]["StringEquals"]
        resource = statement["Resource"]
        allowed.extend(resource if isinstance(resource, list) else [resource])
    assert deny["Resource"] == allowed


def test_an_imported_guardrail_is_enforced_with_its_numbered_version(f: Fixture) -> None:
    guardrail = ImportedGuardrail(
        guardrail_arn="arn:aws:bedrock:us-east-1:444455556666:guardrail/abc123",
        guardrail_version="3",
        kms_key_arn="arn:aws:kms:us-east-1:444455556666:key/12345678-1234-1234-1234-123456789012",
        cross_region_guardrail_profile="us.guardrail.v1:0",
    )
    ModelInvokeAccess(f.stack, "Access", grantee=f.role, model=FoundationModel(MODEL), guardrail=guardrail)
    model = f.arn(f"bedrock:us-east-1::foundation-model/{MODEL}")
    versioned = "arn:aws:bedrock:us-east-1:444455556666:guardrail/abc123:3"
    assert f.statements() == [
        _allow(model, {"bedrock:GuardrailIdentifier": versioned}),
        {
            "Action": INVOKE,
            "Effect": "Deny",
            "Resource": model,
            "Condition": {"StringNotEquals": {"bedrock:GuardrailIdentifier": versioned}},
        },
        {
            "Action": "bedrock:ApplyGuardrail",
            "Effect": "Allow",
            "Resource": [
                "arn:aws:bedrock:us-east-1:444455556666:guardrail/abc123",
                "arn:aws:bedrock:*:444455556666:guardrail-profile/us.guardrail.v1:0",
            ],
        },
        {
            "Action": "kms:Decrypt",
            "Effect": "Allow",
            "Resource": "arn:aws:kms:us-east-1:444455556666:key/12345678-1234-1234-1234-123456789012",
        },
    ]


def test_an_imported_application_profile_arn_is_accepted(f: Fixture) -> None:
    arn = "arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/abc123def456"
    ModelInvokeAccess(
        f.stack,
        "Access",
        grantee=f.role,
        model=ApplicationProfile(profile_arn=arn, source=FoundationModel(MODEL)),
    )
    assert f.statements()[0] == _allow(arn)
