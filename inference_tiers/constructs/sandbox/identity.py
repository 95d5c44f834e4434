"""An IAM role for one Kubernetes service account through EKS Pod Identity, with confused-deputy conditions."""

from __future__ import annotations

from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from inference_tiers.constructs.common.trust import pod_identity_principal
from inference_tiers.validation import Args

_K8S_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"


class PodIdentityRole(Construct):
    """A role that only EKS Pod Identity may assume, for ``namespace/service_account`` of ``cluster`` only.

    The trust policy lets ``pods.eks.amazonaws.com`` assume the role (and tag the session, which Pod Identity
    always does) only on behalf of this account and this cluster (``aws:SourceAccount``/``aws:SourceArn``); the
    association binds it to one service account. The role has no permissions until you add them.

    Attributes: ``role`` (``iam.Role``), ``association`` (``CfnPodIdentityAssociation``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service_account: str,
        description: str,
    ) -> None:
        """
        :param cluster: the EKS cluster (its name and ARN may be deploy-time tokens).
        :param namespace: the service account's namespace.
        :param service_account: the service account's name.
        :param description: the role's description (what the pods use it for).
        """
        super().__init__(scope, construct_id)
        args = Args("PodIdentityRole")
        cluster = args.implements("cluster", cluster, eks.ICluster)
        args.text("namespace", namespace, pattern=_K8S_NAME, description="a Kubernetes namespace name")
        args.text(
            "service_account",
            service_account,
            pattern=_K8S_NAME,
            description="a Kubernetes service account name",
        )
        args.text("description", description, max_length=1000)
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=pod_identity_principal(self, cluster.cluster_arn),
        )
        """The role the service account's pods get: it has no permissions until you grant some (``grant_*``
        methods, ``add_to_policy``)."""
        self.association = eks_l1.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )
        """The ``CfnPodIdentityAssociation`` that binds :attr:`role` to the service account: make the first
        pod that needs AWS credentials depend on it."""
