"""The project's one shape of ElastiCache Valkey (the gateway's cache, the HyperPod L2 KV cache): a replication
group with cluster mode disabled in a VPC's private subnets, a primary and a replica in two AZs with automatic
failover, TLS required, encrypted at rest with a customer-managed key, behind its own security group with no
outbound rule."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers.validation import Args


def check_valkey_args(args: Args, node_type: str, engine_version: str) -> None:
    """``node_type`` (``cache.<family>.<size>``) and ``engine_version`` (``<major>.<minor>``) of a construct."""
    args.text("node_type", node_type, pattern=r"cache\.[a-z0-9]+\.[a-z0-9]+", allow_token=False)
    args.text("engine_version", engine_version, pattern=r"[0-9]+\.[0-9]+", allow_token=False)


def private_valkey(
    scope: Construct,
    *,
    name: str,
    description: str,
    vpc: ec2.IVpc,
    encryption_key: kms.IKey,
    node_type: str,
    engine_version: str,
    port: int,
    **properties: Any,
) -> tuple[ec2.SecurityGroup, elasticache.CfnReplicationGroup]:
    """The security group (``SecurityGroup``), subnet group (``Subnets``) and replication group (``Resource``)
    under ``scope``. ``name`` describes the group and subnets, ``description`` the replication group;
    ``properties``: further ``CfnReplicationGroup`` properties (an AUTH token, snapshots)."""
    security_group = ec2.SecurityGroup(
        scope, "SecurityGroup", vpc=vpc, description=name, allow_all_outbound=False
    )
    private = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    subnet_group = elasticache.CfnSubnetGroup(
        scope, "Subnets", description=f"{name} private subnets", subnet_ids=private.subnet_ids
    )
    replication_group = elasticache.CfnReplicationGroup(
        scope,
        "Resource",
        replication_group_description=description,
        engine="valkey",
        engine_version=engine_version,
        cache_node_type=node_type,
        cluster_mode="disabled",
        num_cache_clusters=2,
        automatic_failover_enabled=True,
        multi_az_enabled=True,
        transit_encryption_enabled=True,
        transit_encryption_mode="required",
        at_rest_encryption_enabled=True,
        kms_key_id=encryption_key.key_arn,
        cache_subnet_group_name=subnet_group.ref,
        security_group_ids=[security_group.security_group_id],
        port=port,
        auto_minor_version_upgrade=True,
        **properties,
    )
    return security_group, replication_group
