"""The rotation path (audit W6): ECS injects DATABASE_PASSWORD only when a task starts, and LiteLLM 1.104.0 recycles
idle database connections after 60 s (litellm/proxy/db/db_url_settings.py DEFAULT_MAX_IDLE_CONNECTION_LIFETIME),
so each rotation of the proxy's password must restart its tasks. Followed here through the synthesized template:
a RotationSucceeded event -> the EventBridge rule -> the input it sends -> the restart function -> UpdateService
with forceNewDeployment on exactly the proxy's service, which is all its policy allows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from inference_tiers.constructs.gateway.proxy import ASSETS
from tests.harness import TierBuild, import_file

STACK = "InferenceTiers-Gateway"
# What the template's intrinsics resolve to at deploy time, for the logical ids they name.
DEPLOYED = {
    "Cluster": "arn:aws:ecs:us-east-1:123456789012:cluster/gateway",
    "Service": "gateway-service",
    "AppSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:GatewayDatabaseAppSecret-AbCdEf",
    "MasterSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:GatewayDatabaseClusterSecret-GhIjKl",
}


def rotation_event(secret_arn: str, name: str = "RotationSucceeded") -> dict[str, Any]:
    """A rotation record as EventBridge delivers it: a CloudTrail service event of Secrets Manager, the secret in
    additionalEventData.SecretId (Secrets Manager user guide, "AWS CloudTrail entries for Secrets Manager")."""
    return {
        "version": "0",
        "detail-type": "AWS Service Event via CloudTrail",
        "source": "aws.secretsmanager",
        "account": "123456789012",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventSource": "secretsmanager.amazonaws.com",
            "eventName": name,
            "awsRegion": "us-east-1",
            "sourceIPAddress": "secretsmanager.amazonaws.com",
            "requestParameters": None,
            "responseElements": None,
            "additionalEventData": {"SecretId": secret_arn},
            "eventType": "AwsServiceEvent",
        },
    }


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge's matching for the pattern forms the rule uses (nested objects, lists of exact values)."""
    for key, expected in pattern.items():
        value = event.get(key)
        if isinstance(expected, dict):
            if not isinstance(value, dict) or not matches(expected, value):
                return False
        elif value not in expected:
            return False
    return True


def handler() -> ModuleType:
    return import_file("gateway_restart", Path(ASSETS) / "restart" / "index.py")


class FakeEcs:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def update_service(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {"service": {"serviceName": kwargs["service"]}}


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> dict[str, Any]:
    return dict(tier_build("gateway").template(STACK).to_json())


def one(template: dict[str, Any], kind: str, fragment: str = "") -> tuple[str, dict[str, Any]]:
    found = [(i, r) for i, r in template["Resources"].items() if r["Type"] == kind and fragment in i]
    assert len(found) == 1, f"expected one {kind} named *{fragment}*, got {[i for i, _ in found]}"
    return found[0]


def deployed(template: dict[str, Any], intrinsic: dict[str, Any]) -> str:
    """The deploy-time value of a Ref/GetAtt the rule's input names (only the ones it may name)."""
    logical_id = intrinsic["Ref"] if "Ref" in intrinsic else intrinsic["Fn::GetAtt"][0]
    expected = {
        one(template, "AWS::ECS::Cluster")[0]: "Cluster",
        one(template, "AWS::ECS::Service")[0]: "Service",
        one(template, "AWS::SecretsManager::Secret", "DatabaseAppSecret")[0]: "AppSecret",
    }
    assert logical_id in expected, f"the rule's input names {intrinsic}"
    return DEPLOYED[expected[logical_id]]


def transformed_input(
    template: dict[str, Any], target: dict[str, Any], event: dict[str, Any]
) -> dict[str, Any]:
    """EventBridge's input transformer, as the template configures it, applied to ``event``."""
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {"detail": "$.detail"}
    parts = transformer["InputTemplate"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else deployed(template, p) for p in parts)
    return dict(json.loads(text.replace("<detail>", json.dumps(event["detail"]))))


def test_a_rotation_of_the_proxys_password_restarts_exactly_its_service(template: dict[str, Any]) -> None:
    _, rule = one(template, "AWS::Events::Rule", "RestartOnRotation")
    pattern = rule["Properties"]["EventPattern"]
    event = rotation_event(DEPLOYED["AppSecret"])
    assert matches(pattern, event)
    assert not matches(pattern, rotation_event(DEPLOYED["AppSecret"], "RotationFailed"))
    (target,) = rule["Properties"]["Targets"]
    function_id, _ = one(template, "AWS::Lambda::Function", "RestartHandler")
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}

    ecs = FakeEcs()
    result = handler().on_rotation(transformed_input(template, target, event), None, ecs)
    assert result == {"Restarted": True}
    assert ecs.updates == [
        {"cluster": DEPLOYED["Cluster"], "service": DEPLOYED["Service"], "forceNewDeployment": True}
    ]


def test_the_secret_it_watches_is_the_one_ecs_injects_as_the_database_password(
    template: dict[str, Any],
) -> None:
    _, task = one(template, "AWS::ECS::TaskDefinition")
    (proxy,) = [c for c in task["Properties"]["ContainerDefinitions"] if c["Name"] == "litellm"]
    password = next(s["ValueFrom"] for s in proxy["Secrets"] if s["Name"] == "DATABASE_PASSWORD")
    secret_id, _ = one(template, "AWS::SecretsManager::Secret", "DatabaseAppSecret")
    assert password == {"Fn::Join": ["", [{"Ref": secret_id}, ":password::"]]}
    _, rule = one(template, "AWS::Events::Rule", "RestartOnRotation")
    assert {"Ref": secret_id} in rule["Properties"]["Targets"][0]["InputTransformer"]["InputTemplate"][
        "Fn::Join"
    ][1]


def test_other_rotations_restart_nothing(template: dict[str, Any]) -> None:
    _, rule = one(template, "AWS::Events::Rule", "RestartOnRotation")
    (target,) = rule["Properties"]["Targets"]
    ecs = FakeEcs()
    event = rotation_event(DEPLOYED["MasterSecret"])
    assert handler().on_rotation(transformed_input(template, target, event), None, ecs) == {
        "Restarted": False
    }
    assert ecs.updates == []


def test_the_restart_function_may_update_only_the_proxys_service(template: dict[str, Any]) -> None:
    service_id, _ = one(template, "AWS::ECS::Service")
    _, policy = one(template, "AWS::IAM::Policy", "RestartHandler")
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "ecs:UpdateService", "Effect": "Allow", "Resource": {"Ref": service_id}}
    ]


def test_the_password_does_not_rotate_at_creation_and_a_failed_restart_alarms(
    template: dict[str, Any],
) -> None:
    """At creation the role does not exist until the migration runs (audit U5); and a restart that fails pages
    the gateway's alarm topic."""
    _, schedule = one(template, "AWS::SecretsManager::RotationSchedule", "AppSecret")
    assert schedule["Properties"]["RotateImmediatelyOnUpdate"] is False
    function_id, _ = one(template, "AWS::Lambda::Function", "RestartHandler")
    _, alarm = one(template, "AWS::CloudWatch::Alarm", "RotationRestart")
    assert alarm["Properties"]["MetricName"] == "Errors"
    assert alarm["Properties"]["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]
    assert alarm["Properties"]["AlarmActions"]
