"""BedrockMonitoring: each alarm's metric, threshold and action, the encrypted topic, the dashboard (misuse: test_misuse.py)."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    BedrockMonitoring,
    CrossRegionProfile,
    Geography,
    Guardrail,
)

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


# ------------------------------------------------------------------ calls through an application profile
# Bedrock reports a call under the ModelId it named: calls through an application inference profile land in
# the profile's own id, not in its source's (awslabs/bedrock-usage-analyzer@4ba03085a603eed547111b0515ddbf914ed10488
# src/bedrock_usage_analyzer/core/profile_fetcher.py:39-86 collects each APPLICATION profile's inferenceProfileId,
# core/metrics_fetcher.py:828-840 queries AWS/Bedrock with Dimensions=[ModelId=<that id>] besides the system
# profile's, README.md:11 "aggregates the FM usage across Bedrock application inference profiles"). The AWS docs
# (https://docs.aws.amazon.com/bedrock/latest/userguide/monitoring-runtime-metrics.html) name ModelId as the only
# dimension of these metrics.

MODEL_ALARMS = {
    "Throttles": ("InvocationThrottles", "SUM"),
    "ServerErrorRate": ("InvocationServerErrors", "SUM"),
    "LatencyP99": ("InvocationLatency", "MAX"),
    "TimeToFirstTokenP90": ("TimeToFirstToken", "MAX"),
    "TpmQuotaUsage": ("EstimatedTPMQuotaUsage", "SUM"),
}


@pytest.fixture(scope="module")
def through_profile() -> tuple[cdk.Stack, dict[str, Any], Template]:
    stack = cdk.Stack(cdk.App(), "Stack")
    profile = ApplicationInferenceProfile(
        stack, "Profile", model_source=CrossRegionProfile(model_id=PROFILE[3:], geography=Geography.US)
    )
    BedrockMonitoring(
        stack, "Monitoring", model_id=PROFILE, application_profile_id=profile.profile_id, tpm_quota=1000
    )
    return stack, stack.resolve(profile.profile_id), Template.from_stack(stack)


def _model_series(metrics: list[dict[str, Any]], metric_name: str) -> list[Any]:
    """The ModelId values of the alarm's MetricStat entries of ``metric_name``."""
    return [
        dimension["Value"]
        for m in metrics
        if "MetricStat" in m and m["MetricStat"]["Metric"]["MetricName"] == metric_name
        for dimension in m["MetricStat"]["Metric"]["Dimensions"]
        if dimension["Name"] == "ModelId"
    ]


@pytest.mark.parametrize(("construct_id", "metric_and_combine"), MODEL_ALARMS.items())
def test_each_model_alarm_combines_the_system_and_application_profile_series(
    through_profile: Any, construct_id: str, metric_and_combine: tuple[str, str]
) -> None:
    _, profile_id, template = through_profile
    metric_name, combine = metric_and_combine
    assert profile_id["Fn::GetAtt"][1] == "InferenceProfileId"
    metrics = _alarm(template, construct_id)["Metrics"]
    assert _model_series(metrics, metric_name) == [PROFILE, profile_id]
    combined = [m["Expression"] for m in metrics if m.get("Expression", "").startswith(("SUM(", "MAX("))]
    assert combined and all(e.startswith(f"{combine}([") for e in combined), combined


def test_the_dashboard_graphs_the_application_profile_series_of_every_model_metric(
    through_profile: Any,
) -> None:
    _, profile_id, template = through_profile
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    text = "".join(p for p in parts if isinstance(p, str))
    system = re.findall(rf'"AWS/Bedrock","(\w+)","ModelId","{re.escape(PROFILE)}"', text)
    application = [
        re.findall(r'"AWS/Bedrock","(\w+)","ModelId","$', parts[i - 1])[0]
        for i, part in enumerate(parts)
        if part == profile_id
    ]
    assert system and sorted(application) == sorted(system)


def test_without_an_application_profile_only_the_model_id_series_is_watched(built: Any) -> None:
    _, monitoring, template = built
    assert monitoring.model_ids == (PROFILE,)
    for construct_id, (metric_name, _) in MODEL_ALARMS.items():
        props = _alarm(template, construct_id)
        metrics = props.get("Metrics", [{"MetricStat": {"Metric": props | {"MetricName": metric_name}}}])
        assert _model_series(metrics, metric_name) == [PROFILE], construct_id
