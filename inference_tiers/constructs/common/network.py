"""The VPC every tier that runs its own compute starts from: private subnets, NAT egress, retained flow logs."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from inference_tiers.constructs.common.encryption import allow_log_encryption
from inference_tiers.constructs.common.trust import regional_arn_pattern, service_for_account

DEFAULT_VPC_CIDR = "10.0.0.0/16"
"""The VPC CIDR of a tier that sets none."""


def create_private_vpc(
    scope: Construct,
    construct_id: str,
    *,
    flow_log_key: kms.IKey,
    cidr: str = DEFAULT_VPC_CIDR,
    availability_zones: Sequence[str] | None = None,
    private_cidr_mask: int = 20,
    nat_gateways: int = 1,
    nat_gateway_provider: ec2.NatProvider | None = None,
    s3_gateway_endpoint: bool = True,
    flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
) -> ec2.Vpc:
    """Two AZs of public subnets (/24, for NAT gateways and internet-facing load balancers only) and private
    subnets with egress (``private_cidr_mask``), an S3 gateway endpoint on the private route tables (weights,
    images and scripts stay off the NAT), and flow logs of all traffic to a retained log group encrypted with
    ``flow_log_key``, written by a role only VPC Flow Logs acting for this account's flow logs may assume.

    ``availability_zones``: AZ names in order (default: the Region's first two).
    """
    zones = list(availability_zones) if availability_zones else None
    vpc = ec2.Vpc(
        scope,
        construct_id,
        ip_addresses=ec2.IpAddresses.cidr(cidr),
        availability_zones=zones,
        max_azs=None if zones else 2,
        nat_gateways=nat_gateways,
        nat_gateway_provider=nat_gateway_provider,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(
                name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=private_cidr_mask
            ),
        ],
    )
    if s3_gateway_endpoint:
        vpc.add_gateway_endpoint(
            "S3",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
        )
    # The flow-log group's name is generated, so the key admits any log group of this account and Region.
    allow_log_encryption(flow_log_key, scope, "*")
    flow_logs = logs.LogGroup(
        vpc,
        "FlowLogs",
        encryption_key=flow_log_key,
        retention=flow_log_retention,
        removal_policy=RemovalPolicy.RETAIN,
    )
    # The role aws-cdk would create trusts vpc-flow-logs.amazonaws.com for any account's flow logs.
    flow_log_role = iam.Role(
        vpc,
        "FlowLogRole",
        assumed_by=service_for_account(
            vpc, "vpc-flow-logs.amazonaws.com", regional_arn_pattern(vpc, "ec2", "vpc-flow-log/*")
        ),
        description="VPC Flow Logs: write this VPC's flow logs to its log group",
    )
    vpc.add_flow_log(
        "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs, flow_log_role)
    )
    return vpc
