"""The Guardrail construct: rendered policies, safe defaults, version stability, grants, metrics, validation."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
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


# ------------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ContentFilter(type="HATE", input_strength="VERY_HIGH"),
            r"input_strength: got 'VERY_HIGH'; expected one of NONE, LOW, MEDIUM, HIGH",
        ),
        (lambda: ContentFilter(type="HATE", output_strength="max"), r"output_strength: got 'max'"),
        (lambda: ContentFilter(type="GORE"), r"ContentFilter.type: got 'GORE'; expected one of SEXUAL"),
        (
            lambda: ContentFilter(type="HATE", input_action="ALLOW"),
            r"input_action: got 'ALLOW'; expected one of BLOCK, NONE",
        ),
        (
            lambda: ContentFilter(type="HATE", input_modalities=()),
            r"input_modalities: got \(\); expected one or two",
        ),
        (lambda: ContentFilter(type="HATE", output_modalities=("TEXT", "TEXT")), r"duplicates \['TEXT'\]"),
        (
            lambda: ContentFilter(type="HATE", output_modalities=("AUDIO",)),
            r"got 'AUDIO'; expected one of TEXT, IMAGE",
        ),
        (
            lambda: ContentFilter(type=ContentFilterType.PROMPT_ATTACK, output_strength="LOW"),
            r"PROMPT_ATTACK\)\.output_strength: got 'LOW'; expected NONE",
        ),
        (
            lambda: DeniedTopic(name="Bad/name", definition="x"),
            r"DeniedTopic\('Bad/name'\)\.name: got 'Bad/name'; expected a string matching",
        ),
        (
            lambda: DeniedTopic(name="ok", definition=""),
            r"definition: got ''; expected a string of 1 to 1000",
        ),
        (
            lambda: DeniedTopic(name="ok", definition="d", examples=("a",) * 6),
            r"got 6 examples; expected at most 5",
        ),
        (
            lambda: DeniedTopic(name="ok", definition="d", examples=("x" * 101,)),
            r"examples\[0\]: got 'x+'; expected a string of 1 to 100",
        ),
        (lambda: WordFilter(text=""), r"WordFilter.text: got ''"),
        (lambda: PiiEntity(type="SHOE_SIZE"), r"PiiEntity.type: got 'SHOE_SIZE'"),
        (
            lambda: PiiEntity(type="EMAIL", output_action="MASK"),
            r"PiiEntity\(EMAIL\)\.output_action: got 'MASK'; expected one of BLOCK, ANONYMIZE, NONE",
        ),
        (lambda: RegexFilter(name="", pattern="x"), r"RegexFilter\(''\)\.name: got ''"),
        (lambda: RegexFilter(name="r", pattern=""), r"pattern: got ''"),
        (
            lambda: ContextualGrounding(grounding_threshold=1.5),
            r"grounding_threshold: got 1.5; expected a number from 0 to 0.99",
        ),
        (lambda: ContextualGrounding(relevance_threshold=-0.1), r"relevance_threshold: got -0.1"),
        (
            lambda: ContextualGrounding(grounding_threshold=None, relevance_threshold=None),
            r"got no threshold",
        ),
        (lambda: AutomatedReasoning(policy_arns=()), r"got 0 ARNs; expected one or two"),
        (
            lambda: AutomatedReasoning(policy_arns=("arn:aws:s3:::bucket",)),
            r"policy_arns\[0\]: got 'arn:aws:s3:::bucket'",
        ),
        (
            lambda: AutomatedReasoning(policy_arns=(AR_POLICY,), confidence_threshold=2),
            r"confidence_threshold: got 2; expected a number from 0 to 1",
        ),
    ],
)
def test_policy_values_are_validated(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"tier": GuardrailTier.STANDARD}, r"tier: got 'STANDARD' without cross_region_guardrail_profile"),
        ({"tier": "PREMIUM"}, r"Guardrail.tier: got 'PREMIUM'; expected one of CLASSIC, STANDARD"),
        (
            {"cross_region_guardrail_profile": "us-guardrail"},
            r"cross_region_guardrail_profile: got 'us-guardrail'",
        ),
        ({"guardrail_name": "has space"}, r"guardrail_name: got 'has space'; expected a string matching"),
        ({"guardrail_name": "x" * 51}, r"guardrail_name: got 'x+'; expected a string of 1 to 50"),
        ({"description": "d" * 201}, r"description: got 'd+'; expected a string of 1 to 200"),
        ({"blocked_input_message": ""}, r"blocked_input_message: got ''; expected a string of 1 to 500"),
        (
            {"blocked_output_message": "m" * 501},
            r"blocked_output_message: got 'm+'; expected a string of 1 to 500",
        ),
        (
            {"content_filters": [ContentFilter(type="HATE")] * 2},
            r"content_filters types: got duplicates \['HATE'\]",
        ),
        ({"content_filters": ["HATE"]}, r"content_filters: got 'HATE'; expected ContentFilter instances"),
        ({"denied_topics": [DeniedTopic(name=f"t{i}", definition="d") for i in range(31)]}, r"got 31 topics"),
        (
            {"denied_topics": [DeniedTopic(name="t", definition="d")] * 2},
            r"denied_topics names: got duplicates",
        ),
        ({"word_filters": ["w", "w"]}, r"word_filters: got duplicates \['w'\]"),
        ({"pii_entities": [PiiEntity(type="EMAIL")] * 2}, r"pii_entities types: got duplicates \['EMAIL'\]"),
        ({"regex_filters": [RegexFilter(name=f"r{i}", pattern="x") for i in range(31)]}, r"got 31 filters"),
        (
            {"content_filters": (), "pii_entities": (), "profanity_filter": False},
            r"Guardrail: got no policy; expected at least one of",
        ),
    ],
)
def test_guardrail_props_are_validated(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Guardrail(_stack(), "Guardrail", **props)


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
