"""SM3: no identity policy allows invoking SageMaker endpoints on every resource."""

from __future__ import annotations

from cdk_nag import NagMessageLevel

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

INVOKE_ENDPOINT = (
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointAsync",
    "sagemaker:InvokeEndpointWithResponseStream",
)


def check(resource: Resource, facts: AppFacts) -> Result:
    found = []
    for document in iam.identity_documents(resource):
        for statement in iam.statements(document):
            if iam.is_allow(statement) and "*" in iam.resources(statement):
                found += [f"Action::{p}" for p in iam.action_patterns(statement, INVOKE_ENDPOINT)]
    return findings(found)


RULE = Rule(
    suffix="SM3",
    level=NagMessageLevel.ERROR,
    info="The policy allows invoking SageMaker endpoints on Resource '*'.",
    explanation=(
        "Invoke on '*' reaches every endpoint in the account, including ones serving other teams' models and "
        "data. Grant sagemaker:InvokeEndpoint (and the streaming and async actions you use) on the endpoint "
        "ARNs the principal calls (SageMakerLlmEndpoint.grant_invoke does)."
    ),
    documentation="https://docs.aws.amazon.com/sagemaker/latest/dg/security_iam_id-based-policy-examples.html",
    resource_types=iam.IDENTITY_POLICY_TYPES,
    check=check,
)
