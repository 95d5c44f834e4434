"""BR5 (warning): an app that lets a principal invoke Bedrock models also turns on model-invocation logging.

CloudFormation has no type for the logging setting (it is account-and-Region wide), so the app is taken to
configure it when some principal in it may call ``bedrock:PutModelInvocationLoggingConfiguration``: that is
what a custom resource (ModelInvocationLogging here) needs to switch logging on.
"""

from __future__ import annotations

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule

PUT_LOGGING = "bedrock:PutModelInvocationLoggingConfiguration"


def _allows(resource: Resource, actions: tuple[str, ...]) -> bool:
    return any(
        iam.is_allow(s) and any(iam.covers_action(s, a) for a in actions)
        for d in iam.identity_documents(resource)
        for s in iam.statements(d)
    )


def check(resource: Resource, facts: AppFacts) -> Result:
    if not _allows(resource, iam.BEDROCK_INVOKE):
        return NagRuleCompliance.NOT_APPLICABLE
    if any(_allows(r, (PUT_LOGGING,)) for r in facts.of_type(*iam.IDENTITY_POLICY_TYPES)):
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="BR5",
    level=NagMessageLevel.WARN,
    info="The app invokes Bedrock models but does not turn on model-invocation logging.",
    explanation=(
        "Without invocation logging there is no record of which prompts and responses went through the "
        "model, which incident response and abuse reviews need. Add ModelInvocationLogging to the app, or "
        "acknowledge this finding where logging is already configured for the account and Region elsewhere "
        "(it is one setting per account and Region)."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/model-invocation-logging.html",
    resource_types=iam.IDENTITY_POLICY_TYPES,
    check=check,
)
