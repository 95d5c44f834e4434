"""checkov skips recorded on the resource itself (CloudFormation metadata ``checkov.skip``), each with its reason.

``skip_check`` is the one way the constructs skip a check. ``FrameworkFunctionSkips`` is the Aspect that
``build_app`` applies for the functions aws-cdk itself generates (custom-resource providers, the Provider
framework, the EKS kubectl provider, BucketDeployment's copy function, AwsCustomResource's function): the project cannot configure the
properties checkov asks for on those, so the Aspect names which framework resource each one is and why the check
does not apply. It recognises them by their aws-cdk construct class, never by a name a user's function could share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsii
from aws_cdk import CfnResource, IAspect, Stack
from constructs import Construct, IConstruct

from inference_tiers.validation import Args

CHECK_ID = r"CKV2?_AWS_[0-9]+"
_MIN_REASON_WORDS = 6


def skip_check(scope: IConstruct, check_id: str, reason: str) -> None:
    """Skip checkov's ``check_id`` (``CKV_AWS_116``) on ``scope``'s CloudFormation resource only: ``scope``
    itself when it is one, else its default child. ``reason`` says, in terms a reviewer can check against the
    template, why the check does not apply there (six words or more). A second skip of the same check on the
    same resource replaces the first."""
    args = Args("skip_check")
    args.text("check_id", check_id, pattern=CHECK_ID, allow_token=False)
    reason = args.text("reason", reason, allow_token=False)
    if len(reason.split()) < _MIN_REASON_WORDS:
        raise args.error("reason", reason, "a specific reason of six words or more")
    resource = scope if isinstance(scope, CfnResource) else scope.node.default_child
    if not isinstance(resource, CfnResource):
        raise args.error(
            "scope", scope, "a CloudFormation resource or a construct whose default child is one"
        )
    metadata = resource.get_metadata("checkov") or {}
    skips = [s for s in metadata.get("skip", []) if s["id"] != check_id]
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check_id, "comment": reason}]})


def skipped_checks(resource: CfnResource) -> dict[str, str]:
    """The checks skipped on ``resource``: check id -> reason."""
    metadata = resource.get_metadata("checkov") or {}
    return {s["id"]: s["comment"] for s in metadata.get("skip", [])}


@dataclass(frozen=True, eq=False)
class FrameworkFunction:
    """One kind of function aws-cdk generates: what it is, why each check it fails does not apply, and the
    environment variables its CKV_AWS_173 reason (no secret in the environment) names. The synthesized value is
    not readable from Python at synth time, so tests/common/test_checkov_skips.py checks every framework
    function of every tier against ``environment``: a variable a new aws-cdk release adds fails that test until
    someone reads it and updates the reason."""

    name: str
    skips: Mapping[str, str]
    environment: frozenset[str] = frozenset()


# Why CloudFormation-invoked framework functions need no dead-letter queue: CloudFormation (directly, or
# through the Provider framework) waits for their response and fails the stack operation when none comes.
_NO_DLQ = (
    "its caller waits for the result and CloudFormation fails the stack operation on an error or timeout, "
    "so an event left in a dead-letter queue would never be replayed"
)
_NO_CONCURRENCY = (
    "it runs only during deployments, once per custom-resource event, so it never competes for the "
    "account's concurrency; aws-cdk exposes no reserved-concurrency setting for it"
)

CUSTOM_RESOURCE_PROVIDER = FrameworkFunction(
    "aws-cdk's CustomResourceProvider function",
    {
        "CKV_AWS_115": _NO_CONCURRENCY,
        "CKV_AWS_116": f"CloudFormation invokes it at deploy time; {_NO_DLQ}",
        "CKV_AWS_117": "it calls only AWS APIs, reaches nothing inside a VPC, and aws-cdk's "
        "CustomResourceProvider has no VPC setting",
    },
)
PROVIDER_FRAMEWORK = FrameworkFunction(
    "aws-cdk's custom_resources.Provider framework function",
    {
        "CKV_AWS_115": _NO_CONCURRENCY,
        "CKV_AWS_116": f"CloudFormation or the Provider's waiter state machine invokes it; {_NO_DLQ}",
        "CKV_AWS_117": "it calls only the Lambda and Step Functions APIs and CloudFormation's pre-signed "
        "S3 response URL, nothing inside a VPC",
        "CKV_AWS_173": "its environment holds only the ARNs of the handler functions and waiter state machine "
        "it calls (USER_ON_EVENT_FUNCTION_ARN, USER_IS_COMPLETE_FUNCTION_ARN, WAITER_STATE_MACHINE_ARN), "
        "which are no secret",
    },
    frozenset({"USER_ON_EVENT_FUNCTION_ARN", "USER_IS_COMPLETE_FUNCTION_ARN", "WAITER_STATE_MACHINE_ARN"}),
)
KUBECTL_HANDLER = FrameworkFunction(
    "aws-cdk's EKS kubectl provider handler",
    {
        "CKV_AWS_115": _NO_CONCURRENCY,
        "CKV_AWS_116": f"the Provider framework invokes it synchronously; {_NO_DLQ}",
        "CKV_AWS_173": "its environment holds only AWS_STS_REGIONAL_ENDPOINTS=regional, which is no secret",
    },
    frozenset({"AWS_STS_REGIONAL_ENDPOINTS"}),
)
BUCKET_DEPLOYMENT = FrameworkFunction(
    "aws-cdk's BucketDeployment copy function",
    {
        "CKV_AWS_115": _NO_CONCURRENCY,
        "CKV_AWS_116": f"CloudFormation invokes it at deploy time; {_NO_DLQ}",
        "CKV_AWS_117": "it copies CDK asset objects between S3 buckets through the S3 API only, nothing "
        "inside a VPC",
        "CKV_AWS_173": "its environment holds only AWS_CA_BUNDLE, the path of the CA bundle file in its "
        "layer, which is no secret",
    },
    frozenset({"AWS_CA_BUNDLE"}),
)

AWS_CUSTOM_RESOURCE = FrameworkFunction(
    "aws-cdk's AwsCustomResource function",
    {
        "CKV_AWS_115": _NO_CONCURRENCY,
        "CKV_AWS_116": f"CloudFormation invokes it at deploy time; {_NO_DLQ}",
        "CKV_AWS_117": "it makes the one AWS API call its custom resource names and reaches nothing inside a VPC",
    },
)


@jsii.implements(IAspect)
class FrameworkFunctionSkips:
    """Skip, on each function aws-cdk generates, the checkov checks that do not apply to it (see the reasons
    above); every other resource, and every other check, is left alone. Apply it to the app:
    ``Aspects.of(app).add(FrameworkFunctionSkips())``."""

    def visit(self, node: IConstruct) -> None:
        for resource, kind in _framework_functions(node):
            function: Any = resource.node.scope
            # A framework function placed in a VPC passes CKV_AWS_117: skipping it would hide that.
            in_vpc = _is_a(function, FUNCTION) and function.is_bound_to_vpc
            for check_id, reason in kind.skips.items():
                if check_id not in skipped_checks(resource) and not (check_id == "CKV_AWS_117" and in_vpc):
                    skip_check(resource, check_id, f"{kind.name}: {reason}")


# The aws-cdk classes the framework functions come from, by jsii name: every app imports this module (build_app
# applies the Aspect), and importing aws_eks_v2, aws_lambda, aws_s3_deployment and custom_resources to name them
# would cost a tier that uses none of them about a quarter of a second.
FUNCTION = "aws-cdk-lib.aws_lambda.Function"
CFN_FUNCTION = "aws-cdk-lib.aws_lambda.CfnFunction"
CUSTOM_RESOURCE_PROVIDER_BASE = "aws-cdk-lib.CustomResourceProviderBase"
PROVIDER = "aws-cdk-lib.custom_resources.Provider"
KUBECTL_PROVIDER = "aws-cdk-lib.aws_eks_v2.KubectlProvider"
BUCKET_DEPLOYMENT_CLASS = "aws-cdk-lib.aws_s3_deployment.BucketDeployment"
AWS_CUSTOM_RESOURCE_CLASS = "aws-cdk-lib.custom_resources.AwsCustomResource"


def _is_a(node: object, jsii_type: str) -> bool:
    """``isinstance(node, <the aws-cdk class named jsii_type>)`` without importing that class's module: each class
    jsii generates holds its jsii name in its own ``__jsii_type__`` (a Python subclass only inherits it)."""
    return any(vars(c).get("__jsii_type__") == jsii_type for c in type(node).__mro__)


def _framework_functions(node: Any) -> Iterable[tuple[CfnResource, FrameworkFunction]]:
    """The framework functions ``node`` holds directly, each with its kind (``node`` is typed Any: each branch
    reads the members of the class ``_is_a`` found)."""
    if _is_a(node, CUSTOM_RESOURCE_PROVIDER_BASE):
        handler = node.node.try_find_child("Handler")
        if isinstance(handler, CfnResource) and handler.cfn_resource_type == "AWS::Lambda::Function":
            yield handler, CUSTOM_RESOURCE_PROVIDER
    elif _is_a(node, PROVIDER):
        for child in node.node.children:
            if _is_a(child, FUNCTION) and re.fullmatch(r"framework-[A-Za-z]+", child.node.id):
                yield _cfn_function(child), PROVIDER_FRAMEWORK
    elif _is_a(node, KUBECTL_PROVIDER):
        handler = node.node.try_find_child("Handler")
        if _is_a(handler, FUNCTION):
            yield _cfn_function(handler), KUBECTL_HANDLER
    elif _is_a(node, BUCKET_DEPLOYMENT_CLASS):
        yield from _singleton_with_role(node, node.handler_role, BUCKET_DEPLOYMENT)
    elif _is_a(node, AWS_CUSTOM_RESOURCE_CLASS) and isinstance(node.grant_principal, Construct):
        yield from _singleton_with_role(node, node.grant_principal, AWS_CUSTOM_RESOURCE)


def _singleton_with_role(
    node: IConstruct, role: IConstruct, kind: FrameworkFunction
) -> Iterable[tuple[CfnResource, FrameworkFunction]]:
    """The singleton function aws-cdk adds at the stack's root for ``node``: the one whose role is ``role``."""
    children: list[Any] = Stack.of(node).node.children
    for child in children:
        if _is_a(child, FUNCTION) and child.role and child.role.node.path == role.node.path:
            yield _cfn_function(child), kind


def _cfn_function(function: Any) -> CfnResource:
    resource = function.node.default_child
    assert isinstance(resource, CfnResource) and _is_a(resource, CFN_FUNCTION), (
        f"{function.node.path} has no AWS::Lambda::Function"
    )
    return resource
