"""Links into the AWS console that work in every partition (the console host differs in China and GovCloud)."""

from __future__ import annotations

from functools import cached_property
from typing import Any, cast

from aws_cdk import Aws, CfnMapping, Stack
from aws_cdk import aws_cloudwatch as cw

CONSOLE_HOSTS = {
    "aws": "console.aws.amazon.com",
    "aws-cn": "console.amazonaws.cn",
    "aws-us-gov": "console.amazonaws-us-gov.com",
}
_MAPPING_ID = "ConsoleHosts"


def dashboard_url(dashboard: cw.Dashboard) -> str:
    """The console URL of ``dashboard`` in the partition and Region the stack is deployed to."""
    stack = Stack.of(dashboard)
    mapping = stack.node.try_find_child(_MAPPING_ID) or CfnMapping(
        stack, _MAPPING_ID, mapping={partition: {"Host": host} for partition, host in CONSOLE_HOSTS.items()}
    )
    host = cast(CfnMapping, mapping).find_in_map(Aws.PARTITION, "Host")
    return (
        f"https://{host}/cloudwatch/home?region={Aws.REGION}#dashboards/dashboard/{dashboard.dashboard_name}"
    )


def lazy_dashboard_url(attribute: str = "dashboard") -> cached_property[str]:
    """A property for a construct class: :func:`dashboard_url` of its ``attribute`` dashboard, on first read.

    The console-host mapping is added to the stack only when something reads the URL, so a stack that
    composes the construct without using the URL carries no unreferenced ``ConsoleHosts`` mapping (cfn-lint
    W7001). Use it as a class attribute: ``dashboard_url = lazy_dashboard_url()``.
    """

    def url(construct: Any) -> str:
        dashboard: cw.Dashboard = getattr(construct, attribute)
        return dashboard_url(dashboard)

    return cached_property(url)
