"""SM1-SM4 on compliant and non-compliant construct trees, validated with pack.validate_scope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker

from tests.nag.support import findings, new_stack

KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ENDPOINT = "arn:aws:sagemaker:us-east-1:111122223333:endpoint/llm"


def _endpoint_config(stack: Any, instance_type: str, **props: Any) -> sagemaker.CfnEndpointConfig:
    return sagemaker.CfnEndpointConfig(
        stack,
        "Config",
        production_variants=[
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="AllTraffic", instance_type=instance_type, initial_instance_count=1
            )
        ],
        **props,
    )


# SM1


def test_sm1_ebs_instance_with_a_key_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _endpoint_config(stack, "ml.c7i.xlarge", kms_key_id=KEY)
    assert findings(stack, "InferenceTiers-SM1") == {}


def test_sm1_local_nvme_instance_needs_no_volume_key(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _endpoint_config(stack, "ml.g6e.2xlarge")
    assert findings(stack, "InferenceTiers-SM1") == {}


def test_sm1_each_unencrypted_store_is_its_own_finding(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _endpoint_config(
        stack,
        "ml.c7i.xlarge",
        data_capture_config=sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input")],
            destination_s3_uri="s3://bucket/capture",
            initial_sampling_percentage=10,
        ),
        async_inference_config=sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path="s3://b/o"
            )
        ),
    )
    path = ["Test/Config"]
    assert findings(stack, "InferenceTiers-SM1") == {
        "InferenceTiers-SM1[AsyncOutput]": path,
        "InferenceTiers-SM1[DataCapture]": path,
        "InferenceTiers-SM1[Volume]": path,
    }


def test_sm1_an_ebs_pool_beside_an_nvme_one_needs_the_volume_key(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    sagemaker.CfnEndpointConfig(
        stack,
        "Config",
        production_variants=[
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="A", instance_type="ml.g5.2xlarge", initial_instance_count=1
            ),
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="B", instance_type="ml.m7i.2xlarge", initial_instance_count=1
            ),
        ],
    )
    assert findings(stack, "InferenceTiers-SM1") == {"InferenceTiers-SM1[Volume]": ["Test/Config"]}


# SM2


def _model(stack: Any, **props: Any) -> sagemaker.CfnModel:
    return sagemaker.CfnModel(
        stack,
        "Model",
        execution_role_arn="arn:aws:iam::111122223333:role/r",
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
            image="111122223333.dkr.ecr.us-east-1.amazonaws.com/vllm:1"
        ),
        **props,
    )


def test_sm2_isolated_model_in_a_vpc_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _model(
        stack,
        enable_network_isolation=True,
        vpc_config=sagemaker.CfnModel.VpcConfigProperty(security_group_ids=["sg-1"], subnets=["subnet-1"]),
    )
    assert findings(stack, "InferenceTiers-SM2") == {}


def test_sm2_open_model_fails_for_vpc_and_isolation(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _model(stack)
    assert findings(stack, "InferenceTiers-SM2") == {
        "InferenceTiers-SM2[NetworkIsolation]": ["Test/Model"],
        "InferenceTiers-SM2[VpcConfig]": ["Test/Model"],
    }


# SM3


def _grant(stack: Any, actions: list[str], resources: list[str]) -> None:
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=actions, resources=resources))


def test_sm3_invoke_on_one_endpoint_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _grant(stack, ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"], [ENDPOINT])
    assert findings(stack, "InferenceTiers-SM3") == {}


def test_sm3_invoke_on_every_endpoint_fails_per_action(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _grant(stack, ["sagemaker:InvokeEndpoint", "sagemaker:Invoke*", "sagemaker:DescribeEndpoint"], ["*"])
    path = ["Test/Caller/DefaultPolicy/Resource"]
    assert findings(stack, "InferenceTiers-SM3") == {
        "InferenceTiers-SM3[Action::sagemaker:Invoke*]": path,
        "InferenceTiers-SM3[Action::sagemaker:InvokeEndpoint]": path,
    }


# SM4


def test_sm4_trust_bounded_by_source_account_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    iam.Role(
        stack,
        "Execution",
        assumed_by=iam.ServicePrincipal(
            "sagemaker.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
        ),
    )
    assert findings(stack, "InferenceTiers-SM4") == {}


def test_sm4_unbounded_sagemaker_trust_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    iam.Role(stack, "Execution", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    iam.Role(stack, "Other", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    assert findings(stack, "InferenceTiers-SM4") == {"InferenceTiers-SM4": ["Test/Execution/Resource"]}
