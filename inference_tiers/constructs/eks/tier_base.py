"""The preamble every EKS tier stack starts from: a retained log key, a VPC, the ``EksCluster`` and its outputs.

The constructs are created directly in the stack (ids ``LogKey``, ``Vpc``, ``Eks``), so the logical ids of the
tiers that used to write this preamble themselves stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms

from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.network import DEFAULT_VPC_CIDR, create_private_vpc
from inference_tiers.constructs.eks.cluster import (
    DEFAULT_SYSTEM_NODE_COUNT,
    DEFAULT_SYSTEM_NODE_INSTANCE_TYPE,
    EKS_NAT_GATEWAYS,
    EKS_PRIVATE_CIDR_MASK,
    EksCluster,
)

NetworkFactory = Callable[[kms.IKey], ec2.IVpc]
"""Builds the tier's VPC, given the key that encrypts its flow logs."""


def private_eks_vpc(
    stack: Stack, *, cidr: str = DEFAULT_VPC_CIDR, availability_zones: Sequence[str] | None = None
) -> NetworkFactory:
    """The two-AZ private VPC (id ``Vpc``) with private subnets sized for EKS pod addressing."""
    return lambda key: create_private_vpc(
        stack,
        "Vpc",
        flow_log_key=key,
        cidr=cidr,
        availability_zones=availability_zones,
        private_cidr_mask=EKS_PRIVATE_CIDR_MASK,
        nat_gateways=EKS_NAT_GATEWAYS,
    )


class EksTierBase:
    """The log key, VPC and ``EksCluster`` of an EKS tier stack.

    Attributes: ``log_key`` (encrypts the flow logs and the kubectl provider's logs), ``vpc``, ``eks``.
    """

    def __init__(
        self,
        stack: Stack,
        *,
        log_key_description: str,
        admin_principal_arn: str | None,
        public_endpoint_cidrs: Sequence[str],
        network: NetworkFactory | None = None,
        system_node_instance_type: str = DEFAULT_SYSTEM_NODE_INSTANCE_TYPE,
        system_node_count: int = DEFAULT_SYSTEM_NODE_COUNT,
        system_node_labels: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param stack: the tier's stack; the constructs are its direct children.
        :param log_key_description: the description of the stack's log key.
        :param admin_principal_arn: the IAM role/user given cluster admin; None: none.
        :param public_endpoint_cidrs: networks allowed to reach a public API endpoint; empty: private only.
        :param network: builds the VPC. Default: ``private_eks_vpc(stack)``.
        :param system_node_instance_type: instance type of the system (core) node group.
        :param system_node_count: nodes of the system node group.
        :param system_node_labels: labels of the system nodes beside the system pool label.
        """
        self.stack = stack
        self.log_key = retained_key(stack, "LogKey", log_key_description)
        self.vpc = (network or private_eks_vpc(stack))(self.log_key)
        self.eks = EksCluster(
            stack,
            "Eks",
            vpc=self.vpc,
            admin_principal_arns=[admin_principal_arn] if admin_principal_arn else [],
            public_endpoint_cidrs=public_endpoint_cidrs,
            system_node_instance_type=system_node_instance_type,
            system_node_count=system_node_count,
            system_node_labels=system_node_labels,
            log_key=self.log_key,
        )

    def add_outputs(self) -> None:
        """The outputs every EKS tier gives: ``EksClusterName`` and ``KubeconfigCommand``."""
        CfnOutput(self.stack, "EksClusterName", value=self.eks.cluster_name)
        CfnOutput(self.stack, "KubeconfigCommand", value=self.eks.kubeconfig_command)
