"""The identity model pods read their LoRA adapters from S3 with: one service account, one least-privilege role.

Shared by the hyperpod tier (the HyperPod operator's model pods) and the disaggregated tier (the prefill and
decode pods). Both clusters run the ``eks-pod-identity-agent`` add-on, so the role is bound with EKS Pod
Identity (:class:`~inference_tiers.constructs.sandbox.identity.PodIdentityRole`: ``pods.eks.amazonaws.com``
for this cluster and account only).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.k8s.inference_gateway_lora import LoraServing
from inference_tiers.validation import Args


class LoraAdapterReader(Construct):
    """The Pod Identity role of one ServiceAccount, which may only list and read the adapter folders.

    Per bucket: ``s3:ListBucket`` with ``s3:prefix`` limited to the adapter folders, ``s3:GetObject`` on the
    objects below them; ``kms:Decrypt`` on ``key`` when given. The ServiceAccount itself is the caller's
    (:func:`~inference_tiers.k8s.inference_gateway_lora.lora_service_account`); make the pods depend on this
    construct so the association exists before the first pod asks for credentials.

    Attributes: ``role``, ``association``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service_account: str,
        lora: LoraServing,
        description: str,
        key: kms.IKey | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (kubectl provider; Pod Identity agent add-on).
        :param namespace: the pods' namespace (must exist before this manifest is applied).
        :param service_account: the ServiceAccount name the pods run as.
        :param lora: the adapters whose folders the role may read.
        :param description: the role's description.
        :param key: KMS key of the adapter objects (SSE-KMS). Default none.
        """
        args = Args("LoraAdapterReader")
        args.instance("lora", lora, LoraServing, "a LoraServing")
        if key is not None:
            args.implements("key", key, kms.IKey)
        super().__init__(scope, construct_id)
        identity = PodIdentityRole(
            self,
            "Identity",
            cluster=cluster,
            namespace=namespace,
            service_account=service_account,
            description=description,
        )
        self.role = identity.role
        self.association = identity.association
        for bucket, prefixes in lora.buckets.items():
            self._grant_read(bucket, prefixes)
        if key is not None:
            key.grant_decrypt(self.role)

    def _grant_read(self, bucket: str, prefixes: list[str]) -> None:
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{bucket}"
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}},
            )
        )
        objects = [f"{bucket_arn}/{prefix}*" for prefix in prefixes]
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=objects))
        for prefix in prefixes:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{bucket}/{prefix}*]",
                f"The pods copy every file of the LoRA adapter folder s3://{bucket}/{prefix}; the file "
                "names are only known when the adapter is uploaded, and nothing outside that folder is readable",
            )
