"""ModelInvocationLogging: the custom resource's API calls and permissions, destinations, and the singleton rule."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs import ModelInvocationLogging
from tests.harness import nag_findings


@pytest.fixture(scope="module")
def built() -> tuple[cdk.Stack, ModelInvocationLogging, Template]:
    stack = cdk.Stack(cdk.App(), "Stack")
    logging = ModelInvocationLogging(stack, "Logging")
    return stack, logging, Template.from_stack(stack)


def _custom_resource(template: Template) -> dict[str, Any]:
    (resource,) = template.find_resources("Custom::BedrockModelInvocationLogging").values()
    return resource


def _marker(reference: dict[str, Any]) -> str:
    """A Ref/GetAtt as a plain-text marker, so the JSON around it can be parsed."""
    if "Ref" in reference:
        return f"<Ref {reference['Ref']}>"
    return "<GetAtt {}.{}>".format(*reference["Fn::GetAtt"])


def _sdk_call(value: Any) -> dict[str, Any]:
    """The AwsSdkCall JSON of a Create/Update/Delete property, with CloudFormation references as markers."""
    if isinstance(value, str):
        result: dict[str, Any] = json.loads(value)
        return result
    parts = value["Fn::Join"][1]
    result = json.loads("".join(p if isinstance(p, str) else _marker(p) for p in parts))
    return result


def test_create_and_update_put_the_configuration_and_delete_removes_it(built: Any) -> None:
    stack, logging, template = built
    resource = _custom_resource(template)
    ref = lambda token: _marker(stack.resolve(token))  # noqa: E731
    put = {
        "service": "Bedrock",
        "action": "PutModelInvocationLoggingConfiguration",
        "parameters": {
            "loggingConfig": {
                "textDataDeliveryEnabled": True,
                "imageDataDeliveryEnabled": False,
                "embeddingDataDeliveryEnabled": False,
                "videoDataDeliveryEnabled": False,
                "audioDataDeliveryEnabled": False,
                "s3Config": {
                    "bucketName": ref(logging.bucket.bucket_name),
                    "keyPrefix": "bedrock-invocation-logs",
                },
                "cloudWatchConfig": {
                    "logGroupName": ref(logging.log_group.log_group_name),
                    "roleArn": ref(logging.role.role_arn),
                },
            }
        },
        "physicalResourceId": {"id": "bedrock-model-invocation-logging"},
    }
    props = resource["Properties"]
    assert _sdk_call(props["Create"]) == put
    assert _sdk_call(props["Update"]) == put
    assert _sdk_call(props["Delete"]) == {
        "service": "Bedrock",
        "action": "DeleteModelInvocationLoggingConfiguration",
    }
    assert props["InstallLatestAwsSdk"] is False


def test_custom_resource_runs_after_its_destinations_and_their_permissions(built: Any) -> None:
    stack, logging, template = built
    depends_on = set(_custom_resource(template)["DependsOn"])
    waits_for = {logging.bucket.policy, logging.role.node.find_child("DefaultPolicy")}
    assert {stack.get_logical_id(c.node.default_child) for c in waits_for} <= depends_on
    # The bucket, log group and role are referenced by the call itself, so CloudFormation orders them too.
    create = json.dumps(_custom_resource(template)["Properties"]["Create"])
    for construct in (logging.bucket, logging.log_group, logging.role):
        assert stack.get_logical_id(construct.node.default_child) in create


def test_custom_resource_policy_is_least_privilege(built: Any) -> None:
    stack, logging, template = built
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("CustomResourcePolicy")}}
    )
    (policy,) = policies.values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    statements[0]["Action"].sort()  # the order depends on the app's @aws-cdk/aws-iam:minimizePolicies flag
    assert statements == [
        {
            "Action": [
                "bedrock:DeleteModelInvocationLoggingConfiguration",
                "bedrock:PutModelInvocationLoggingConfiguration",
            ],
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
            "Effect": "Allow",
            "Resource": stack.resolve(logging.role.role_arn),
        },
    ]


def test_bedrock_role_is_confined_to_this_account_and_region_and_writes_one_log_group(built: Any) -> None:
    stack, logging, template = built
    source = {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {
            "aws:SourceArn": stack.resolve(f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:*")
        },
    }
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"Service": "bedrock.amazonaws.com"},
                        "Condition": source,
                    }
                ]
            }
        },
    )
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [stack.resolve(logging.role.role_name)],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                        "Effect": "Allow",
                        "Resource": stack.resolve(logging.log_group.log_group_arn),
                    }
                ]
            },
        },
    )
    # Bedrock may write only its own log prefix in the bucket, with the same source conditions.
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": stack.resolve(logging.bucket.bucket_name),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": "s3:PutObject",
                            "Effect": "Allow",
                            "Principal": {"Service": "bedrock.amazonaws.com"},
                            "Resource": stack.resolve(
                                logging.bucket.arn_for_objects(
                                    f"bedrock-invocation-logs/AWSLogs/{stack.account}/BedrockModelInvocationLogs/*"
                                )
                            ),
                            "Condition": source,
                        }
                    ]
                )
            },
        },
    )


def test_destinations_are_encrypted_private_tls_only_and_retained(built: Any) -> None:
    stack, logging, template = built
    key_arn = stack.resolve(logging.kms_key.key_arn)
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "DeletionPolicy": "Retain",
            "Properties": {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {
                            "BucketKeyEnabled": True,
                            "ServerSideEncryptionByDefault": {
                                "SSEAlgorithm": "aws:kms",
                                "KMSMasterKeyID": key_arn,
                            },
                        }
                    ]
                },
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "LoggingConfiguration": {
                    "DestinationBucketName": stack.resolve(logging.access_logs_bucket.bucket_name)
                },
                "LifecycleConfiguration": {
                    "Rules": Match.array_with([Match.object_like({"ExpirationInDays": 365})])
                },
            },
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": stack.resolve(logging.bucket.bucket_name),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            },
        },
    )
    template.has_resource(
        "AWS::Logs::LogGroup",
        {"DeletionPolicy": "Retain", "Properties": {"KmsKeyId": key_arn, "RetentionInDays": 365}},
    )
    template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {"Service": "bedrock.amazonaws.com"},
                                "Action": "kms:GenerateDataKey",
                            }
                        ),
                        Match.object_like(
                            {"Principal": {"Service": stack.resolve(f"logs.{stack.region}.amazonaws.com")}}
                        ),
                    ]
                )
            },
        },
    )


def test_no_fake_cloudformation_type_is_used(built: Any) -> None:
    _, _, template = built
    types = {r["Type"] for r in template.to_json()["Resources"].values()}
    assert "AWS::Bedrock::ModelInvocationLoggingConfiguration" not in types


def test_nag_passes_on_the_construct_alone(built: Any) -> None:
    stack, _, _ = built
    assert nag_findings(stack, AwsSolutionsChecks()) == []


def test_only_one_per_account_and_region() -> None:
    app = cdk.App()
    ModelInvocationLogging(cdk.Stack(app, "One"), "Logging")
    with pytest.raises(
        ValueError,
        match=r"ModelInvocationLogging: parameter 'scope' got 'Two/Logging'; expected one ModelInvocationLogging "
        r"per account and Region \(the first is at One/Logging\)",
    ):
        ModelInvocationLogging(cdk.Stack(app, "Two"), "Logging")


def test_different_regions_may_each_have_one() -> None:
    app = cdk.App()
    ModelInvocationLogging(
        cdk.Stack(app, "East", env=cdk.Environment(account="111122223333", region="us-east-1")), "L"
    )
    ModelInvocationLogging(
        cdk.Stack(app, "West", env=cdk.Environment(account="111122223333", region="us-west-2")), "L"
    )
    assert len([c for c in app.node.find_all() if isinstance(c, ModelInvocationLogging)]) == 2


def test_each_data_kind_maps_to_its_delivery_flag() -> None:
    stack = cdk.Stack(cdk.App(), "Stack")
    ModelInvocationLogging(stack, "Logging", text_data=False, audio_data=True, video_data=True)
    put = _sdk_call(_custom_resource(Template.from_stack(stack))["Properties"]["Create"])
    flags = {k: v for k, v in put["parameters"]["loggingConfig"].items() if k.endswith("DeliveryEnabled")}
    assert flags == {
        "textDataDeliveryEnabled": False,
        "imageDataDeliveryEnabled": False,
        "embeddingDataDeliveryEnabled": False,
        "videoDataDeliveryEnabled": True,
        "audioDataDeliveryEnabled": True,
    }


def test_a_nested_key_prefix_is_the_same_in_the_api_call_and_the_bucket_policy() -> None:
    stack = cdk.Stack(cdk.App(), "Stack")
    logging = ModelInvocationLogging(stack, "Logging", key_prefix="team-a/bedrock_logs")
    template = Template.from_stack(stack)
    put = _sdk_call(_custom_resource(template)["Properties"]["Create"])
    assert put["parameters"]["loggingConfig"]["s3Config"]["keyPrefix"] == "team-a/bedrock_logs"
    resource = stack.resolve(
        logging.bucket.arn_for_objects(
            f"team-a/bedrock_logs/AWSLogs/{stack.account}/BedrockModelInvocationLogs/*"
        )
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Action": "s3:PutObject", "Resource": resource})]
                )
            }
        },
    )
