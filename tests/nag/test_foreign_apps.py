"""Issue 29, item 6: the library's constructs in a user's own app, each composed in the user's own stacks as its
docs page shows. Under aws-cdk's default feature flags and under the project's cdk.json flags, neither cdk-nag's
AwsSolutions pack nor the project's InferenceChecks reports a finding on any resource the library created (its
own findings are fixed or acknowledged on its own resources, never left to the user)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from inference_tiers.constructs import (
    ClusterExporters,
    EksCluster,
    InferenceGateway,
    ModelWeights,
    ObservabilityHub,
    SageMakerLlmEndpoint,
    ScalingOptions,
)
from inference_tiers.k8s.efa_exporter import EfaExporterSpec
from inference_tiers.k8s.inference_gateway import LoraAdapter, ModelPool, PoolScaling
from inference_tiers.k8s.inference_gateway_scaling import PrometheusMetrics, ScaledTarget
from inference_tiers.observability.rules import AlertThresholds
from tests.bedrock.test_foreign_app import user_stacks as bedrock_stacks
from tests.disaggregated.test_foreign_app import user_stacks as disaggregated_stacks
from tests.harness import FLAG_SETS, PROJECT_ROOT, foreign_app_findings
from tests.observability.test_hub import CLUSTER, GROUPS, SUBNETS

# docs/observability.md's scraper of a cluster the app does not manage.
SCRAPER = {
    "cluster_arn": CLUSTER,
    "subnet_ids": SUBNETS,
    "security_group_ids": GROUPS,
    "cluster_label": "inference",
}


def _sagemaker(app: cdk.App) -> Sequence[IConstruct]:
    """docs/sagemaker.md: the endpoint in the user's VPC, invoke (with bearer tokens) granted to the user's role."""
    stack = cdk.Stack(app, "MyStack")
    llm = SageMakerLlmEndpoint(
        stack,
        "Llm",
        weights=ModelWeights.from_s3_uri("s3://my-models/qwen3-32b/"),
        instance_types=["ml.g6e.12xlarge", "ml.g6e.24xlarge"],
        engine="vllm",
        tensor_parallel_degree=4,
        max_model_len=32768,
        engine_args={"enable-prefix-caching": "true"},
        vpc=ec2.Vpc(stack, "Vpc", max_azs=2),
        scaling=ScalingOptions(
            min_capacity=1,
            max_capacity=4,
            target_concurrency=8,
            scale_to_zero=True,
            idle_scale_in=Duration.hours(2),
        ),
    )
    app_role = iam.Role(stack, "App", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    llm.grant_invoke(app_role, bearer_token=True)
    return [llm, app_role]  # the grant's statements on the user's role are the library's


def _observability(app: cdk.App) -> Sequence[IConstruct]:
    """docs/observability.md: the hub with a scraper of a cluster the app does not manage, and the exporters in
    the stack of the user's own cluster."""
    stack = cdk.Stack(app, "Observability")
    hub = ObservabilityHub(
        stack,
        "Hub",
        thresholds=AlertThresholds(ttft_p90_seconds=1.5, queue_depth=10),
        retention_days=90,
        alarm_email="oncall@example.com",
    )
    hub.add_eks_scraper("Scraper", **SCRAPER)
    cluster_stack = cdk.Stack(app, "Cluster")
    eks = EksCluster(cluster_stack, "Eks")
    exporters = ClusterExporters(
        cluster_stack,
        "Exporters",
        cluster=eks.cluster,
        efa_exporter=EfaExporterSpec(node_labels={"inference-tiers/node-pool": "gpu-efa"}),
    )
    return [hub, eks, exporters]


def _inference_gateway(app: cdk.App) -> Sequence[IConstruct]:
    """docs/inference-gateway.md: the gateway with a LoRA adapter and KEDA scaling on the user's AMP workspace."""
    stack = cdk.Stack(app, "MyGateway", env=cdk.Environment(account="123456789012", region="us-west-2"))
    eks = EksCluster(stack, "Eks")
    pool = ModelPool(
        name="qwen",
        namespace="models",
        selector={"app": "qwen"},
        model_name="qwen3-8b",
        adapters=[LoraAdapter("sql-lora", "s3://my-adapters/sql-lora")],
    )
    gateway = InferenceGateway(
        stack,
        "Gateway",
        cluster=eks.cluster,
        namespace="models",
        backend=pool,
        scaled_targets=[ScaledTarget("qwen", {"namespace": "models", "app": "qwen"}, PoolScaling(0, 4))],
        metrics=PrometheusMetrics(
            url="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef",
            region="us-west-2",
        ),
    )
    return [eks, gateway]


def _platform(app: cdk.App) -> Sequence[IConstruct]:
    """docs/platform.md "Compose the platform in your own app", run as written in the user's ``app``: every
    resource of its stack is the library's."""
    text = (PROJECT_ROOT / "docs" / "platform.md").read_text()
    section = text.split("## Compose the platform in your own app", 1)[1]
    source = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "app = cdk.App()" in source and "app.synth()" in source
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    exec(
        source.replace("app = cdk.App()", "app = _user_app").replace("app.synth()", ""),
        {**namespace, "_user_app": app},
    )
    return [app.node.find_child("MyPlatform")]


COMPOSITIONS: dict[str, Callable[[cdk.App], Sequence[IConstruct]]] = {
    "sagemaker": _sagemaker,
    "observability": _observability,
    "inference-gateway": _inference_gateway,
    # Whole stacks: the user's roles hold the library's grants.
    "bedrock": lambda app: list(bedrock_stacks(app).values()),
    # The user's network stack (its flow log's retention, InferenceTiers-LOG1) is the user's own to judge.
    "disaggregated": lambda app: [s for n, s in disaggregated_stacks(app).items() if n != "UserNetwork"],
    "platform": _platform,
}


@pytest.mark.parametrize("flags", FLAG_SETS)
@pytest.mark.parametrize("tier", COMPOSITIONS)
def test_no_nag_finding_on_the_librarys_resources_in_the_users_app(tier: str, flags: str) -> None:
    assert foreign_app_findings(COMPOSITIONS[tier], flags) == []
