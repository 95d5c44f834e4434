"""The app being validated, read once per validation: resources by type and by logical id, resolved on demand.

Each read is a round trip to the jsii kernel, so every resource's type is read once, in one pass over the tree; a
resource is resolved only when a check asks for it, at most once per validation; and each stack's path is read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnResource, Stack
from constructs import IConstruct

from inference_tiers.nag.rule import Resource


def object_key(obj: Any) -> str:
    """The jsii kernel's id of the JavaScript object behind ``obj``. Each crossing into Python makes a new proxy
    (``is`` and ``==`` do not hold between two of them), but every proxy of one object carries this id."""
    ref: str = obj.__jsii_ref__.ref
    return ref


class ConstructTreeFacts:
    """The :class:`~inference_tiers.nag.rule.AppFacts` of the construct tree under ``root``."""

    def __init__(self, root: IConstruct) -> None:
        self._root = root
        self._nodes: list[tuple[CfnResource, str]] | None = None
        self._kinds: dict[str, str] = {}
        self._resolved: dict[str, Resource] = {}
        self._stack_paths: dict[str, str] = {}

    def kind(self, node: CfnResource) -> str:
        """``node``'s CloudFormation type: from the one pass over the tree, or read for a node that pass did not
        see as a CfnResource."""
        self._all_nodes()
        key = object_key(node)
        if key not in self._kinds:
            self._kinds[key] = node.cfn_resource_type
        return self._kinds[key]

    def resource(self, node: CfnResource) -> Resource:
        """``node`` with its properties rendered and resolved the way the synthesized template shows them.

        Raw overrides (``add_property_override``) are not part of the construct's properties, exactly as in
        cdk-nag's own rules: a resource fixed that way must acknowledge the finding.
        """
        key = object_key(node)
        if key not in self._resolved:
            stack = Stack.of(node)
            properties: Any = node._render_properties(stack.resolve(node._cfn_properties))
            self._resolved[key] = Resource(
                type=self.kind(node),
                logical_id=str(stack.resolve(node.logical_id)),
                stack=self._stack_path(stack),
                properties=properties or {},
            )
        return self._resolved[key]

    def _stack_path(self, stack: Stack) -> str:
        key = object_key(stack)
        if key not in self._stack_paths:
            self._stack_paths[key] = stack.node.path
        return self._stack_paths[key]

    def _all_nodes(self) -> list[tuple[CfnResource, str]]:
        """Every CloudFormation resource under the root, with its type (read once: each read is a round trip)."""
        if self._nodes is None:
            self._nodes = [
                (c, c.cfn_resource_type) for c in self._root.node.find_all() if isinstance(c, CfnResource)
            ]
            self._kinds = {object_key(node): kind for node, kind in self._nodes}
        return self._nodes

    def of_type(self, *types: str) -> Sequence[Resource]:
        return [self.resource(node) for node, kind in self._all_nodes() if kind in types]
