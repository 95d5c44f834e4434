"""EKS2: an EKS cluster envelope-encrypts Kubernetes secrets with a KMS key."""

from __future__ import annotations

from collections.abc import Mapping

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule


def check(resource: Resource, facts: AppFacts) -> Result:
    for entry in iam.as_list(resource.properties.get("EncryptionConfig")):
        if not isinstance(entry, Mapping):
            continue
        provider = entry.get("Provider")
        secrets = "secrets" in iam.as_list(entry.get("Resources"))
        if secrets and isinstance(provider, Mapping) and provider.get("KeyArn"):
            return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="EKS2",
    level=NagMessageLevel.ERROR,
    info="The EKS cluster does not envelope-encrypt Kubernetes secrets with a KMS key.",
    explanation=(
        "Inference clusters keep model-hub tokens, registry credentials and TLS keys in secrets. Set "
        "EncryptionConfig to [{Resources: [secrets], Provider: {KeyArn: <customer-managed key>}}] "
        "(aws_eks_v2.Cluster(secrets_encryption_key=...))."
    ),
    documentation="https://docs.aws.amazon.com/eks/latest/userguide/envelope-encryption.html",
    resource_types=frozenset({"AWS::EKS::Cluster"}),
    check=check,
)
