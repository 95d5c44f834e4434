"""SageMakerLlmEndpoint on its own: engines, topologies, pools, scaling, IAM, alarms and every validation rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from constructs import IConstruct

from inference_tiers import instance_types
from inference_tiers.constructs import ModelWeights, SageMakerLlmEndpoint, ScalingOptions
from inference_tiers.constructs.sagemaker.capacity import Capacity

S3_WEIGHTS = "s3://weights-bucket/models/qwen3-8b/"
BYOC_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-llm:1.0-cu124"


def build(**props: Any) -> tuple[SageMakerLlmEndpoint, Template]:
    """A stack with one endpoint; ``props`` override the defaults below."""
    endpoint = make(**props)
    return endpoint, Template.from_stack(endpoint.stack)


def make(**props: Any) -> SageMakerLlmEndpoint:
    """Like :func:`build`, without synthesizing (the stack can still be extended)."""
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, restrict_default_security_group=False)
    defaults: dict[str, Any] = {
        "weights": ModelWeights.from_s3_uri(S3_WEIGHTS),
        "instance_types": ["ml.g6e.2xlarge"],
        "vpc": vpc,
    }
    return SageMakerLlmEndpoint(stack, "Llm", **{**defaults, **props})


def only(template: Template, resource_type: str) -> dict[str, Any]:
    resources = template.find_resources(resource_type)
    assert len(resources) == 1, list(resources)
    (resource,) = resources.values()
    return dict(resource)


def logical_id(construct: IConstruct) -> str:
    """The logical id of ``construct``, or of its CloudFormation default child."""
    element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    assert isinstance(element, cdk.CfnElement), construct.node.path
    return cdk.Stack.of(element).get_logical_id(element)


def environment(template: Template) -> dict[str, str]:
    env: dict[str, str] = only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"][
        "Environment"
    ]
    return env


def variant(template: Template) -> dict[str, Any]:
    config = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]
    (production_variant,) = config["ProductionVariants"]
    return dict(production_variant)


def policy_statements(template: Template, endpoint: SageMakerLlmEndpoint) -> list[dict[str, Any]]:
    policy_id = logical_id(endpoint.role.node.find_child("DefaultPolicy"))
    return list(template.to_json()["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"])


# --- engines ------------------------------------------------------------------------------------------------


def test_vllm_environment_uses_sm_vllm_variables_and_the_mounted_prefix() -> None:
    _, template = build(
        served_model_name="qwen3-8b",
        max_model_len=8192,
        max_concurrent_sequences=32,
        engine_args={"enable-prefix-caching": "true"},
    )
    assert environment(template) == {
        "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_SERVED_MODEL_NAME": "qwen3-8b",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "1",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_MAX_NUM_SEQS": "32",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
    }


def test_sglang_environment_uses_sm_sglang_variables() -> None:
    _, template = build(
        engine="sglang",
        instance_types=["ml.g6e.12xlarge"],
        tensor_parallel_degree=4,
        max_model_len=32768,
        max_concurrent_sequences=64,
        engine_args={"reasoning-parser": "qwen3"},
    )
    assert environment(template) == {
        "SM_SGLANG_MODEL_PATH": "/opt/ml/model",
        "SM_SGLANG_TP_SIZE": "4",
        "SM_SGLANG_CONTEXT_LENGTH": "32768",
        "SM_SGLANG_MAX_RUNNING_REQUESTS": "64",
        "SM_SGLANG_REASONING_PARSER": "qwen3",
    }
    image = json.dumps(only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Image"])
    assert "/sglang:0.5.8-gpu-py312-cu129-ubuntu22.04-sagemaker" in image


def test_lmi_environment_uses_hf_model_id_and_option_variables() -> None:
    _, template = build(engine="lmi", max_model_len=8192, engine_args={"gpu_memory_utilization": "0.9"})
    assert environment(template) == {
        "HF_MODEL_ID": "/opt/ml/model",
        "OPTION_TENSOR_PARALLEL_DEGREE": "1",
        "OPTION_MAX_MODEL_LEN": "8192",
        "OPTION_ASYNC_MODE": "true",
        "OPTION_ROLLING_BATCH": "disable",
        "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
        "SERVING_FAIL_FAST": "true",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.9",
    }


def test_byoc_uses_the_given_image_and_passes_engine_args_unchanged() -> None:
    endpoint, template = build(
        engine="byoc", image_uri=BYOC_IMAGE, engine_args={"MODEL_DIR": "/opt/ml/model"}
    )
    container = only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]
    assert container["Image"] == BYOC_IMAGE
    assert container["Environment"] == {"MODEL_DIR": "/opt/ml/model"}
    assert template.find_mappings("*") == {}
    # cu124 in the tag: the driver-550 host AMI.
    assert variant(template)["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    ecr = [s for s in policy_statements(template, endpoint) if "ecr:BatchGetImage" in s["Action"]]
    assert ecr[0]["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ecr:us-west-2:123456789012:repository/my-llm"]]
    }


def test_dlc_image_uri_is_region_aware_through_a_mapping() -> None:
    _, template = build()
    image = only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Image"]
    parts = image["Fn::Join"][1]
    assert parts[0]["Fn::FindInMap"][1] == {"Ref": "AWS::Region"}
    assert parts[-1] == "/vllm:0.20.2-gpu-py312-cu130-ubuntu22.04-sagemaker"
    (mapping,) = template.find_mappings("*").values()
    assert mapping["us-east-1"]["account"] == "763104351884"
    assert mapping["af-south-1"]["account"] == "626614931356"
    assert mapping["cn-north-1"]["account"] == "727897471807"
    # cu130 image: the driver-580 AMI.
    assert variant(template)["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"


def test_inference_ami_version_override_is_used() -> None:
    _, template = build(inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1")
    assert variant(template)["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"


# --- weights --------------------------------------------------------------------------------------------------


def test_s3_weights_are_an_uncompressed_prefix_with_network_isolation() -> None:
    _, template = build()
    model = only(template, "AWS::SageMaker::Model")["Properties"]
    assert model["PrimaryContainer"]["ModelDataSource"] == {
        "S3DataSource": {"S3Uri": S3_WEIGHTS, "S3DataType": "S3Prefix", "CompressionType": "None"}
    }
    assert model["EnableNetworkIsolation"] is True


def test_hub_weights_download_without_isolation_and_warn_about_tokens() -> None:
    endpoint, template = build(
        weights=ModelWeights.from_hub("Qwen/Qwen3-8B"), environment={"HF_TOKEN": "hf_x"}
    )
    model = only(template, "AWS::SageMaker::Model")["Properties"]
    assert "ModelDataSource" not in model["PrimaryContainer"]
    assert model["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"] == "Qwen/Qwen3-8B"
    assert model["EnableNetworkIsolation"] is False
    warnings = Annotations.from_stack(endpoint.stack).find_warning("*", Match.string_like_regexp("HF_TOKEN"))
    assert len(warnings) == 1


def test_no_token_warning_without_a_token() -> None:
    endpoint, _ = build(weights=ModelWeights.from_hub("Qwen/Qwen3-8B"))
    assert (
        Annotations.from_stack(endpoint.stack).find_warning("*", Match.string_like_regexp("plaintext")) == []
    )


# --- topology and capacity --------------------------------------------------------------------------------------


def test_inference_component_topology() -> None:
    endpoint, template = build(
        memory_per_copy_mb=8192, scaling=ScalingOptions(min_capacity=2, max_capacity=4)
    )
    production_variant = variant(template)
    assert "ModelName" not in production_variant
    assert production_variant["InstanceType"] == "ml.g6e.2xlarge"
    # One GPU per instance and one per copy: one copy per instance.
    assert production_variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 2,
        "MaxInstanceCount": 4,
    }
    assert production_variant["InitialInstanceCount"] == 2
    assert "ContainerStartupHealthCheckTimeoutInSeconds" not in production_variant
    config = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert "ExecutionRoleArn" in config and "VpcConfig" in config
    component = only(template, "AWS::SageMaker::InferenceComponent")["Properties"]
    assert component["InferenceComponentName"] == endpoint.inference_component_name
    assert component["VariantName"] == "AllTraffic"
    assert component["EndpointName"] == {"Fn::GetAtt": [logical_id(endpoint.endpoint), "EndpointName"]}
    spec = component["Specification"]
    assert spec["ModelName"] == {"Fn::GetAtt": [logical_id(endpoint.model), "ModelName"]}
    assert spec["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1,
        "MinMemoryRequiredInMb": 8192,
    }
    assert spec["StartupParameters"] == {
        "ContainerStartupHealthCheckTimeoutInSeconds": 1800,
        "ModelDataDownloadTimeoutInSeconds": 1800,
    }
    assert component["RuntimeConfig"] == {"CopyCount": 2}
    deployment = component["DeploymentConfig"]
    assert deployment["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}
    rollback = [a["AlarmName"]["Ref"] for a in deployment["AutoRollbackConfiguration"]["Alarms"]]
    assert rollback == [
        logical_id(a) for a in (endpoint.monitoring.error_rate_alarm, endpoint.monitoring.latency_alarm)
    ]
    endpoint_props = only(template, "AWS::SageMaker::Endpoint")["Properties"]
    assert endpoint_props["RetainAllVariantProperties"] is True
    assert "DeploymentConfig" not in endpoint_props


# --- physical names: a fixed name on a resource that a property change replaces makes that update fail ----------

_NAME_PROPERTY = {
    "AWS::SageMaker::Model": "ModelName",
    "AWS::SageMaker::EndpointConfig": "EndpointConfigName",
    "AWS::SageMaker::Endpoint": "EndpointName",
    "AWS::SageMaker::InferenceComponent": "InferenceComponentName",
}


@pytest.mark.parametrize("inference_components", [True, False], ids=["inference-component", "single-model"])
def test_model_and_endpoint_config_get_generated_names(inference_components: bool) -> None:
    _, template = build(inference_components=inference_components)
    assert "ModelName" not in only(template, "AWS::SageMaker::Model")["Properties"]
    assert "EndpointConfigName" not in only(template, "AWS::SageMaker::EndpointConfig")["Properties"]


@pytest.mark.parametrize("inference_components", [True, False], ids=["inference-component", "single-model"])
def test_fixed_names_only_where_no_other_set_property_forces_replacement(inference_components: bool) -> None:
    """Replacing a resource with a fixed name fails (the new one cannot take the old one's name), so a fixed
    name is allowed only where no other property set on the resource is create-only (CloudFormation registry
    schema, as pinned cfn-lint ships it)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    _, template = build(inference_components=inference_components)
    checked = []
    for resource_type, name_property in _NAME_PROPERTY.items():
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
        create_only = {p.removeprefix("/properties/") for p in schema.get("createOnlyProperties", [])}
        for resource in template.find_resources(resource_type).values():
            properties = set(resource["Properties"])
            if name_property in properties:
                assert properties & create_only <= {name_property}, (resource_type, properties & create_only)
                checked.append(resource_type)
    # The Endpoint (and inference component) names are fixed: alarms, scaling targets and the URL use them.
    assert "AWS::SageMaker::Endpoint" in checked


def test_copies_share_an_instance_when_gpus_allow() -> None:
    _, template = build(
        instance_types=["ml.g6e.12xlarge"], scaling=ScalingOptions(min_capacity=1, max_capacity=8)
    )
    # 4 GPUs and 384 GiB: four one-GPU copies per instance, so 8 copies need 2 instances.
    assert variant(template)["ManagedInstanceScaling"]["MaxInstanceCount"] == 2


def test_single_model_topology() -> None:
    endpoint, template = build(
        inference_components=False,
        instance_types=["ml.g6e.12xlarge"],
        startup_health_check_timeout=cdk.Duration.minutes(40),
    )
    production_variant = variant(template)
    assert production_variant["ModelName"] == {"Fn::GetAtt": [logical_id(endpoint.model), "ModelName"]}
    assert production_variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 2400
    assert production_variant["ModelDataDownloadTimeoutInSeconds"] == 1800
    assert "ManagedInstanceScaling" not in production_variant
    # Single model: tensor parallel over every GPU of the instance.
    assert environment(template)["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    template.resource_count_is("AWS::SageMaker::InferenceComponent", 0)
    config = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert "ExecutionRoleArn" not in config
    deployment = only(template, "AWS::SageMaker::Endpoint")["Properties"]["DeploymentConfig"]
    assert deployment["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 25}
    assert len(deployment["AutoRollbackConfiguration"]["Alarms"]) == 2
    assert endpoint.inference_component_name is None


def test_instance_pools_in_priority_order_with_least_outstanding_requests() -> None:
    _, template = build(
        instance_types=["ml.g6e.2xlarge", "ml.g5.2xlarge", "ml.g6.2xlarge"],
        provision_timeout=cdk.Duration.minutes(45),
    )
    production_variant = variant(template)
    assert "InstanceType" not in production_variant
    assert production_variant["InstancePools"] == [
        {"InstanceType": "ml.g6e.2xlarge", "Priority": 1},
        {"InstanceType": "ml.g5.2xlarge", "Priority": 2},
        {"InstanceType": "ml.g6.2xlarge", "Priority": 3},
    ]
    assert production_variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert production_variant["VariantInstanceProvisionTimeoutInSeconds"] == 2700


def test_prefix_aware_routing_on_a_single_instance_type() -> None:
    _, template = build(routing="PREFIX_AWARE", prefix_length=8192, prefix_concurrency_threshold=8)
    assert variant(template)["RoutingConfig"] == {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {"PrefixLength": 8192, "ConcurrencyThreshold": 8},
    }


def test_capacity_reservation() -> None:
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/llm-plan"
    _, template = build(capacity_reservation_arn=arn)
    assert variant(template)["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": arn,
    }


# --- KMS --------------------------------------------------------------------------------------------------------


def test_volume_kms_key_is_used_on_ebs_only_instance_types(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every GPU type in the shared table has local NVMe today; an EBS-only entry exercises the other branch
    # (p3.2xlarge: one V100, EBS only; a name SageMaker's ProductionVariantInstanceType has).
    ebs_only = instance_types.GpuInstanceType("p3.2xlarge", 1, "V100", 16, 8, 61, 10, 0, local_nvme=False)
    monkeypatch.setitem(instance_types.GPU_INSTANCE_TYPES, "p3.2xlarge", ebs_only)
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    key = kms.Key(stack, "VolumeKey")
    endpoint = SageMakerLlmEndpoint(
        stack,
        "Llm",
        weights=ModelWeights.from_s3_uri(S3_WEIGHTS),
        instance_types=["ml.p3.2xlarge"],
        vpc=ec2.Vpc(stack, "Vpc", restrict_default_security_group=False),
        volume_kms_key=key,
    )
    template = Template.from_stack(stack)
    config = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert config["KmsKeyId"] == {"Fn::GetAtt": [logical_id(key), "Arn"]}
    kms_actions = [
        s["Action"] for s in policy_statements(template, endpoint) if "kms:CreateGrant" in s["Action"]
    ]
    assert kms_actions == [["kms:CreateGrant", "kms:Decrypt", "kms:GenerateDataKey*"]]


# --- autoscaling ------------------------------------------------------------------------------------------------


def test_inference_component_scaling_tracks_concurrency_per_copy() -> None:
    endpoint, template = build(scaling=ScalingOptions(min_capacity=1, max_capacity=6, target_concurrency=12))
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"inference-component/{endpoint.inference_component_name}",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
        "MinCapacity": 1,
        "MaxCapacity": 6,
    }
    # No RoleARN: App Auto Scaling uses its SageMaker service-linked role; no role is created for it.
    assert (
        template.find_resources(
            "AWS::IAM::Role",
            {
                "Properties": {
                    "AssumeRolePolicyDocument": Match.object_like(
                        {
                            "Statement": [
                                Match.object_like(
                                    {"Principal": {"Service": "application-autoscaling.amazonaws.com"}}
                                )
                            ]
                        }
                    )
                }
            },
        )
        == {}
    )
    assert endpoint.inference_component is not None
    assert logical_id(endpoint.inference_component) in target["DependsOn"]
    policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")["Properties"]
    assert policy["PolicyType"] == "TargetTrackingScaling"
    assert policy["TargetTrackingScalingPolicyConfiguration"] == {
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
        },
        "TargetValue": 12,
        "ScaleInCooldown": 300,
        "ScaleOutCooldown": 60,
    }


def test_single_model_scaling_tracks_concurrency_per_model() -> None:
    endpoint, template = build(
        inference_components=False, scaling=ScalingOptions(min_capacity=1, max_capacity=3)
    )
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")["Properties"]
    assert target["ResourceId"] == f"endpoint/{endpoint.endpoint_name}/variant/AllTraffic"
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 3)
    policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")["Properties"]
    spec = policy["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"]
    assert spec == {"PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
    assert variant(template)["InitialInstanceCount"] == 1


def test_scale_to_zero_adds_a_step_policy_on_no_capacity_failures_and_idle_scale_in() -> None:
    endpoint, template = build(
        scaling=ScalingOptions(
            min_capacity=1, max_capacity=2, scale_to_zero=True, idle_scale_in=cdk.Duration.minutes(45)
        )
    )
    assert only(template, "AWS::ApplicationAutoScaling::ScalableTarget")["Properties"]["MinCapacity"] == 0
    assert variant(template)["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    # The first copy still starts at deployment, so the deployment proves the model loads.
    assert only(template, "AWS::SageMaker::InferenceComponent")["Properties"]["RuntimeConfig"] == {
        "CopyCount": 1
    }

    scaling = endpoint.scaling
    assert scaling.scale_out_from_zero is not None and scaling.no_capacity_alarm is not None
    assert scaling.idle_scale_in is not None and scaling.idle_alarm is not None
    policies = template.to_json()["Resources"]
    scale_out = policies[logical_id(scaling.scale_out_from_zero)]["Properties"]
    assert scale_out["PolicyType"] == "StepScaling"
    assert scale_out["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "Cooldown": 60,
        "MetricAggregationType": "Maximum",
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }
    alarm = policies[logical_id(scaling.no_capacity_alarm)]["Properties"]
    assert alarm["Namespace"] == "AWS/SageMaker"
    assert alarm["MetricName"] == "NoCapacityInvocationFailures"
    assert alarm["Dimensions"] == [
        {"Name": "InferenceComponentName", "Value": endpoint.inference_component_name}
    ]
    # 60 s, not 10: no AWS document says NoCapacityInvocationFailures is published at high resolution, and a
    # 10 s alarm over one-minute data would miss its datapoints and never scale out from zero.
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Maximum", 60, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmActions"] == [{"Ref": logical_id(scaling.scale_out_from_zero)}]

    idle = policies[logical_id(scaling.idle_scale_in)]["Properties"]
    assert idle["StepScalingPolicyConfiguration"]["AdjustmentType"] == "ExactCapacity"
    assert idle["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalUpperBound": 0, "ScalingAdjustment": 0}
    ]
    idle_alarm = policies[logical_id(scaling.idle_alarm)]["Properties"]
    assert idle_alarm["EvaluationPeriods"] == 45
    assert idle_alarm["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    expression, *inputs = idle_alarm["Metrics"]
    # Requests that found no copy count as demand: after a scale-in to zero they put the idle alarm back to
    # OK, so its policy stops setting 0 copies while the copy added for them starts.
    assert expression["Expression"] == "FILL(invocations, 0) + FILL(noCapacity, 0)"
    assert {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in inputs} == {
        "invocations": "Invocations",
        "noCapacity": "NoCapacityInvocationFailures",
    }
    for metric in inputs:
        assert metric["MetricStat"]["Metric"]["Namespace"] == "AWS/SageMaker"
        assert metric["MetricStat"]["Metric"]["Dimensions"] == [
            {"Name": "InferenceComponentName", "Value": endpoint.inference_component_name}
        ]
        assert (metric["MetricStat"]["Stat"], metric["MetricStat"]["Period"]) == ("Sum", 60)


def test_no_step_policies_without_scale_to_zero() -> None:
    _, template = build()
    template.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy", {"PolicyType": "StepScaling"}, 0
    )


# --- security -----------------------------------------------------------------------------------------------------


def test_model_depends_on_the_role_default_policy() -> None:
    endpoint, template = build()
    policy_id = logical_id(endpoint.role.node.find_child("DefaultPolicy"))
    for resource_type in (
        "AWS::SageMaker::Model",
        "AWS::SageMaker::EndpointConfig",
        "AWS::SageMaker::InferenceComponent",
    ):
        assert policy_id in only(template, resource_type)["DependsOn"], resource_type


def test_execution_role_is_least_privilege() -> None:
    endpoint, template = build()
    role = only(template, "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in role["Properties"]
    statements = policy_statements(template, endpoint)
    by_action = {json.dumps(s["Action"]): s for s in statements}
    ecr = by_action[
        json.dumps(["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"])
    ]
    assert "repository/vllm" in json.dumps(ecr["Resource"]) and "FindInMap" in json.dumps(ecr["Resource"])
    assert by_action['"s3:GetObject"']["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::weights-bucket/models/qwen3-8b/*"]]
    }
    assert by_action['"s3:ListBucket"']["Condition"] == {"StringLike": {"s3:prefix": ["models/qwen3-8b/*"]}}
    logs = by_action[json.dumps(["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"])]
    assert len(logs["Resource"]) == 2  # the endpoint's and the component's own log groups
    alarms = by_action['"cloudwatch:DescribeAlarms"']["Resource"]
    assert len(alarms) == 2
    wildcard_actions = sorted(
        a
        for s in statements
        if s["Resource"] == "*"
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )
    assert wildcard_actions == sorted(
        [
            "ecr:GetAuthorizationToken",
            "cloudwatch:PutMetricData",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeVpcs",
            "ec2:DescribeDhcpOptions",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
        ]
    )
    assert not any(
        a.endswith(":*") or a == "*"
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )


def test_only_sagemaker_acting_for_this_account_and_region_may_assume_the_role() -> None:
    _, template = build()
    (statement,) = only(template, "AWS::IAM::Role")["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    # SageMaker inference sends aws:SourceArn as arn:<partition>:sagemaker:<region>:<account>:* (docs:
    # security-confused-deputy-prevention, "SageMaker AI Inference").
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {
            "aws:SourceArn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":sagemaker:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":*",
                    ],
                ]
            }
        },
    }


def _ec2_arn(resource: str) -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ec2:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":{resource}",
            ],
        ]
    }


def _ec2_ref_arn(resource: str, logical_id: str, attribute: str | None = None) -> dict[str, Any]:
    ref = {"Ref": logical_id} if attribute is None else {"Fn::GetAtt": [logical_id, attribute]}
    (join,) = _ec2_arn(f"{resource}/").values()
    return {"Fn::Join": ["", [*join[1], ref]]}


def test_network_interface_actions_are_scoped_to_the_vpc_subnets_and_security_group() -> None:
    endpoint, template = build()
    statements = policy_statements(template, endpoint)
    vpc = endpoint.stack.node.find_child("Vpc")
    assert isinstance(vpc, ec2.Vpc)
    (create,) = [s for s in statements if s["Action"] == "ec2:CreateNetworkInterface"]
    subnets = [_ec2_ref_arn("subnet", logical_id(s)) for s in vpc.private_subnets]
    group = _ec2_ref_arn("security-group", logical_id(endpoint.security_group), "GroupId")
    expected = [_ec2_arn("network-interface/*"), *subnets, group]
    assert sorted(map(json.dumps, create["Resource"])) == sorted(map(json.dumps, expected))
    assert (
        "Condition" not in create
    )  # a condition would also apply to the new interface, which has no ec2:Vpc
    (manage,) = [s for s in statements if "ec2:DeleteNetworkInterface" in s["Action"]]
    assert manage["Action"] == [
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
    ]
    assert manage["Resource"] == _ec2_arn("network-interface/*")
    assert manage["Condition"] == {"ArnEquals": {"ec2:Vpc": endpoint.stack.resolve(vpc.vpc_arn)}}


def test_bucket_weights_grant_the_bucket_key() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    key = kms.Key(stack, "BucketKey")
    bucket = s3.Bucket(stack, "Weights", encryption_key=key)
    endpoint = SageMakerLlmEndpoint(
        stack,
        "Llm",
        weights=ModelWeights.from_bucket(bucket, "models/m/"),
        instance_types=["ml.g6e.2xlarge"],
        vpc=ec2.Vpc(stack, "Vpc", restrict_default_security_group=False),
    )
    statements = policy_statements(Template.from_stack(stack), endpoint)
    decrypt = [s for s in statements if s["Action"] == "kms:Decrypt"]
    assert decrypt[0]["Resource"] == {"Fn::GetAtt": [logical_id(key), "Arn"]}


def test_model_runs_in_private_subnets_with_https_egress_only() -> None:
    endpoint, template = build()
    vpc_config = only(template, "AWS::SageMaker::Model")["Properties"]["VpcConfig"]
    vpc = endpoint.stack.node.find_child("Vpc")
    assert isinstance(vpc, ec2.Vpc)
    private = [s.subnet_id for s in vpc.private_subnets]
    assert vpc_config["Subnets"] == [endpoint.stack.resolve(s) for s in private]
    group = only(template, "AWS::EC2::SecurityGroup")["Properties"]
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "HTTPS to S3 and model hubs",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in group


def test_grant_invoke_covers_streaming_and_optionally_bearer_tokens() -> None:
    endpoint = make()
    app_role = iam.Role(endpoint.stack, "App", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    endpoint.grant_invoke(app_role)
    bearer_role = iam.Role(endpoint.stack, "Bearer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    endpoint.grant_invoke(bearer_role, bearer_token=True)
    template = Template.from_stack(endpoint.stack)
    arn = endpoint.stack.resolve(endpoint.endpoint_arn)
    for role, actions in (
        (app_role, ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]),
        (
            bearer_role,
            [
                "sagemaker:InvokeEndpoint",
                "sagemaker:InvokeEndpointWithResponseStream",
                "sagemaker:CallWithBearerToken",
            ],
        ),
    ):
        template.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "Roles": [{"Ref": logical_id(role)}],
                "PolicyDocument": {"Statement": [{"Action": actions, "Effect": "Allow", "Resource": arn}]},
            },
        )
    assert ":endpoint/" + endpoint.endpoint_name in json.dumps(arn)


def test_data_capture_to_an_encrypted_bucket() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    key = kms.Key(stack, "CaptureKey")
    bucket = s3.Bucket(stack, "Capture", encryption_key=key)
    endpoint = SageMakerLlmEndpoint(
        stack,
        "Llm",
        weights=ModelWeights.from_s3_uri(S3_WEIGHTS),
        instance_types=["ml.g6e.2xlarge"],
        vpc=ec2.Vpc(stack, "Vpc", restrict_default_security_group=False),
        data_capture_bucket=bucket,
        data_capture_percentage=5,
    )
    template = Template.from_stack(stack)
    capture = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]["DataCaptureConfig"]
    assert capture["EnableCapture"] is True
    assert capture["InitialSamplingPercentage"] == 5
    assert capture["KmsKeyId"] == {"Fn::GetAtt": [logical_id(key), "Arn"]}
    assert capture["CaptureOptions"] == [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}]
    put = [s for s in policy_statements(template, endpoint) if s["Action"] == "s3:PutObject"]
    assert f"/data-capture/{endpoint.endpoint_name}/*" in json.dumps(put[0]["Resource"])


def test_logs_are_encrypted_retained_and_expire() -> None:
    endpoint, template = build()
    groups = template.find_resources("AWS::Logs::LogGroup")
    names = sorted(g["Properties"]["LogGroupName"] for g in groups.values())
    assert names == [
        f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}",
        f"/aws/sagemaker/InferenceComponents/{endpoint.inference_component_name}",
    ]
    for group in groups.values():
        assert group["DeletionPolicy"] == "Retain"
        assert "KmsKeyId" in group["Properties"] and group["Properties"]["RetentionInDays"] == 90


# --- observability ------------------------------------------------------------------------------------------------


def test_enhanced_metrics_every_ten_seconds_with_detailed_observability() -> None:
    _, template = build()
    assert only(template, "AWS::SageMaker::EndpointConfig")["Properties"]["MetricsConfig"] == {
        "EnableEnhancedMetrics": True,
        "MetricPublishFrequencyInSeconds": 10,
        "EnableDetailedObservability": True,
    }


def test_alarms_watch_errors_latency_gpu_memory_disk_and_capacity() -> None:
    endpoint, template = build()
    component = [{"Name": "InferenceComponentName", "Value": endpoint.inference_component_name}]
    variant_dims = [
        {"Name": "EndpointName", "Value": endpoint.endpoint_name},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    expected = {
        "Invocation5XXErrors": ("AWS/SageMaker", component, "Average", 0.01),
        "ModelLatency": ("AWS/SageMaker", component, None, 30_000_000),
        "GPUMemoryUtilizationNormalized": ("/aws/sagemaker/InferenceComponents", component, "Average", 95),
        "DiskUtilization": ("/aws/sagemaker/Endpoints", variant_dims, "Maximum", 85),
        "NoCapacityInvocationFailures": ("AWS/SageMaker", component, "Sum", 1),
    }
    assert sorted(alarms) == sorted(expected)
    topic_ref = {"Ref": logical_id(endpoint.node.find_child("AlarmTopic"))}
    for name, (namespace, dims, statistic, threshold) in expected.items():
        alarm = alarms[name]
        assert alarm["Namespace"] == namespace, name
        assert alarm["Dimensions"] == dims, name
        assert alarm["Threshold"] == threshold, name
        assert alarm.get("Statistic") == statistic, name
        assert alarm["AlarmActions"] == [topic_ref], name
    assert alarms["ModelLatency"]["ExtendedStatistic"] == "p90"
    topic = only(template, "AWS::SNS::Topic")["Properties"]
    assert "KmsMasterKeyId" in topic


def test_dashboard_shows_traffic_latency_concurrency_gpu_and_capacity() -> None:
    _, template = build()
    body = json.dumps(only(template, "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"])
    for needle in (
        "Invocations",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ModelLatency",
        "p99",
        "ConcurrentRequestsPerCopy",
        "GPUUtilizationNormalized",
        "GPUMemoryUtilizationNormalized",
        "SEARCH(",
        "NoCapacityInvocationFailures",
    ):
        assert needle in body, needle


def test_metric_helpers_use_the_component_dimension() -> None:
    endpoint, _ = build()
    metric = endpoint.metric_concurrent_requests()
    assert metric.metric_name == "ConcurrentRequestsPerCopy"
    assert metric.dimensions == {"InferenceComponentName": endpoint.inference_component_name}
    assert metric.period.to_seconds() == 10
    assert endpoint.metric_model_latency("p50").statistic == "p50"
    assert endpoint.metric_gpu_memory_utilization().namespace == "/aws/sagemaker/InferenceComponents"


def test_openai_url_names_the_component() -> None:
    endpoint, _ = build()
    url = endpoint.stack.resolve(endpoint.openai_base_url)
    assert json.dumps(url).endswith(
        f'/endpoints/{endpoint.endpoint_name}/inference-components/{endpoint.inference_component_name}/openai/v1"]]}}'
    )


def test_no_capacity_metric_exists_only_for_inference_components() -> None:
    endpoint, _ = build(inference_components=False)
    with pytest.raises(
        ValueError, match=r"NoCapacityInvocationFailures is published for inference components only"
    ):
        endpoint.metrics.no_capacity_invocation_failures()


def test_hub_weights_have_no_s3_uri() -> None:
    with pytest.raises(ValueError, match=r"s3_uri: these weights come from a model hub, not S3"):
        _ = ModelWeights.from_hub("Qwen/Qwen3-8B").s3_uri


@pytest.mark.parametrize(
    ("types", "memory_mb", "copies_per_instance"),
    [
        (["ml.g6e.12xlarge"], 16384, 4),  # 4 GPUs, 384 GiB: GPU-bound
        (["ml.g6e.12xlarge"], 200_000, 1),  # 393216 MiB / 200000: memory-bound
        (["ml.g6e.12xlarge", "ml.g6e.2xlarge"], 16384, 1),  # the smallest pool decides
    ],
)
def test_copies_per_instance_is_bounded_by_gpus_and_host_memory(
    types: list[str], memory_mb: int, copies_per_instance: int
) -> None:
    capacity = Capacity.plan(
        types, inference_components=True, tensor_parallel_degree=1, memory_per_copy_mb=memory_mb
    )
    assert capacity.copies_per_instance == copies_per_instance
    assert capacity.instances_for(8) == -(-8 // copies_per_instance)


def test_single_model_capacity_counts_instances() -> None:
    capacity = Capacity.plan(
        ["ml.p5.48xlarge"], inference_components=False, tensor_parallel_degree=None, memory_per_copy_mb=16384
    )
    assert capacity.gpus_per_copy == 8
    assert capacity.instances_for(3) == 3


# --- docs/sagemaker.md's "Using the construct in another CDK app" example, as written there ---------------------------


def docs_example() -> str:
    """The python block of docs/sagemaker.md's "Using the construct in another CDK app" section."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sagemaker.md").read_text()
    section = doc.split("## Using the construct in another CDK app", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_docs_example_runs_as_written_and_builds_what_it_describes() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(docs_example(), "docs/sagemaker.md", "exec"), namespace)
    stack = namespace["stack"]
    template = Template.from_stack(stack)
    pools = variant(template)["InstancePools"]
    assert [(p["InstanceType"], p["Priority"]) for p in pools] == [
        ("ml.g6e.12xlarge", 1),
        ("ml.g6e.24xlarge", 2),
    ]
    assert variant(template)["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    requirements = only(template, "AWS::SageMaker::InferenceComponent")["Properties"]["Specification"]
    assert requirements["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 4
    env = environment(template)
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "32768" and env["SM_VLLM_ENABLE_PREFIX_CACHING"] == "true"
    assert stack.llm.scaling.idle_alarm is not None
    assert stack.concurrency.metric_name == "ConcurrentRequestsPerCopy"
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Action": [
                                "sagemaker:InvokeEndpoint",
                                "sagemaker:InvokeEndpointWithResponseStream",
                                "sagemaker:CallWithBearerToken",
                            ]
                        }
                    )
                ]
            },
            "Roles": [{"Ref": logical_id(stack.node.find_child("App"))}],
        },
    )


def _new_bucket_warnings(weights_stack: str) -> list[Any]:
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    bucket = s3.Bucket(cdk.Stack(app, "Storage") if weights_stack == "other" else stack, "Weights")
    weights = (
        ModelWeights.from_s3_uri("s3://existing-models/m/")
        if weights_stack == "none"
        else ModelWeights.from_bucket(bucket, "models/m/")
    )
    SageMakerLlmEndpoint(
        stack,
        "Llm",
        weights=weights,
        instance_types=["ml.g6e.2xlarge"],
        vpc=ec2.Vpc(stack, "Vpc", restrict_default_security_group=False),
    )
    return Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("a bucket this stack creates")
    )


def test_weights_in_a_bucket_of_the_endpoints_own_stack_warn_with_the_two_steps() -> None:
    """Both created by one deploy, the bucket is empty when the inference component downloads: rollback."""
    (warning,) = _new_bucket_warnings("same")
    assert "Deploy the bucket without this endpoint first, upload the weights" in str(warning.entry.data)


@pytest.mark.parametrize("weights_stack", ["other", "none"])
def test_weights_in_another_stacks_bucket_or_an_existing_prefix_do_not_warn(weights_stack: str) -> None:
    assert _new_bucket_warnings(weights_stack) == []
