"""Links into the AWS console that work in every partition (the console host differs in China and GovCloud)."""

from __future__ import annotations

from typing import cast

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
