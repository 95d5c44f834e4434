"""The LiteLLM gateway in a user's own app, in the user's own VPC and stack: under aws-cdk's default feature
flags and under the project's cdk.json flags, neither cdk-nag's AwsSolutions pack nor the project's
InferenceChecks reports a finding on any resource the library created."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from inference_tiers.constructs.bedrock import (
    CrossRegionProfile,
    Geography,
    ImportedGuardrail,
    ModelInvocationLogging,
)
from inference_tiers.constructs.gateway import BedrockTarget, LiteLLMGateway
from tests.harness import FLAG_SETS, foreign_app_findings

GUARDRAIL = ImportedGuardrail(
    guardrail_arn="arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", guardrail_version="2"
)
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def _compose(app: cdk.App) -> list[Construct]:
    network = cdk.Stack(app, "UserNetwork")
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=1)
    vpc.add_flow_log("FlowLog")
    service = cdk.Stack(app, "UserService")
    gateway = LiteLLMGateway(
        service,
        "Gateway",
        vpc=vpc,
        models=[
            BedrockTarget(
                "nova",
                CrossRegionProfile(model_id="amazon.nova-2-lite-v1:0", geography=Geography.US),
                GUARDRAIL,
            )
        ],
        certificate=acm.Certificate.from_certificate_arn(service, "Cert", CERTIFICATE),
    )
    # Invoking Bedrock without invocation logging is the app's finding (InferenceTiers-BR5), not the library's:
    # the documented composition turns logging on.
    return [gateway, ModelInvocationLogging(service, "Logging")]


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_no_nag_finding_in_the_users_app(flags: str) -> None:
    assert foreign_app_findings(_compose, flags) == []
