"""Console links resolve to the right host in every partition; the lazy one adds its mapping only when read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cw
from aws_cdk.assertions import Template
from constructs import Construct

from inference_tiers.constructs.common.console import CONSOLE_HOSTS, dashboard_url, lazy_dashboard_url


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


class _Watched(Construct):
    dashboard_url = lazy_dashboard_url()

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cw.Dashboard(self, "Dashboard")


def test_the_lazy_url_adds_the_mapping_only_when_read(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Lazy")
    watched = _Watched(stack, "Watched")
    assert stack.node.try_find_child("ConsoleHosts") is None  # nothing read: nothing added
    url = watched.dashboard_url
    assert watched.dashboard_url is url  # computed once
    assert stack.resolve(url) == stack.resolve(dashboard_url(watched.dashboard))  # as the eager helper
    cdk.CfnOutput(stack, "Url", value=url)
    template = Template.from_stack(stack).to_json()
    assert set(template["Mappings"]) == {"ConsoleHosts"}
    assert "Fn::FindInMap" in json.dumps(template["Outputs"]["Url"])
