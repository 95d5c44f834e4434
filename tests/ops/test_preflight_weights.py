"""preflight for sagemaker: the S3 prefix an endpoint loads its weights from holds objects (botocore Stubbers at
the services' real shapes); an empty, missing or not yet deployed prefix fails before the deploy rolls back."""

from __future__ import annotations

import datetime

import pytest

from inference_tiers.config import AccountRequirements, WeightsNeed
from inference_tiers.ops import preflight
from inference_tiers.stacks.sagemaker import STACK_NAME, WEIGHTS_OUTPUT
from tests.ops.helpers import StubClients, client_error, tier_requirements

STACK_PREFIX = "s3://inferencetiers-sagemaker-modelbucket-abc/models/Qwen/Qwen3-8B/"
STACK_BUCKET = AccountRequirements(
    model_weights=WeightsNeed(stack_name=STACK_NAME, output_key=WEIGHTS_OUTPUT)
)
OWN_PREFIX = AccountRequirements(model_weights=WeightsNeed(s3_uri="s3://my-models/qwen3-8b/"))


@pytest.fixture
def clients() -> StubClients:
    return StubClients()


def _listing(clients: StubClients, bucket: str, prefix: str, keys: int) -> None:
    contents = [{"Key": f"{prefix}config.json", "Size": 728}] if keys else []
    clients.stub("s3").add_response(
        "list_objects_v2",
        {
            "Name": bucket,
            "Prefix": prefix,
            "MaxKeys": 1,
            "KeyCount": keys,
            "IsTruncated": keys > 0,
            "Contents": contents,
        },
        {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1},
    )


def _stack(clients: StubClients, outputs: list[dict[str, str]]) -> None:
    stack = {
        "StackName": STACK_NAME,
        "CreationTime": datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC),
        "StackStatus": "UPDATE_COMPLETE",
        "Outputs": outputs,
    }
    clients.stub("cloudformation").add_response(
        "describe_stacks", {"Stacks": [stack]}, {"StackName": STACK_NAME}
    )


def test_weights_under_the_configured_prefix_pass(clients: StubClients) -> None:
    _listing(clients, "my-models", "qwen3-8b/", 1)
    [result] = preflight.check_sagemaker_weights(clients, OWN_PREFIX)
    assert (result.status, result.detail) == ("pass", "weights found under s3://my-models/qwen3-8b/")
    clients.assert_done()


def test_an_empty_prefix_fails_with_the_upload_command(clients: StubClients) -> None:
    _listing(clients, "my-models", "qwen3-8b/", 0)
    [result] = preflight.check_sagemaker_weights(clients, OWN_PREFIX)
    assert result.status == "fail" and "no objects under s3://my-models/qwen3-8b/" in result.detail
    assert result.fix == "aws s3 sync <local model dir> s3://my-models/qwen3-8b/ --exclude '.cache/*'"


def test_a_missing_bucket_fails(clients: StubClients) -> None:
    client_error(clients.stub("s3"), "list_objects_v2", "NoSuchBucket", status=404)
    [result] = preflight.check_sagemaker_weights(clients, OWN_PREFIX)
    assert result.status == "fail" and "no bucket my-models" in result.detail


def test_access_denied_on_the_bucket_is_a_warning(clients: StubClients) -> None:
    client_error(clients.stub("s3"), "list_objects_v2", "AccessDenied", status=403)
    [result] = preflight.check_sagemaker_weights(clients, OWN_PREFIX)
    assert result.status == "warn" and "s3:ListBucket on my-models" in result.fix


def test_the_stack_bucket_is_read_from_the_deployed_stack_output(clients: StubClients) -> None:
    _stack(
        clients,
        [
            {"OutputKey": "NextSteps", "OutputValue": "1. ..."},
            {"OutputKey": WEIGHTS_OUTPUT, "OutputValue": STACK_PREFIX},
        ],
    )
    _listing(clients, "inferencetiers-sagemaker-modelbucket-abc", "models/Qwen/Qwen3-8B/", 0)
    [result] = preflight.check_sagemaker_weights(clients, STACK_BUCKET)
    assert result.status == "fail" and STACK_PREFIX in result.detail
    clients.assert_done()


def test_a_stack_bucket_that_is_not_deployed_yet_fails_with_the_two_steps(clients: StubClients) -> None:
    client_error(
        clients.stub("cloudformation"),
        "describe_stacks",
        "ValidationError",
        f"Stack with id {STACK_NAME} does not exist",
    )
    [result] = preflight.check_sagemaker_weights(clients, STACK_BUCKET)
    assert result.status == "fail" and "not deployed yet" in result.detail
    assert "ModelWeightsPrefix output" in result.fix and "sagemaker.create_endpoint=true" in result.fix


def test_a_deployed_stack_without_the_output_fails(clients: StubClients) -> None:
    _stack(clients, [])
    [result] = preflight.check_sagemaker_weights(clients, STACK_BUCKET)
    assert result.status == "fail"


def test_the_checks_run_the_weights_check() -> None:
    assert preflight.check_sagemaker_weights in preflight.CHECKS


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), None),  # the default builds no endpoint: nothing to load
        (("sagemaker.create_endpoint=true",), WeightsNeed(stack_name=STACK_NAME, output_key=WEIGHTS_OUTPUT)),
        (
            ("sagemaker.model_s3_uri=s3://my-models/qwen3-8b/",),
            WeightsNeed(s3_uri="s3://my-models/qwen3-8b/"),
        ),
        (("sagemaker.model_source=hub",), None),
        (("sagemaker.model_s3_uri=s3://my-models/qwen3-8b/", "sagemaker.create_endpoint=false"), None),
    ],
)
def test_the_tier_asks_for_the_prefix_its_endpoint_loads_from(
    overrides: tuple[str, ...], expected: WeightsNeed | None
) -> None:
    assert tier_requirements("sagemaker", *overrides).model_weights == expected
