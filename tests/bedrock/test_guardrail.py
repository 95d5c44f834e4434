"""The Guardrail construct: rendered policies, safe defaults, version stability, grants, metrics (misuse: test_misuse.py)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from inference_tiers.constructs import (
    AutomatedReasoning,
    ContentFilter,
    ContentFilterType,
    ContextualGrounding,
    DeniedTopic,
    FilterStrength,
    Guardrail,
    GuardrailAction,
    GuardrailTier,
    Modality,
    PiiAction,
    PiiEntity,
    PiiEntityType,
    RegexFilter,
    WordFilter,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")
AR_POLICY = "arn:aws:bedrock:us-east-1:111122223333:automated-reasoning-policy/abcdefghijkl:1"


def _arn(stack: cdk.Stack, rest: str) -> Any:
    """``arn:<partition>:<rest>`` as it appears in the template (the partition stays a token)."""
    return stack.resolve(f"arn:{stack.partition}:{rest}")


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Stack", env=ENV)


def _guardrail_props(**kwargs: Any) -> dict[str, Any]:
    stack = _stack()
    Guardrail(stack, "Guardrail", **kwargs)
    resources = Template.from_stack(stack).find_resources("AWS::Bedrock::Guardrail")
    (resource,) = resources.values()
    props: dict[str, Any] = resource["Properties"]
    return props


def _version_logical_id(build: Any) -> str:
    """Build an app with ``build(stack)`` and return the guardrail version's logical id."""
    stack = cdk.Stack(cdk.App(), "Stack")
    build(stack)
    (logical_id,) = Template.from_stack(stack).find_resources("AWS::Bedrock::GuardrailVersion")
    return logical_id


# ------------------------------------------------------------------------------------------------ defaults


def test_defaults_block_all_six_content_categories_with_prompt_attack_on_input_only() -> None:
    filters = {f["Type"]: f for f in _guardrail_props()["ContentPolicyConfig"]["FiltersConfig"]}
    assert sorted(filters) == sorted(t.value for t in ContentFilterType)
    for kind in ("SEXUAL", "VIOLENCE", "HATE", "INSULTS", "MISCONDUCT"):
        assert filters[kind]["InputStrength"] == filters[kind]["OutputStrength"] == "MEDIUM"
        assert filters[kind]["InputAction"] == filters[kind]["OutputAction"] == "BLOCK"
    assert filters["PROMPT_ATTACK"]["InputStrength"] == "HIGH"
    assert filters["PROMPT_ATTACK"]["OutputStrength"] == "NONE"


def test_output_strength_defaults_to_none_for_prompt_attack_and_medium_otherwise() -> None:
    assert ContentFilter(type=ContentFilterType.PROMPT_ATTACK).output_strength is FilterStrength.NONE
    assert ContentFilter(type=ContentFilterType.HATE).output_strength is FilterStrength.MEDIUM


def test_defaults_add_profanity_pii_cmk_and_classic_tier() -> None:
    stack = _stack()
    guardrail = Guardrail(stack, "Guardrail")
    template = Template.from_stack(stack)
    props = next(iter(template.find_resources("AWS::Bedrock::Guardrail").values()))["Properties"]
    assert props["WordPolicyConfig"] == {
        "ManagedWordListsConfig": [{"Type": "PROFANITY", "InputAction": "BLOCK", "OutputAction": "BLOCK"}]
    }
    pii = {e["Type"]: e for e in props["SensitiveInformationPolicyConfig"]["PiiEntitiesConfig"]}
    assert pii["AWS_SECRET_KEY"]["InputAction"] == pii["AWS_SECRET_KEY"]["OutputAction"] == "BLOCK"
    assert (pii["EMAIL"]["InputAction"], pii["EMAIL"]["OutputAction"]) == ("NONE", "ANONYMIZE")
    assert props["ContentPolicyConfig"]["ContentFiltersTierConfig"] == {"TierName": "CLASSIC"}
    assert props["KmsKeyArn"] == stack.resolve(guardrail.kms_key.key_arn)
    assert "CrossRegionConfig" not in props and "TopicPolicyConfig" not in props
    template.has_resource(
        "AWS::KMS::Key", {"DeletionPolicy": "Retain", "Properties": {"EnableKeyRotation": True}}
    )
    assert 1 <= len(props["Name"]) <= 50


# ------------------------------------------------------------------------------------------------ policies


def test_every_policy_renders_with_the_cloudformation_property_names() -> None:
    props = _guardrail_props(
        guardrail_name="my-guardrail_1",
        description="Support bot",
        content_filters=[
            ContentFilter(
                type=ContentFilterType.HATE,
                input_strength=FilterStrength.HIGH,
                output_strength="LOW",
                output_action=GuardrailAction.NONE,
                input_modalities=(Modality.TEXT, Modality.IMAGE),
            )
        ],
        denied_topics=[
            DeniedTopic(name="Investment advice", definition="Advice on stocks.", examples=("Buy?",))
        ],
        word_filters=["acme-secret", WordFilter(text="codename", output_action=GuardrailAction.NONE)],
        profanity_filter=False,
        pii_entities=[PiiEntity(type=PiiEntityType.NAME, input_action=PiiAction.ANONYMIZE)],
        regex_filters=[RegexFilter(name="account", pattern="ACC-[0-9]{8}", description="Account ids")],
        contextual_grounding=ContextualGrounding(grounding_threshold=0.8, relevance_threshold=None),
        automated_reasoning=AutomatedReasoning(policy_arns=(AR_POLICY,), confidence_threshold=0.9),
        blocked_input_message="No.",
        blocked_output_message="Cannot answer.",
    )
    assert props["Name"] == "my-guardrail_1"
    assert props["Description"] == "Support bot"
    assert (props["BlockedInputMessaging"], props["BlockedOutputsMessaging"]) == ("No.", "Cannot answer.")
    assert props["ContentPolicyConfig"]["FiltersConfig"] == [
        {
            "Type": "HATE",
            "InputStrength": "HIGH",
            "OutputStrength": "LOW",
            "InputAction": "BLOCK",
            "OutputAction": "NONE",
            "InputEnabled": True,
            "OutputEnabled": True,
            "InputModalities": ["TEXT", "IMAGE"],
            "OutputModalities": ["TEXT"],
        }
    ]
    assert props["TopicPolicyConfig"] == {
        "TopicsConfig": [
            {
                "Name": "Investment advice",
                "Definition": "Advice on stocks.",
                "Examples": ["Buy?"],
                "Type": "DENY",
                "InputAction": "BLOCK",
                "OutputAction": "BLOCK",
                "InputEnabled": True,
                "OutputEnabled": True,
            }
        ],
        "TopicsTierConfig": {"TierName": "CLASSIC"},
    }
    assert props["WordPolicyConfig"] == {
        "WordsConfig": [
            {"Text": "acme-secret", "InputAction": "BLOCK", "OutputAction": "BLOCK"},
            {"Text": "codename", "InputAction": "BLOCK", "OutputAction": "NONE"},
        ]
    }
    assert props["SensitiveInformationPolicyConfig"] == {
        "PiiEntitiesConfig": [
            {
                "Type": "NAME",
                "Action": "ANONYMIZE",
                "InputAction": "ANONYMIZE",
                "OutputAction": "ANONYMIZE",
                "InputEnabled": True,
                "OutputEnabled": True,
            }
        ],
        "RegexesConfig": [
            {
                "Name": "account",
                "Pattern": "ACC-[0-9]{8}",
                "Description": "Account ids",
                "Action": "BLOCK",
                "InputAction": "BLOCK",
                "OutputAction": "BLOCK",
            }
        ],
    }
    assert props["ContextualGroundingPolicyConfig"] == {
        "FiltersConfig": [{"Type": "GROUNDING", "Threshold": 0.8, "Action": "BLOCK", "Enabled": True}]
    }
    assert props["AutomatedReasoningPolicyConfig"] == {"Policies": [AR_POLICY], "ConfidenceThreshold": 0.9}


def test_standard_tier_sets_both_tier_configs_and_the_cross_region_profile() -> None:
    stack = _stack()
    Guardrail(
        stack,
        "Guardrail",
        tier=GuardrailTier.STANDARD,
        cross_region_guardrail_profile="us.guardrail.v1:0",
        denied_topics=[DeniedTopic(name="Medical", definition="Medical advice.")],
    )
    props = next(iter(Template.from_stack(stack).find_resources("AWS::Bedrock::Guardrail").values()))[
        "Properties"
    ]
    assert props["ContentPolicyConfig"]["ContentFiltersTierConfig"] == {"TierName": "STANDARD"}
    assert props["TopicPolicyConfig"]["TopicsTierConfig"] == {"TierName": "STANDARD"}
    assert props["CrossRegionConfig"] == {
        "GuardrailProfileArn": _arn(
            stack, "bedrock:us-east-1:111122223333:guardrail-profile/us.guardrail.v1:0"
        )
    }


def test_a_passed_in_key_is_used_and_no_key_is_created() -> None:
    stack = _stack()
    key = kms.Key(stack, "MyKey", removal_policy=cdk.RemovalPolicy.RETAIN)
    Guardrail(stack, "Guardrail", kms_key=key)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource_properties("AWS::Bedrock::Guardrail", {"KmsKeyArn": stack.resolve(key.key_arn)})


# ------------------------------------------------------------------------------------------------ versions


def test_version_is_stable_for_the_same_policy_even_with_unrelated_constructs_added() -> None:
    def plain(stack: cdk.Stack) -> None:
        Guardrail(stack, "Guardrail")

    def with_more_constructs(stack: cdk.Stack) -> None:
        sqs.Queue(stack, "Unrelated", enforce_ssl=True)  # created first: shifts any token numbering
        kms.Key(stack, "AnotherKey")
        Guardrail(stack, "Guardrail")
        sqs.Queue(stack, "AfterwardsToo")

    assert _version_logical_id(plain) == _version_logical_id(with_more_constructs)


def test_version_changes_when_the_policy_changes() -> None:
    base = _version_logical_id(lambda s: Guardrail(s, "Guardrail"))
    stricter = [ContentFilter(type=ContentFilterType.HATE, input_strength=FilterStrength.HIGH)]
    assert base != _version_logical_id(lambda s: Guardrail(s, "Guardrail", content_filters=stricter))
    assert base != _version_logical_id(lambda s: Guardrail(s, "Guardrail", word_filters=["new-word"]))
    assert base != _version_logical_id(lambda s: Guardrail(s, "Guardrail", blocked_input_message="Changed."))


def test_version_references_the_guardrail_and_carries_the_policy_hash() -> None:
    stack = _stack()
    guardrail = Guardrail(stack, "Guardrail")
    Template.from_stack(stack).has_resource_properties(
        "AWS::Bedrock::GuardrailVersion",
        {
            "GuardrailIdentifier": stack.resolve(guardrail.guardrail_id),
            "Description": f"inference-tiers guardrail policy {guardrail.policy_hash}",
        },
    )
    assert stack.resolve(guardrail.versioned_arn) == {
        "Fn::Join": [
            ":",
            [
                stack.resolve(guardrail.guardrail_arn),
                {"Fn::GetAtt": [stack.get_logical_id(guardrail.version), "Version"]},
            ],
        ]
    }


# ------------------------------------------------------------------------------------------------ grants


def _policy_statements(stack: cdk.Stack) -> list[dict[str, Any]]:
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_grant_apply_allows_apply_guardrail_and_kms_decrypt() -> None:
    stack = _stack()
    guardrail = Guardrail(stack, "Guardrail")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    guardrail.grant_apply(role)
    assert _policy_statements(stack) == [
        {
            "Action": "bedrock:ApplyGuardrail",
            "Effect": "Allow",
            "Resource": stack.resolve(guardrail.guardrail_arn),
        },
        {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": stack.resolve(guardrail.kms_key.key_arn)},
    ]


def test_grant_apply_includes_the_guardrail_profile_in_every_region_for_cross_region_guardrails() -> None:
    stack = _stack()
    guardrail = Guardrail(
        stack, "Guardrail", tier=GuardrailTier.STANDARD, cross_region_guardrail_profile="eu.guardrail.v1:0"
    )
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    guardrail.grant_apply(role)
    assert _policy_statements(stack)[0] == {
        "Action": "bedrock:ApplyGuardrail",
        "Effect": "Allow",
        "Resource": [
            stack.resolve(guardrail.guardrail_arn),
            _arn(stack, "bedrock:*:111122223333:guardrail-profile/eu.guardrail.v1:0"),
        ],
    }


# ------------------------------------------------------------------------------------------------ metrics


def test_metrics_use_the_guardrails_namespace_and_this_version() -> None:
    stack = _stack()
    guardrail = Guardrail(stack, "Guardrail")
    metric = guardrail.metric_invocations_intervened()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (
        "AWS/Bedrock/Guardrails",
        "InvocationsIntervened",
        "Sum",
    )
    assert stack.resolve(metric.dimensions) == {
        "GuardrailArn": stack.resolve(guardrail.guardrail_arn),
        "GuardrailVersion": stack.resolve(guardrail.guardrail_version),
    }
    assert guardrail.metric_invocation_latency().statistic == "p90"
    rate = guardrail.metric_intervention_rate()
    assert rate.expression == "IF(invocations > 0, 100 * intervened / invocations, 0)"
    assert {k: m.metric_name for k, m in rate.using_metrics.items()} == {  # type: ignore[attr-defined]
        "intervened": "InvocationsIntervened",
        "invocations": "Invocations",
    }


def test_a_partial_policy_is_valid_and_omits_the_rest() -> None:
    props = _guardrail_props(content_filters=(), pii_entities=(), profanity_filter=False, word_filters=["x"])
    assert set(props) >= {"WordPolicyConfig"}
    assert not {"ContentPolicyConfig", "SensitiveInformationPolicyConfig"} & set(props)
    assert props["WordPolicyConfig"] == {
        "WordsConfig": [{"Text": "x", "InputAction": "BLOCK", "OutputAction": "BLOCK"}]
    }


def test_template_has_exactly_one_guardrail_and_version() -> None:
    stack = _stack()
    Guardrail(stack, "Guardrail")
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Bedrock::Guardrail", 1)
    template.resource_count_is("AWS::Bedrock::GuardrailVersion", 1)
    template.has_resource_properties("AWS::Bedrock::Guardrail", {"Tags": Match.absent()})
