"""SM4: a role SageMaker assumes limits the trust to this account's (or one resource's) requests."""

from __future__ import annotations

from collections.abc import Mapping

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule

SAGEMAKER = "sagemaker.amazonaws.com"
SOURCE_KEYS = {"aws:sourceaccount", "aws:sourcearn"}


def check(resource: Resource, facts: AppFacts) -> Result:
    trust = resource.properties.get("AssumeRolePolicyDocument")
    if not isinstance(trust, Mapping):
        return NagRuleCompliance.NOT_APPLICABLE
    trusting = [
        s for s in iam.statements(trust) if iam.is_allow(s) and SAGEMAKER in iam.service_principals(s)
    ]
    if not trusting:
        return NagRuleCompliance.NOT_APPLICABLE
    if all(any(SOURCE_KEYS & set(keys) for keys in iam.conditions(s).values()) for s in trusting):
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="SM4",
    level=NagMessageLevel.ERROR,
    info="The role trusts sagemaker.amazonaws.com without an aws:SourceAccount or aws:SourceArn condition.",
    explanation=(
        "Without a source condition, SageMaker acting for any account that knows the role ARN can be made to "
        "assume it (the confused-deputy problem). Add StringEquals aws:SourceAccount = <this account> and "
        "ArnLike aws:SourceArn = arn:<partition>:sagemaker:<region>:<account>:* to the trust statement."
    ),
    documentation="https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html",
    resource_types=frozenset({"AWS::IAM::Role"}),
    check=check,
)
