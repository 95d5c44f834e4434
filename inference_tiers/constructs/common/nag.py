"""The one place that talks to cdk-nag (v3): register the checks and acknowledge findings with a reason."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, App, Stack, Validations
from aws_cdk import aws_s3_assets as s3_assets
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from inference_tiers.nag import InferenceChecks
from inference_tiers.validation import declares


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


def acknowledge_granted_resource(grantee: Any, resource_arn: str, reason: str) -> None:
    """Acknowledge the granular ``AwsSolutions-IAM5`` finding for one wildcard ``resource_arn`` that a grant
    added to ``grantee``'s identity policy (which may sit in another stack than the construct granting it).

    The acknowledgment goes on the principal (a role, user or group construct) and so covers the policies it
    holds, for that one resource string only: any other wildcard in the same policy is still reported.
    """
    principal = grantee.grant_principal
    if declares(principal, IConstruct):  # an imported role is a jsii proxy, not a Construct subclass
        finding = f"AwsSolutions-IAM5[Resource::{nag_resource_id(principal, resource_arn)}]"
        acknowledge(principal, finding, reason)


def add_nag_checks(app: App) -> None:
    """Gate every synth of ``app`` on the AWS Solutions checks and this library's inference checks
    (docs/nag-rules.md): any unacknowledged finding of either fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), InferenceChecks(app))


# The actions Asset.grant_read adds to a cluster's kubectl handler when a Helm chart comes from a CDK asset.
CHART_ASSET_READ_ACTIONS = ("s3:GetBucket*", "s3:GetObject*", "s3:List*")


def acknowledge_chart_asset_read(kubectl_provider: IConstruct, asset: s3_assets.Asset) -> None:
    """Acknowledge the read-only grant on ``asset``'s bucket that a Helm chart asset gives the kubectl handler.

    The objects' ARN is rendered from the asset's own bucket, as nag sees it: with a concrete account and Region
    and, depending on feature flags, a literal partition, it is not the ``<AWS::AccountId>`` form."""
    objects = nag_resource_id(kubectl_provider, asset.bucket.arn_for_objects("*"))
    for finding in (*(f"Action::{action}" for action in CHART_ASSET_READ_ACTIONS), f"Resource::{objects}"):
        acknowledge(
            kubectl_provider,
            f"AwsSolutions-IAM5[{finding}]",
            "Asset.grant_read lets the kubectl handler download the packaged Helm chart from the CDK "
            "bootstrap asset bucket, read-only",
        )


def nag_resource_id(scope: IConstruct, value: str) -> str:
    """The text cdk-nag (v3) puts after ``Resource::`` in a granular finding for ``value`` (an ARN that may
    hold tokens): references become ``<LogicalId>`` or ``<LogicalId.Attribute>``, pseudo parameters
    ``<AWS::Region>``, and other intrinsics their JSON."""
    return _flatten(Stack.of(scope).resolve(value))


def _flatten(node: Any) -> str:
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(_flatten(item) for item in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return _flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def acknowledge_invocation_logging(role: IConstruct) -> None:
    """A model gateway's Bedrock caller leaves model-invocation logging to the account's one configuration
    (InferenceTiers-BR5): the ``bedrock`` tier's ``bedrock.invocation_logging`` or a ``ModelInvocationLogging``
    of the user's; the gateway's spend log records every call it makes."""
    acknowledge(
        role,
        "InferenceTiers-BR5",
        "model-invocation logging is one setting per account and Region, owned by the bedrock tier "
        "(bedrock.invocation_logging=true) or the app's ModelInvocationLogging; a second configuration from "
        "the gateway would overwrite it",
    )
