"""The trust of an EKS Pod Identity role: the Pod Identity service, acting for one cluster of this account."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import IConstruct

from inference_tiers.constructs.common.trust import service_for_account

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def pod_identity_principal(scope: IConstruct, cluster_arn: str) -> iam.IPrincipal:
    """``pods.eks.amazonaws.com`` assuming the role (and tagging the session, which Pod Identity always does)
    only for pods of the cluster ``cluster_arn`` in ``scope``'s account. Pod Identity sends the cluster's ARN
    as ``aws:SourceArn``; the HyperPod observability add-on's published IAM setup uses these same two keys."""
    return service_for_account(scope, POD_IDENTITY_SERVICE, cluster_arn, session_tags=True)
