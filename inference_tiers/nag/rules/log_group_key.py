"""LOG1: a CloudWatch Logs log group is encrypted with a customer-managed KMS key."""

from __future__ import annotations

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule


def check(resource: Resource, facts: AppFacts) -> Result:
    if resource.properties.get("KmsKeyId"):
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="LOG1",
    level=NagMessageLevel.ERROR,
    info="The log group is not encrypted with a customer-managed KMS key.",
    explanation=(
        "Inference logs carry prompts, completions, request headers and cluster events; a customer-managed "
        "key lets you audit and revoke who reads them. Set KmsKeyId (LogGroup(encryption_key=...)) to a key "
        "whose policy lets logs.<region>.amazonaws.com use it for this account's log groups."
    ),
    documentation="https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html",
    resource_types=frozenset({"AWS::Logs::LogGroup"}),
    check=check,
)
