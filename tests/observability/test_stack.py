"""InferenceTiers-Observability as cdk.json configures it: the properties that matter in the template."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Match, Template

from inference_tiers.observability.alertmanager import alertmanager_config
from inference_tiers.observability.rules import rules_yaml
from inference_tiers.stacks.observability import STACK_NAME
from tests.harness import TierBuild, cdk_json_context


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> Template:
    return tier_build("observability").template(STACK_NAME)


TOPIC = "arn:aws:sns:us-east-1:111122223333:alerts"


def _fill(token: dict[str, Any]) -> str:
    return "us-east-1" if token == {"Ref": "AWS::Region"} else TOPIC


def _one(template: Template, kind: str) -> dict[str, Any]:
    (resource,) = template.find_resources(kind).values()
    return resource


def test_workspace_is_encrypted_retained_logged_and_keeps_the_configured_retention(
    template: Template,
) -> None:
    workspace = _one(template, "AWS::APS::Workspace")
    assert workspace["DeletionPolicy"] == "Retain"
    props = workspace["Properties"]
    key_id = next(iter(template.find_resources("AWS::KMS::Key")))
    assert props["KmsKeyArn"] == {"Fn::GetAtt": [key_id, "Arn"]}
    days = cdk_json_context()["observability.retention_days"]
    assert props["WorkspaceConfiguration"] == {"RetentionPeriodInDays": days}
    log_group = _one(template, "AWS::Logs::LogGroup")
    assert log_group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert log_group["Properties"]["LogGroupName"].startswith("/aws/vendedlogs/prometheus/")


def test_rule_groups_namespace_holds_the_rendered_rules(template: Template) -> None:
    props = _one(template, "AWS::APS::RuleGroupsNamespace")["Properties"]
    assert props["Name"] == "inference-tiers"
    assert props["Workspace"] == {
        "Fn::GetAtt": [next(iter(template.find_resources("AWS::APS::Workspace"))), "Arn"]
    }
    # cdk.json's thresholds equal AlertThresholds' defaults, so the file is the default rendering
    assert props["Data"] == rules_yaml()


def test_alerts_go_to_the_encrypted_topic_and_only_this_accounts_workspaces_may_publish(
    template: Template,
) -> None:
    topic_id, topic = next(iter(template.find_resources("AWS::SNS::Topic").items()))
    assert "KmsMasterKeyId" in topic["Properties"]
    definition = _one(template, "AWS::APS::Workspace")["Properties"]["AlertManagerDefinition"]
    # the topic ARN and Region are joined in at deploy time; with them filled in it is the rendered definition
    parts = definition["Fn::Join"][1]
    assert {"Ref": topic_id} in parts and {"Ref": "AWS::Region"} in parts
    filled = "".join(p if isinstance(p, str) else _fill(p) for p in parts)
    inner = yaml.safe_load(yaml.safe_load(filled)["alertmanager_config"])
    assert inner == alertmanager_config(TOPIC, "us-east-1")
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "AmpAlertmanagerPublishes",
                                "Principal": {"Service": "aps.amazonaws.com"},
                                "Condition": {
                                    "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                                    "ArnLike": {"aws:SourceArn": Match.any_value()},
                                },
                            }
                        )
                    ]
                )
            }
        },
    )
    key_policy = _one(template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
    aps = [s for s in key_policy if s.get("Principal") == {"Service": "aps.amazonaws.com"}]
    assert len(aps) == 1 and set(aps[0]["Condition"]) == {"StringEquals", "ArnLike"}


def test_no_scraper_collector_or_grafana_without_their_tiers_or_settings(template: Template) -> None:
    for kind in ("AWS::APS::Scraper", "AWS::Grafana::Workspace", "AWS::IAM::Role"):
        assert template.find_resources(kind) == {}, kind


def test_outputs_give_what_the_ops_commands_and_other_stacks_need(template: Template) -> None:
    assert {"WorkspaceArn", "PrometheusEndpoint", "RemoteWriteUrl", "AlertTopicArn"} <= set(
        template.to_json()["Outputs"]
    )
