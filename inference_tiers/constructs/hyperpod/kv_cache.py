"""The L2 KV cache tier ``redis`` of the HyperPod Inference Operator: an ElastiCache Valkey replication group
inside the HyperPod cluster's VPC (the operator's docs: "If the Redis cluster is not in the same VPC as the
HyperPod cluster, encryption of data in transit is not guaranteed").

TLS is required and the data is encrypted at rest with a customer-managed key. Only the HyperPod nodes'
security group reaches the port. The cache holds KV blocks that the model pods recompute on a miss, so it has
no snapshots and goes with the stack.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.valkey import check_valkey_args, private_valkey
from inference_tiers.validation import Args

KV_CACHE_PORT = 6379


class HyperPodKvCacheStore(Construct):
    """A Valkey replication group (cluster mode disabled: LMCache's Redis connector is a single-endpoint
    client), primary and replica in two AZs, reachable from ``clients`` only.

    :param vpc: the HyperPod cluster's VPC; nodes go to its private subnets.
    :param clients: the security group(s) of the HyperPod nodes (the model pods use the node network).
    :param encryption_key: encrypts the data at rest.
    :param node_type: cache node type (default ``cache.r7g.large``: memory-optimized, KV blocks are large).
    :param engine_version: Valkey version (default ``8.0``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        clients: ec2.IConnectable,
        encryption_key: kms.IKey,
        node_type: str = "cache.r7g.large",
        engine_version: str = "8.0",
    ) -> None:
        args = Args("HyperPodKvCacheStore")
        args.implements("vpc", vpc, ec2.IVpc)
        args.implements("clients", clients, ec2.IConnectable)
        args.implements("encryption_key", encryption_key, kms.IKey)
        check_valkey_args(args, node_type, engine_version)
        super().__init__(scope, construct_id)
        security_group, resource = private_valkey(
            self,
            name="HyperPod L2 KV cache",
            description="inference-tiers hyperpod: L2 KV cache (LMCache)",
            vpc=vpc,
            encryption_key=encryption_key,
            node_type=node_type,
            engine_version=engine_version,
            port=KV_CACHE_PORT,
        )
        self.security_group = security_group
        """The store's security group, which admits ``clients`` on the Valkey port; allow further clients on
        it."""
        self.resource = resource
        """The ``CfnReplicationGroup``, destroyed with the stack."""
        self.security_group.connections.allow_from(
            clients, ec2.Port.tcp(KV_CACHE_PORT), "HyperPod model pods to the L2 KV cache"
        )
        self.resource.apply_removal_policy(RemovalPolicy.DESTROY)
        no_auth = (
            "the operator takes the L2 URL in the InferenceEndpointConfig spec, where an AUTH token would be "
            "readable by every principal that can read the resource; access is limited to the HyperPod node "
            "security group instead, and TLS is required"
        )
        acknowledge(self.resource, "AwsSolutions-AEC6", no_auth)
        skip_check(self.resource, "CKV_AWS_31", no_auth)

    @property
    def url(self) -> str:
        """``rediss://<primary endpoint>:<port>`` (TLS), as LMCache's Redis connector parses it."""
        return (
            f"rediss://{self.resource.attr_primary_end_point_address}:"
            f"{self.resource.attr_primary_end_point_port}"
        )
