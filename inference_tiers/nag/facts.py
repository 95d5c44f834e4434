"""The app being validated, read once per validation: resources by type and by logical id, resolved on demand.

Resolving a resource's properties costs a round trip to the jsii kernel, so only the resources a check asks
for are resolved, and each at most once per validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnResource, Stack
from constructs import IConstruct

from inference_tiers.nag.rule import Resource


def read_resource(node: CfnResource) -> Resource:
    """``node`` with its properties rendered and resolved the way the synthesized template shows them.

    Raw overrides (``add_property_override``) are not part of the construct's properties, exactly as in
    cdk-nag's own rules: a resource fixed that way must acknowledge the finding.
    """
    stack = Stack.of(node)
    properties: Any = node._render_properties(stack.resolve(node._cfn_properties))
    return Resource(
        type=node.cfn_resource_type,
        logical_id=str(stack.resolve(node.logical_id)),
        stack=stack.node.path,
        properties=properties or {},
    )


class ConstructTreeFacts:
    """The :class:`~inference_tiers.nag.rule.AppFacts` of the construct tree under ``root``."""

    def __init__(self, root: IConstruct) -> None:
        self._root = root
        self._nodes: list[tuple[CfnResource, str]] | None = None
        self._resolved: dict[str, Resource] = {}

    def resource(self, node: CfnResource) -> Resource:
        path = node.node.path
        if path not in self._resolved:
            self._resolved[path] = read_resource(node)
        return self._resolved[path]

    def _all_nodes(self) -> list[tuple[CfnResource, str]]:
        """Every CloudFormation resource under the root, with its type (read once: each read is a round trip)."""
        if self._nodes is None:
            self._nodes = [
                (c, c.cfn_resource_type) for c in self._root.node.find_all() if isinstance(c, CfnResource)
            ]
        return self._nodes

    def of_type(self, *types: str) -> Sequence[Resource]:
        return [self.resource(node) for node, kind in self._all_nodes() if kind in types]
