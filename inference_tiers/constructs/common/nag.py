"""The one place that talks to cdk-nag (v3): register the checks and acknowledge findings with a reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on ``scope`` and its children.

    ``rule_id`` is the exact finding id, granular where cdk-nag reports one (for example
    ``AwsSolutions-IAM5[Resource::*]``). ``reason`` must say why the finding is acceptable here in terms a
    reviewer can check against the template; blanket or generic reasons are rejected.
    """
    if len(reason.split()) < 6:
        raise ValueError(
            f"acknowledgment of {rule_id} needs a specific reason (six words or more), got {reason!r}"
        )
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def add_nag_checks(app: App) -> None:
    """Gate every synth of ``app`` on AWS Solutions checks: any unacknowledged finding fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


# What Asset.grant_read adds to a cluster's kubectl handler when a Helm chart comes from a CDK asset.
CHART_ASSET_READ_FINDINGS = (
    "Action::s3:GetBucket*",
    "Action::s3:GetObject*",
    "Action::s3:List*",
    "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
)


def acknowledge_chart_asset_read(kubectl_provider: IConstruct) -> None:
    """Acknowledge the read-only asset-bucket grant that a Helm chart asset gives the kubectl handler."""
    for finding in CHART_ASSET_READ_FINDINGS:
        acknowledge(
            kubectl_provider,
            f"AwsSolutions-IAM5[{finding}]",
            "Asset.grant_read lets the kubectl handler download the packaged Helm chart from the CDK "
            "bootstrap asset bucket, read-only",
        )
