"""GW1 and GW2 on compliant and non-compliant construct trees, validated with pack.validate_scope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam

from tests.nag.support import findings, new_stack

GUARDED = {
    "StringEquals": {"bedrock:GuardrailIdentifier": "arn:aws:bedrock:us-east-1:111122223333:guardrail/g:1"}
}
INVOKE = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]


def _task_role(stack: Any, resources: list[str], service: str = "ecs-tasks.amazonaws.com") -> iam.Role:
    role = iam.Role(stack, "TaskRole", assumed_by=iam.ServicePrincipal(service))
    role.add_to_policy(iam.PolicyStatement(actions=INVOKE, resources=resources, conditions=GUARDED))
    return role


# GW1


def test_gw1_task_role_naming_its_models_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _task_role(
        stack,
        [
            f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/us.amazon.nova-2-lite-v1:0",
            # Cross-Region profiles need the model in every destination Region: a Region wildcard is fine.
            f"arn:{stack.partition}:bedrock:*::foundation-model/amazon.nova-2-lite-v1:0",
        ],
    )
    assert findings(stack, "InferenceTiers-GW1") == {}


def test_gw1_task_role_with_wildcard_models_fails_per_resource(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _task_role(
        stack,
        ["arn:aws:bedrock:us-east-1::foundation-model/*", "arn:aws:bedrock:*::foundation-model/anthropic.*"],
    )
    path = ["Test/TaskRole/DefaultPolicy/Resource"]
    assert findings(stack, "InferenceTiers-GW1") == {
        "InferenceTiers-GW1[Resource::arn:aws:bedrock:*::foundation-model/anthropic.*]": path,
        "InferenceTiers-GW1[Resource::arn:aws:bedrock:us-east-1::foundation-model/*]": path,
    }


def test_gw1_applies_to_inline_policies_of_task_roles_only(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    document = iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(actions=INVOKE, resources=["arn:aws:bedrock:us-east-1::foundation-model/*"])
        ]
    )
    iam.Role(
        stack,
        "Task",
        assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
        inline_policies={"p": document},
    )
    iam.Role(
        stack,
        "Lambda",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        inline_policies={"p": document},
    )
    _task_role(stack, ["arn:aws:bedrock:us-east-1::foundation-model/*"], service="lambda.amazonaws.com")
    assert findings(stack, "InferenceTiers-GW1") == {
        "InferenceTiers-GW1[Resource::arn:aws:bedrock:us-east-1::foundation-model/*]": ["Test/Task/Resource"]
    }


# GW2


def _load_balancer(stack: Any) -> elbv2.ApplicationLoadBalancer:
    return elbv2.ApplicationLoadBalancer(stack, "Lb", vpc=ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0))


def test_gw2_https_listener_and_redirect_pass(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    lb = _load_balancer(stack)
    lb.add_listener(
        "Https",
        port=443,
        certificates=[elbv2.ListenerCertificate.from_arn("arn:aws:acm:us-east-1:111122223333:certificate/c")],
        default_action=elbv2.ListenerAction.fixed_response(404),
    )
    lb.add_redirect()
    assert findings(stack, "InferenceTiers-GW2") == {}


def test_gw2_plain_http_listener_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _load_balancer(stack).add_listener(
        "Http",
        port=80,
        protocol=elbv2.ApplicationProtocol.HTTP,
        default_action=elbv2.ListenerAction.fixed_response(200),
    )
    assert findings(stack, "InferenceTiers-GW2") == {"InferenceTiers-GW2": ["Test/Lb/Http/Resource"]}
