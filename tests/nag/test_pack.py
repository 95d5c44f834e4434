"""The pack as a whole: registration in any app, acknowledgments exactly like cdk-nag's, rule metadata."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk import Acknowledgment, App, Stack, Validations
from aws_cdk import aws_iam as iam
from cdk_nag import NagMessageLevel

from inference_tiers.nag import RULES, InferenceChecks, pack
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule
from tests.nag.support import findings, new_stack

MODEL = "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-2-lite-v1:0"


def _unguarded_grant(stack: Stack) -> iam.Role:
    role = iam.Role(stack, "App", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[MODEL]))
    return role


def test_foreign_app_with_an_unguarded_bedrock_grant_fails_synth_with_the_rule_and_its_explanation(
    tmp_path: Path,
) -> None:
    outdir = tmp_path / "cdk.out"
    app = App(outdir=str(outdir))
    _unguarded_grant(Stack(app, "Foreign"))
    Validations.of(app).add_plugins(InferenceChecks(app))

    with pytest.raises(RuntimeError, match="ValidationFailed") as failure:
        app.synth()

    message = str(failure.value)
    assert "Acknowledge with 'inference-tiers::InferenceTiers-BR2[Action::bedrock:InvokeModel]'" in message
    assert "Add Condition StringEquals bedrock:GuardrailIdentifier" in message
    report = json.loads((outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "inference-tiers"]
    violations = {v["ruleName"]: v for v in plugin["violations"]}
    br2 = violations["InferenceTiers-BR2[Action::bedrock:InvokeModel]"]
    assert br2["severity"] == "error"
    assert "without a guardrail" in br2["description"]
    assert "bedrock:GuardrailIdentifier" in br2["description"]  # the explanation: what to change
    assert (
        "https://docs.aws.amazon.com/bedrock/latest/userguide/guardrails-permissions-id.html"
        in br2["description"]
    )
    assert [r["constructPath"] for r in br2["violatingConstructs"]] == ["Foreign/App/DefaultPolicy/Resource"]
    assert violations["InferenceTiers-BR5"]["severity"] == "warning"


def test_acknowledged_app_synthesizes_with_the_pack_registered(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "cdk.out"))
    role = _unguarded_grant(Stack(app, "Foreign"))
    for finding in ("InferenceTiers-BR2[Action::bedrock:InvokeModel]", "InferenceTiers-BR5"):
        Validations.of(role).acknowledge(
            Acknowledgment(id=finding, reason="test fixture acknowledges it on purpose")
        )
    Validations.of(app).add_plugins(InferenceChecks(app))
    assert app.synth().get_stack_by_name("Foreign").template["Resources"]


def test_granular_acknowledgment_clears_only_that_finding(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    role = iam.Role(stack, "App", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["bedrock:*", "bedrock:Invoke*"], resources=["*"]))
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="InferenceTiers-BR3[Action::bedrock:*]", reason="granular acknowledgment under test"
        )
    )
    assert findings(stack, "InferenceTiers-BR3") == {
        "InferenceTiers-BR3[Action::bedrock:Invoke*]": ["Test/App/DefaultPolicy/Resource"]
    }


def test_acknowledgment_on_an_ancestor_covers_its_resources(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    role = _unguarded_grant(stack)
    assert "InferenceTiers-BR5" in findings(stack)
    Validations.of(stack).acknowledge(
        Acknowledgment(id="InferenceTiers-BR5", reason="logging is on for this account in another app")
    )
    assert "InferenceTiers-BR5" not in findings(stack)
    assert "InferenceTiers-BR2[Action::bedrock:InvokeModel]" in findings(role)


def test_an_acknowledgment_needs_a_reason() -> None:
    with pytest.raises(TypeError, match="reason"):
        Acknowledgment(id="InferenceTiers-BR5")  # type: ignore[call-arg]


def test_each_validation_reads_the_app_as_it_is_then(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _unguarded_grant(stack)
    pack = InferenceChecks()
    assert "InferenceTiers-BR5" in {v.rule_name for v in pack.validate_scope(stack).violations}
    logging = iam.Role(stack, "Logging", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    logging.add_to_policy(
        iam.PolicyStatement(actions=["bedrock:PutModelInvocationLoggingConfiguration"], resources=["*"])
    )
    assert "InferenceTiers-BR5" not in {v.rule_name for v in pack.validate_scope(stack).violations}


def test_compliant_and_unrelated_resources_report_nothing(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    iam.Role(stack, "Plain", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    report = InferenceChecks().validate_scope(stack)
    assert report.success and report.violations == []


def test_rules_have_unique_ids_levels_explanations_and_aws_documentation() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for rule in RULES:
        assert re.fullmatch(r"InferenceTiers-(BR|SM|EKS|GPU|LOG|GW)\d+", rule.id), rule.id
        assert rule.info.endswith(".") and len(rule.explanation.split()) >= 20, rule.id
        assert rule.documentation.startswith("https://docs.aws.amazon.com/"), rule.id
        assert rule.resource_types and all(t.startswith("AWS::") for t in rule.resource_types), rule.id


def test_pack_reports_its_name_and_runs_non_verbose_on_request(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _unguarded_grant(stack)
    pack = InferenceChecks(verbose=False)
    assert pack.name == "inference-tiers"
    descriptions = {v.rule_name: v.description for v in pack.validate_scope(stack).violations}
    assert descriptions["InferenceTiers-BR5"] == next(r.info for r in RULES if r.id == "InferenceTiers-BR5")


def _rule_that_raises(suffix: str) -> Rule:
    def check(resource: Resource, facts: AppFacts) -> Result:
        raise ValueError(f"cannot read {resource.logical_id}")

    return Rule(
        suffix=suffix,
        level=NagMessageLevel.ERROR,
        info="A rule under test.",
        explanation="It raises, as a check that meets an unexpected property shape would.",
        documentation="https://docs.aws.amazon.com/",
        resource_types=frozenset({"AWS::IAM::Role"}),
        check=check,
    )


def test_a_check_that_raises_is_a_finding_of_its_rule_unless_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pack evaluates its rules in Python before it hands cdk-nag anything: an error must still reach cdk-nag
    as a finding of that rule on that resource, with the error's message, and be acknowledgeable like any other."""
    monkeypatch.setattr(pack, "RULES", (_rule_that_raises("ERR1"),))
    stack = new_stack(tmp_path)
    role = iam.Role(stack, "Plain", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    report = InferenceChecks().validate_scope(stack)
    ((violation,),) = [[v for v in report.violations if v.rule_name == "InferenceTiers-ERR1"]]
    assert [str(r.construct_path) for r in violation.violating_resources] == ["Test/Plain/Resource"]
    assert "Rule threw an error during validation" in violation.description
    assert re.search(r"cannot read Plain[0-9A-F]{8}\b", violation.description), violation.description

    Validations.of(role).acknowledge(
        Acknowledgment(id="InferenceTiers-ERR1", reason="the test rule raises on purpose for every role")
    )
    assert InferenceChecks().validate_scope(stack).violations == []
