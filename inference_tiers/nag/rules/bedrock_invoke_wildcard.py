"""BR3: no identity policy allows invoking Bedrock models on every resource (``bedrock:*``, ``Invoke*`` on ``*``)."""

from __future__ import annotations

from cdk_nag import NagMessageLevel

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings


def check(resource: Resource, facts: AppFacts) -> Result:
    found = []
    for document in iam.identity_documents(resource):
        for statement in iam.statements(document):
            if iam.is_allow(statement) and "*" in iam.resources(statement):
                found += [f"Action::{p}" for p in iam.action_patterns(statement, iam.BEDROCK_INVOKE)]
    return findings(found)


RULE = Rule(
    suffix="BR3",
    level=NagMessageLevel.ERROR,
    info="The policy allows invoking Bedrock models on Resource '*'.",
    explanation=(
        "Invoke on '*' reaches every foundation model, inference profile and imported model in the account, "
        "including ones approved for nobody. Name the model, system inference profile or application "
        "inference profile ARNs the principal needs (ModelInvokeAccess builds them)."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/security_iam_id-based-policy-examples.html",
    resource_types=iam.IDENTITY_POLICY_TYPES,
    check=check,
)
