"""What a rule of the pack is: an id, a level, what it reports and what to change, and a pure check."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdk_nag import NagMessageLevel, NagRuleCompliance

# A check's answer, as cdk-nag's rules give it: compliant, non-compliant, not applicable, or one finding id per
# offending value (reported as ``<rule id>[<finding>]`` and acknowledged one by one, like AwsSolutions-IAM5).
Result = NagRuleCompliance | list[str]


@dataclass(frozen=True)
class Resource:
    """One CloudFormation resource of the app, its properties resolved (intrinsics stay ``{"Ref": ...}``)."""

    type: str
    logical_id: str
    stack: str
    """The construct path of the stack that holds it: logical ids are unique only within a stack."""
    properties: Mapping[str, Any]


class AppFacts(Protocol):
    """What a check may look up beyond its own resource (the rest of the app being validated)."""

    def of_type(self, *types: str) -> Sequence[Resource]:
        """Every resource of these CloudFormation types in the app."""
        ...


@dataclass(frozen=True)
class Rule:
    """One rule: ``InferenceTiers-<suffix>``, applied to every resource of ``resource_types``."""

    suffix: str
    level: NagMessageLevel
    info: str
    """What was found (the finding's one-line description)."""
    explanation: str
    """Why it matters and what to change."""
    documentation: str
    """The AWS documentation the rule follows."""
    resource_types: frozenset[str]
    check: Callable[[Resource, AppFacts], Result]

    @property
    def id(self) -> str:
        return f"{PACK_NAME}-{self.suffix}"


PACK_NAME = "InferenceTiers"


def findings(ids: Sequence[str]) -> Result:
    """Granular findings, sorted and without repeats; compliant when there are none."""
    return sorted(set(ids)) or NagRuleCompliance.COMPLIANT
