"""Every misuse of the disaggregated tier's public API is an ArgumentError (a ValueError) naming the construct,
the parameter, the value received and what is accepted: never a TypeError, AttributeError or jsii error."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks

from inference_tiers.constructs.disaggregated.monitoring import DisaggregatedMonitoring
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing
from inference_tiers.k8s.disaggregated import DisaggregatedWorkloadSpec
from tests.disaggregated.helpers import MODEL, make_cluster
from tests.misuse import assert_junk_refused_by_name_or_accepted, assert_refused

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-mooncake-efa:t"
ROUTER = "123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-router:0.1.17"
_ids = itertools.count()


class Env:
    """One stack with a kubectl-enabled cluster; every case builds its construct under a fresh id."""

    def __init__(self, outdir: Path) -> None:
        self.stack = cdk.Stack(cdk.App(outdir=str(outdir)), "Misuse")
        self.cluster = make_cluster(self.stack)
        self.bare_cluster = eks.Cluster(self.stack, "Bare", version=eks.KubernetesVersion.V1_35)
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self.stack, "Vpc", vpc_id="vpc-1", availability_zones=["us-east-1a"], vpc_cidr_block="10.0.0.0/16"
        )
        self.serving = self.build_serving()

    def build_serving(self, **props: Any) -> DisaggregatedServing:
        return DisaggregatedServing(
            self.stack,
            f"Serving{next(_ids)}",
            **{"cluster": self.cluster, "model_id": MODEL, "instance_type": "p5.48xlarge", **props},
        )

    def build_monitoring(self, **props: Any) -> DisaggregatedMonitoring:
        return DisaggregatedMonitoring(
            self.stack,
            f"Monitoring{next(_ids)}",
            **{"cluster": self.cluster, "serving": self.serving, **props},
        )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(tmp_path_factory.mktemp("cdk.out"))


# (overrides, parameter named, what the message says)
SPEC_CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"model_id": " "}, "model_id", r"got ' '; expected a Hugging Face model id"),
    ({"model_id": 7}, "model_id", r"got 7"),
    ({"instance_type": "g5.xlarge"}, "instance_type", r"one of 'g5\.8xlarge'.*'p5\.48xlarge'"),
    ({"instance_type": "p9.48xlarge"}, "instance_type", r"got 'p9\.48xlarge'"),
    ({"tensor_parallel_size": 16}, "tensor_parallel_size", r"a divisor of the 8 GPUs of p5\.48xlarge"),
    ({"tensor_parallel_size": 3}, "tensor_parallel_size", r"got 3"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size", r"got 0"),
    ({"tensor_parallel_size": "8"}, "tensor_parallel_size", r"got '8'"),
    ({"prefill_replicas": 0}, "prefill_replicas", r"an integer from 1 to 64"),
    ({"decode_replicas": 65}, "decode_replicas", r"got 65"),
    ({"decode_replicas": True}, "decode_replicas", r"got True; expected an integer"),
    ({"router_replicas": 11}, "router_replicas", r"from 1 to 10"),
    ({"max_model_len": 100}, "max_model_len", r"got 100; expected an integer from 256"),
    (
        {"model_id": "Qwen/Qwen3-32B", "max_model_len": 65536},
        "max_model_len",
        r"got 65536; expected at most 40960, the maximum context of Qwen/Qwen3-32B",
    ),
    ({"startup_timeout_minutes": 5}, "startup_timeout_minutes", r"from 10 to 240"),
    ({"name": "Bad_Name"}, "name", r"a DNS label"),
    ({"namespace": "x" * 41}, "namespace", r"1-40 characters"),
    ({"vllm_image": "a b"}, "vllm_image", r"a container image with a pinned tag"),
    ({"router_image": "vllm/router:latest"}, "router_image", r"not latest"),
    ({"vllm_image": "vllm/vllm-openai"}, "vllm_image", r"pinned tag"),
    ({"hf_token_secret_name": "Hf Token"}, "hf_token_secret_name", r"a Kubernetes Secret name"),
    ({"hf_token_secret_name": "a." * 127 + "a"}, "hf_token_secret_name", r"Secret name"),
    ({"gpu_node_labels": {}}, "gpu_node_labels", r"at least one node label"),
    ({"gpu_node_labels": "pool=gpu"}, "gpu_node_labels", r"a mapping"),
    ({"gpu_node_labels": {"bad key!": "x"}}, "gpu_node_labels key", r"a mapping of strings matching"),
    ({"gpu_node_labels": {"pool": "not valid!"}}, "gpu_node_labels['pool']", r"a Kubernetes label value"),
    ({"allowed_cidrs": []}, "allowed_cidrs", r"a list of at least 1 items"),
    ({"allowed_cidrs": "10.0.0.0/16"}, "allowed_cidrs", r"a string is not a list"),
    ({"allowed_cidrs": ["10.0.0.0/16", "10.0.0.1/8"]}, "allowed_cidrs[1]", r"no host bits"),
    ({"allowed_cidrs": ["internal"]}, "allowed_cidrs[0]", r"an IPv4 CIDR block"),
    ({"allowed_cidrs": ["fd00::/8"]}, "allowed_cidrs[0]", r"IPv4 CIDR"),
    ({"extra_env": {"FI_PROVIDER": "tcp"}}, "extra_env key", r"other than those set here.*FI_PROVIDER"),
    ({"extra_env": {"HF_TOKEN": "x"}}, "extra_env key", r"other than those set here"),
    ({"extra_env": {"1BAD": "x"}}, "extra_env key", r"matching"),
    ({"extra_env": {"MC_MAX_CONCURRENT_REG_MR": 16}}, "extra_env['MC_MAX_CONCURRENT_REG_MR']", r"a string"),
    ({"extra_env": [("A", "b")]}, "extra_env", r"a mapping"),
    ({"efa_devices": 33}, "efa_devices", r"from 1 to 32"),
    ({"enable_kv_store": "yes"}, "enable_kv_store", r"True or False"),
    ({"kv_store_segment_gib_per_rank": 0}, "kv_store_segment_gib_per_rank", r"from 1 to 1024"),
    (
        {"enable_kv_store": True, "kv_store_segment_gib_per_rank": 200},
        "kv_store_segment_gib_per_rank",
        r"at most 96 GiB per rank: 8 ranks must fit in half of the pod's 1536 GiB",
    ),
]


@pytest.mark.parametrize(("overrides", "param", "match"), SPEC_CASES)
def test_workload_spec_misuse(overrides: dict[str, Any], param: str, match: str) -> None:
    props = {"model_id": MODEL, "instance_type": "p5.48xlarge", "vllm_image": IMAGE, "router_image": ROUTER}
    assert_refused(
        lambda: DisaggregatedWorkloadSpec(**{**props, **overrides}), "DisaggregatedWorkloadSpec", param, match
    )


SERVING_CASES: list[tuple[Callable[[Env], dict[str, Any]], str, str]] = [
    (lambda e: {"cluster": "arn:aws:eks:us-east-1:123456789012:cluster/x"}, "cluster", r"not a string"),
    (lambda e: {"cluster": e.vpc}, "cluster", r"got a Resource\+IVpc; expected an ICluster"),
    (lambda e: {"cluster": e.bare_cluster}, "cluster", r"kubectl_provider_options.*KubectlV35Layer"),
    (lambda e: {"model_id": None}, "model_id", r"got None"),
    (lambda e: {"instance_type": "g6.xlarge"}, "instance_type", r"got 'g6\.xlarge'; expected one of"),
    (lambda e: {"prefill_replicas": "1"}, "prefill_replicas", r"got '1'; expected an integer"),
    (lambda e: {"tensor_parallel_size": 16}, "tensor_parallel_size", r"a divisor of the 8 GPUs"),
    (lambda e: {"image_uri": "vllm:latest"}, "image_uri", r"not latest"),
    (lambda e: {"router_image_uri": 5}, "router_image_uri", r"got 5; expected a container image"),
    (lambda e: {"allowed_cidrs": "10.0.0.0/16"}, "allowed_cidrs", r"a string is not a list"),
    (lambda e: {"allowed_cidrs": ["10.0.0.0/33"]}, "allowed_cidrs[0]", r"IPv4 CIDR"),
    (lambda e: {"gpu_node_labels": ["pool"]}, "gpu_node_labels", r"a mapping"),
    (lambda e: {"namespace": cdk.Aws.STACK_NAME}, "namespace", r"known at synth time"),
    (lambda e: {"efa_devices": 0}, "efa_devices", r"from 1 to 32"),
    (lambda e: {"instance_type": "p5en.48xlarge", "efa_devices": 32}, "efa_devices", r"from 1 to 16"),
    (lambda e: {"startup_timeout_minutes": 60.0}, "startup_timeout_minutes", r"got 60\.0"),
    (lambda e: {"hf_token_secret_name": ""}, "hf_token_secret_name", r"Secret name"),
]


@pytest.mark.parametrize(("props", "param", "match"), SERVING_CASES)
def test_serving_misuse(env: Env, props: Callable[[Env], dict[str, Any]], param: str, match: str) -> None:
    assert_refused(lambda: env.build_serving(**props(env)), "DisaggregatedServing", param, match)


MONITORING_CASES: list[tuple[Callable[[Env], dict[str, Any]], str, str]] = [
    (lambda e: {"cluster": "my-cluster"}, "cluster", r"not a string"),
    (lambda e: {"serving": "vllm-pd"}, "serving", r"got 'vllm-pd'; expected a DisaggregatedServing"),
    (lambda e: {"serving": e.cluster}, "serving", r"got a Cluster; expected a DisaggregatedServing"),
    (
        lambda e: {"addon_version": "6.2.0"},
        "addon_version",
        r"an EKS add-on version such as v6\.2\.0-eksbuild\.1",
    ),
    (lambda e: {"alarm_topic": "arn:aws:sns:us-east-1:123456789012:ops"}, "alarm_topic", r"an ITopic"),
    (lambda e: {"alarm_topic": e.cluster}, "alarm_topic", r"got a Cluster; expected an ITopic"),
    (lambda e: {"encryption_key": "alias/ops"}, "encryption_key", r"an IKey"),
    (lambda e: {"ttft_alarm_seconds": 0}, "ttft_alarm_seconds", r"a number from 0\.05 to 600"),
    (lambda e: {"ttft_alarm_seconds": 601}, "ttft_alarm_seconds", r"got 601"),
    (lambda e: {"ttft_alarm_seconds": "10"}, "ttft_alarm_seconds", r"got '10'; expected a number"),
    (lambda e: {"ttft_alarm_seconds": True}, "ttft_alarm_seconds", r"got True"),
    (lambda e: {"transfer_failure_alarm_count": 0}, "transfer_failure_alarm_count", r"from 1 to 10000"),
    (lambda e: {"transfer_failure_alarm_count": 1.5}, "transfer_failure_alarm_count", r"got 1\.5"),
]


@pytest.mark.parametrize(("props", "param", "match"), MONITORING_CASES)
def test_monitoring_misuse(env: Env, props: Callable[[Env], dict[str, Any]], param: str, match: str) -> None:
    assert_refused(lambda: env.build_monitoring(**props(env)), "DisaggregatedMonitoring", param, match)


def test_the_good_arguments_of_the_cases_above_build(env: Env) -> None:
    # The cases fail on the one argument they change, not on the base arguments.
    serving = env.build_serving(
        allowed_cidrs=["10.0.0.0/16"], efa_devices=16, gpu_node_labels={"pool": "gpu"}
    )
    assert serving.spec.efa == 16 and serving.spec.allowed_cidrs == ("10.0.0.0/16",)
    monitoring = env.build_monitoring(ttft_alarm_seconds=2, transfer_failure_alarm_count=3)
    assert monitoring.ttft_alarm is not None


SERVING_PARAMS = [
    "cluster", "model_id", "instance_type", "prefill_replicas", "decode_replicas", "tensor_parallel_size",
    "max_model_len", "namespace", "name", "image_uri", "router_image_uri", "enable_kv_store",
    "kv_store_segment_gib_per_rank", "hf_token_secret_name", "gpu_node_labels", "router_replicas",
    "allowed_cidrs", "startup_timeout_minutes", "extra_env", "efa_devices", "lora", "lora_init_image",
    "adapter_key",
]  # fmt: skip
MONITORING_PARAMS = [
    "cluster", "serving", "addon_version", "alarm_topic", "encryption_key", "ttft_alarm_seconds",
    "transfer_failure_alarm_count",
]  # fmt: skip


def test_the_sweeps_cover_every_parameter() -> None:
    for kind, swept in ((DisaggregatedServing, SERVING_PARAMS), (DisaggregatedMonitoring, MONITORING_PARAMS)):
        declared = set(inspect.signature(kind.__init__).parameters) - {"self", "scope", "construct_id"}
        assert set(swept) == declared, (kind.__name__, declared ^ set(swept))


@pytest.mark.parametrize("param", SERVING_PARAMS)
def test_any_junk_for_a_serving_parameter_is_an_argument_error_or_accepted(env: Env, param: str) -> None:
    # Pinned image URIs unless the case is about them: no image assets to stage, so the sweep stays fast.
    images = {"image_uri": IMAGE, "router_image_uri": ROUTER}
    assert_junk_refused_by_name_or_accepted(
        lambda **kw: env.build_serving(**{**images, **kw}), "DisaggregatedServing", param
    )


@pytest.mark.parametrize("param", MONITORING_PARAMS)
def test_any_junk_for_a_monitoring_parameter_is_an_argument_error_or_accepted(env: Env, param: str) -> None:
    assert_junk_refused_by_name_or_accepted(env.build_monitoring, "DisaggregatedMonitoring", param)
