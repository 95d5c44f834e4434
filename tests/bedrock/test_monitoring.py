"""BedrockMonitoring: each alarm's metric, threshold and action, the encrypted topic, the dashboard (misuse: test_misuse.py)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from inference_tiers.constructs import BedrockMonitoring, Guardrail

PROFILE = "us.amazon.nova-2-lite-v1:0"


@pytest.fixture(scope="module")
def built() -> tuple[cdk.Stack, BedrockMonitoring, Template]:
    stack = cdk.Stack(cdk.App(), "Stack")
    guardrail = Guardrail(stack, "Guardrail")
    monitoring = BedrockMonitoring(
        stack,
        "Monitoring",
        model_id=PROFILE,
        tpm_quota=400_000,
        guardrail=guardrail,
        log_delivery_alarm=True,
        alarm_email="ops@example.com",
    )
    return stack, monitoring, Template.from_stack(stack)


def _alarm(template: Template, construct_id: str) -> dict[str, Any]:
    matches = [
        r
        for logical_id, r in template.find_resources("AWS::CloudWatch::Alarm").items()
        if construct_id in logical_id
    ]
    assert len(matches) == 1, construct_id
    props: dict[str, Any] = matches[0]["Properties"]
    return props


def _metric_stat(metric: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]], str, int]:
    stat = metric["MetricStat"]
    return (
        stat["Metric"]["Namespace"],
        stat["Metric"]["MetricName"],
        stat["Metric"].get("Dimensions", []),
        stat["Stat"],
        stat["Period"],
    )


MODEL_DIMENSION = [{"Name": "ModelId", "Value": PROFILE}]


def test_every_alarm_notifies_the_topic_and_ignores_missing_data(built: Any) -> None:
    stack, monitoring, template = built
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 7
    for alarm in alarms.values():
        props = alarm["Properties"]
        assert props["AlarmActions"] == [stack.resolve(monitoring.topic.topic_arn)]
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
        assert props["TreatMissingData"] == "notBreaching"


@pytest.mark.parametrize(
    ("construct_id", "metric", "statistic", "threshold", "periods"),
    [
        ("Throttles", "InvocationThrottles", "Sum", 0, 3),
        ("LatencyP99", "InvocationLatency", "p99", 30000, 3),
        ("TimeToFirstTokenP90", "TimeToFirstToken", "p90", 3000, 3),
    ],
)
def test_single_metric_alarms(
    built: Any, construct_id: str, metric: str, statistic: str, threshold: float, periods: int
) -> None:
    _, _, template = built
    props = _alarm(template, construct_id)
    assert (
        props["Namespace"],
        props["MetricName"],
        props["Dimensions"],
        props["Statistic" if statistic == "Sum" else "ExtendedStatistic"],
    ) == (
        "AWS/Bedrock",
        metric,
        MODEL_DIMENSION,
        statistic,
    )
    assert (props["Threshold"], props["EvaluationPeriods"], props["Period"]) == (threshold, periods, 300)


def test_server_error_rate_alarm_divides_errors_by_invocations(built: Any) -> None:
    _, _, template = built
    props = _alarm(template, "ServerErrorRate")
    metrics = {m["Id"]: m for m in props["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "IF(invocations > 0, 100 * errors / invocations, 0)"
    assert _metric_stat(metrics["errors"]) == (
        "AWS/Bedrock",
        "InvocationServerErrors",
        MODEL_DIMENSION,
        "Sum",
        300,
    )
    assert _metric_stat(metrics["invocations"]) == ("AWS/Bedrock", "Invocations", MODEL_DIMENSION, "Sum", 300)
    assert props["Threshold"] == 1


def test_tpm_alarm_compares_estimated_usage_per_minute_to_the_configured_quota(built: Any) -> None:
    _, _, template = built
    props = _alarm(template, "TpmQuotaUsage")
    metrics = {m["Id"]: m for m in props["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "100 * usage / 400000"
    assert _metric_stat(metrics["usage"]) == (
        "AWS/Bedrock",
        "EstimatedTPMQuotaUsage",
        MODEL_DIMENSION,
        "Sum",
        60,
    )
    assert (props["Threshold"], props["EvaluationPeriods"]) == (80, 5)


def test_guardrail_intervention_rate_alarm(built: Any) -> None:
    stack, monitoring, template = built
    props = _alarm(template, "GuardrailInterventionRate")
    metrics = {m["Id"]: m for m in props["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "IF(invocations > 0, 100 * intervened / invocations, 0)"
    namespace, name, dimensions, _, _ = _metric_stat(metrics["intervened"])
    assert (namespace, name, {d["Name"] for d in dimensions}) == (
        "AWS/Bedrock/Guardrails",
        "InvocationsIntervened",
        {"GuardrailArn", "GuardrailVersion"},
    )
    assert props["Threshold"] == 20


def test_log_delivery_alarm_fires_on_any_failure(built: Any) -> None:
    _, _, template = built
    props = _alarm(template, "LogDeliveryFailures")
    metrics = {m["Id"]: m for m in props["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "FILL(cw, 0) + FILL(s3, 0)"
    assert _metric_stat(metrics["cw"])[:3] == (
        "AWS/Bedrock",
        "ModelInvocationLogsCloudWatchDeliveryFailure",
        [],
    )
    assert _metric_stat(metrics["s3"])[:3] == ("AWS/Bedrock", "ModelInvocationLogsS3DeliveryFailure", [])
    assert (props["Threshold"], props["EvaluationPeriods"]) == (0, 1)


def test_topic_is_kms_encrypted_tls_only_and_subscribed(built: Any) -> None:
    stack, monitoring, template = built
    template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": stack.resolve(monitoring.topic_key.key_arn)}
    )
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                    )
                ]
            }
        },
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                            }
                        )
                    ]
                )
            }
        },
    )


def test_dashboard_shows_the_required_metrics(built: Any) -> None:
    _, _, template = built
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for name in (
        "Invocations",
        "InvocationLatency",
        "TimeToFirstToken",
        "InputTokenCount",
        "OutputTokenCount",
        "InvocationThrottles",
        "InvocationClientErrors",
        "InvocationServerErrors",
        "EstimatedTPMQuotaUsage",
        "InvocationsIntervened",
        "ModelInvocationLogsS3DeliveryFailure",
    ):
        assert name in body, name
    for percentile in ("p50", "p90", "p99"):
        assert f'"stat":"{percentile}"' in body


def test_optional_alarms_are_left_out_without_guardrail_or_logging() -> None:
    stack = cdk.Stack(cdk.App(), "Stack")
    BedrockMonitoring(stack, "Monitoring", model_id=PROFILE, tpm_quota=1000)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::CloudWatch::Alarm", 5)
    template.resource_count_is("AWS::SNS::Subscription", 0)
