"""The EKS base (EksCluster, GpuDevicePlugins) in a user's own app: under aws-cdk's default feature flags and
under the project's cdk.json flags, neither cdk-nag's AwsSolutions pack nor the project's InferenceChecks
reports a finding on any resource the library created."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from constructs import Construct

from inference_tiers.constructs import EksCluster, GpuDevicePlugins
from tests.harness import FLAG_SETS, foreign_app_findings


def _compose(app: cdk.App) -> list[Construct]:
    platform = cdk.Stack(app, "UserPlatform")
    eks = EksCluster(platform, "Eks")
    return [eks, GpuDevicePlugins(platform, "Plugins", cluster=eks.cluster)]


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_no_nag_finding_in_the_users_app(flags: str) -> None:
    assert foreign_app_findings(_compose, flags) == []
