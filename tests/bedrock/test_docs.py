"""docs/bedrock.md: its python examples run as written and build what the text says; its checklist names every
check preflight runs for the tier."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from tests.harness import PROJECT_ROOT

DOC = (PROJECT_ROOT / "docs" / "bedrock.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _run(block: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/bedrock.md", "exec"), namespace)
    return namespace


def _no_nag_findings(app: cdk.App) -> None:
    findings = [
        (v.rule_name, r.construct_path)
        for v in AwsSolutionsChecks().validate_scope(app).violations
        for r in v.violating_resources
    ]
    assert findings == []


def test_the_doc_has_the_two_examples() -> None:
    assert len(BLOCKS) == 2


def test_the_single_stack_example_enforces_its_guardrail() -> None:
    names = _run(BLOCKS[0])
    stack, guardrail, role = names["stack"], names["guardrail"], names["role"]
    assert names["access"].model_id == "eu.amazon.nova-2-lite-v1:0"
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::Bedrock::Guardrail",
        {
            "WordPolicyConfig": Match.object_like(
                {"WordsConfig": [Match.object_like({"Text": "project-falcon"})]}
            )
        },
    )
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [stack.resolve(role.role_name)],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {
                                    "StringNotEquals": {
                                        "bedrock:GuardrailIdentifier": stack.resolve(guardrail.versioned_arn)
                                    }
                                },
                            }
                        )
                    ]
                )
            },
        },
    )
    _no_nag_findings(names["app"])


def test_the_cross_stack_example_grants_the_service_role_through_the_platform_profile() -> None:
    names = _run(BLOCKS[1])
    platform, service = names["platform"], names["service"]
    policy = json.dumps(Template.from_stack(service).find_resources("AWS::IAM::Policy"))
    assert "Fn::ImportValue" in policy and "bedrock:InferenceProfileArn" in policy
    template = Template.from_stack(platform)
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}
    )
    assert set(template.to_json()["Mappings"]) == {"ConsoleHosts"}  # the DashboardUrl output reads it
    _no_nag_findings(names["app"])


@pytest.mark.parametrize(
    "api",
    [
        "cdk-bootstrap",
        "GetFoundationModel",
        "GetFoundationModelAvailability",
        "GetInferenceProfile",
        "ACTIVE",
    ],
)
def test_the_first_deploy_checklist_names_what_preflight_checks(api: str) -> None:
    checklist = DOC.split("## What a first deploy needs", 1)[1].split("\n## ", 1)[0]
    assert "inference-tiers preflight --tier bedrock" in checklist
    assert api in checklist
