"""BR1: a Bedrock guardrail encrypts its configuration with a customer-managed KMS key."""

from __future__ import annotations

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule


def check(resource: Resource, facts: AppFacts) -> Result:
    if resource.properties.get("KmsKeyArn"):
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="BR1",
    level=NagMessageLevel.ERROR,
    info="The Bedrock guardrail is not encrypted with a customer-managed KMS key.",
    explanation=(
        "A guardrail's denied topics, word lists and PII patterns describe what the application must never "
        "say; with an AWS-owned key nobody can audit or revoke access to them. Set KmsKeyArn (Guardrail's "
        "kms_key) to a customer-managed key whose policy lets Bedrock use it for this account."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/guardrails-permissions-kms.html",
    resource_types=frozenset({"AWS::Bedrock::Guardrail"}),
    check=check,
)
