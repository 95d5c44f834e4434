"""Record a checkov skip on the resource itself (CloudFormation metadata), with the reason a reviewer checks.

Local until the shared ``inference_tiers.constructs.common.checkov.skip_check`` lands on main (same signature).
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct


def skip_check(scope: IConstruct, check_id: str, reason: str) -> None:
    """Skip checkov's ``check_id`` on ``scope``'s CloudFormation resource only (``scope`` itself or its
    default child); ``reason`` says why the check does not apply there."""
    resource = scope if isinstance(scope, CfnResource) else scope.node.default_child
    if not isinstance(resource, CfnResource):
        raise ValueError(
            f"skip_check: {scope.node.path} has no CloudFormation resource to record {check_id} on"
        )
    metadata = resource.get_metadata("checkov") or {}
    skips = [s for s in metadata.get("skip", []) if s["id"] != check_id]
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check_id, "comment": reason}]})
