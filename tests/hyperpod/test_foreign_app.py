"""docs/hyperpod.md's composition in a user's own app: under aws-cdk's default feature flags and under the
project's cdk.json flags, neither cdk-nag's AwsSolutions pack nor the project's InferenceChecks reports a finding
on any resource the library created (the lifecycle-script upload, the HyperPod buckets, the kubectl provider)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.constructs import (
    EksCluster,
    HyperPodCluster,
    HyperPodDependencyChart,
    HyperPodInferenceOperator,
    HyperPodInstanceGroup,
    HyperPodNetwork,
)
from inference_tiers.constructs.hyperpod.network import hyperpod_ips_per_instance
from tests.harness import FLAG_SETS, foreign_app_findings
from tests.hyperpod.support import write_minimal_chart

ACCOUNT = cdk.Environment(account="111122223333", region="us-east-1")


def _composition(chart_dir: Path) -> object:
    def compose(app: cdk.App) -> list[Construct]:
        stack = cdk.Stack(app, "MyHyperPod", env=ACCOUNT)
        network = HyperPodNetwork(
            stack,
            "Network",
            availability_zone_id="use1-az4",
            required_ip_addresses=2 * hyperpod_ips_per_instance("ml.p5.48xlarge"),
        )
        eks = EksCluster(stack, "Eks", vpc=network.vpc)
        chart = HyperPodDependencyChart(stack, "Chart", cluster=eks.cluster, chart_directory=chart_dir)
        hyperpod = HyperPodCluster(
            stack,
            "HyperPod",
            cluster=eks.cluster,
            subnets=[network.hyperpod_subnet],
            security_groups=[network.security_group],
            instance_groups=[
                HyperPodInstanceGroup(name="p5", instance_type="ml.p5.48xlarge", instance_count=2)
            ],
            dependency_chart=chart,
            wait_for=list(eks.addons.values()),
        )
        operator = HyperPodInferenceOperator(
            stack,
            "Operator",
            cluster=eks.cluster,
            hyperpod_cluster=hyperpod,
            model_buckets=[s3.Bucket.from_bucket_name(stack, "Models", "my-model-weights")],
        )
        return [network, eks, chart, hyperpod, operator]

    return compose


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_no_nag_finding_in_the_users_app(flags: str, tmp_path: Path) -> None:
    assert foreign_app_findings(_composition(write_minimal_chart(tmp_path)), flags) == []
