"""BR2: every identity-policy grant to invoke a Bedrock model requires a guardrail on the call.

An Allow is guarded when it requires ``bedrock:GuardrailIdentifier`` with a positive operator (StringEquals,
StringLike, ArnEquals, ArnLike; not ``...IfExists``, which is true when the caller names no guardrail), or when
an explicit Deny in the same document covers its actions and resources with a negated operator on that key
(``StringNotEquals`` and friends are true when the key is absent, so they deny unguarded calls too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdk_nag import NagMessageLevel

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

GUARDRAIL_KEY = "bedrock:guardrailidentifier"
_REQUIRING = ("stringequals", "stringlike", "arnequals", "arnlike")
_DENYING_OTHERS = tuple(
    f"{op}{suffix}"
    for op in ("stringnotequals", "stringnotlike", "arnnotequals", "arnnotlike")
    for suffix in ("", "ifexists")
)


def requires_guardrail(statement: Mapping[str, Any]) -> bool:
    for operator, keys in iam.conditions(statement).items():
        if operator in _REQUIRING and GUARDRAIL_KEY in keys and keys[GUARDRAIL_KEY] != "*":
            return True
    return False


def _denies_unguarded(deny: Mapping[str, Any]) -> bool:
    """A Deny conditioned only on the guardrail key, and so that it matches calls without the guardrail."""
    operators = iam.conditions(deny)
    if any(set(keys) != {GUARDRAIL_KEY} for keys in operators.values()) or len(operators) != 1:
        return False
    ((operator, keys),) = operators.items()
    return operator in _DENYING_OTHERS or (operator == "null" and str(keys[GUARDRAIL_KEY]).lower() == "true")


def _covered_by_deny(action: str, resources: list[str], denies: list[Mapping[str, Any]]) -> bool:
    action = iam.AUTHORIZED_BY.get(action, action)
    for deny in denies:
        deny_resources = iam.resources(deny)
        if iam.covers_action(deny, action) and (
            "*" in deny_resources or set(resources) <= set(deny_resources)
        ):
            return True
    return False


def unguarded_invoke_patterns(document: Mapping[str, Any]) -> list[str]:
    """``Action::<pattern>`` for each way the document allows an invoke that carries no guardrail."""
    all_statements = iam.statements(document)
    denies = [s for s in all_statements if s.get("Effect") == "Deny" and _denies_unguarded(s)]
    found = []
    for statement in all_statements:
        if not iam.is_allow(statement) or requires_guardrail(statement):
            continue
        resources = iam.resources(statement)
        for pattern, actions in iam.action_patterns(statement, iam.BEDROCK_INVOKE).items():
            if not all(_covered_by_deny(a, resources, denies) for a in actions):
                found.append(f"Action::{pattern}")
    return found


def check(resource: Resource, facts: AppFacts) -> Result:
    return findings([f for doc in iam.identity_documents(resource) for f in unguarded_invoke_patterns(doc)])


RULE = Rule(
    suffix="BR2",
    level=NagMessageLevel.ERROR,
    info="The policy lets its principal invoke Bedrock models without a guardrail.",
    explanation=(
        "Bedrock applies a guardrail only when the request names one, so an unconditioned invoke grant lets "
        "the caller skip it. Add Condition StringEquals bedrock:GuardrailIdentifier = <guardrail ARN>:<version> "
        "to the Allow, or an explicit Deny of the same actions and resources with StringNotEquals on that key "
        "(ModelInvokeAccess(guardrail=...) does both)."
    ),
    documentation="https://docs.aws.amazon.com/bedrock/latest/userguide/guardrails-permissions-id.html",
    resource_types=iam.IDENTITY_POLICY_TYPES,
    check=check,
)
