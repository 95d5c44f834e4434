"""The execution role of a SageMaker LLM endpoint and the log groups it writes to, least privilege.

The role may pull one image repository, read one model prefix, write to the endpoint's own log groups, and
manage the network interfaces that place the model in this VPC's subnets with this endpoint's security group.
Only actions without resource-level permissions (``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData``,
the ec2 ``Describe*`` calls) are granted on ``*``; each remaining cdk-nag finding is acknowledged here with its
reason. SageMaker may assume the role only for this account's resources in this Region.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from inference_tiers.constructs.common.encryption import allow_log_encryption
from inference_tiers.constructs.common.nag import acknowledge, nag_resource_id
from inference_tiers.constructs.common.trust import sagemaker_principal
from inference_tiers.constructs.sagemaker.engines import ResolvedImage
from inference_tiers.constructs.sagemaker.weights import ModelWeights
from inference_tiers.validation import Args

# SageMaker places each model container in the VPC through network interfaces it creates in the chosen subnets
# with the endpoint's security group, lets its own account attach them (the permission actions) and deletes
# them. All four take network-interface ARNs; CreateNetworkInterface also checks the subnet and security group.
_ENI_CREATE = ["ec2:CreateNetworkInterface"]
_ENI_MANAGE = [
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
]
# Read-only calls with no resource-level permissions.
_VPC_DESCRIBE = [
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
]


class ExecutionRole(Construct):
    """``role`` (assumed by SageMaker), its ``log_groups`` (KMS-encrypted, retained) and their grants.

    Props: ``endpoint_name`` and ``inference_component_name`` (None for a single model) name the log groups;
    ``image`` and ``weights`` are what the role may read; ``encryption_key`` and ``log_retention`` configure the
    log groups; ``vpc``, ``subnet_ids`` and ``security_group`` are where the model's network interfaces go.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        inference_component_name: str | None,
        image: ResolvedImage,
        weights: ModelWeights,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
        vpc: ec2.IVpc,
        subnet_ids: Sequence[str],
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("ExecutionRole")
        args.text("endpoint_name", endpoint_name)
        if inference_component_name is not None:
            args.text("inference_component_name", inference_component_name)
        args.instance("image", image, ResolvedImage)
        args.instance("weights", weights, ModelWeights)
        args.implements("encryption_key", encryption_key, kms.IKey)
        args.instance("log_retention", log_retention, logs.RetentionDays)
        args.implements("vpc", vpc, ec2.IVpc)
        args.sequence("subnet_ids", subnet_ids, lambda name, v: args.text(name, v), min_items=1)
        args.implements("security_group", security_group, ec2.ISecurityGroup)

        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=sagemaker_principal(stack),
            description=f"Execution role of SageMaker endpoint {endpoint_name}",
        )
        names = [f"/aws/sagemaker/Endpoints/{endpoint_name}"]
        if inference_component_name is not None:
            names.append(f"/aws/sagemaker/InferenceComponents/{inference_component_name}")
        self.log_groups = [
            _log_group(self, construct_id, name, encryption_key, log_retention)
            for construct_id, name in zip(("EndpointLogs", "ComponentLogs"), names, strict=False)
        ]
        self._add(
            ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            [image.repository_arn],
        )
        network_interfaces = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        self._add(
            _ENI_CREATE,
            [
                network_interfaces,
                *(stack.format_arn(service="ec2", resource="subnet", resource_name=s) for s in subnet_ids),
                stack.format_arn(
                    service="ec2", resource="security-group", resource_name=security_group.security_group_id
                ),
            ],
        )
        # The interfaces exist only after SageMaker creates them, so their ids are unknown here; the VPC
        # condition keeps the permission and delete actions to interfaces in this VPC.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=_ENI_MANAGE,
                resources=[network_interfaces],
                conditions={"ArnEquals": {"ec2:Vpc": vpc.vpc_arn}},
            )
        )
        self._add(["ecr:GetAuthorizationToken", "cloudwatch:PutMetricData", *_VPC_DESCRIBE], ["*"])
        for statement in weights.read_statements(self):
            self.role.add_to_principal_policy(statement)
        self._add(
            ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            [group.log_group_arn for group in self.log_groups],
        )
        self.policy = self.role.node.find_child("DefaultPolicy")
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "Only ecr:GetAuthorizationToken, cloudwatch:PutMetricData and the read-only ec2 Describe calls are on "
            "*: none of them supports resource-level permissions; image pulls, model reads, logs and the "
            "network-interface actions are scoped to their ARNs in the same policy",
        )
        acknowledge(
            self.policy,
            f"AwsSolutions-IAM5[Resource::{nag_resource_id(self, network_interfaces)}]",
            "SageMaker creates the model's network interfaces at deploy time, so their ids cannot be named: "
            "creation also needs this VPC's subnets and this endpoint's security group, and the permission and "
            "delete actions carry an ec2:Vpc condition for this VPC",
        )
        objects = weights.objects_arn(self)
        if objects is not None:
            acknowledge(
                self.policy,
                f"AwsSolutions-IAM5[Resource::{nag_resource_id(self, objects)}]",
                "The model is a directory of files (config, tokenizer, safetensors shards) that SageMaker copies "
                "as a whole; the wildcard covers only objects under this model's prefix",
            )

    def _add(self, actions: list[str], resources: list[str]) -> None:
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=resources))


def _log_group(
    scope: Construct, construct_id: str, name: str, key: kms.IKey, retention: logs.RetentionDays
) -> logs.LogGroup:
    """A log group SageMaker would otherwise create unencrypted and never expiring."""
    allow_log_encryption(key, scope, name)
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        encryption_key=key,
        retention=retention,
        removal_policy=RemovalPolicy.RETAIN,
    )
