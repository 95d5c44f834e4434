"""BR1-BR5 on compliant and non-compliant construct trees, validated with pack.validate_scope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import aws_bedrock as bedrock
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from tests.nag.support import findings, new_stack

MODEL = "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-2-lite-v1:0"
GUARDRAIL = "arn:aws:bedrock:us-east-1:111122223333:guardrail/abc123:1"
INVOKE = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]


def _role(stack: Any, *statements: iam.PolicyStatement) -> iam.Role:
    role = iam.Role(stack, "App", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    for statement in statements:
        role.add_to_policy(statement)
    return role


def _guardrail(stack: Any, **props: Any) -> bedrock.CfnGuardrail:
    return bedrock.CfnGuardrail(
        stack,
        "Guardrail",
        name="g",
        blocked_input_messaging="no",
        blocked_outputs_messaging="no",
        content_policy_config=bedrock.CfnGuardrail.ContentPolicyConfigProperty(
            filters_config=[
                bedrock.CfnGuardrail.ContentFilterConfigProperty(
                    type="HATE", input_strength="HIGH", output_strength="HIGH"
                )
            ]
        ),
        **props,
    )


# BR1


def test_br1_guardrail_with_a_customer_managed_key_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _guardrail(stack, kms_key_arn=kms.Key(stack, "Key", enable_key_rotation=True).key_arn)
    assert findings(stack, "InferenceTiers-BR1") == {}


def test_br1_guardrail_without_a_key_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _guardrail(stack)
    assert findings(stack, "InferenceTiers-BR1") == {"InferenceTiers-BR1": ["Test/Guardrail"]}


# BR2


def test_br2_allow_conditioned_on_the_guardrail_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(
            actions=INVOKE,
            resources=[MODEL],
            conditions={"StringEquals": {"bedrock:GuardrailIdentifier": GUARDRAIL}},
        ),
    )
    assert findings(stack, "InferenceTiers-BR2") == {}


def test_br2_unconditioned_allow_covered_by_an_explicit_deny_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(actions=INVOKE, resources=[MODEL]),
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=["bedrock:InvokeModel*"],
            resources=["*"],
            conditions={"StringNotEquals": {"bedrock:GuardrailIdentifier": GUARDRAIL}},
        ),
    )
    assert findings(stack, "InferenceTiers-BR2") == {}


def test_br2_unguarded_allow_fails_once_per_action(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(actions=INVOKE, resources=[MODEL]))
    path = ["Test/App/DefaultPolicy/Resource"]
    assert findings(stack, "InferenceTiers-BR2") == {
        "InferenceTiers-BR2[Action::bedrock:InvokeModel]": path,
        "InferenceTiers-BR2[Action::bedrock:InvokeModelWithResponseStream]": path,
    }


def test_br2_if_exists_condition_does_not_count_as_a_guardrail(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(
            actions=["bedrock:Converse"],
            resources=[MODEL],
            conditions={"StringEqualsIfExists": {"bedrock:GuardrailIdentifier": GUARDRAIL}},
        ),
    )
    assert list(findings(stack, "InferenceTiers-BR2")) == ["InferenceTiers-BR2[Action::bedrock:Converse]"]


def test_br2_deny_that_misses_the_streaming_action_leaves_it_unguarded(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(actions=["bedrock:*"], resources=[MODEL]),
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=["bedrock:InvokeModel"],
            resources=[MODEL],
            conditions={"StringNotEquals": {"bedrock:GuardrailIdentifier": GUARDRAIL}},
        ),
    )
    assert list(findings(stack, "InferenceTiers-BR2")) == ["InferenceTiers-BR2[Action::bedrock:*]"]


def test_br2_deny_narrowed_by_another_condition_does_not_cover(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[MODEL]),
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=["bedrock:InvokeModel"],
            resources=[MODEL],
            conditions={
                "StringNotEquals": {"bedrock:GuardrailIdentifier": GUARDRAIL},
                "Bool": {"aws:ViaAWSService": "true"},
            },
        ),
    )
    assert list(findings(stack, "InferenceTiers-BR2")) == ["InferenceTiers-BR2[Action::bedrock:InvokeModel]"]


def test_br2_checks_managed_policies_and_inline_role_policies(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    iam.ManagedPolicy(
        stack, "Managed", statements=[iam.PolicyStatement(actions=["bedrock:Invoke*"], resources=[MODEL])]
    )
    iam.Role(
        stack,
        "Inline",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        inline_policies={
            "invoke": iam.PolicyDocument(
                statements=[iam.PolicyStatement(not_actions=["s3:*"], resources=[MODEL])]
            )
        },
    )
    assert findings(stack, "InferenceTiers-BR2") == {
        "InferenceTiers-BR2[Action::bedrock:Invoke*]": ["Test/Managed/Resource"],
        # NotAction: every invoke action it lets through is its own finding.
        "InferenceTiers-BR2[Action::bedrock:Converse]": ["Test/Inline/Resource"],
        "InferenceTiers-BR2[Action::bedrock:ConverseStream]": ["Test/Inline/Resource"],
        "InferenceTiers-BR2[Action::bedrock:InvokeModel]": ["Test/Inline/Resource"],
        "InferenceTiers-BR2[Action::bedrock:InvokeModelWithResponseStream]": ["Test/Inline/Resource"],
    }


def test_br2_ignores_other_bedrock_actions(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(actions=["bedrock:ApplyGuardrail"], resources=[GUARDRAIL]))
    assert findings(stack, "InferenceTiers-BR2") == {}


# BR3


def test_br3_invoke_on_named_models_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(actions=["bedrock:*"], resources=[MODEL]))
    assert findings(stack, "InferenceTiers-BR3") == {}


def test_br3_invoke_on_every_resource_fails_per_action(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(
        stack,
        iam.PolicyStatement(
            actions=["bedrock:*", "bedrock:Invoke*", "bedrock:ListFoundationModels"], resources=["*"]
        ),
    )
    path = ["Test/App/DefaultPolicy/Resource"]
    assert findings(stack, "InferenceTiers-BR3") == {
        "InferenceTiers-BR3[Action::bedrock:*]": path,
        "InferenceTiers-BR3[Action::bedrock:Invoke*]": path,
    }


def test_br3_ignores_deny_statements(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(effect=iam.Effect.DENY, actions=["bedrock:*"], resources=["*"]))
    assert findings(stack, "InferenceTiers-BR3") == {}


# BR4


def _profile(stack: Any) -> bedrock.CfnApplicationInferenceProfile:
    return bedrock.CfnApplicationInferenceProfile(
        stack,
        "Profile",
        inference_profile_name="p",
        model_source=bedrock.CfnApplicationInferenceProfile.InferenceProfileModelSourceProperty(
            copy_from=MODEL
        ),
    )


def test_br4_profile_grant_with_streaming_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    profile = _profile(stack)
    _role(stack, iam.PolicyStatement(actions=INVOKE, resources=[profile.attr_inference_profile_arn]))
    assert findings(stack, "InferenceTiers-BR4") == {}


def test_br4_profile_of_this_stack_without_streaming_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    profile = _profile(stack)
    _role(
        stack,
        iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[profile.attr_inference_profile_arn]),
    )
    assert findings(stack, "InferenceTiers-BR4") == {
        "InferenceTiers-BR4[Resource::<Profile.InferenceProfileArn>]": ["Test/App/DefaultPolicy/Resource"]
    }


def test_br4_imported_profile_arn_without_streaming_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    arn = "arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/abc123"
    _role(stack, iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[arn]))
    assert list(findings(stack, "InferenceTiers-BR4")) == [f"InferenceTiers-BR4[Resource::{arn}]"]


def test_br4_streaming_granted_in_a_separate_statement_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    arn = "arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/abc123"
    _role(
        stack,
        iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[arn]),
        iam.PolicyStatement(actions=["bedrock:InvokeModelWithResponseStream"], resources=[arn]),
    )
    assert findings(stack, "InferenceTiers-BR4") == {}


# BR5


def test_br5_app_that_invokes_and_turns_logging_on_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(actions=INVOKE, resources=[MODEL]))
    logging_role = iam.Role(stack, "Logging", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    logging_role.add_to_policy(
        iam.PolicyStatement(actions=["bedrock:PutModelInvocationLoggingConfiguration"], resources=["*"])
    )
    assert findings(stack, "InferenceTiers-BR5") == {}


def test_br5_app_that_invokes_without_logging_warns(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _role(stack, iam.PolicyStatement(actions=INVOKE, resources=[MODEL]))
    report = findings(stack, "InferenceTiers-BR5")
    assert report == {"InferenceTiers-BR5": ["Test/App/DefaultPolicy/Resource"]}


def test_br5_is_a_warning_and_other_rules_errors() -> None:
    from inference_tiers.nag import RULES

    assert {r.id: r.level.value for r in RULES if r.level.value != "ERROR"} == {"InferenceTiers-BR5": "WARN"}
