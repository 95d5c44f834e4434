"""Does a role in a synthesized template allow what a third-party controller's upstream reference policy grants?

The upstream policies are vendored under ``tests/data/iam_reference/<component>-<version>.json``, each with a
``.SOURCE`` note beside it (repository, tag, path, or URL and date). :func:`missing_grants` answers every
(action, resource) pair of the reference's ``Allow`` statements that the role's policies do not allow:

- an action matches the role's action patterns case-insensitively (IAM actions are), wildcards included;
- where upstream scopes a resource (an ARN pattern), the role must allow the action on that resource type:
  a sample ARN made from the upstream pattern (each ``*`` replaced by a name) must match one of the role's
  resource patterns, in which every deploy-time token (``Ref``, ``Fn::GetAtt``, ``Fn::ImportValue``...) of a
  ``Fn::Join`` is a wildcard; where upstream grants ``"*"``, any resource the role names is accepted (the
  project may scope an action narrower than upstream, never drop it).

Conditions are not compared: the project may add conditions upstream does not have (ownership tags), and the
tests that need one assert it directly. ``Deny`` statements in the role's policies are refused outright.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tests.harness import DATA_DIR

REFERENCE_DIR = DATA_DIR / "iam_reference"


@dataclass(frozen=True)
class Grant:
    """One ``Allow`` statement of the role: action patterns and resource patterns (tokens as ``*``)."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]

    def allows(self, action: str, upstream_resource: str) -> bool:
        if not any(fnmatchcase(action.lower(), pattern.lower()) for pattern in self.actions):
            return False
        if upstream_resource == "*":
            return True
        sample = upstream_resource.replace("*", "sample")
        return any(fnmatchcase(sample, pattern) for pattern in self.resources)


def reference_policy(name: str) -> dict[str, Any]:
    """A vendored upstream policy document; its ``.SOURCE`` note must exist beside it."""
    path = REFERENCE_DIR / f"{name}.json"
    assert Path(f"{path}.SOURCE").read_text().strip(), f"{path.name} has no SOURCE note"
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def listed(value: Any) -> list[Any]:
    """A policy field that may be one value or a list of them, as a list."""
    return value if isinstance(value, list) else [value]


def resource_pattern(value: Any) -> str:
    """A rendered resource as a glob: literal text kept, every deploy-time token a ``*``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(resource_pattern(part) for part in parts)
    return "*"


def role_grants(template: Mapping[str, Any], role_logical_id: str) -> list[Grant]:
    """Every ``Allow`` statement that applies to the role: its inline policies and every AWS::IAM::Policy and
    AWS::IAM::ManagedPolicy of the template attached to it. AWS managed policies are not expanded: a test
    that relies on one asserts the ARN."""
    resources = template["Resources"]
    documents = [p["PolicyDocument"] for p in resources[role_logical_id]["Properties"].get("Policies", [])]
    for resource in resources.values():
        attached = {"Ref": role_logical_id} in resource["Properties"].get("Roles", [])
        if attached and resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(resource["Properties"]["PolicyDocument"])
    grants = []
    for document in documents:
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow", f"{role_logical_id} has a Deny statement: {statement}"
            assert "NotAction" not in statement and "NotResource" not in statement, statement
            grants.append(
                Grant(
                    tuple(listed(statement["Action"])),
                    tuple(resource_pattern(r) for r in listed(statement["Resource"])),
                )
            )
    return grants


def missing_grants(reference: Mapping[str, Any], grants: Iterable[Grant]) -> dict[str, list[str]]:
    """Each upstream action the grants do not allow, with the upstream resources they miss it on."""
    grants = list(grants)
    missing: dict[str, list[str]] = {}
    for statement in reference["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        for action in listed(statement["Action"]):
            for resource in listed(statement["Resource"]):
                if not any(grant.allows(action, resource) for grant in grants):
                    missing.setdefault(action, []).append(resource)
    return missing


def assert_covers(
    reference_name: str,
    template: Mapping[str, Any],
    role_logical_id: str,
    exceptions: Mapping[str, str],
) -> None:
    """The role allows every action of the reference, except exactly the documented ``exceptions``
    (action -> why the project does not grant it). A stale exception (an action now granted) fails too."""
    missing = missing_grants(reference_policy(reference_name), role_grants(template, role_logical_id))
    unexplained = {action: where for action, where in missing.items() if action not in exceptions}
    assert not unexplained, f"{role_logical_id} lacks what {reference_name} grants: {unexplained}"
    stale = sorted(set(exceptions) - set(missing))
    assert not stale, f"exceptions for {reference_name} that the role now grants (remove them): {stale}"
