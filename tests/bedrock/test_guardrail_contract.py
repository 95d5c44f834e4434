"""The guardrail contract between stacks: a policy change, deployed as an update of the guardrail's stack,
must not rename or change anything another stack imports, or CloudFormation refuses the update.

CloudFormation's rules, modelled by ``update_refusals`` (AWS CloudFormation User Guide, "Get exported outputs
from a deployed CloudFormation stack": "You can't modify or remove an output value that is referenced by
another stack", and an export name must stay unique): every export that a deployed consumer imports must
still exist after the producer's update, under the same name and with the same value. A consumer's
``AWS::SSM::Parameter::Value<String>`` parameter names an SSM parameter, which must still exist with that name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from inference_tiers.constructs import CrossRegionProfile, Geography, Guardrail, ModelInvokeAccess
from inference_tiers.constructs.bedrock import DeniedTopic, PublishedGuardrail
from tests.harness import TierBuild

PRODUCER = "Safety"
CONSUMER = "Service"
PARAMETER = f"/inference-tiers/{PRODUCER}/Guardrail/GuardrailVersion"
POLICIES: dict[str, dict[str, Any]] = {
    "before": {},
    "after": {"denied_topics": [DeniedTopic(name="Investment advice", definition="Advice on what to buy.")]},
}


def _imports(template: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "Fn::ImportValue" in value:
                found.append(value["Fn::ImportValue"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(template.get("Resources", {}))
    return sorted(set(found))


def _exports(template: dict[str, Any]) -> dict[str, Any]:
    outputs = template.get("Outputs", {}).values()
    return {o["Export"]["Name"]: o["Value"] for o in outputs if "Export" in o}


def _ssm_reads(template: dict[str, Any]) -> list[str]:
    """The SSM parameters the stack reads at deploy (but the CDK's own BootstrapVersion check)."""
    parameters = template.get("Parameters", {})
    return sorted(
        p["Default"]
        for key, p in parameters.items()
        if p["Type"] == "AWS::SSM::Parameter::Value<String>" and key != "BootstrapVersion"
    )


def _ssm_names(template: dict[str, Any]) -> set[str]:
    return {
        r["Properties"]["Name"] for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"
    }


def update_refusals(
    deployed_producer: dict[str, Any], deployed_consumer: dict[str, Any], new_producer: dict[str, Any]
) -> list[str]:
    """What CloudFormation says when it refuses to update ``deployed_producer`` to ``new_producer`` while
    ``deployed_consumer`` imports from it (and what the consumer's next deploy would fail on)."""
    old, new = _exports(deployed_producer), _exports(new_producer)
    refusals = []
    for name in _imports(deployed_consumer):
        if name not in new:
            refusals.append(f"Export {name} cannot be deleted as it is in use by {CONSUMER}")
        elif new[name] != old[name]:
            refusals.append(f"Cannot update export {name} as it is in use by {CONSUMER}")
    published = _ssm_names(new_producer)
    refusals += [
        f"Parameter {name} not found" for name in _ssm_reads(deployed_consumer) if name not in published
    ]
    return refusals


def _app(
    outdir: Path, policy: dict[str, Any], consume: Callable[[Guardrail, cdk.Stack], Any]
) -> dict[str, Any]:
    """A guardrail with ``policy`` in one stack, a role in another whose invoke access enforces it."""
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []})
    safety = cdk.Stack(app, PRODUCER)
    guardrail = Guardrail(safety, "Guardrail", **policy)
    service = cdk.Stack(app, CONSUMER)
    role = iam.Role(service, "ApiRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    ModelInvokeAccess(
        service,
        "Access",
        grantee=role,
        model=CrossRegionProfile(model_id="amazon.nova-2-lite-v1:0", geography=Geography.US),
        guardrail=consume(guardrail, service),
    )
    cdk.CfnOutput(service, "Version", value=consume(guardrail, service).guardrail_version)
    return {s.stack_name: Template.from_stack(s).to_json() for s in (safety, service)}


def _deploys(tmp_path: Path, consume: Callable[[Guardrail, cdk.Stack], Any]) -> dict[str, dict[str, Any]]:
    return {name: _app(tmp_path / name, policy, consume) for name, policy in POLICIES.items()}


def _versions(template: dict[str, Any]) -> list[str]:
    return [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Bedrock::GuardrailVersion"]


def test_a_policy_change_keeps_every_name_the_consumer_reads(tmp_path: Path) -> None:
    deploys = _deploys(tmp_path, lambda guardrail, _: guardrail)
    before, after = deploys["before"], deploys["after"]
    assert _versions(before[PRODUCER]) != _versions(after[PRODUCER])  # the policy change makes a new version
    assert update_refusals(before[PRODUCER], before[CONSUMER], after[PRODUCER]) == []
    # The consumer reads the version by the parameter's stable name, and its imports keep their names.
    assert _ssm_reads(before[CONSUMER]) == _ssm_reads(after[CONSUMER]) == [PARAMETER]
    assert _imports(before[CONSUMER]) == _imports(after[CONSUMER])
    assert not any("GuardrailVersion" in name for name in _imports(after[CONSUMER]))
    # The parameter's value follows the new version.
    (parameter,) = (r for r in after[PRODUCER]["Resources"].values() if r["Type"] == "AWS::SSM::Parameter")
    assert parameter["Properties"]["Name"] == PARAMETER
    assert parameter["Properties"]["Value"] == {"Fn::GetAtt": [_versions(after[PRODUCER])[0], "Version"]}
    # The version the consumer's grant requires is the parameter's value.
    policy = json.dumps(after[CONSUMER]["Resources"])
    (read,) = (k for k, p in after[CONSUMER]["Parameters"].items() if p.get("Default") == PARAMETER)
    assert policy.count(json.dumps({"Ref": read})) >= 2  # the Allow's and the Deny's GuardrailIdentifier


def test_the_model_refuses_what_cloudformation_refuses_a_version_exported_across_stacks(
    tmp_path: Path,
) -> None:
    # The consumer given the version itself (what a plain cross-stack reference makes): an export named after
    # the version's logical id, which the policy change deletes while the consumer imports it.
    def version_itself(guardrail: Guardrail, _: cdk.Stack) -> PublishedGuardrail:
        return PublishedGuardrail(guardrail, guardrail.guardrail_version)

    deploys = _deploys(tmp_path, version_itself)
    refusals = update_refusals(
        deploys["before"][PRODUCER], deploys["before"][CONSUMER], deploys["after"][PRODUCER]
    )
    assert refusals and all("cannot be deleted as it is in use" in r for r in refusals)
    assert any(_versions(deploys["before"][PRODUCER])[0] in r for r in refusals)


def test_replaced_versions_are_retained_for_consumers_not_yet_redeployed(tmp_path: Path) -> None:
    template = _app(tmp_path, {}, lambda guardrail, _: guardrail)[PRODUCER]
    (version,) = (r for r in template["Resources"].values() if r["Type"] == "AWS::Bedrock::GuardrailVersion")
    assert version["DeletionPolicy"] == version["UpdateReplacePolicy"] == "Retain"


def test_in_its_own_stack_the_guardrail_is_used_directly_elsewhere_its_stack_deploys_first(
    tmp_path: Path,
) -> None:
    app = cdk.App(outdir=str(tmp_path))
    safety, service = cdk.Stack(app, PRODUCER), cdk.Stack(app, CONSUMER)
    guardrail = Guardrail(safety, "Guardrail")
    assert guardrail.for_consumer(safety) is guardrail
    assert _ssm_reads(Template.from_stack(safety).to_json()) == []
    published = guardrail.for_consumer(service)
    assert isinstance(published, PublishedGuardrail) and published.guardrail is guardrail
    assert service.dependencies == [safety]  # the parameter exists before the consumer's deploy reads it
    assert safety.dependencies == []


@pytest.mark.parametrize("name", ["inference-tiers/x", "/a b", "/" + "x" * 1011])
def test_a_bad_version_parameter_name_is_refused_by_name(tmp_path: Path, name: str) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), PRODUCER)
    with pytest.raises(ValueError, match="version_parameter_name"):
        Guardrail(stack, "Guardrail", version_parameter_name=name)


def test_the_bedrock_and_gateway_stacks_share_the_guardrail_by_its_version_parameter(
    tier_build: Callable[[str], TierBuild],
) -> None:
    build = tier_build("bedrock,gateway")
    bedrock, gateway = build.template("InferenceTiers-Bedrock"), build.template("InferenceTiers-Gateway")
    name = "/inference-tiers/InferenceTiers-Bedrock/Guardrail/GuardrailVersion"
    assert name in _ssm_names(bedrock.to_json())
    assert _ssm_reads(gateway.to_json()) == [name]
    exported = _exports(bedrock.to_json())
    for imported in _imports(gateway.to_json()):
        assert "GuardrailVersion" not in json.dumps(exported[imported])  # nothing imported names the version
