"""The execution role of a SageMaker LLM endpoint and the log groups it writes to, least privilege.

The role may pull one image repository, read one model prefix, write to the endpoint's own log groups, and
manage the network interfaces that place the model in the VPC. The actions without resource-level permissions
(``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData``, the ec2 network-interface actions) are the only
wildcards, and each cdk-nag finding is acknowledged here with its reason.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from inference_tiers.constructs.common.encryption import allow_log_encryption
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.sagemaker.engines import ResolvedImage
from inference_tiers.constructs.sagemaker.weights import ModelWeights

# SageMaker places each model container in the VPC through network interfaces it creates and deletes.
_VPC_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
]


class ExecutionRole(Construct):
    """``role`` (assumed by SageMaker), its ``log_groups`` (KMS-encrypted, retained) and their grants."""

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
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
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
        self._add(["ecr:GetAuthorizationToken", "cloudwatch:PutMetricData", *_VPC_ACTIONS], ["*"])
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
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData and the ec2 network-interface actions SageMaker "
            "needs to place the model in the VPC support no resource-level permissions; image pulls, logs and "
            "model reads are scoped to their ARNs in the same policy",
        )
        weights_id = weights.nag_resource_id(self)
        if weights_id is not None:
            acknowledge(
                self.policy,
                f"AwsSolutions-IAM5[Resource::{weights_id}]",
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
