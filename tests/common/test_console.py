"""Console links resolve to the right host in every partition."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cw
from aws_cdk.assertions import Template

from inference_tiers.constructs.common.console import CONSOLE_HOSTS, dashboard_url


def _resolved_url(partition: str) -> str:
    """Resolve a dashboard link the way CloudFormation would in ``partition`` (a second link shares the mapping)."""
    stack = cdk.Stack(cdk.App(), "Console")
    urls = [dashboard_url(cw.Dashboard(stack, name, dashboard_name=name)) for name in ("First", "Second")]
    cdk.CfnOutput(stack, "Url", value=urls[0])
    cdk.CfnOutput(stack, "Other", value=urls[1])
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    hosts = template["Mappings"]["ConsoleHosts"]
    parts = template["Outputs"]["Url"]["Value"]["Fn::Join"][1]

    def value(part: Any) -> str:
        if isinstance(part, str):
            return part
        if "Fn::FindInMap" in part:
            name, key, attribute = part["Fn::FindInMap"]
            assert key == {"Ref": "AWS::Partition"}
            return str(hosts[partition][attribute])
        return {"AWS::Region": "eu-west-1"}.get(part.get("Ref", ""), "<dashboard>")

    return "".join(value(part) for part in parts)


@pytest.mark.parametrize("partition", sorted(CONSOLE_HOSTS))
def test_dashboard_url_uses_the_partitions_console_host(partition: str) -> None:
    assert _resolved_url(partition) == (
        f"https://{CONSOLE_HOSTS[partition]}/cloudwatch/home?region=eu-west-1#dashboards/dashboard/<dashboard>"
    )
