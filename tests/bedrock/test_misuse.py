"""Every misuse of the bedrock constructs and props classes is an ArgumentError (a ValueError) naming the class,
the parameter, the value received and what is accepted: never a TypeError, AttributeError or jsii error."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    ApplicationProfile,
    AutomatedReasoning,
    BedrockMonitoring,
    ContentFilter,
    ContentFilterType,
    ContextualGrounding,
    CrossRegionProfile,
    DeniedTopic,
    FoundationModel,
    Geography,
    Guardrail,
    ImportedGuardrail,
    ModelInvocationLogging,
    ModelInvokeAccess,
    PiiEntity,
    RegexFilter,
    WordFilter,
    invoke_statements,
)
from inference_tiers.validation import ArgumentError
from tests.misuse import assert_junk_refused_by_name_or_accepted, assert_refused

MODEL = "amazon.nova-2-lite-v1:0"
PROFILE = "us.amazon.nova-2-lite-v1:0"
GUARDRAIL_ARN = "arn:aws:bedrock:us-east-1:444455556666:guardrail/abc123"
KEY_ARN = "arn:aws:kms:us-east-1:444455556666:key/12345678-1234-1234-1234-123456789012"
AR_POLICY = "arn:aws:bedrock:us-east-1:444455556666:automated-reasoning-policy/abcdefghijkl"
AIP_ARN = "arn:aws:bedrock:us-east-1:444455556666:application-inference-profile/abc123"
_ids = itertools.count()


class Env:
    """One stack shared by the cases (each construct gets a fresh id); they fail before anything synthesizes."""

    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir
        self.stack = cdk.Stack(cdk.App(outdir=str(outdir)), "Misuse")
        self.role = iam.Role(self.stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.guardrail = Guardrail(self.stack, "Guardrail")
        self.imported = ImportedGuardrail(guardrail_arn=GUARDRAIL_ARN, guardrail_version="1")

    def build_guardrail(self, **props: Any) -> Guardrail:
        return Guardrail(self.stack, f"Guardrail{next(_ids)}", **props)

    def build_profile(self, **props: Any) -> ApplicationInferenceProfile:
        return ApplicationInferenceProfile(
            self.stack, f"Profile{next(_ids)}", **{"model_source": FoundationModel(MODEL), **props}
        )

    def build_access(self, **props: Any) -> ModelInvokeAccess:
        return ModelInvokeAccess(
            self.stack,
            f"Access{next(_ids)}",
            **{"grantee": self.role, "model": FoundationModel(MODEL), "guardrail": self.guardrail, **props},
        )

    def build_monitoring(self, **props: Any) -> BedrockMonitoring:
        return BedrockMonitoring(
            self.stack, f"Monitoring{next(_ids)}", **{"model_id": PROFILE, "tpm_quota": 1000, **props}
        )

    def build_logging(self, **props: Any) -> ModelInvocationLogging:
        # One logging configuration per account and Region: each build gets an app of its own.
        app = cdk.App(outdir=str(self.outdir))
        return ModelInvocationLogging(cdk.Stack(app, "Logging"), "Logging", **props)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(tmp_path_factory.mktemp("cdk.out"))


# -------------------------------------------------------------------------------- policy props classes

# (build, owner, parameter named, what the message says)
PROPS_CASES: list[tuple[Callable[[], Any], str, str, str]] = [
    (
        lambda: ContentFilter(type="HATE", input_strength="VERY_HIGH"),
        "ContentFilter",
        "input_strength",
        r"got 'VERY_HIGH'; expected one of FilterStrength\.NONE, FilterStrength\.LOW",
    ),
    (lambda: ContentFilter(type="GORE"), "ContentFilter", "type", r"one of ContentFilterType\.SEXUAL"),
    (lambda: ContentFilter(type="HATE", input_action="ALLOW"), "ContentFilter", "input_action", r"BLOCK"),
    (lambda: ContentFilter(type="HATE", input_modalities=()), "ContentFilter", "input_modalities", r"1 to 2"),
    (
        lambda: ContentFilter(type="HATE", input_modalities="TEXT"),
        "ContentFilter",
        "input_modalities",
        r"a string is not a list",
    ),
    (
        lambda: ContentFilter(type="HATE", output_modalities=("TEXT", "TEXT")),
        "ContentFilter",
        "output_modalities[1]",
        r"at most once",
    ),
    (
        lambda: ContentFilter(type="HATE", output_modalities=("AUDIO",)),
        "ContentFilter",
        "output_modalities[0]",
        r"got 'AUDIO'; expected one of Modality\.TEXT, Modality\.IMAGE",
    ),
    (
        lambda: ContentFilter(type=ContentFilterType.PROMPT_ATTACK, output_strength="LOW"),
        "ContentFilter",
        "output_strength",
        r"got 'LOW'; expected FilterStrength\.NONE for PROMPT_ATTACK",
    ),
    (lambda: ContentFilter(type="HATE", input_enabled="yes"), "ContentFilter", "input_enabled", r"True or"),
    (
        lambda: DeniedTopic(name="Bad/name", definition="x"),
        "DeniedTopic",
        "name",
        r"got 'Bad/name'; expected a string matching",
    ),
    (lambda: DeniedTopic(name="ok", definition=""), "DeniedTopic", "definition", r"got ''"),
    (lambda: DeniedTopic(name="ok", definition="d" * 1001), "DeniedTopic", "definition", r"at most 1000"),
    (lambda: DeniedTopic(name="ok", definition="d", examples=("a",) * 6), "DeniedTopic", "examples", r"0 to 5"),
    (lambda: DeniedTopic(name="ok", definition="d", examples="abc"), "DeniedTopic", "examples", r"not a list"),
    (
        lambda: DeniedTopic(name="ok", definition="d", examples=("x" * 101,)),
        "DeniedTopic",
        "examples[0]",
        r"at most 100 characters",
    ),
    (lambda: DeniedTopic(name="ok", definition="d", output_enabled=1), "DeniedTopic", "output_enabled", r"got 1"),
    (lambda: WordFilter(text=""), "WordFilter", "text", r"got ''"),
    (lambda: WordFilter(text="w" * 101), "WordFilter", "text", r"at most 100"),
    (lambda: WordFilter(text=["darn"]), "WordFilter", "text", r"got \['darn'\]"),
    (lambda: WordFilter(text="w", input_action="MASK"), "WordFilter", "input_action", r"got 'MASK'"),
    (lambda: WordFilter(text="w", output_action=None), "WordFilter", "output_action", r"got None"),
    (lambda: PiiEntity(type="SHOE_SIZE"), "PiiEntity", "type", r"got 'SHOE_SIZE'; expected one of"),
    (
        lambda: PiiEntity(type="EMAIL", output_action="MASK"),
        "PiiEntity",
        "output_action",
        r"one of PiiAction\.BLOCK, PiiAction\.ANONYMIZE, PiiAction\.NONE",
    ),
    (lambda: PiiEntity(type="EMAIL", input_action=True), "PiiEntity", "input_action", r"got True"),
    (lambda: PiiEntity(type=None), "PiiEntity", "type", r"got None"),
    (lambda: PiiEntity(type="email"), "PiiEntity", "type", r"got 'email'"),
    (lambda: RegexFilter(name="", pattern="x"), "RegexFilter", "name", r"got ''"),
    (lambda: RegexFilter(name="r", pattern=""), "RegexFilter", "pattern", r"got ''"),
    (lambda: RegexFilter(name="r", pattern="x" * 501), "RegexFilter", "pattern", r"at most 500"),
    (lambda: RegexFilter(name="r", pattern="x", description=""), "RegexFilter", "description", r"got ''"),
    (lambda: RegexFilter(name="r", pattern="x", input_action="MASK"), "RegexFilter", "input_action", r"MASK"),
    (
        lambda: ContextualGrounding(grounding_threshold=1.5),
        "ContextualGrounding",
        "grounding_threshold",
        r"got 1\.5; expected a number from 0 to 0\.99",
    ),
    (lambda: ContextualGrounding(relevance_threshold=-0.1), "ContextualGrounding", "relevance_threshold", r"-0.1"),
    (lambda: ContextualGrounding(relevance_threshold="0.5"), "ContextualGrounding", "relevance_threshold", r"'0.5'"),
    (
        lambda: ContextualGrounding(grounding_threshold=None, relevance_threshold=None),
        "ContextualGrounding",
        "grounding_threshold",
        r"both are None",
    ),
    (lambda: ContextualGrounding(action="ALLOW"), "ContextualGrounding", "action", r"got 'ALLOW'"),
    (lambda: AutomatedReasoning(policy_arns=()), "AutomatedReasoning", "policy_arns", r"1 to 2 items"),
    (lambda: AutomatedReasoning(policy_arns=AR_POLICY), "AutomatedReasoning", "policy_arns", r"not a list"),
    (
        lambda: AutomatedReasoning(policy_arns=("arn:aws:s3:::bucket",)),
        "AutomatedReasoning",
        "policy_arns[0]",
        r"got 'arn:aws:s3:::bucket'",
    ),
    (
        lambda: AutomatedReasoning(policy_arns=(AR_POLICY, AR_POLICY)),
        "AutomatedReasoning",
        "policy_arns[1]",
        r"at most once",
    ),
    (
        lambda: AutomatedReasoning(policy_arns=(AR_POLICY,), confidence_threshold=2),
        "AutomatedReasoning",
        "confidence_threshold",
        r"got 2; expected a number from 0 to 1",
    ),
    (
        lambda: ImportedGuardrail(guardrail_arn=GUARDRAIL_ARN, guardrail_version="DRAFT"),
        "ImportedGuardrail",
        "guardrail_version",
        r"got 'DRAFT'; expected a string matching",
    ),
    (
        lambda: ImportedGuardrail(guardrail_arn=GUARDRAIL_ARN, guardrail_version=1),
        "ImportedGuardrail",
        "guardrail_version",
        r"got 1",
    ),
    (
        lambda: ImportedGuardrail(guardrail_arn="abc123", guardrail_version="1"),
        "ImportedGuardrail",
        "guardrail_arn",
        r"got 'abc123'",
    ),
    (
        lambda: ImportedGuardrail(guardrail_arn=GUARDRAIL_ARN, guardrail_version="1", kms_key_arn="alias/mine"),
        "ImportedGuardrail",
        "kms_key_arn",
        r"got 'alias/mine'",
    ),
    (
        lambda: ImportedGuardrail(
            guardrail_arn=GUARDRAIL_ARN, guardrail_version="1", cross_region_guardrail_profile="us"
        ),
        "ImportedGuardrail",
        "cross_region_guardrail_profile",
        r"got 'us'",
    ),
    (lambda: FoundationModel(PROFILE), "FoundationModel", "model_id", r"without a geography prefix"),
    (lambda: FoundationModel("Nova Lite"), "FoundationModel", "model_id", r"a Bedrock foundation-model id"),
    (lambda: FoundationModel(None), "FoundationModel", "model_id", r"got None"),
    (lambda: FoundationModel(""), "FoundationModel", "model_id", r"got ''"),
    (lambda: FoundationModel(["amazon.nova"]), "FoundationModel", "model_id", r"got \['amazon\.nova'\]"),
    (
        lambda: CrossRegionProfile(model_id=MODEL, geography="mars"),
        "CrossRegionProfile",
        "geography",
        r"got 'mars'; expected one of Geography\.US, Geography\.EU",
    ),
    (lambda: CrossRegionProfile(model_id=MODEL, geography="US"), "CrossRegionProfile", "geography", r"'US'"),
    (lambda: CrossRegionProfile(model_id="", geography="us"), "CrossRegionProfile", "model_id", r"got ''"),
    (lambda: CrossRegionProfile(model_id=PROFILE, geography="us"), "CrossRegionProfile", "model_id", r"prefix"),
    (lambda: CrossRegionProfile(model_id=MODEL, geography=None), "CrossRegionProfile", "geography", r"None"),
    (
        lambda: ApplicationProfile(profile_arn="arn:aws:bedrock:us-east-1:1:foo/x", source=FoundationModel(MODEL)),
        "ApplicationProfile",
        "profile_arn",
        r"got 'arn:aws:bedrock:us-east-1:1:foo/x'; expected arn:aws:bedrock:<region>",
    ),
    (
        lambda: ApplicationProfile(profile_arn=AIP_ARN, source=MODEL),
        "ApplicationProfile",
        "source",
        r"got 'amazon\.nova-2-lite-v1:0'; expected a FoundationModel or CrossRegionProfile",
    ),
    (
        lambda: ApplicationProfile(
            profile_arn=AIP_ARN, source=ApplicationProfile(profile_arn=AIP_ARN, source=FoundationModel(MODEL))
        ),
        "ApplicationProfile",
        "source",
        r"got a ApplicationProfile",
    ),
    (lambda: ApplicationProfile(profile_arn=None, source=FoundationModel(MODEL)), "ApplicationProfile", "profile_arn", "None"),
    (lambda: ApplicationProfile(profile_arn="", source=FoundationModel(MODEL)), "ApplicationProfile", "profile_arn", "''"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "owner", "param", "match"), PROPS_CASES)
def test_props_class_misuse(build: Callable[[], Any], owner: str, param: str, match: str) -> None:
    assert_refused(build, owner, param, match)


def test_every_props_class_has_at_least_five_cases() -> None:
    owners = [owner for _, owner, _, _ in PROPS_CASES]
    for owner in {o for o in owners}:
        assert owners.count(owner) >= 5, owner


# ------------------------------------------------------------------------------------------ constructs

CaseProps = Callable[[Env], dict[str, Any]]

GUARDRAIL_CASES: list[tuple[CaseProps, str, str]] = [
    (lambda e: {"word_filters": "darn"}, "word_filters", r"got 'darn'; expected a list of 0 to 10000 items \(a string is not a list"),
    (lambda e: {"word_filters": ["w", "w"]}, "word_filters[1]", r"each word at most once \('w' repeats\)"),
    (lambda e: {"word_filters": [""]}, "word_filters[0]", r"got ''"),
    (lambda e: {"word_filters": [7]}, "word_filters[0]", r"got 7"),
    (lambda e: {"tier": "STANDARD"}, "tier", r"got 'STANDARD'; expected GuardrailTier\.CLASSIC, or STANDARD with"),
    (lambda e: {"tier": "PREMIUM"}, "tier", r"one of GuardrailTier\.CLASSIC, GuardrailTier\.STANDARD"),
    (lambda e: {"cross_region_guardrail_profile": "us-guardrail"}, "cross_region_guardrail_profile", r"matching"),
    (lambda e: {"guardrail_name": "has space"}, "guardrail_name", r"got 'has space'; expected a string matching"),
    (lambda e: {"guardrail_name": "x" * 51}, "guardrail_name", r"of at most 50 characters"),
    (lambda e: {"description": "d" * 201}, "description", r"at most 200 characters"),
    (lambda e: {"blocked_input_message": ""}, "blocked_input_message", r"got ''"),
    (lambda e: {"blocked_output_message": "m" * 501}, "blocked_output_message", r"at most 500"),
    (lambda e: {"content_filters": [ContentFilter(type="HATE")] * 2}, "content_filters[1]", r"each type at most"),
    (lambda e: {"content_filters": ["HATE"]}, "content_filters[0]", r"got 'HATE'; expected a ContentFilter"),
    (lambda e: {"content_filters": ContentFilter(type="HATE")}, "content_filters", r"expected a list"),
    (
        lambda e: {"denied_topics": [DeniedTopic(name=f"t{i}", definition="d") for i in range(31)]},
        "denied_topics",
        r"a list of 0 to 30 items",
    ),
    (lambda e: {"denied_topics": [DeniedTopic(name="t", definition="d")] * 2}, "denied_topics[1]", r"each name"),
    (lambda e: {"pii_entities": [PiiEntity(type="EMAIL")] * 2}, "pii_entities[1]", r"'EMAIL' repeats"),
    (lambda e: {"pii_entities": ["EMAIL"]}, "pii_entities[0]", r"a PiiEntity"),
    (
        lambda e: {"regex_filters": [RegexFilter(name=f"r{i}", pattern="x") for i in range(31)]},
        "regex_filters",
        r"0 to 30 items",
    ),
    (lambda e: {"profanity_filter": "no"}, "profanity_filter", r"got 'no'; expected True or False"),
    (lambda e: {"contextual_grounding": 0.75}, "contextual_grounding", r"got 0\.75; expected a ContextualGrounding"),
    (lambda e: {"automated_reasoning": [AR_POLICY]}, "automated_reasoning", r"a AutomatedReasoning"),
    (lambda e: {"kms_key": KEY_ARN}, "kms_key", r"an IKey \(a construct, not a string\)"),
    (lambda e: {"kms_key": e.role}, "kms_key", r"got a Role; expected an IKey"),
    (
        lambda e: {"content_filters": (), "pii_entities": (), "profanity_filter": False},
        "content_filters",
        r"at least one policy: .* \(every one is empty\)",
    ),
    (
        lambda e: {"blocked_input_message": cdk.Aws.STACK_NAME},
        "blocked_input_message",
        r"got a deploy-time token; .*known at synth time",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("props", "param", "match"), GUARDRAIL_CASES)
def test_guardrail_misuse(env: Env, props: CaseProps, param: str, match: str) -> None:
    assert_refused(lambda: env.build_guardrail(**props(env)), "Guardrail", param, match)


PROFILE_CASES: list[tuple[CaseProps, str, str]] = [
    (lambda e: {"model_source": PROFILE}, "model_source", r"got 'us\.amazon\.nova-2-lite-v1:0'; expected a Found"),
    (
        lambda e: {"model_source": ApplicationProfile(profile_arn=AIP_ARN, source=FoundationModel(MODEL))},
        "model_source",
        r"an application profile cannot copy another one",
    ),
    (lambda e: {"profile_name": "bad/name"}, "profile_name", r"got 'bad/name'; expected a name matching"),
    (lambda e: {"profile_name": "double--dash"}, "profile_name", r"got 'double--dash'"),
    (lambda e: {"profile_name": "-leading"}, "profile_name", r"got '-leading'"),
    (lambda e: {"profile_name": "x" * 65}, "profile_name", r"at most 64 characters"),
    (lambda e: {"description": "Costs, per team"}, "description", r"got 'Costs, per team'; .*no commas"),
    (lambda e: {"description": "d" * 201}, "description", r"at most 200"),
    (lambda e: {"cost_tags": {"aws:reserved": "x"}}, "cost_tags key", r"does not start with 'aws:'"),
    (lambda e: {"cost_tags": {"team": "a&b"}}, "cost_tags['team']", r"got 'a&b'; expected letters, digits"),
    (lambda e: {"cost_tags": {"": "x"}}, "cost_tags key", r"got ''"),
    (lambda e: {"cost_tags": [("team", "a")]}, "cost_tags", r"a mapping"),
    (lambda e: {"cost_tags": {"team": 7}}, "cost_tags['team']", r"got 7"),
    (lambda e: {"cost_tags": {f"k{i}": "v" for i in range(201)}}, "cost_tags", r"at most 200 entries"),
    (lambda e: {"cost_tags": {cdk.Aws.STACK_NAME: "v"}}, "cost_tags key", r"known at synth time"),
]  # fmt: skip


@pytest.mark.parametrize(("props", "param", "match"), PROFILE_CASES)
def test_application_inference_profile_misuse(env: Env, props: CaseProps, param: str, match: str) -> None:
    assert_refused(lambda: env.build_profile(**props(env)), "ApplicationInferenceProfile", param, match)


ACCESS_CASES: list[tuple[CaseProps, str, str]] = [
    (
        lambda e: {"grantee": "arn:aws:iam::444455556666:role/app"},
        "grantee",
        r"got 'arn:aws:iam::444455556666:role/app'; expected an IGrantable \(a construct, not a string\)",
    ),
    (lambda e: {"grantee": None}, "grantee", r"got None; expected an IGrantable"),
    (lambda e: {"grantee": e.guardrail}, "grantee", r"got a Guardrail; expected an IGrantable"),
    (
        lambda e: {"grantee": iam.ServicePrincipal("lambda.amazonaws.com")},
        "grantee",
        r"a principal that can hold an identity policy",
    ),
    (
        lambda e: {"grantee": iam.ArnPrincipal("arn:aws:iam::444455556666:role/app")},
        "grantee",
        r"got a ArnPrincipal; expected a principal that can hold an identity policy \(a role, user or group",
    ),
    (lambda e: {"model": MODEL}, "model", r"got 'amazon\.nova-2-lite-v1:0'; expected a FoundationModel, Cross"),
    (lambda e: {"model": {"model_id": MODEL}}, "model", r"got \{'model_id'"),
    (lambda e: {"guardrail": GUARDRAIL_ARN}, "guardrail", r"a Guardrail or ImportedGuardrail \(an IGuardrail, not"),
    (lambda e: {"guardrail": e.role}, "guardrail", r"got a Role"),
    (lambda e: {"guardrail": "1"}, "guardrail", r"got '1'"),
]  # fmt: skip


@pytest.mark.parametrize(("props", "param", "match"), ACCESS_CASES)
def test_model_invoke_access_misuse(env: Env, props: CaseProps, param: str, match: str) -> None:
    assert_refused(lambda: env.build_access(**props(env)), "ModelInvokeAccess", param, match)


@pytest.mark.parametrize(
    ("call", "owner", "param", "match"),
    [
        (lambda e: invoke_statements(e.stack, MODEL), "invoke_statements", "model", r"a FoundationModel"),
        (
            lambda e: invoke_statements(e.stack, FoundationModel(MODEL), GUARDRAIL_ARN),
            "invoke_statements",
            "guardrail",
            r"not a string",
        ),
        (lambda e: e.guardrail.grant_apply("arn:aws:iam::1:role/x"), "Guardrail.grant_apply", "grantee", r"IGrant"),
        (lambda e: e.guardrail.grant_apply(None), "Guardrail.grant_apply", "grantee", r"got None"),
        (lambda e: e.imported.grant_apply("role"), "ImportedGuardrail.grant_apply", "grantee", r"got 'role'"),
        (lambda e: invoke_statements("Stack", FoundationModel(MODEL)), "invoke_statements", "scope", r"not a string"),
        (lambda e: e.guardrail.metric(""), "Guardrail.metric", "metric_name", r"got ''"),
        (
            lambda e: e.guardrail.metric_invocations(period=cdk.Duration.seconds(90)),
            "Guardrail.metric",
            "period",
            r"1, 5, 10, 30 seconds or a multiple of 60",
        ),
        (lambda e: e.guardrail.metric_invocations(period=300), "Guardrail.metric", "period", r"got 300"),
        (lambda e: e.guardrail.metric_invocations(stat="Sum"), "Guardrail.metric", "stat", r"expected a metric option \(account, region"),
        (
            lambda e: e.guardrail.metric_invocations(dimensions_map={}),
            "Guardrail.metric",
            "dimensions_map",
            r"the helper sets the dimensions",
        ),
        (
            lambda e: e.guardrail.metric_intervention_rate(period=cdk.Duration.days(2)),
            "Guardrail.metric_intervention_rate",
            "period",
            r"from 1 second to 1 day",
        ),
        (lambda e: e.build_monitoring().metric("Invocations", unit="ms"), "BedrockMonitoring.metric", "unit", r"a Unit"),
        (lambda e: e.build_monitoring().metric("Invocations", visible=1), "BedrockMonitoring.metric", "visible", r"1"),
        (lambda e: e.build_monitoring().metric(None), "BedrockMonitoring.metric", "metric_name", r"got None"),
        (
            lambda e: e.build_monitoring().metric("Invocations", color="red"),
            "BedrockMonitoring.metric",
            "color",
            r"a color #rrggbb",
        ),
    ],
)  # fmt: skip
def test_functions_and_grants_refuse_misuse(
    env: Env, call: Callable[[Env], Any], owner: str, param: str, match: str
) -> None:
    assert_refused(lambda: call(env), owner, param, match)


MONITORING_CASES: list[tuple[CaseProps, str, str]] = [
    (lambda e: {"model_id": "Nova Lite"}, "model_id", r"got 'Nova Lite'; expected the ModelId the application"),
    (lambda e: {"model_id": 7}, "model_id", r"got 7"),
    (lambda e: {"tpm_quota": 0}, "tpm_quota", r"got 0; expected an integer from 1 to 1000000000"),
    (lambda e: {"tpm_quota": "1000"}, "tpm_quota", r"got '1000'"),
    (lambda e: {"tpm_quota": 1000.0}, "tpm_quota", r"got 1000\.0"),
    (lambda e: {"tpm_alarm_percent": 150}, "tpm_alarm_percent", r"got 150; expected a number greater than 0 and at"),
    (lambda e: {"server_error_rate_alarm_percent": 0}, "server_error_rate_alarm_percent", r"got 0"),
    (lambda e: {"intervention_rate_alarm_percent": -1}, "intervention_rate_alarm_percent", r"got -1"),
    (lambda e: {"throttle_alarm_count": -1}, "throttle_alarm_count", r"got -1; expected an integer from 0"),
    (lambda e: {"throttle_alarm_count": 0.5}, "throttle_alarm_count", r"got 0\.5"),
    (lambda e: {"alarm_email": "not-an-address"}, "alarm_email", r"got 'not-an-address'; expected an email address"),
    (lambda e: {"latency_p99_alarm": 30_000}, "latency_p99_alarm", r"got 30000; expected a Duration"),
    (lambda e: {"latency_p99_alarm": cdk.Duration.hours(2)}, "latency_p99_alarm", r"from 1 milli to 1 hour"),
    (lambda e: {"ttft_p90_alarm": cdk.Duration.millis(0)}, "ttft_p90_alarm", r"Duration 0 millis"),
    (
        lambda e: {"ttft_p90_alarm": cdk.Duration.seconds(cdk.Token.as_number(cdk.Aws.NO_VALUE))},
        "ttft_p90_alarm",
        r"known at synth time",
    ),
    (lambda e: {"guardrail": e.imported}, "guardrail", r"got a ImportedGuardrail; expected a Guardrail"),
    (lambda e: {"guardrail": GUARDRAIL_ARN}, "guardrail", r"expected a Guardrail"),
    (lambda e: {"log_delivery_alarm": 1}, "log_delivery_alarm", r"True or False"),
    (
        lambda e: {"application_profile_id": "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x y"},
        "application_profile_id",
        r"expected an application inference profile id",
    ),
    (lambda e: {"application_profile_id": ""}, "application_profile_id", r"got ''"),
]  # fmt: skip


@pytest.mark.parametrize(("props", "param", "match"), MONITORING_CASES)
def test_monitoring_misuse(env: Env, props: CaseProps, param: str, match: str) -> None:
    assert_refused(lambda: env.build_monitoring(**props(env)), "BedrockMonitoring", param, match)


LOGGING_CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"text_data": False}, "text_data", r"every \*_data flag is False"),
    ({"text_data": "yes"}, "text_data", r"got 'yes'; expected True or False"),
    ({"image_data": None}, "image_data", r"got None"),
    ({"key_prefix": "bad prefix!"}, "key_prefix", r"got 'bad prefix!'; expected ASCII letters"),
    ({"key_prefix": "logs/"}, "key_prefix", r"\(no leading or trailing '/'\)"),
    ({"key_prefix": "/logs"}, "key_prefix", r"got '/logs'"),
    ({"key_prefix": "a//b"}, "key_prefix", r"got 'a//b'"),
    ({"key_prefix": "journaux-modèle"}, "key_prefix", r"got 'journaux-modèle'"),
    ({"key_prefix": ""}, "key_prefix", r"got ''"),
    ({"object_expiration": cdk.Duration.hours(1)}, "object_expiration", r"got Duration 1 hour; expected a Duration"),
    ({"object_expiration": cdk.Duration.hours(36)}, "object_expiration", r"a whole number of days"),
    ({"object_expiration": 365}, "object_expiration", r"got 365; expected a Duration"),
    ({"log_retention": 365}, "log_retention", r"got 365; expected a logs\.RetentionDays"),
    ({"log_retention": "ONE_YEAR"}, "log_retention", r"got 'ONE_YEAR'"),
    ({"kms_key": KEY_ARN}, "kms_key", r"an IKey"),
]  # fmt: skip


@pytest.mark.parametrize(("props", "param", "match"), LOGGING_CASES)
def test_invocation_logging_misuse(env: Env, props: dict[str, Any], param: str, match: str) -> None:
    assert_refused(lambda: env.build_logging(**props), "ModelInvocationLogging", param, match)


def test_a_failed_logging_configuration_does_not_count_as_the_one_per_region(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Stack")
    with pytest.raises(ArgumentError):
        ModelInvocationLogging(stack, "Bad", key_prefix="/")
    assert ModelInvocationLogging(stack, "Good").bucket is not None
    with pytest.raises(
        ArgumentError, match=r"parameter 'scope' got 'Stack/Again'.*the first is at Stack/Good"
    ):
        ModelInvocationLogging(stack, "Again")


def test_the_base_arguments_of_the_cases_above_build(env: Env) -> None:
    # Each case fails on the one argument it changes, not on the base arguments.
    assert env.build_guardrail(word_filters=["darn", WordFilter(text="heck")]).policy_hash
    assert env.build_profile(cost_tags={"team": ""}).cost_tags == {"team": ""}
    assert env.build_access().model_id == MODEL
    assert env.build_monitoring(guardrail=env.guardrail, alarm_email="ops@example.com").alarms
    assert env.build_logging(object_expiration=cdk.Duration.days(2)).bucket is not None
    assert ContentFilter(type="HATE").output_strength == "MEDIUM"
    assert AutomatedReasoning(policy_arns=[AR_POLICY]).policy_arns == (AR_POLICY,)
    metric = env.guardrail.metric_invocations(period=cdk.Duration.minutes(1), statistic="p99", label="x")
    assert (metric.period.to_seconds(), metric.statistic) == (60, "p99")


# ------------------------------------------------------------ every parameter, one value of each wrong kind


CONSTRUCT_PARAMS: list[tuple[str, str, list[str]]] = [
    ("build_guardrail", "Guardrail", [
        "guardrail_name", "description", "content_filters", "denied_topics", "word_filters", "profanity_filter",
        "pii_entities", "regex_filters", "contextual_grounding", "automated_reasoning", "tier",
        "cross_region_guardrail_profile", "blocked_input_message", "blocked_output_message", "kms_key",
    ]),
    ("build_profile", "ApplicationInferenceProfile", ["model_source", "profile_name", "description", "cost_tags"]),
    ("build_access", "ModelInvokeAccess", ["grantee", "model", "guardrail"]),
    ("build_monitoring", "BedrockMonitoring", [
        "model_id", "tpm_quota", "guardrail", "log_delivery_alarm", "tpm_alarm_percent", "latency_p99_alarm",
        "ttft_p90_alarm", "server_error_rate_alarm_percent", "throttle_alarm_count",
        "intervention_rate_alarm_percent", "alarm_email",
    ]),
    ("build_logging", "ModelInvocationLogging", [
        "text_data", "image_data", "embedding_data", "video_data", "audio_data", "log_retention",
        "object_expiration", "key_prefix", "kms_key",
    ]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("builder", "owner", "param"),
    [(builder, owner, param) for builder, owner, params in CONSTRUCT_PARAMS for param in params],
)
def test_any_junk_for_a_construct_parameter_is_an_argument_error_or_accepted(
    env: Env, builder: str, owner: str, param: str
) -> None:
    assert_junk_refused_by_name_or_accepted(getattr(env, builder), owner, param)


# A valid instance of each props class; the sweep replaces one field at a time.
PROPS_BASES: list[Callable[..., Any]] = [
    lambda **kw: ContentFilter(**{"type": "HATE", **kw}),
    lambda **kw: DeniedTopic(**{"name": "t", "definition": "d", **kw}),
    lambda **kw: WordFilter(**{"text": "w", **kw}),
    lambda **kw: PiiEntity(**{"type": "EMAIL", **kw}),
    lambda **kw: RegexFilter(**{"name": "r", "pattern": "x", **kw}),
    lambda **kw: ContextualGrounding(**kw),
    lambda **kw: AutomatedReasoning(**{"policy_arns": (AR_POLICY,), **kw}),
    lambda **kw: FoundationModel(**{"model_id": MODEL, **kw}),
    lambda **kw: CrossRegionProfile(**{"model_id": MODEL, "geography": Geography.EU, **kw}),
    lambda **kw: ApplicationProfile(**{"profile_arn": AIP_ARN, "source": FoundationModel(MODEL), **kw}),
]
PROPS_CLASSES = [
    ContentFilter, DeniedTopic, WordFilter, PiiEntity, RegexFilter, ContextualGrounding, AutomatedReasoning,
    FoundationModel, CrossRegionProfile, ApplicationProfile,
]  # fmt: skip


@pytest.mark.parametrize(("props_class", "base"), list(zip(PROPS_CLASSES, PROPS_BASES, strict=True)))
def test_any_junk_for_a_props_field_is_an_argument_error_or_accepted(
    props_class: type, base: Callable[..., Any]
) -> None:
    assert isinstance(base(), props_class)
    for field in fields(props_class):
        assert_junk_refused_by_name_or_accepted(base, props_class.__name__, field.name)


@pytest.mark.parametrize(
    "param", ["guardrail_arn", "guardrail_version", "kms_key_arn", "cross_region_guardrail_profile"]
)
def test_any_junk_for_an_imported_guardrail_parameter_is_an_argument_error_or_accepted(param: str) -> None:
    base = {"guardrail_arn": GUARDRAIL_ARN, "guardrail_version": "1"}
    assert_junk_refused_by_name_or_accepted(
        lambda **kw: ImportedGuardrail(**{**base, **kw}), "ImportedGuardrail", param
    )


def test_a_logs_retention_member_is_accepted(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Stack")
    logging = ModelInvocationLogging(stack, "Logging", log_retention=logs.RetentionDays.ONE_MONTH)
    assert stack.resolve(logging.log_group.node.default_child.retention_in_days) == 30
