"""A small stack with one of each aws-cdk framework function the project meets, and decoys named like them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import custom_resources as cr
from constructs import Construct

from inference_tiers.constructs.common.checkov import FrameworkFunctionSkips
from inference_tiers.constructs.common.storage import access_logs_bucket, private_bucket


@dataclass
class FrameworkStack:
    app: cdk.App
    stack: cdk.Stack
    provider: cr.Provider
    user_handler: lambda_.Function
    decoys: list[lambda_.Function]

    def logical_id(self, construct: Construct) -> str:
        resource = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
        assert isinstance(resource, cdk.CfnElement)
        return self.stack.get_logical_id(resource)


def _function(scope: Construct, construct_id: str) -> lambda_.Function:
    return lambda_.Function(
        scope,
        construct_id,
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
    )


def framework_stack(outdir: Path) -> FrameworkStack:
    """The stack, with FrameworkFunctionSkips applied to the app (as build_app does); ``outdir`` under tmp_path."""
    app = cdk.App(outdir=str(outdir))
    cdk.Aspects.of(app).add(FrameworkFunctionSkips())
    stack = cdk.Stack(app, "Framework")
    # restrict_default_security_group adds aws-cdk's Custom::VpcRestrictDefaultSG CustomResourceProvider.
    ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        nat_gateways=0,
        restrict_default_security_group=True,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )
    user_handler = _function(stack, "UserHandler")
    provider = cr.Provider(stack, "Provider", on_event_handler=user_handler)
    cdk.CustomResource(stack, "Resource", service_token=provider.service_token)
    logs = access_logs_bucket(stack, "AccessLogs")
    bucket = private_bucket(stack, "Bucket", key=None, access_logs=logs, access_logs_prefix="bucket/")
    s3_deployment.BucketDeployment(
        stack,
        "Deployment",
        sources=[s3_deployment.Source.data("hello.txt", "hello")],
        destination_bucket=bucket,
    )
    cr.AwsCustomResource(
        stack,
        "Call",
        on_create=cr.AwsSdkCall(
            service="STS", action="getCallerIdentity", physical_resource_id=cr.PhysicalResourceId.of("id")
        ),
        policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=cr.AwsCustomResourcePolicy.ANY_RESOURCE),
        install_latest_aws_sdk=False,
    )
    # A user's functions whose ids are those of framework functions: they must get no skip.
    decoys = [
        _function(Construct(stack, "NotAProvider"), "framework-onEvent"),
        _function(Construct(stack, "KubectlProvider"), "Handler"),
    ]
    return FrameworkStack(app, stack, provider, user_handler, decoys)
