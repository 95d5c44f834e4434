"""Service trust with cross-service confused-deputy protection: the service may assume a role only while it
acts for a resource of this stack's account (``aws:SourceAccount``) matching ``aws:SourceArn``.

Without the two keys any customer of the service could make it assume the role by naming the role's ARN in
their own resource (docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html). Both keys must name the
same account.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import IConstruct


def service_for_account(
    scope: IConstruct, service: str, source_arn: str, *, session_tags: bool = False
) -> iam.IPrincipal:
    """``service`` (e.g. ``vpc-flow-logs.amazonaws.com``) acting for ``source_arn`` in ``scope``'s account.

    ``source_arn`` is an ARN or an ``ArnLike`` pattern (``*`` allowed). ``session_tags`` also allows
    ``sts:TagSession`` under the same conditions (EKS Pod Identity passes session tags).
    """
    principal = iam.ServicePrincipal(
        service,
        conditions={
            "StringEquals": {"aws:SourceAccount": Stack.of(scope).account},
            "ArnLike": {"aws:SourceArn": source_arn},
        },
    )
    return principal.with_session_tags() if session_tags else principal


def regional_arn_pattern(scope: IConstruct, service: str, resource: str = "*") -> str:
    """``arn:<partition>:<service>:<region>:<account>:<resource>`` of ``scope``'s stack (``*`` allowed)."""
    return Stack.of(scope).format_arn(
        service=service, resource=resource, arn_format=ArnFormat.NO_RESOURCE_NAME
    )


def sagemaker_principal(scope: IConstruct) -> iam.IPrincipal:
    """SageMaker, acting for this account in this Region only.

    For real-time, serverless and asynchronous inference SageMaker sends ``aws:SourceArn`` as
    ``arn:<partition>:sagemaker:<region>:<account>:*``: the asterisk is part of the value, and the docs say not
    to put a model or endpoint ARN there (docs.aws.amazon.com/sagemaker/latest/dg/
    security-confused-deputy-prevention.html, "SageMaker AI Inference"). The same pattern covers HyperPod
    clusters (``...:cluster/<id>``) of the account and Region.
    """
    return service_for_account(scope, "sagemaker.amazonaws.com", regional_arn_pattern(scope, "sagemaker"))


def pod_identity_principal(scope: IConstruct, cluster_arn: str) -> iam.IPrincipal:
    """``pods.eks.amazonaws.com`` assuming the role (and tagging the session, which Pod Identity always does)
    only for pods of the cluster ``cluster_arn`` in ``scope``'s account. Pod Identity sends the cluster's ARN
    as ``aws:SourceArn``; the HyperPod observability add-on's published IAM setup uses these same two keys."""
    return service_for_account(scope, "pods.eks.amazonaws.com", cluster_arn, session_tags=True)
