"""Encryption building blocks every tier uses: retained customer-managed keys, and the key grants that
CloudWatch alarms (publishing to an encrypted SNS topic) and CloudWatch Logs (encrypting log groups) need."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


def retained_key(scope: Construct, construct_id: str, description: str) -> kms.Key:
    """A customer-managed key with yearly rotation, kept when the stack is deleted (it protects retained data)."""
    return kms.Key(
        scope,
        construct_id,
        description=description,
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
    )


def encrypted_alarm_topic(
    scope: Construct, key: kms.IKey, *, email: str | None = None, construct_id: str = "AlarmTopic"
) -> sns.Topic:
    """A TLS-only SNS topic encrypted with ``key`` that CloudWatch alarms of this account can publish to."""
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
        )
    )
    topic = sns.Topic(scope, construct_id, master_key=key, enforce_ssl=True)
    if email:
        topic.add_subscription(subscriptions.EmailSubscription(email))
    return topic


def allow_log_encryption(key: kms.IKey, scope: Construct, log_group_name: str) -> None:
    """Let CloudWatch Logs use ``key`` for the log groups named ``log_group_name`` (``*`` allowed) in this
    stack's account and Region; the encryption-context condition keeps every other log group out."""
    arn = Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=log_group_name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            actions=[
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": arn}},
        )
    )
