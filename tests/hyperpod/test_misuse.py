"""Every misuse of the HyperPod constructs is an ArgumentError naming the construct, the parameter, the value
and what is accepted (never a TypeError, AttributeError or jsii error); tokens pass where they make sense."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster, HyperPodInstanceGroup
from inference_tiers.constructs.hyperpod.dependencies import HyperPodDependencyChart
from inference_tiers.constructs.hyperpod.inference_operator import (
    DEFAULT_ADDON_VERSIONS,
    HyperPodInferenceOperator,
)
from inference_tiers.constructs.hyperpod.model_endpoint import HyperPodModelEndpoint
from inference_tiers.constructs.hyperpod.network import HyperPodNetwork
from inference_tiers.constructs.hyperpod.observability import HyperPodObservability
from inference_tiers.k8s.hyperpod_inference import (
    AutoScaling,
    CloudWatchTrigger,
    FsxModelSource,
    InferenceEndpoint,
    IntelligentRouting,
    KvCache,
    LoraServing,
    PrometheusTrigger,
    RequestLimits,
    S3ModelSource,
    VllmWorker,
    render_inference_endpoint_config,
)
from inference_tiers.k8s.inference_gateway import LoraAdapter
from tests.harness import cdk_json_context
from tests.hyperpod.support import write_minimal_chart
from tests.misuse import assert_junk_refused_by_name_or_accepted, assert_refused

_ids = itertools.count()
P5 = HyperPodInstanceGroup(name="p5", instance_type="ml.p5.48xlarge", instance_count=1)
ENDPOINT = InferenceEndpoint(
    name="qwen",
    instance_types=("ml.p5.48xlarge",),
    model_source=S3ModelSource(bucket_name="weights", region="us-east-1", location="qwen"),
    worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=1),
)
# The tieredstorage L2 tier is the cluster's TieredStorageConfig: the endpoint's share must be the cluster's.
TIERED_10 = dataclasses.replace(
    ENDPOINT,
    worker=VllmWorker(image="lmcache/vllm-openai:v0.3.7", tensor_parallel_size=1),
    kv_cache=KvCache(l2_backend="tieredstorage", tiered_storage_memory_percent=10),
)
OTHER_TYPE = InferenceEndpoint(
    name="qwen",
    instance_types=("ml.g6e.12xlarge",),
    model_source=S3ModelSource(bucket_name="weights", region="us-east-1", location="qwen"),
    worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=1),
)


class Env:
    """One stack with the whole HyperPod chain; each case builds one construct more under a fresh id."""

    def __init__(self, outdir: Path, chart_dir: Path) -> None:
        app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
        self.stack = cdk.Stack(app, "Misuse")
        self.chart_dir = chart_dir
        self.network = HyperPodNetwork(self.stack, "Network", availability_zone_id="use1-az4")
        self.eks = EksCluster(self.stack, "Eks", vpc=self.network.vpc)
        self.cluster = self.eks.cluster
        self.bare_cluster = eks.Cluster(self.stack, "Bare", version=eks.KubernetesVersion.V1_35)
        self.bucket = s3.Bucket(self.stack, "Weights")
        self.key = kms.Key(self.stack, "AdapterKey", enable_key_rotation=True)
        self.chart = self.build(HyperPodDependencyChart)
        self.hyperpod = self.build(HyperPodCluster)
        self.operator = self.build(HyperPodInferenceOperator)

    def defaults(self, kind: type) -> dict[str, Any]:
        return {
            HyperPodDependencyChart: lambda: {"cluster": self.cluster, "chart_directory": self.chart_dir},
            HyperPodCluster: lambda: {
                "cluster": self.cluster,
                "subnets": [self.network.hyperpod_subnet],
                "security_groups": [self.network.security_group],
                "instance_groups": [P5],
                "dependency_chart": self.chart,
            },
            HyperPodInferenceOperator: lambda: {"cluster": self.cluster, "hyperpod_cluster": self.hyperpod},
            HyperPodModelEndpoint: lambda: {
                "cluster": self.cluster,
                "hyperpod_cluster": self.hyperpod,
                "operator": self.operator,
                "endpoint": ENDPOINT,
            },
            HyperPodObservability: lambda: {"cluster": self.cluster, "hyperpod_cluster": self.hyperpod},
        }[kind]()

    def build(self, kind: type, **props: Any) -> Any:
        return kind(self.stack, f"{kind.__name__}{next(_ids)}", **{**self.defaults(kind), **props})


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    chart = write_minimal_chart(tmp_path_factory.mktemp("chart") / "HyperPodHelmChart")
    return Env(tmp_path_factory.mktemp("cdk.out"), chart)


ARN = "arn:aws:eks:us-east-1:123456789012:cluster/x"
CASES: list[tuple[type, Callable[[Env], dict[str, Any]], str, str]] = [
    (HyperPodDependencyChart, lambda e: {"cluster": ARN}, "cluster", r"not a string"),
    (HyperPodDependencyChart, lambda e: {"cluster": e.bare_cluster}, "cluster", r"kubectl_provider_options"),
    (HyperPodDependencyChart, lambda e: {"chart_directory": str(e.chart_dir)}, "chart_directory", r"pathlib"),
    (HyperPodDependencyChart, lambda e: {"chart_directory": Path("/nonexistent")}, "chart_directory", "Chart.yaml"),
    (HyperPodDependencyChart, lambda e: {"values": [("a", 1)]}, "values", r"a mapping"),
    (HyperPodDependencyChart, lambda e: {"release": "Hyper_Pod"}, "release", r"a Helm release name"),
    (HyperPodCluster, lambda e: {"cluster": ARN}, "cluster", r"an ICluster"),
    (HyperPodCluster, lambda e: {"subnets": []}, "subnets", r"a list of 1 to 16 items"),
    (HyperPodCluster, lambda e: {"subnets": ["subnet-1"]}, "subnets[0]", r"an ISubnet"),
    (HyperPodCluster, lambda e: {"security_groups": "sg-1"}, "security_groups", r"not a list"),
    (HyperPodCluster, lambda e: {"instance_groups": []}, "instance_groups", r"a list of 1 to 100 items"),
    (HyperPodCluster, lambda e: {"instance_groups": [P5, P5]}, "instance_groups", r"unique names"),
    (HyperPodCluster, lambda e: {"instance_groups": [{"name": "p5"}]}, "instance_groups[0]", "HyperPodInstanceGroup"),
    (HyperPodCluster, lambda e: {"dependency_chart": "hyperpod-dependencies"}, "dependency_chart", "DependencyChart"),
    (HyperPodCluster, lambda e: {"wait_for": ["addons"]}, "wait_for[0]", r"an IDependable"),
    (HyperPodCluster, lambda e: {"lifecycle_scripts": e.chart_dir}, "lifecycle_scripts", r"on_create\.sh"),
    (HyperPodCluster, lambda e: {"node_recovery": "automatic"}, "node_recovery", r"one of 'Automatic', 'None'"),
    (HyperPodCluster, lambda e: {"nodes_ready_timeout": 3600}, "nodes_ready_timeout", r"a Duration"),
    (HyperPodCluster, lambda e: {"nodes_ready_timeout": cdk.Duration.hours(3)}, "nodes_ready_timeout", "2 hours"),
    (HyperPodCluster, lambda e: {"access_logs_bucket": "logs"}, "access_logs_bucket", r"an IBucket"),
    (HyperPodCluster, lambda e: {"log_key": "alias/logs"}, "log_key", r"an IKey"),
    (HyperPodInferenceOperator, lambda e: {"cluster": ARN}, "cluster", r"not a string"),
    (HyperPodInferenceOperator, lambda e: {"hyperpod_cluster": e.chart}, "hyperpod_cluster", r"HyperPodCluster"),
    (HyperPodInferenceOperator, lambda e: {"model_buckets": e.bucket}, "model_buckets", r"a list"),
    (HyperPodInferenceOperator, lambda e: {"model_buckets": ["weights"]}, "model_buckets[0]", r"an IBucket"),
    (HyperPodInferenceOperator, lambda e: {"prometheus_workspace_arn": "ws-1"}, "prometheus_workspace_arn", "AMP"
     r"|Managed Prometheus"),
    (HyperPodInferenceOperator, lambda e: {"addon_versions": {}}, "addon_versions", r"missing"),
    (
        HyperPodInferenceOperator,
        lambda e: {"addon_versions": {**DEFAULT_ADDON_VERSIONS, "cert-manager": "1.18.2"}},
        "addon_versions['cert-manager']",
        r"an EKS add-on version",
    ),
    (HyperPodModelEndpoint, lambda e: {"cluster": e.bare_cluster}, "cluster", r"kubectl_provider_options"),
    (HyperPodModelEndpoint, lambda e: {"hyperpod_cluster": ARN}, "hyperpod_cluster", r"a HyperPodCluster"),
    (HyperPodModelEndpoint, lambda e: {"operator": e.hyperpod}, "operator", r"HyperPodInferenceOperator"),
    (HyperPodModelEndpoint, lambda e: {"endpoint": {"name": "qwen"}}, "endpoint", r"an InferenceEndpoint"),
    (HyperPodModelEndpoint, lambda e: {"endpoint": OTHER_TYPE}, "endpoint.instance_types[0]", "instance groups"),
    (HyperPodModelEndpoint, lambda e: {"endpoint": TIERED_10}, "endpoint.kv_cache.tiered_storage_memory_percent",
     r"got 10; expected the HyperPod cluster's tiered_storage_memory_percent \(None\)"),
    (
        HyperPodModelEndpoint,
        lambda e: {"endpoint": TIERED_10, "hyperpod_cluster": e.build(HyperPodCluster, tiered_storage_memory_percent=20)},
        "endpoint.kv_cache.tiered_storage_memory_percent",
        r"got 10; expected the HyperPod cluster's tiered_storage_memory_percent \(20\)",
    ),
    (HyperPodModelEndpoint, lambda e: {"adapter_key": "alias/adapters"}, "adapter_key", r"an IKey"),
    (HyperPodModelEndpoint, lambda e: {"adapter_key": e.key}, "adapter_key", r"no lora adapters"),
    (HyperPodObservability, lambda e: {"cluster": "x"}, "cluster", r"not a string"),
    (HyperPodObservability, lambda e: {"hyperpod_cluster": None}, "hyperpod_cluster", r"got None"),
    (HyperPodObservability, lambda e: {"grafana_workspace": "yes"}, "grafana_workspace", r"True or False"),
    (HyperPodObservability, lambda e: {"addon_version": "1.0.4"}, "addon_version", r"an EKS add-on version"),
    (HyperPodObservability, lambda e: {"addon_version": 1}, "addon_version", r"got 1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "props", "param", "match"), CASES, ids=lambda c: getattr(c, "__name__", None)
)
def test_construct_misuse(
    env: Env, kind: type, props: Callable[[Env], dict[str, Any]], param: str, match: str
) -> None:
    assert_refused(lambda: env.build(kind, **props(env)), kind.__name__, param, match)


def test_every_construct_has_at_least_five_misuse_cases() -> None:
    counts = {kind.__name__: sum(1 for case in CASES if case[0] is kind) for kind in {c[0] for c in CASES}}
    assert len(counts) == 5 and all(count >= 5 for count in counts.values()), counts


@pytest.mark.parametrize(
    ("instance_type", "match"),
    [
        ("ml.p5.48xlarg", r"ClusterInstanceType .*\(closest: ml.p5.48xlarge"),
        ("p5.48xlarge", r"ClusterInstanceType .*\(closest: ml.p5.48xlarge"),
        ("ml.g6e.12xlarge ", r"ClusterInstanceType .*\(closest: ml.g6e.12xlarge"),
    ],
)
def test_instance_group_type_is_one_hyperpod_accepts(instance_type: str, match: str) -> None:
    """The enum is CreateCluster's ClusterInstanceType in botocore 1.44.8 (constraints.txt), file
    botocore/data/sagemaker/2017-07-24/service-2.json, read at synth; CPU groups stay allowed."""
    assert_refused(
        lambda: HyperPodInstanceGroup(name="g", instance_type=instance_type, instance_count=1),
        "HyperPodInstanceGroup",
        "instance_type",
        match,
    )
    assert HyperPodInstanceGroup(name="cpu", instance_type="ml.m5.xlarge", instance_count=1)


def test_scaling_and_alarms_watch_the_renamed_endpoint_in_a_users_app(env: Env) -> None:
    """With routing the operator registers ``<endpoint_name>-<suffix>`` (spec.endpointName): the documented
    trigger (sagemaker_invocations(None, ...)), the construct's metrics and alarms a user builds on them all
    name that endpoint, never the bare ``endpoint_name``, which no endpoint carries."""
    routed = dataclasses.replace(
        ENDPOINT,
        endpoint_name="qwen",
        routing=IntelligentRouting(),
        autoscaling=AutoScaling(1, 2, CloudWatchTrigger.sagemaker_invocations(None, 60)),
    )
    model = env.build(HyperPodModelEndpoint, endpoint=routed)
    alarm = model.metric_invocations().create_alarm(env.stack, "UserAlarm", threshold=1, evaluation_periods=1)
    assert model.endpoint_name == model.document["spec"]["endpointName"]
    assert model.endpoint_name is not None and model.endpoint_name.startswith("qwen-")
    trigger = model.document["spec"]["autoScalingSpec"]["cloudWatchTrigger"]
    assert {d["name"]: d["value"] for d in trigger["dimensions"]}["EndpointName"] == model.endpoint_name
    dimensions = env.stack.resolve(alarm.node.default_child.dimensions)  # type: ignore[union-attr]
    assert {d["name"]: d["value"] for d in dimensions}["EndpointName"] == model.endpoint_name


def test_a_trigger_on_the_name_routing_replaces_is_refused() -> None:
    stale = AutoScaling(1, 2, CloudWatchTrigger.sagemaker_invocations("qwen", 60))
    assert_refused(
        lambda: dataclasses.replace(
            ENDPOINT, endpoint_name="qwen", routing=IntelligentRouting(), autoscaling=stale
        ),
        "InferenceEndpoint",
        "autoscaling",
        r"the registered name qwen-\w+ .*sagemaker_invocations\(None",
    )


def test_metric_of_an_unregistered_endpoint_is_refused(env: Env) -> None:
    model = env.build(HyperPodModelEndpoint)
    assert_refused(
        lambda: model.metric("Invocations"), "HyperPodModelEndpoint.metric", "metric_name", r"endpoint_name"
    )


PARAMS: dict[type, list[str]] = {
    HyperPodDependencyChart: ["cluster", "chart_directory", "values", "release"],
    HyperPodCluster: [
        "cluster", "subnets", "security_groups", "instance_groups", "dependency_chart", "wait_for",
        "lifecycle_scripts", "access_logs_bucket", "node_recovery", "nodes_ready_timeout", "log_key",
    ],
    HyperPodInferenceOperator: [
        "cluster", "hyperpod_cluster", "model_buckets", "prometheus_workspace_arn", "access_logs_bucket",
        "addon_versions",
    ],
    HyperPodModelEndpoint: ["cluster", "hyperpod_cluster", "operator", "endpoint", "adapter_key"],
    HyperPodObservability: ["cluster", "hyperpod_cluster", "grafana_workspace", "addon_version"],
}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "param"),
    [(kind, param) for kind, params in PARAMS.items() for param in params],
    ids=lambda c: getattr(c, "__name__", c),
)
def test_any_junk_for_a_parameter_is_an_argument_error_or_accepted(env: Env, kind: type, param: str) -> None:
    assert_junk_refused_by_name_or_accepted(lambda **kw: env.build(kind, **kw), kind.__name__, param)


def test_deploy_time_values_reach_the_template_unparsed(env: Env) -> None:
    workspace = cdk.CfnParameter(env.stack, "WorkspaceArn").value_as_string
    count = cdk.CfnParameter(env.stack, "Count", type="Number").value_as_number
    group = HyperPodInstanceGroup(name="tok", instance_type="ml.p5.48xlarge", instance_count=count)
    cluster = env.build(HyperPodCluster, instance_groups=[group])
    env.build(HyperPodInferenceOperator, hyperpod_cluster=cluster, prometheus_workspace_arn=workspace)
    template = json.dumps(Template.from_stack(env.stack).to_json())
    assert '"InstanceCount": {"Ref": "Count"}' in template
    assert '"Resource": {"Ref": "WorkspaceArn"}' in template


# ---- the InferenceEndpointConfig builder's parts ----------------------------------------------------------

WORKER = {"image": "vllm/vllm-openai:v0.10.1", "tensor_parallel_size": 1}
S3 = {"bucket_name": "weights", "region": "us-east-1", "location": "m/"}
FSX = {"file_system_id": "fs-0123456789abcdef0", "location": "/m"}
CW = {
    "name": "cw",
    "namespace": "AWS/SageMaker",
    "metric_name": "Invocations",
    "dimensions": {},
    "target_value": 1,
}
PROM = {"server_address": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1", "query": "up",
        "target_value": 1}  # fmt: skip
TRIGGER = PrometheusTrigger(**PROM)
SCALING = {"min_replicas": 0, "max_replicas": 2, "trigger": TRIGGER}
ADAPTER = LoraAdapter("sql-lora", "s3://adapters/sql-lora")
LORA = {"adapters": (ADAPTER,), "region": "us-east-1"}
MODEL = {"name": "qwen", "instance_types": ("ml.p5.48xlarge",), "model_source": S3ModelSource(**S3),
         "worker": VllmWorker(**WORKER)}  # fmt: skip
PART_CASES: list[tuple[type, dict[str, Any], dict[str, Any], str, str]] = [
    (S3ModelSource, S3, {"bucket_name": ""}, "bucket_name", r"a non-empty string"),
    (S3ModelSource, S3, {"bucket_name": ["weights"]}, "bucket_name", r"got \['weights'\]"),
    (S3ModelSource, S3, {"region": "us-east-1a"}, "region", r"an AWS Region name"),
    (S3ModelSource, S3, {"location": None}, "location", r"got None"),
    (S3ModelSource, S3, {"prefetch": "yes"}, "prefetch", r"True or False"),
    (FsxModelSource, FSX, {"file_system_id": "fsx-1"}, "file_system_id", r"an FSx file system id"),
    (FsxModelSource, FSX, {"file_system_id": 7}, "file_system_id", r"got 7"),
    (FsxModelSource, FSX, {"location": ""}, "location", r"a non-empty string"),
    (FsxModelSource, FSX, {"dns_name": 1}, "dns_name", r"got 1"),
    (FsxModelSource, FSX, {"mount_name": ""}, "mount_name", r"a non-empty string"),
    (VllmWorker, WORKER, {"image": "vllm/vllm-openai:latest"}, "image", r"pinned tag \(not latest\)"),
    (VllmWorker, WORKER, {"tensor_parallel_size": 0}, "tensor_parallel_size", r"from 1 to 64"),
    (VllmWorker, WORKER, {"tensor_parallel_size": "8"}, "tensor_parallel_size", r"got '8'"),
    (VllmWorker, WORKER, {"max_model_len": -1}, "max_model_len", r"at least 1"),
    (VllmWorker, WORKER, {"port": 70000}, "port", r"from 1 to 65535"),
    (VllmWorker, WORKER, {"extra_args": "--enforce-eager"}, "extra_args", r"not a list"),
    (VllmWorker, WORKER, {"environment": {"1BAD": "x"}}, "environment key", r"matching"),
    (RequestLimits, {"max_concurrent_requests": 1}, {"max_concurrent_requests": 0}, "max_concurrent_requests", "1"),
    (RequestLimits, {"max_concurrent_requests": 1}, {"max_concurrent_requests": True}, "max_concurrent_requests",
     r"got True"),
    (RequestLimits, {"max_concurrent_requests": 1}, {"max_queue_size": -1}, "max_queue_size", r"at least 0"),
    (RequestLimits, {"max_concurrent_requests": 1}, {"overflow_status_code": 200}, "overflow_status_code", "400"),
    (RequestLimits, {"max_concurrent_requests": 1}, {"overflow_status_code": "429"}, "overflow_status_code",
     r"got '429'"),
    (CloudWatchTrigger, CW, {"name": ""}, "name", r"a non-empty string"),
    (CloudWatchTrigger, CW, {"dimensions": [("EndpointName", "x")]}, "dimensions", r"a mapping"),
    (CloudWatchTrigger, CW, {"target_value": 0}, "target_value", r"greater than 0"),
    (CloudWatchTrigger, CW, {"statistic": "p99"}, "statistic", r"one of 'Sum'"),
    (CloudWatchTrigger, CW, {"period_seconds": 0}, "period_seconds", r"from 1 to 86400"),
    (PrometheusTrigger, PROM, {"server_address": "aps-workspaces/ws-1"}, "server_address", r"an https URL"),
    (PrometheusTrigger, PROM, {"query": ""}, "query", r"a non-empty string"),
    (PrometheusTrigger, PROM, {"target_value": -1}, "target_value", r"greater than 0"),
    (PrometheusTrigger, PROM, {"target_value": "1"}, "target_value", r"got '1'"),
    (PrometheusTrigger, PROM, {"name": None}, "name", r"got None"),
    (PrometheusTrigger, PROM, {"metric_type": "AverageValue"}, "metric_type", r"one of .*'Value'"),
    (AutoScaling, SCALING, {"min_replicas": 3}, "min_replicas", r"at most max_replicas \(2\)"),
    (AutoScaling, SCALING, {"max_replicas": 0}, "max_replicas", r"at least 1"),
    (AutoScaling, SCALING, {"trigger": "cpu"}, "trigger", r"a CloudWatchTrigger, a PrometheusTrigger or a tuple"),
    (AutoScaling, SCALING, {"trigger": ()}, "trigger", r"a list of 1 to 100 items"),
    (AutoScaling, SCALING, {"trigger": (TRIGGER, "cpu")}, "trigger[1]", r"a PrometheusTrigger"),
    (AutoScaling, SCALING, {"trigger": (TRIGGER, TRIGGER)}, "trigger[1].name", r"unique among the triggers"),
    (AutoScaling, SCALING, {"polling_interval_seconds": 0}, "polling_interval_seconds", r"at least 1"),
    (AutoScaling, SCALING, {"cooldown_seconds": 1.5}, "cooldown_seconds", r"got 1\.5"),
    (InferenceEndpoint, MODEL, {"name": "Llama_70B"}, "name", r"lowercase letters"),
    (InferenceEndpoint, MODEL, {"instance_types": "ml.p5.48xlarge"}, "instance_types", r"not a list"),
    (InferenceEndpoint, MODEL, {"instance_types": ("p5.48xlarge",)}, "instance_types[0]", r"GPU instance type"),
    (InferenceEndpoint, MODEL, {"instance_types": ("ml.p5.48xlarg",)}, "instance_types[0]",
     r"GPU instance type this library knows \(closest: ml.p5.48xlarge"),
    (InferenceEndpoint, MODEL, {"model_source": "s3://weights"}, "model_source", r"an S3ModelSource"),
    (InferenceEndpoint, MODEL, {"worker": WORKER}, "worker", r"a VllmWorker"),
    (InferenceEndpoint, MODEL, {"replicas": 0}, "replicas", r"at least 1"),
    (InferenceEndpoint, MODEL, {"endpoint_name": "bad name"}, "endpoint_name", r"a SageMaker endpoint name"),
    (InferenceEndpoint, MODEL, {"threads_per_core": 4}, "threads_per_core", r"one of 1, 2"),
    (InferenceEndpoint, MODEL, {"instance_types": ("ml.g5.xlarge",)}, "threads_per_core", r"threads_per_core=2"),
    (InferenceEndpoint, MODEL, {"max_deploy_time_seconds": 10}, "max_deploy_time_seconds", r"from 60"),
    (InferenceEndpoint, MODEL, {"lora": LORA}, "lora", r"a LoraServing"),
    (InferenceEndpoint, MODEL, {"lora": LoraServing(adapters=(LoraAdapter("qwen", "s3://adapters/q"),), region="us-east-1")},
     "lora.adapters[0].name", r"other than the endpoint's \(qwen\)"),
    (InferenceEndpoint, MODEL, {"lora": LoraServing(**LORA), "worker": VllmWorker(**WORKER, extra_args=("--max-loras=4",))},
     "worker.extra_args", r"no --max-loras when lora is set"),
    (LoraServing, LORA, {"adapters": ()}, "adapters", r"a list of 1 to 64 items"),
    (LoraServing, LORA, {"adapters": ("s3://adapters/sql-lora",)}, "adapters[0]", r"a LoraAdapter"),
    (LoraServing, LORA, {"adapters": (ADAPTER, ADAPTER)}, "adapters[1].name", r"unique among the adapters"),
    (LoraServing, LORA, {"adapters": (LoraAdapter("sql", "s3://adapters"),)}, "adapters[0].s3_uri",
     r"with a prefix .* never a whole bucket"),
    (LoraServing, LORA, {"adapters": (LoraAdapter("sql", "s3://adapters//"),)}, "adapters[0].s3_uri", r"with a prefix"),
    (LoraServing, LORA, {"region": "us-east-1a"}, "region", r"an AWS Region name"),
    (LoraServing, LORA, {"max_lora_rank": 12}, "max_lora_rank", r"one of 1, 8, 16"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "base", "overrides", "param", "match"), PART_CASES)
def test_builder_part_misuse(
    kind: type, base: dict[str, Any], overrides: dict[str, Any], param: str, match: str
) -> None:
    assert_refused(lambda: kind(**{**base, **overrides}), kind.__name__, param, match)


def test_every_builder_part_has_at_least_five_misuse_cases() -> None:
    counts = {k.__name__: sum(1 for case in PART_CASES if case[0] is k) for k in {c[0] for c in PART_CASES}}
    assert len(counts) == 9 and all(count >= 5 for count in counts.values()), counts


@pytest.mark.parametrize(
    ("kind", "base", "param"),
    [
        (kind, base, field.name)
        for kind, base in ((S3ModelSource, S3), (FsxModelSource, FSX), (VllmWorker, WORKER),
                           (RequestLimits, {"max_concurrent_requests": 1}), (CloudWatchTrigger, CW),
                           (PrometheusTrigger, PROM), (AutoScaling, SCALING), (InferenceEndpoint, MODEL),
                           (LoraServing, LORA))
        for field in dataclasses.fields(kind)
    ],
    ids=lambda c: getattr(c, "__name__", c if isinstance(c, str) else None),
)  # fmt: skip
def test_any_junk_for_a_builder_field_is_an_argument_error_or_accepted(
    kind: type, base: dict[str, Any], param: str
) -> None:
    assert_junk_refused_by_name_or_accepted(
        lambda **kw: kind(**{**base, **kw}), kind.__name__, param, also_named=("worker.",)
    )


def test_builder_tokens_pass_unparsed() -> None:
    stack = cdk.Stack()
    bucket = s3.Bucket(stack, "B")
    source = S3ModelSource(bucket_name=bucket.bucket_name, region=cdk.Aws.REGION, location=cdk.Aws.STACK_NAME)
    rendered = stack.resolve(source.render())
    assert rendered["s3Storage"] == {"bucketName": {"Ref": stack.get_logical_id(bucket.node.default_child)},
                                     "region": {"Ref": "AWS::Region"}}  # fmt: skip
    assert rendered["modelLocation"] == {"Ref": "AWS::StackName"}


def test_adapter_uris_must_be_literal_but_the_region_may_be_a_token() -> None:
    stack = cdk.Stack()
    bucket = s3.Bucket(stack, "Adapters")
    assert_refused(
        lambda: LoraServing(
            adapters=(LoraAdapter("sql", f"s3://{bucket.bucket_name}/sql"),), region="us-east-1"
        ),
        "LoraServing",
        "adapters[0].s3_uri",
        r"got a deploy-time token; expected an s3://bucket/prefix URI known at synth time",
    )
    lora = LoraServing(adapters=(ADAPTER,), region=cdk.Aws.REGION)
    endpoint = InferenceEndpoint(**MODEL, lora=lora)
    command = stack.resolve(render_inference_endpoint_config(endpoint)["spec"]["worker"]["command"])
    assert {"Ref": "AWS::Region"} in command[2]["Fn::Join"][1]
