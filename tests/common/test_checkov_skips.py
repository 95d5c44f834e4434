"""checkov skips: skip_check writes the metadata; FrameworkFunctionSkips tags only aws-cdk's own functions, and
only with the checks that do not apply to them; every skip in every tier has a specific reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from constructs import Construct

from inference_tiers.app_factory import TIERS
from inference_tiers.constructs.common import checkov
from inference_tiers.constructs.common.checkov import (
    AWS_CUSTOM_RESOURCE,
    BUCKET_DEPLOYMENT,
    CUSTOM_RESOURCE_PROVIDER,
    KUBECTL_HANDLER,
    PROVIDER_FRAMEWORK,
    skip_check,
)
from inference_tiers.constructs.common.storage import access_logs_bucket
from inference_tiers.validation import ArgumentError
from tests.common.checkov_stack import framework_stack
from tests.harness import TierBuild, make_app

REASON = "The bucket only holds public test fixtures that anyone may read"


def _skips(template: dict[str, Any]) -> dict[str, dict[str, str]]:
    """logical id -> {check id: reason} for every resource with checkov skips."""
    return {
        logical_id: {s["id"]: s["comment"] for s in resource["Metadata"]["checkov"]["skip"]}
        for logical_id, resource in template["Resources"].items()
        if "checkov" in resource.get("Metadata", {})
    }


def _stack(tmp_path: Path) -> cdk.Stack:
    return cdk.Stack(cdk.App(outdir=str(tmp_path)), "Skips")


def test_skip_check_records_id_and_reason_on_the_default_child(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    bucket = s3.Bucket(stack, "Bucket")
    skip_check(bucket, "CKV_AWS_18", REASON)
    skip_check(bucket, "CKV_AWS_21", REASON + " (second)")
    skip_check(bucket, "CKV_AWS_18", REASON + " (replaced)")
    template = Template.from_stack(stack).to_json()
    [(logical_id, skips)] = _skips(template).items()
    assert template["Resources"][logical_id]["Type"] == "AWS::S3::Bucket"
    assert skips == {"CKV_AWS_21": REASON + " (second)", "CKV_AWS_18": REASON + " (replaced)"}


def test_skip_check_accepts_a_cfn_resource_itself(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    resource = s3.CfnBucket(stack, "Bucket")
    skip_check(resource, "CKV_AWS_21", REASON)
    assert _skips(Template.from_stack(stack).to_json()) == {
        stack.get_logical_id(resource): {"CKV_AWS_21": REASON}
    }


@pytest.mark.parametrize(
    ("check_id", "reason", "param"),
    [
        ("CKV_AWS_18 ", REASON, "check_id"),
        ("ckv_aws_18", REASON, "check_id"),
        ("AwsSolutions-S1", REASON, "check_id"),
        ("", REASON, "check_id"),
        ("CKV_AWS_18", "", "reason"),
        ("CKV_AWS_18", "does not apply", "reason"),
        ("CKV_AWS_18", ["a", "list", "is", "not", "a", "reason"], "reason"),
    ],
)
def test_skip_check_refuses_a_bad_id_or_a_vague_reason(
    tmp_path: Path, check_id: Any, reason: Any, param: str
) -> None:
    bucket = s3.Bucket(_stack(tmp_path), "Bucket")
    with pytest.raises(ArgumentError, match=rf"skip_check: parameter '{param}'") as error:
        skip_check(bucket, check_id, reason)
    assert error.value.param == param


def test_skip_check_refuses_a_construct_without_a_resource(tmp_path: Path) -> None:
    group = Construct(_stack(tmp_path), "Group")
    with pytest.raises(
        ArgumentError, match="parameter 'scope' got a Construct; expected a CloudFormation resource"
    ):
        skip_check(group, "CKV_AWS_18", REASON)


@pytest.fixture(scope="module")
def framework(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, dict[str, str]]]:
    built = framework_stack(tmp_path_factory.mktemp("framework"))
    return built, _skips(Template.from_stack(built.stack).to_json())


def _functions_of_type(template: dict[str, Any]) -> set[str]:
    return {k for k, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}


def test_aspect_skips_exactly_the_framework_functions_and_their_checks(framework: Any) -> None:
    built, skips = framework
    stack = built.stack
    template = Template.from_stack(stack).to_json()
    vpc_provider = stack.node.find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
    deployment_role = stack.node.find_child("Deployment").handler_role
    expected = {
        built.logical_id(vpc_provider.node.find_child("Handler")): CUSTOM_RESOURCE_PROVIDER,
        built.logical_id(built.provider.node.find_child("framework-onEvent")): PROVIDER_FRAMEWORK,
        built.logical_id(deployment_role.node.scope): BUCKET_DEPLOYMENT,
        built.logical_id(stack.node.find_child("Call").grant_principal.node.scope): AWS_CUSTOM_RESOURCE,
    }
    # Besides the framework functions, only the access-log bucket (skip_check in storage.py) has skips.
    access_logs = built.logical_id(stack.node.find_child("AccessLogs"))
    assert set(skips) == {*expected, access_logs}
    for logical_id, kind in expected.items():
        assert set(skips[logical_id]) == set(kind.skips), logical_id
        for check_id, reason in skips[logical_id].items():
            assert reason == f"{kind.name}: {kind.skips[check_id]}"
    # The user's own functions, also those with a framework function's id, are left to checkov.
    for function in [built.user_handler, *built.decoys]:
        assert built.logical_id(function) in _functions_of_type(template)
        assert built.logical_id(function) not in skips


_KINDS = (
    CUSTOM_RESOURCE_PROVIDER,
    PROVIDER_FRAMEWORK,
    KUBECTL_HANDLER,
    BUCKET_DEPLOYMENT,
    AWS_CUSTOM_RESOURCE,
)


def _framework_environments(template: dict[str, Any]) -> list[tuple[str, Any, set[str]]]:
    """(logical id, framework kind, environment variable names) for every function the aspect tagged."""
    found = []
    for logical_id, skips in _skips(template).items():
        kinds = {kind for kind in _KINDS for reason in skips.values() if reason.startswith(f"{kind.name}: ")}
        if kinds:
            [kind] = kinds
            properties = template["Resources"][logical_id]["Properties"]
            found.append((logical_id, kind, set(properties.get("Environment", {}).get("Variables", {}))))
    return found


def _assert_environments_named_by_the_reason(template: dict[str, Any]) -> int:
    """The CKV_AWS_173 reason (no secret in the environment) names every variable the function really has."""
    checked = 0
    for logical_id, kind, variables in _framework_environments(template):
        assert variables <= kind.environment, f"{logical_id} ({kind.name}): {variables - kind.environment}"
        checked += bool(variables)
    return checked


def test_framework_environment_check_fails_on_an_unknown_variable(tmp_path: Path) -> None:
    built = framework_stack(tmp_path)
    built.provider.node.find_child("framework-onEvent").add_environment(
        "API_TOKEN", "not-known-to-be-harmless"
    )
    with pytest.raises(AssertionError, match="API_TOKEN"):
        _assert_environments_named_by_the_reason(Template.from_stack(built.stack).to_json())


def test_framework_environments_hold_only_the_variables_the_reasons_name(framework: Any) -> None:
    built, _ = framework
    # The Provider framework and BucketDeployment functions have an environment; the VPC's provider has none.
    assert _assert_environments_named_by_the_reason(Template.from_stack(built.stack).to_json()) == 2


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_tier_framework_environments_hold_only_the_variables_the_reasons_name(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    for template in tier_build(tier).templates().values():
        _assert_environments_named_by_the_reason(template)


def test_aspect_leaves_a_skip_the_construct_recorded_itself(tmp_path: Path) -> None:
    built = framework_stack(tmp_path)
    framework_function = built.provider.node.find_child("framework-onEvent")
    skip_check(framework_function, "CKV_AWS_117", "This provider's own reason, given by its construct")
    skips = _skips(Template.from_stack(built.stack).to_json())[built.logical_id(framework_function)]
    assert skips["CKV_AWS_117"] == "This provider's own reason, given by its construct"


def test_access_log_bucket_is_versioned_with_a_lifecycle(framework: Any) -> None:
    built, skips = framework
    bucket = Template.from_stack(built.stack).to_json()["Resources"][
        built.logical_id(built.stack.node.find_child("AccessLogs"))
    ]
    properties = bucket["Properties"]
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    assert properties["LifecycleConfiguration"] == {
        "Rules": [
            {
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                "NoncurrentVersionExpiration": {"NoncurrentDays": 90},
                "Status": "Enabled",
            }
        ]
    }
    assert bucket["DeletionPolicy"] == "Retain"


def test_access_log_bucket_expiration_joins_the_same_rule(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    access_logs_bucket(stack, "Logs", expiration=cdk.Duration.days(365))
    [bucket] = Template.from_stack(stack).find_resources("AWS::S3::Bucket").values()
    rules = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rules == [
        {
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
            "ExpirationInDays": 365,
            "NoncurrentVersionExpiration": {"NoncurrentDays": 90},
            "Status": "Enabled",
        }
    ]


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_every_skip_in_the_tier_has_a_specific_reason(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    """Also a skip written into metadata without skip_check (which refuses a vague reason) is caught here."""
    for stack_name, template in tier_build(tier).templates().items():
        for logical_id, skips in _skips(template).items():
            for check_id, reason in skips.items():
                where = f"{stack_name}/{logical_id} {check_id}"
                assert re.fullmatch(r"CKV2?_AWS_[0-9]+", check_id), where
                assert isinstance(reason, str) and len(reason.split()) >= 6, f"{where}: {reason!r}"


@pytest.mark.parametrize("tier", ["hyperpod", "disaggregated"])
def test_eks_tiers_kubectl_handler_gets_its_framework_skips(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    build = tier_build(tier)
    [stack] = build.stacks
    [provider] = [c for c in stack.node.find_all() if isinstance(c, eks.KubectlProvider)]
    handler = provider.node.find_child("Handler").node.default_child
    assert isinstance(handler, cdk.CfnElement)
    template = build.templates()[stack.stack_name]
    skips = _skips(template)[stack.get_logical_id(handler)]
    assert skips == {
        check: f"{KUBECTL_HANDLER.name}: {reason}" for check, reason in KUBECTL_HANDLER.skips.items()
    }
    # Its Provider's framework function runs in the cluster's VPC: CKV_AWS_117 passes and is not skipped.
    framework_function = (
        provider.node.find_child("Provider").node.find_child("framework-onEvent").node.default_child
    )
    assert isinstance(framework_function, cdk.CfnElement)
    logical_id = stack.get_logical_id(framework_function)
    assert "VpcConfig" in template["Resources"][logical_id]["Properties"]
    assert set(_skips(template)[logical_id]) == set(PROVIDER_FRAMEWORK.skips) - {"CKV_AWS_117"}


@pytest.mark.parametrize("tier", ["sagemaker"])  # runs in the sagemaker tier's worker
def test_sagemaker_model_skips_network_isolation_only_for_hub_weights(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    # S3 weights: the endpoint exists once asked for (the default first deploy builds none over an empty bucket)
    _, s3_stacks = make_app(tier=tier, **{"sagemaker.create_endpoint": True})
    [s3_model] = Template.from_stack(s3_stacks[0]).find_resources("AWS::SageMaker::Model").values()
    assert s3_model["Properties"]["EnableNetworkIsolation"] is True
    assert "checkov" not in s3_model.get("Metadata", {})
    _, stacks = make_app(tier=tier, **{"sagemaker.model_source": "hub"})
    [hub_model] = Template.from_stack(stacks[0]).find_resources("AWS::SageMaker::Model").values()
    assert hub_model["Properties"]["EnableNetworkIsolation"] is False
    [skip] = hub_model["Metadata"]["checkov"]["skip"]
    assert skip["id"] == "CKV_AWS_370"
    assert "Hub weights are downloaded by the container" in skip["comment"]


def test_the_aspect_names_each_framework_class_by_its_aws_cdk_jsii_name() -> None:
    """The Aspect matches classes by jsii name so that it imports none of their modules: each name must be the one
    aws-cdk-lib's Python module gives the class."""
    from aws_cdk import CustomResourceProviderBase
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_s3_deployment as s3_deployment
    from aws_cdk import custom_resources as cr

    assert {
        checkov.FUNCTION: lambda_.Function,
        checkov.CFN_FUNCTION: lambda_.CfnFunction,
        checkov.CUSTOM_RESOURCE_PROVIDER_BASE: CustomResourceProviderBase,
        checkov.PROVIDER: cr.Provider,
        checkov.KUBECTL_PROVIDER: eks.KubectlProvider,
        checkov.BUCKET_DEPLOYMENT_CLASS: s3_deployment.BucketDeployment,
        checkov.AWS_CUSTOM_RESOURCE_CLASS: cr.AwsCustomResource,
    } == {
        cls.__jsii_type__: cls
        for cls in (
            lambda_.Function,
            lambda_.CfnFunction,
            CustomResourceProviderBase,
            cr.Provider,
            eks.KubectlProvider,
            s3_deployment.BucketDeployment,
            cr.AwsCustomResource,
        )
    }
