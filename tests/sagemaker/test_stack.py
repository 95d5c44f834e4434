"""The InferenceTiers-SageMaker stack: cdk.json defaults, settings validation, outputs, VPC and model bucket."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match
from cdk_nag import AwsSolutionsChecks
from syrupy.extensions.json import JSONSnapshotExtension

from inference_tiers.config import ConfigError, InstanceNeed
from inference_tiers.nag import InferenceChecks
from inference_tiers.stacks.sagemaker import STACK_NAME, TIER, SageMakerSettings
from tests.harness import (
    TierBuild,
    build_tier,
    cdk_json_context,
    cfn_lint_errors,
    mask_asset_hashes,
    nag_findings,
)


def resources_of(template: Mapping[str, Any], resource_type: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def default_settings(**overrides: Any) -> SageMakerSettings:
    from inference_tiers.config import parse_settings

    return parse_settings(TIER.spec, {**cdk_json_context(), **overrides})  # type: ignore[no-any-return]


def test_every_setting_has_a_default_in_cdk_json() -> None:
    keys = set(TIER.spec.context_keys())
    assert keys <= set(cdk_json_context()), sorted(keys - set(cdk_json_context()))


@pytest.fixture(scope="module")
def second_deploy() -> TierBuild:
    """The defaults once the weights are in the stack's bucket: ``sagemaker.create_endpoint=true``."""
    return build_tier("sagemaker", **{"sagemaker.create_endpoint": "true"})


def test_defaults_serve_an_open_model_with_vllm_on_single_gpu_pools(second_deploy: TierBuild) -> None:
    template = second_deploy.template(STACK_NAME).to_json()
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == "Qwen/Qwen3-8B"
    source = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    (bucket_id,) = [k for k in resources_of(template, "AWS::S3::Bucket") if k.startswith("ModelBucket")]
    assert source["S3Uri"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/models/Qwen/Qwen3-8B/"]]}
    (config,) = resources_of(template, "AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    assert [p["InstanceType"] for p in variant["InstancePools"]] == ["ml.g6e.2xlarge", "ml.g5.2xlarge"]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 1  # scale-to-zero off
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 1800
    assert len(resources_of(template, "AWS::SageMaker::InferenceComponent")) == 1


def test_outputs(second_deploy: TierBuild) -> None:
    template = second_deploy.template(STACK_NAME).to_json()
    outputs = template["Outputs"]
    assert sorted(outputs) == [
        "DashboardUrl",
        "EndpointName",
        "InferenceComponentName",
        "InvokeExample",
        "InvokeUrl",
        "ModelWeightsPrefix",  # preflight reads it to check the weights before each deploy
    ]
    endpoint_name = outputs["EndpointName"]["Value"]
    component_name = outputs["InferenceComponentName"]["Value"]
    (endpoint,) = resources_of(template, "AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"]["EndpointName"] == endpoint_name
    url = json.dumps(outputs["InvokeUrl"]["Value"])
    assert "https://runtime.sagemaker." in url
    assert f"/endpoints/{endpoint_name}/inference-components/{component_name}/openai/v1" in url
    (dashboard_id,) = resources_of(template, "AWS::CloudWatch::Dashboard")
    assert {"Ref": dashboard_id} in outputs["DashboardUrl"]["Value"]["Fn::Join"][1]
    example = json.dumps(outputs["InvokeExample"]["Value"])
    assert f"--endpoint-name {endpoint_name} --inference-component-name {component_name}" in example
    assert "sagemaker-runtime invoke-endpoint" in example


def test_single_model_outputs_have_no_component_name() -> None:
    stack = build_tier(
        "sagemaker",
        **{
            "sagemaker.create_endpoint": "true",
            "sagemaker.topology": "single-model",
            "sagemaker.instance_types": ["ml.g6e.12xlarge"],
        },
    )
    outputs = stack.template(STACK_NAME).to_json()["Outputs"]
    assert sorted(outputs) == [
        "DashboardUrl",
        "EndpointName",
        "InvokeExample",
        "InvokeUrl",
        "ModelWeightsPrefix",
    ]
    assert "inference-components" not in json.dumps(outputs["InvokeUrl"])
    (config,) = resources_of(stack.template(STACK_NAME).to_json(), "AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    # One instance type: no pools to fall back across, so no provisioning timeout.
    assert "VariantInstanceProvisionTimeoutInSeconds" not in variant
    assert variant["InstanceType"] == "ml.g6e.12xlarge"


def test_vpc_has_private_subnets_flow_logs_and_an_s3_gateway_endpoint(second_deploy: TierBuild) -> None:
    template = second_deploy.template(STACK_NAME).to_json()
    (vpc,) = resources_of(template, "AWS::EC2::VPC").values()
    assert vpc["Properties"]["CidrBlock"] == "10.42.0.0/16"
    (flow_log,) = resources_of(template, "AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    (endpoint,) = resources_of(template, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    private = [
        k
        for k, v in resources_of(template, "AWS::EC2::Subnet").items()
        if v["Properties"]["MapPublicIpOnLaunch"] is False
    ]
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    assert sorted(s["Ref"] for s in model["Properties"]["VpcConfig"]["Subnets"]) == sorted(private)


def test_model_bucket_is_kms_encrypted_tls_only_and_logged(tier_build: Callable[[str], TierBuild]) -> None:
    template = tier_build("sagemaker").template(STACK_NAME).to_json()
    buckets = resources_of(template, "AWS::S3::Bucket")
    (model_bucket,) = [v for k, v in buckets.items() if k.startswith("ModelBucket")]
    encryption = model_bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert "LoggingConfiguration" in model_bucket["Properties"]
    policies = json.dumps(resources_of(template, "AWS::S3::BucketPolicy"))
    assert '"aws:SecureTransport": "false"' in policies


def test_every_log_group_has_a_customer_managed_key(second_deploy: TierBuild) -> None:
    template = second_deploy.template(STACK_NAME).to_json()
    groups = resources_of(template, "AWS::Logs::LogGroup")
    keys = resources_of(template, "AWS::KMS::Key")
    # Flow logs, the endpoint's and the inference component's logs.
    assert len(groups) == 3
    for name, group in groups.items():
        (key_id, attribute) = group["Properties"]["KmsKeyId"]["Fn::GetAtt"]
        assert key_id in keys and attribute == "Arn", name


def test_existing_s3_weights_create_no_model_bucket() -> None:
    stack = build_tier("sagemaker", **{"sagemaker.model_s3_uri": "s3://my-models/qwen3-8b/"})
    template = stack.template(STACK_NAME).to_json()
    # No model bucket, no capture bucket: no bucket at all (not even for access logs).
    assert resources_of(template, "AWS::S3::Bucket") == {}
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    source = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3Uri"] == "s3://my-models/qwen3-8b/"


def _model_bucket_and_endpoint(build: TierBuild) -> tuple[list[str], list[str]]:
    template = build.template(STACK_NAME).to_json()
    buckets = [k for k in resources_of(template, "AWS::S3::Bucket") if k.startswith("ModelBucket")]
    sagemaker = [k for k, r in template["Resources"].items() if r["Type"].startswith("AWS::SageMaker::")]
    return buckets, sagemaker


def test_the_default_first_deploy_builds_no_endpoint_over_the_empty_model_bucket(
    tier_build: Callable[[str], TierBuild],
) -> None:
    """cdk.json's defaults (model_source s3, no model_s3_uri, create_endpoint empty): the deploy creates the model
    bucket, empty until the user uploads, so an inference component created with it could not download the
    weights and the stack would roll back. No SageMaker resource; the outputs and a warning give the two steps."""
    build = tier_build("sagemaker")
    buckets, sagemaker = _model_bucket_and_endpoint(build)
    assert buckets and sagemaker == []
    outputs = build.template(STACK_NAME).to_json()["Outputs"]
    assert sorted(outputs) == ["ModelWeightsPrefix", "NextSteps"]
    prefix = outputs["ModelWeightsPrefix"]["Value"]
    assert prefix == {"Fn::Join": ["", ["s3://", {"Ref": buckets[0]}, "/models/Qwen/Qwen3-8B/"]]}
    steps = json.dumps(outputs["NextSteps"]["Value"])
    assert "aws s3 sync" in steps and '\\"sagemaker.create_endpoint\\": true in cdk.json' in steps
    (warning,) = Annotations.from_stack(build.stacks[0]).find_warning(
        "*", Match.string_like_regexp("No endpoint in this deploy")
    )
    assert "sagemaker.create_endpoint" in str(warning.entry.data) and "models/Qwen/Qwen3-8B/" in str(
        warning.entry.data
    )


@pytest.mark.parametrize(
    ("overrides", "endpoint"),
    [
        ({}, False),
        ({"sagemaker.create_endpoint": "false"}, False),
        ({"sagemaker.create_endpoint": "true"}, True),  # the second step: the user uploaded the weights
        ({"sagemaker.model_s3_uri": "s3://my-models/qwen3-8b/"}, True),
        ({"sagemaker.model_source": "hub"}, True),
        ({"sagemaker.model_source": "hub", "sagemaker.create_endpoint": "false"}, False),
    ],
)
def test_an_endpoint_is_built_over_the_stack_bucket_only_when_asked(
    overrides: dict[str, str], endpoint: bool
) -> None:
    settings = default_settings(**overrides)
    assert settings.builds_endpoint is endpoint
    assert bool(_model_bucket_and_endpoint(build_tier("sagemaker", **overrides))[1]) is endpoint


def test_an_explicit_false_gives_the_steps_without_a_warning() -> None:
    build = build_tier("sagemaker", **{"sagemaker.create_endpoint": "false"})
    assert sorted(build.template(STACK_NAME).to_json()["Outputs"]) == ["ModelWeightsPrefix", "NextSteps"]
    assert (
        Annotations.from_stack(build.stacks[0]).find_warning("*", Match.string_like_regexp("No endpoint"))
        == []
    )


def test_a_latency_slo_of_fractional_seconds_sets_the_alarm() -> None:
    # Duration.to_seconds() raised a jsii error for 2500 ms; the description now divides milliseconds.
    stack = build_tier(
        "sagemaker", **{"sagemaker.create_endpoint": "true", "sagemaker.latency_slo_ms": "2500"}
    )
    alarms = resources_of(stack.template(STACK_NAME).to_json(), "AWS::CloudWatch::Alarm").values()
    (latency,) = [a for a in alarms if "SLO" in a["Properties"].get("AlarmDescription", "")]
    assert latency["Properties"]["Threshold"] == 2_500_000
    assert latency["Properties"]["AlarmDescription"] == "p90 model latency at or above the 2.5 s SLO."


def test_scale_to_zero_from_context() -> None:
    stack = build_tier(
        "sagemaker",
        **{
            "sagemaker.create_endpoint": "true",
            "sagemaker.scale_to_zero": "true",
            "sagemaker.idle_minutes": "30",
        },
    )
    template = stack.template(STACK_NAME).to_json()
    (target,) = resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["MinCapacity"] == 0
    policies = resources_of(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert sorted(p["Properties"]["PolicyType"] for p in policies) == [
        "StepScaling",
        "StepScaling",
        "TargetTrackingScaling",
    ]


def test_account_requirements_list_every_pool_and_the_reservation() -> None:
    settings = default_settings()
    assert settings.account_requirements().instances == (
        InstanceNeed("sagemaker-endpoint", "ml.g6e.2xlarge", 2),
        InstanceNeed("sagemaker-endpoint", "ml.g5.2xlarge", 2),
    )
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1"
    reserved = default_settings(
        **{"sagemaker.capacity_reservation_arn": arn, "sagemaker.instance_types": ["ml.p5.48xlarge"]}
    )
    requirements = reserved.account_requirements()
    assert requirements.capacity_reservation_ids == (arn,)
    # Eight GPUs and one GPU per copy: two copies fit on one p5.
    assert requirements.instances == (InstanceNeed("sagemaker-endpoint", "ml.p5.48xlarge", 1),)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"sagemaker.engine": "tgi"},
            r"'sagemaker.engine': got 'tgi'; expected one of vllm, sglang, lmi, byoc",
        ),
        (
            {"sagemaker.instance_types": ["ml.t2.medium"]},
            r"'sagemaker.instance_types\[0\]': got 'ml.t2.medium'",
        ),
        # A mistyped fallback pool: SageMaker's own enum refuses it, the closest names are offered.
        (
            {"sagemaker.instance_types": ["ml.g6e.2xlarge", "ml.g6e.12xlarg"]},
            r"'sagemaker.instance_types\[1\]': got 'ml.g6e.12xlarg'; expected an instance type of SageMaker's "
            r"ProductionVariantInstanceType .*\(closest: ml.g6e.12xlarge",
        ),
        (
            {"sagemaker.instance_types": ["ml.g5.xlarge"] * 6},
            r"'sagemaker.instance_types': got .*; expected a list of 1 to 5 items",
        ),
        (
            {"sagemaker.instance_types": ["ml.g5.xlarge", "ml.g5.xlarge"]},
            r"'sagemaker.instance_types\[1\]': got 'ml.g5.xlarge'; expected each item at most once",
        ),
        (
            {"sagemaker.routing": "RANDOM"},
            r"'sagemaker.routing': got 'RANDOM'; expected LEAST_OUTSTANDING_REQUESTS with 2 instance pools",
        ),
        (
            {"sagemaker.scale_to_zero": True, "sagemaker.topology": "single-model"},
            r"'sagemaker.scale_to_zero': got True; expected False for a single-model endpoint",
        ),
        # Qwen3-8B's config.json: max_position_embeddings 40960.
        (
            {"sagemaker.max_model_len": 65536},
            r"'sagemaker.max_model_len': got 65536; expected at most 40960, the maximum context of Qwen/Qwen3-8B",
        ),
        (
            {"sagemaker.startup_timeout_seconds": 59},
            r"'sagemaker.startup_timeout_seconds': got 59; expected an integer from 60 to 3600",
        ),
        ({"sagemaker.download_timeout_seconds": "3601"}, r"'sagemaker.download_timeout_seconds': got '3601'"),
        ({"sagemaker.provision_timeout_seconds": 200}, r"'sagemaker.provision_timeout_seconds': got 200"),
        ({"sagemaker.engine": "byoc"}, r"'sagemaker.image_uri': got None; expected your ECR image URI"),
        (
            {"sagemaker.image_uri": "nginx:latest"},
            r"'sagemaker.image_uri': got 'nginx:latest'; expected an Amazon ECR image URI",
        ),
        (
            {"sagemaker.min_capacity": 3},
            r"'sagemaker.min_capacity': got 3; expected at most max_capacity \(2\)",
        ),
        (
            {"sagemaker.target_concurrency": 64},
            r"'sagemaker.target_concurrency': got 64; expected at most max_concurrent",
        ),
        (
            {"sagemaker.model_s3_uri": "s3://bucket/no-slash"},
            r"'sagemaker.model_s3_uri': got 's3://bucket/no-slash'",
        ),
        (
            {"sagemaker.model_source": "hub", "sagemaker.model_s3_uri": "s3://bucket/m/"},
            r"'sagemaker.model_s3_uri': got 's3://bucket/m/'; expected empty when model_source is hub",
        ),
        ({"sagemaker.capacity_reservation_arn": "cr-1"}, r"'sagemaker.capacity_reservation_arn': got 'cr-1'"),
        ({"sagemaker.vpc_cidr": "192.168.0.0/16"}, r"'sagemaker.vpc_cidr': got '192.168.0.0/16'"),
        ({"sagemaker.tensor_parallel_degree": 9}, r"'sagemaker.tensor_parallel_degree': got 9"),
        (
            {"sagemaker.memory_per_copy_mb": 65536},
            r"'sagemaker.memory_per_copy_mb': got 65536; expected at most 32768 \(the host memory of ml.g5.2xlarge\)",
        ),
    ],
)
def test_bad_settings_are_rejected(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        default_settings(**overrides)


def test_capacity_rules_name_the_context_key() -> None:
    with pytest.raises(
        ConfigError,
        match=r"'sagemaker.tensor_parallel_degree': got 2; expected 1 to 1 \(ml.g6e.2xlarge has 1 GPU",
    ):
        build_tier("sagemaker", **{"sagemaker.tensor_parallel_degree": "2"})


@pytest.mark.parametrize(
    "overrides",
    [
        {"sagemaker.topology": "single-model", "sagemaker.instance_types": ["ml.g6e.12xlarge"]},
        {"sagemaker.scale_to_zero": "true", "sagemaker.data_capture_percent": "10"},
        {"sagemaker.model_source": "hub", "sagemaker.engine": "sglang"},
        {"sagemaker.model_s3_uri": "s3://my-models/qwen3-8b/", "sagemaker.engine": "lmi"},
        {"sagemaker.create_endpoint": "true"},
    ],
    ids=[
        "single-model",
        "scale-to-zero-with-capture",
        "hub-sglang",
        "existing-s3-lmi",
        "stack-bucket-uploaded",
    ],
)
def test_variants_pass_nag_and_cfn_lint(overrides: dict[str, str]) -> None:
    build = build_tier("sagemaker", **overrides)
    # Both packs add_nag_checks runs (hub weights acknowledge InferenceTiers-SM2[NetworkIsolation]).
    for pack in (AwsSolutionsChecks(), InferenceChecks()):
        assert nag_findings(build.app, pack) == []
    assert cfn_lint_errors(build.templates()[STACK_NAME]) == []


def test_snapshot_of_the_endpoint_over_the_stack_bucket(second_deploy: TierBuild, snapshot: Any) -> None:
    """The default tier's snapshot (tests/test_tiers_common.py) has no endpoint until the weights are uploaded;
    this reviewed snapshot covers the endpoint the second deploy adds."""
    assert mask_asset_hashes(second_deploy.templates()) == snapshot.use_extension(JSONSnapshotExtension)


def test_the_second_deploy_acknowledges_the_new_bucket_warning(second_deploy: TierBuild) -> None:
    """create_endpoint=true is the user saying the weights are uploaded (preflight checks it): no warning left."""
    warnings = Annotations.from_stack(second_deploy.stacks[0]).find_warning("*", Match.any_value())
    assert [w for w in warnings if "bucket this stack creates" in str(w.entry.data)] == []
