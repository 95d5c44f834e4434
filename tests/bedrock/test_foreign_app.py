"""The tier-1 constructs composed in a user's own app, across its own stacks, granting to its own roles from the
stack that owns the guardrail and from the service's stack, and to a role imported by ARN: the library leaves
nothing for the user to acknowledge (tests/nag/test_foreign_apps.py checks both packs under both flag sets). The
cross-Region wildcards its grants need are acknowledged by the library, exactly those findings and on the
grantee's policy; no unreferenced ConsoleHosts mapping (cfn-lint W7001) when the dashboard URL is not used;
cfn-lint reports nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    BedrockMonitoring,
    CrossRegionProfile,
    Geography,
    Guardrail,
    ModelInvocationLogging,
    ModelInvokeAccess,
)
from inference_tiers.constructs.bedrock import guardrail as guardrail_module
from inference_tiers.constructs.bedrock import model_access as model_access_module
from inference_tiers.constructs.common.nag import nag_resource_id

MODEL = "amazon.nova-2-lite-v1:0"
GUARDRAIL_PROFILE = "us.guardrail.v1:0"


def user_stacks(app: cdk.App) -> dict[str, cdk.Stack]:
    """The user's stacks, by name (tests/nag/test_foreign_apps.py checks them under both packs and flag sets)."""
    safety = cdk.Stack(app, "UserSafety")
    guardrail = Guardrail(
        safety, "Guardrail", tier="STANDARD", cross_region_guardrail_profile=GUARDRAIL_PROFILE
    )
    us = CrossRegionProfile(model_id=MODEL, geography=Geography.US)
    profile = ApplicationInferenceProfile(safety, "Profile", model_source=us, cost_tags={"team": "search"})
    ModelInvocationLogging(safety, "Logging")
    BedrockMonitoring(
        safety,
        "Monitoring",
        model_id=us.profile_id,
        tpm_quota=400_000,
        guardrail=guardrail,
        log_delivery_alarm=True,
    )

    service = cdk.Stack(app, "UserService")
    api_role = iam.Role(service, "ApiRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    batch_role = iam.Role(service, "BatchRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    # In the service's stack, through the profile and the guardrail of the other stack.
    ModelInvokeAccess(service, "ApiAccess", grantee=api_role, model=profile.model_source, guardrail=guardrail)
    # In the guardrail's stack, to a role of the service's stack, through the global profile.
    ModelInvokeAccess(
        safety,
        "BatchAccess",
        grantee=batch_role,
        model=CrossRegionProfile(model_id=MODEL, geography=Geography.GLOBAL),
        guardrail=guardrail,
    )
    # A role that another team manages, imported by ARN: its grant lands in a Policy of the service's stack.
    shared_role = iam.Role.from_role_arn(service, "SharedRole", "arn:aws:iam::111122223333:role/shared-batch")
    ModelInvokeAccess(
        service,
        "SharedAccess",
        grantee=shared_role,
        model=CrossRegionProfile(model_id=MODEL, geography=Geography.EU),
        guardrail=guardrail,
    )
    return {s.stack_name: s for s in (safety, service)}


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, cdk.Stack]:
    return _user_app(tmp_path_factory.mktemp("cdk.out"))


def _user_app(outdir: Path) -> dict[str, cdk.Stack]:
    return user_stacks(cdk.App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []}))


def _findings(stacks: dict[str, cdk.Stack]) -> list[tuple[str, str]]:
    return sorted(
        (violation.rule_name, resource.construct_path)
        for stack in stacks.values()
        for violation in AwsSolutionsChecks().validate_scope(stack).violations
        for resource in violation.violating_resources
    )


def _lint(template: dict[str, Any]) -> list[tuple[str, str]]:
    """Every cfn-lint finding (errors, warnings and informational) as (rule id, path)."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    return [(m.rule.id, "/".join(map(str, m.path))) for m in matches]


def test_the_library_acknowledges_exactly_the_cross_region_wildcards_of_its_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Build the same app with the library's grant acknowledgments recorded instead of made: the findings nag
    # then reports are exactly the recorded ones, all on the service roles' policies, and nothing else.
    recorded: list[tuple[str, str]] = []

    def record(grantee: Any, resource_arn: str, reason: str) -> None:
        principal = grantee.grant_principal
        finding = f"AwsSolutions-IAM5[Resource::{nag_resource_id(principal, resource_arn)}]"
        policy = "DefaultPolicy" if isinstance(principal, iam.Role) else "Policy"  # an imported role's own
        recorded.append((finding, f"{principal.node.path}/{policy}/Resource"))
        assert len(reason.split()) >= 6

    monkeypatch.setattr(model_access_module, "acknowledge_granted_resource", record)
    monkeypatch.setattr(guardrail_module, "acknowledge_granted_resource", record)
    findings = _findings(_user_app(tmp_path))
    assert findings == sorted(set(recorded))
    assert set(recorded) == {
        (
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{MODEL}]",
            "UserService/ApiRole/DefaultPolicy/Resource",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*:<AWS::AccountId>:guardrail-profile/"
            f"{GUARDRAIL_PROFILE}]",
            "UserService/ApiRole/DefaultPolicy/Resource",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*:<AWS::AccountId>:guardrail-profile/"
            f"{GUARDRAIL_PROFILE}]",
            "UserService/BatchRole/DefaultPolicy/Resource",
        ),
        (
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{MODEL}]",
            "UserService/SharedRole/Policy/Resource",
        ),
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*:<AWS::AccountId>:guardrail-profile/"
            f"{GUARDRAIL_PROFILE}]",
            "UserService/SharedRole/Policy/Resource",
        ),
    }  # the global profile's model ARNs (source Region, Region-less) have no wildcard to acknowledge


def test_cfn_lint_reports_nothing_and_no_console_mapping_is_left_unreferenced(
    user_app: dict[str, cdk.Stack],
) -> None:
    templates = {name: Template.from_stack(stack).to_json() for name, stack in user_app.items()}
    assert "Mappings" not in templates["UserSafety"]
    assert {name: _lint(template) for name, template in templates.items()} == {name: [] for name in templates}


def test_reading_the_dashboard_url_adds_the_mapping_that_the_url_uses(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "WithUrl")
    monitoring = BedrockMonitoring(stack, "Monitoring", model_id=f"us.{MODEL}", tpm_quota=1000)
    assert stack.node.try_find_child("ConsoleHosts") is None
    cdk.CfnOutput(stack, "DashboardUrl", value=monitoring.dashboard_url)
    template = Template.from_stack(stack).to_json()
    assert set(template["Mappings"]) == {"ConsoleHosts"}
    assert '"Fn::FindInMap": ["ConsoleHosts"' in json.dumps(template["Outputs"]["DashboardUrl"])
    assert _lint(template) == []
