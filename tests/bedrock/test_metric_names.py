"""Every AWS/Bedrock metric the monitoring alarms on or graphs is one AWS documents, with the dimension AWS
documents for it (tests/data/bedrock/runtime-metrics.txt, see its SOURCE.md): a misspelt or undocumented name would
give an alarm that never fires (missing data is not breaching)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from inference_tiers.constructs import (
    ApplicationInferenceProfile,
    BedrockMonitoring,
    CrossRegionProfile,
    Geography,
    Guardrail,
)

DOCUMENTED = {
    tuple(line.split())
    for line in (Path(__file__).parents[1] / "data" / "bedrock" / "runtime-metrics.txt")
    .read_text()
    .splitlines()
    if line and not line.startswith("#")
}


def _rendered() -> set[tuple[str, str]]:
    """(dimension names or '-', metric name) of every AWS/Bedrock metric in the alarms and the dashboard."""
    stack = cdk.Stack(cdk.App(), "Stack")
    source = CrossRegionProfile(model_id="amazon.nova-2-lite-v1:0", geography=Geography.US)
    profile = ApplicationInferenceProfile(stack, "Profile", model_source=source)
    BedrockMonitoring(
        stack,
        "Monitoring",
        model_id=source.profile_id,
        application_profile_id=profile.profile_id,
        tpm_quota=1000,
        guardrail=Guardrail(stack, "Guardrail"),
        log_delivery_alarm=True,
    )
    template = Template.from_stack(stack).to_json()
    found: set[tuple[str, str]] = set()
    for resource in template["Resources"].values():
        props: dict[str, Any] = resource["Properties"]
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            metrics = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m] or [
                props
            ]
            found |= {
                (",".join(d["Name"] for d in m.get("Dimensions", [])) or "-", m["MetricName"])
                for m in metrics
                if m["Namespace"] == "AWS/Bedrock"
            }
        if resource["Type"] == "AWS::CloudWatch::Dashboard":
            body = json.dumps(props["DashboardBody"]).replace('\\"', '"')
            found |= {(d or "-", n) for n, d in re.findall(r'"AWS/Bedrock","(\w+)",?"?(ModelId)?', body)}
    return found


def test_every_rendered_bedrock_metric_is_documented_with_its_dimension() -> None:
    rendered = _rendered()
    assert {name for _, name in rendered} >= {
        "InvocationThrottles",
        "TimeToFirstToken",
        "EstimatedTPMQuotaUsage",
        "ModelInvocationLogsS3DeliveryFailure",
    }
    assert rendered <= DOCUMENTED, sorted(rendered - DOCUMENTED)
