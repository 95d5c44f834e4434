"""Reading IAM policy documents as CloudFormation holds them, for the rules that check grants and trusts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from inference_tiers.nag.rule import Resource

# Bedrock's invoke actions. Converse and ConverseStream are authorized by InvokeModel and
# InvokeModelWithResponseStream (Bedrock user guide, "Carry out a conversation with the Converse API
# operations"); they are listed so that a statement naming them is recognized as an invoke grant.
INVOKE_MODEL = "bedrock:InvokeModel"
INVOKE_STREAM = "bedrock:InvokeModelWithResponseStream"
BEDROCK_INVOKE = (INVOKE_MODEL, INVOKE_STREAM, "bedrock:Converse", "bedrock:ConverseStream")
AUTHORIZED_BY = {"bedrock:Converse": INVOKE_MODEL, "bedrock:ConverseStream": INVOKE_STREAM}

IDENTITY_POLICY_TYPES = frozenset(
    {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group"}
)


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def identity_documents(resource: Resource) -> list[Mapping[str, Any]]:
    """The identity-policy documents a resource carries (a policy's document, a principal's inline ones)."""
    props = resource.properties
    if resource.type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        return [props["PolicyDocument"]] if isinstance(props.get("PolicyDocument"), Mapping) else []
    return [p["PolicyDocument"] for p in as_list(props.get("Policies")) if isinstance(p, Mapping)]


def statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in as_list(document.get("Statement")) if isinstance(s, Mapping)]


def _pattern(glob: str) -> re.Pattern[str]:
    # IAM action and resource wildcards: '*' any run of characters, '?' one character, case-insensitive.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob), re.I)


def glob_matches(glob: Any, value: str) -> bool:
    return isinstance(glob, str) and _pattern(glob).fullmatch(value) is not None


def is_allow(statement: Mapping[str, Any]) -> bool:
    return statement.get("Effect") == "Allow"


def covers_action(statement: Mapping[str, Any], action: str) -> bool:
    """Whether the statement's Action (or NotAction) applies to ``action``, whatever its effect."""
    if "NotAction" in statement:
        return not any(glob_matches(p, action) for p in as_list(statement["NotAction"]))
    return any(glob_matches(p, action) for p in as_list(statement.get("Action")))


def action_patterns(statement: Mapping[str, Any], actions: Iterable[str]) -> dict[str, list[str]]:
    """Each way the statement names one of ``actions`` -> the actions it covers.

    Keyed by the Action pattern as written (``bedrock:*``); for a NotAction statement by each covered action.
    """
    actions = list(actions)
    if "NotAction" in statement:
        return {a: [a] for a in actions if covers_action(statement, a)}
    named: dict[str, list[str]] = {}
    for pattern in as_list(statement.get("Action")):
        covered = [a for a in actions if glob_matches(pattern, a)]
        if covered:
            named[str(pattern)] = covered
    return named


def conditions(statement: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The statement's Condition block with operators and keys lower-cased (IAM compares both that way)."""
    block = statement.get("Condition")
    if not isinstance(block, Mapping):
        return {}
    return {
        str(op).lower(): {str(k).lower(): v for k, v in keys.items()}
        for op, keys in block.items()
        if isinstance(keys, Mapping)
    }


def render(value: Any) -> str:
    """A resource or principal as one string, intrinsics shown the way cdk-nag shows them (``<Logical.Arn>``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt" and isinstance(arg, list):
            return f"<{'.'.join(str(a) for a in arg)}>"
        if fn == "Fn::Join" and isinstance(arg, list) and len(arg) == 2:
            return str(arg[0]).join(render(part) for part in as_list(arg[1]))
    return "<?>"


def resources(statement: Mapping[str, Any]) -> list[str]:
    """The statement's Resource values rendered; ``["*"]`` for a NotResource statement (it reaches almost all)."""
    if "NotResource" in statement:
        return ["*"]
    return [render(r) for r in as_list(statement.get("Resource"))]


def service_principals(statement: Mapping[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if not isinstance(principal, Mapping):
        return []
    return [render(p) for p in as_list(principal.get("Service"))]


def trusts_service(role: Resource, service: str) -> bool:
    """Whether the role's trust policy lets ``service`` (``ecs-tasks.amazonaws.com``) assume it."""
    trust = role.properties.get("AssumeRolePolicyDocument")
    if not isinstance(trust, Mapping):
        return False
    return any(is_allow(s) and service in service_principals(s) for s in statements(trust))
