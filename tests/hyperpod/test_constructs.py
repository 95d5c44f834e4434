"""The HyperPod constructs on their own, on a plain aws_eks_v2.Cluster (no EksCluster, no tier settings)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Annotations, Match, Template
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from inference_tiers.constructs import (
    HyperPodCluster,
    HyperPodDependencyChart,
    HyperPodInferenceOperator,
    HyperPodInstanceGroup,
    HyperPodModelEndpoint,
    HyperPodNetwork,
    HyperPodTaint,
)
from inference_tiers.constructs.eks.cluster import as_cluster_ref
from inference_tiers.constructs.hyperpod.dependencies import MISSING_CHART_PLACEHOLDER
from inference_tiers.constructs.hyperpod.inference_operator import DEFAULT_ADDON_VERSIONS, INFERENCE_ADDON
from inference_tiers.constructs.hyperpod.network import hyperpod_ips_per_instance
from inference_tiers.k8s.hyperpod_inference import InferenceEndpoint, RequestLimits, S3ModelSource, VllmWorker
from tests.hyperpod.support import (
    depends_on,
    logical_ids,
    only,
    validate_inference_endpoint_config,
    write_minimal_chart,
)

P5 = HyperPodInstanceGroup(name="p5", instance_type="ml.p5.48xlarge", instance_count=2)


class Parts:
    def __init__(
        self,
        chart_dir: Path,
        groups: tuple[HyperPodInstanceGroup, ...] = (P5,),
        operator_build: str = DEFAULT_ADDON_VERSIONS[INFERENCE_ADDON],
    ) -> None:
        self.app = cdk.App(context={"aws:cdk:bundling-stacks": []})
        self.stack = cdk.Stack(self.app, "Test")
        self.network = HyperPodNetwork(self.stack, "Network", availability_zone_id="use1-az4")
        self.cluster = as_cluster_ref(
            eks.Cluster(
                self.stack,
                "Eks",
                version=eks.KubernetesVersion.V1_35,
                vpc=self.network.vpc,
                default_capacity=0,
                default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
                kubectl_provider_options=eks.KubectlProviderOptions(
                    kubectl_layer=KubectlV35Layer(self.stack, "Kubectl")
                ),
            )
        )
        self.chart = HyperPodDependencyChart(
            self.stack, "Chart", cluster=self.cluster, chart_directory=chart_dir
        )
        self.hyperpod = HyperPodCluster(
            self.stack,
            "HyperPod",
            cluster=self.cluster,
            subnets=[self.network.hyperpod_subnet],
            security_groups=[self.network.security_group],
            instance_groups=groups,
            dependency_chart=self.chart,
        )
        self.operator = HyperPodInferenceOperator(
            self.stack,
            "Operator",
            cluster=self.cluster,
            hyperpod_cluster=self.hyperpod,
            addon_versions={**DEFAULT_ADDON_VERSIONS, INFERENCE_ADDON: operator_build},
        )

    def endpoint(self, instance_type: str, **options: Any) -> HyperPodModelEndpoint:
        return HyperPodModelEndpoint(
            self.stack,
            "Model",
            cluster=self.cluster,
            hyperpod_cluster=self.hyperpod,
            operator=self.operator,
            endpoint=InferenceEndpoint(
                name="qwen",
                instance_types=(instance_type,),
                model_source=S3ModelSource(bucket_name="weights", region="us-east-1", location="qwen"),
                worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=1),
                **options,
            ),
        )

    def template(self) -> Mapping[str, Any]:
        return Template.from_stack(self.stack).to_json()


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_minimal_chart(tmp_path_factory.mktemp("chart") / "HyperPodHelmChart")


def test_constructs_compose_on_a_plain_cluster_in_order(chart_dir: Path) -> None:
    parts = Parts(chart_dir)
    parts.endpoint("ml.p5.48xlarge")
    template = parts.template()
    hyperpod = only(logical_ids(template, "AWS::SageMaker::Cluster"))
    chart = only(logical_ids(template, "Custom::AWSCDK-EKS-HelmChart"))
    barrier = only(logical_ids(template, "Custom::HyperPodNodesReady"))
    inference = only(
        logical_ids(template, "AWS::EKS::Addon", AddonName="amazon-sagemaker-hyperpod-inference")
    )
    manifest = only(logical_ids(template, "Custom::AWSCDK-EKS-KubernetesResource"))
    assert chart in depends_on(template, hyperpod)
    assert hyperpod in depends_on(template, barrier)
    assert barrier in depends_on(template, inference)
    assert inference in depends_on(template, manifest)
    assert template["Resources"][barrier]["Properties"]["InstanceGroups"] == {"p5": "2"}


def test_model_instance_type_must_be_in_an_instance_group(chart_dir: Path) -> None:
    parts = Parts(chart_dir)
    with pytest.raises(
        ValueError,
        match=r"HyperPodModelEndpoint: parameter 'endpoint.instance_types\[0\]' got 'ml.g6e.12xlarge'; expected an "
        r"instance type of the HyperPod cluster's instance groups: ml.p5.48xlarge",
    ):
        parts.endpoint("ml.g6e.12xlarge")


def test_a_field_the_pinned_add_on_build_lacks_is_refused_at_synth(chart_dir: Path) -> None:
    """spec.worker.requestLimits is in the operator CRD from chart 2.1.0 (sagemaker-hyperpod-cli d5e7256), not
    in chart 2.0.0's (51b8dd2), which add-on v1.0.0-eksbuild.1 carries: kubectl would reject the manifest."""
    limits = RequestLimits(max_concurrent_requests=32)
    with pytest.raises(
        ValueError,
        match=r"HyperPodModelEndpoint: parameter 'endpoint.request_limits' got a RequestLimits; expected an "
        r"endpoint without spec.worker.requestLimits \(request limits\): amazon-sagemaker-hyperpod-inference "
        r"v1.0.0-eksbuild.1 ships operator 3.0 \(chart 2.0.0, CRD at 51b8dd2\), whose CRD lacks it \(first in "
        r"operator 3.1 \(chart 2.1.0, CRD at d5e7256\)\); pin amazon-sagemaker-hyperpod-inference "
        r"v2.0.0-eksbuild.2 or later to use it",
    ):
        Parts(chart_dir).endpoint("ml.p5.48xlarge", request_limits=limits)
    model = Parts(chart_dir, operator_build="v2.0.0-eksbuild.2").endpoint(
        "ml.p5.48xlarge", request_limits=limits
    )
    validate_inference_endpoint_config(model.document, "v2.0.0-eksbuild.2")


def test_an_add_on_build_of_unknown_operator_is_refused(chart_dir: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"HyperPodInferenceOperator: parameter 'addon_versions\[amazon-sagemaker-hyperpod-inference\]' got "
        r"'v1.1.0-eksbuild.1'; expected a build whose operator is known: v1.0.0-eksbuild.1, v2.0.0-eksbuild.2",
    ):
        Parts(chart_dir, operator_build="v1.1.0-eksbuild.1")


def test_custom_taints_with_deep_health_checks_are_rejected() -> None:
    taint = HyperPodTaint(key="dedicated", value="inference")
    with pytest.raises(
        ValueError,
        match=r"HyperPodInstanceGroup: parameter 'taints' got \['dedicated'\]; expected no taints with deep",
    ):
        HyperPodInstanceGroup(name="p5", instance_type="ml.p5.48xlarge", instance_count=1, taints=(taint,))
    group = HyperPodInstanceGroup(
        name="p5", instance_type="ml.p5.48xlarge", instance_count=1, taints=(taint,), deep_health_checks=()
    )
    assert group.taints == (taint,)


def test_taints_and_labels_render_without_deep_health_checks(chart_dir: Path) -> None:
    group = HyperPodInstanceGroup(
        name="tainted",
        instance_type="ml.g6e.12xlarge",
        instance_count=1,
        deep_health_checks=(),
        labels={"team": "a"},
        taints=(HyperPodTaint(key="dedicated", value="inference"),),
        training_plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/plan-1",
    )
    template = Parts(chart_dir, groups=(group,)).template()
    rendered = template["Resources"][only(logical_ids(template, "AWS::SageMaker::Cluster"))]["Properties"]
    (instance_group,) = rendered["InstanceGroups"]
    assert instance_group["KubernetesConfig"] == {
        "Labels": {"team": "a"},
        "Taints": [{"Effect": "NoSchedule", "Key": "dedicated", "Value": "inference"}],
    }
    assert "OnStartDeepHealthChecks" not in instance_group
    assert instance_group["TrainingPlanArn"].endswith("training-plan/plan-1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads_per_core": 3}, r"'threads_per_core' got 3; expected one of 1, 2"),
        (
            {"instance_type": "p5.48xlarge"},
            r"'instance_type' got 'p5.48xlarge'; expected an instance type of SageMaker's ClusterInstanceType",
        ),
        ({"deep_health_checks": ("InstanceFlops",)}, r"'deep_health_checks\[0\]' got 'InstanceFlops'"),
        ({"name": "bad_name"}, r"HyperPodInstanceGroup: parameter 'name' got 'bad_name'"),
        ({"training_plan_arn": "plan-1"}, r"'training_plan_arn' got 'plan-1'"),
    ],
)
def test_instance_group_validation(kwargs: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"name": "g", "instance_type": "ml.g5.12xlarge", "instance_count": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        HyperPodInstanceGroup(**values)


def test_duplicate_instance_groups_are_rejected(chart_dir: Path) -> None:
    with pytest.raises(
        ValueError, match=r"'instance_groups' got \['p5', 'p5'\]; expected instance groups with unique names"
    ):
        Parts(chart_dir, groups=(P5, P5))


def _chart_in_a_foreign_app(chart_directory: Path | None) -> tuple[cdk.Stack, bool]:
    """A user's own app with nothing but an EKS cluster and the dependency chart (no tier stack's guard)."""
    stack = cdk.Stack(cdk.App(context={"aws:cdk:bundling-stacks": []}), "Own")
    cluster = eks.Cluster(
        stack,
        "Eks",
        version=eks.KubernetesVersion.V1_35,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )
    chart = HyperPodDependencyChart(stack, "Deps", cluster=cluster, chart_directory=chart_directory)
    return stack, chart.fetched


@pytest.mark.parametrize("chart_directory", [None, MISSING_CHART_PLACEHOLDER], ids=["default", "placeholder"])
def test_a_placeholder_chart_warns_and_stops_the_deploy_in_any_app(chart_directory: Path | None) -> None:
    stack, fetched = _chart_in_a_foreign_app(chart_directory)
    assert fetched is False
    (warning,) = Annotations.from_stack(stack).find_warning(
        "/Own/Deps", Match.string_like_regexp("HyperPod dependency Helm chart is not packaged")
    )
    assert "fetch-dependency-chart.sh" in warning.entry.data
    rules = Template.from_stack(stack).to_json()["Rules"]
    ((assertion,),) = [
        rule["Assertions"] for name, rule in rules.items() if name.startswith("DepsChartPackaged")
    ]
    assert assertion["Assert"] == {"Fn::Equals": ["not-packaged", "packaged"]}
    assert "fetch-dependency-chart.sh" in assertion["AssertDescription"]


def test_a_packaged_chart_needs_no_warning_or_deploy_rule(tmp_path: Path) -> None:
    stack, fetched = _chart_in_a_foreign_app(write_minimal_chart(tmp_path / "chart"))
    assert fetched is True
    assert Annotations.from_stack(stack).find_warning("*", Match.any_value()) == []
    assert not [name for name in Template.from_stack(stack).to_json()["Rules"] if "ChartPackaged" in name]


def test_chart_directory_must_hold_packaged_dependencies(tmp_path: Path) -> None:
    unpackaged = write_minimal_chart(tmp_path / "unpackaged", package_dependencies=False)
    with pytest.raises(
        ValueError,
        match=r"'chart_directory' got .*the packaged sub-charts nvidia-device-plugin-0.16.1 in charts/.*fetch-",
    ):
        Parts(unpackaged)
    with pytest.raises(ValueError, match=r"expected a directory with Chart.yaml"):
        Parts(tmp_path / "absent")
    with pytest.raises(
        ValueError, match=r"expected a directory with Chart.yaml"
    ):  # a name too long for the file system
        Parts(tmp_path / ("x" * 300))


def test_network_sizing_and_az_id_are_validated() -> None:
    assert hyperpod_ips_per_instance("ml.p5.48xlarge") == 81
    assert hyperpod_ips_per_instance("ml.g5.12xlarge") == 50
    stack = cdk.Stack(cdk.App(), "Net")
    with pytest.raises(
        ValueError, match=r"'availability_zone_id' got 'us-east-1a'; expected an Availability Zone ID"
    ):
        HyperPodNetwork(stack, "A", availability_zone_id="us-east-1a")
    with pytest.raises(
        ValueError, match=r"'hyperpod_subnet_cidr' got '10.192.0.0/16'; expected a block outside the VPC"
    ):
        HyperPodNetwork(stack, "B", availability_zone_id="use1-az4", hyperpod_subnet_cidr="10.192.0.0/16")
    with pytest.raises(ValueError, match=r"at least 810 usable addresses"):
        HyperPodNetwork(
            stack,
            "C",
            availability_zone_id="use1-az4",
            hyperpod_subnet_cidr="10.1.0.0/23",
            required_ip_addresses=810,
        )
    with pytest.raises(
        ValueError, match=r"'hyperpod_subnet_cidr' got '10.1.0.0/33'; expected an IPv4 CIDR block"
    ):
        HyperPodNetwork(stack, "D", availability_zone_id="use1-az4", hyperpod_subnet_cidr="10.1.0.0/33")


def test_network_security_group_is_connectable() -> None:
    stack = cdk.Stack(cdk.App(), "Net")
    network = HyperPodNetwork(stack, "Network", availability_zone_id="use1-az4")
    assert isinstance(network.security_group, ec2.SecurityGroup)
    peer = ec2.SecurityGroup(stack, "Client", vpc=network.vpc)
    network.connections.allow_from(peer, ec2.Port.tcp(8000))
    template = Template.from_stack(stack).to_json()
    assert len(logical_ids(template, "AWS::EC2::SecurityGroupEgress")) == 1
    ingress = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
    ]
    assert any(i["IpProtocol"] == "tcp" and i["FromPort"] == 8000 for i in ingress)
