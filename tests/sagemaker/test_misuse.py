"""Every public SageMaker construct and props class refuses misuse with an ArgumentError naming itself and the
parameter, never a TypeError, AttributeError, ZeroDivisionError or jsii error; and accepts deploy-time tokens
where a deploy-time value makes sense, rendering them unparsed into the template."""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs import (
    AlarmThresholds,
    EndpointMetrics,
    ModelWeights,
    SageMakerLlmEndpoint,
    ScalingOptions,
)
from inference_tiers.constructs.sagemaker.capacity import Capacity
from inference_tiers.constructs.sagemaker.engines import ResolvedImage
from inference_tiers.constructs.sagemaker.monitoring import EndpointMonitoring
from inference_tiers.constructs.sagemaker.scaling import ConcurrencyScaling
from inference_tiers.constructs.sagemaker.security import ExecutionRole
from inference_tiers.instance_types import (
    CLUSTER_INSTANCE_TYPES,
    ENDPOINT_INSTANCE_TYPES,
    GPU_INSTANCE_TYPES,
    SAGEMAKER_PREFIX,
    sagemaker_instance_types,
)
from inference_tiers.validation import ArgumentError
from tests.misuse import assert_junk_refused_by_name_or_accepted

S3_WEIGHTS = "s3://weights-bucket/models/qwen3-8b/"
LLM = "SageMakerLlmEndpoint"


@dataclass
class Ctx:
    """One stack with a VPC; ``id()`` gives each construct a fresh id so cases can share the stack."""

    stack: cdk.Stack
    vpc: ec2.Vpc
    ids: itertools.count[int]

    def id(self, prefix: str = "C") -> str:
        return f"{prefix}{next(self.ids)}"

    def text_token(self) -> str:
        return cdk.CfnParameter(self.stack, self.id("Text")).value_as_string

    def number_token(self) -> float:
        return cdk.CfnParameter(self.stack, self.id("Number"), type="Number").value_as_number


def new_ctx(outdir: str) -> Ctx:
    stack = cdk.Stack(cdk.App(outdir=outdir), "Test")
    return Ctx(
        stack, ec2.Vpc(stack, "Vpc", max_azs=2, restrict_default_security_group=False), itertools.count()
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Ctx:
    """A stack the misuse cases share (they fail before anything is synthesized)."""
    return new_ctx(str(tmp_path_factory.mktemp("misuse")))


@pytest.fixture
def ctx(tmp_path: Any) -> Ctx:
    """A fresh stack for tests that synthesize."""
    return new_ctx(str(tmp_path))


def llm(c: Ctx, **props: Any) -> SageMakerLlmEndpoint:
    defaults: dict[str, Any] = {
        "weights": ModelWeights.from_s3_uri(S3_WEIGHTS),
        "instance_types": ["ml.g6e.2xlarge"],
        "vpc": c.vpc,
    }
    return SageMakerLlmEndpoint(c.stack, c.id("Llm"), **{**defaults, **props})


def case(owner: str, param: str, action: Callable[[Ctx], Any], match: str, name: str) -> Any:
    return pytest.param(owner, param, action, match, id=f"{owner}-{name}")


def metrics(**props: Any) -> EndpointMetrics:
    return EndpointMetrics(**{"endpoint_name": "ep", "variant_name": "AllTraffic", **props})


def image() -> ResolvedImage:
    return ResolvedImage("123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1-cu124", "arn:aws:ecr:::r", 124)


def role(c: Ctx, **props: Any) -> ExecutionRole:
    defaults: dict[str, Any] = {
        "endpoint_name": "ep",
        "inference_component_name": None,
        "image": image(),
        "weights": ModelWeights.from_hub("Qwen/Qwen3-8B"),
        "encryption_key": kms.Key(c.stack, c.id("Key")),
        "log_retention": logs.RetentionDays.ONE_MONTH,
        "vpc": c.vpc,
        "subnet_ids": [s.subnet_id for s in c.vpc.private_subnets],
        "security_group": ec2.SecurityGroup(c.stack, c.id("Sg"), vpc=c.vpc),
    }
    return ExecutionRole(c.stack, c.id("Role"), **{**defaults, **props})


def monitoring(c: Ctx, **props: Any) -> EndpointMonitoring:
    defaults: dict[str, Any] = {
        "metrics": metrics(),
        "topic": sns.Topic(c.stack, c.id("Topic")),
        "thresholds": AlarmThresholds(),
    }
    return EndpointMonitoring(c.stack, c.id("Monitoring"), **{**defaults, **props})


def public_only_vpc(c: Ctx) -> ec2.Vpc:
    public = ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)
    return ec2.Vpc(
        c.stack, c.id("Public"), subnet_configuration=[public], restrict_default_security_group=False
    )


def token_image(c: Ctx) -> str:
    return ecr.Repository(c.stack, c.id("Repo")).repository_uri_for_tag("1.0-cu124")


def bucket(c: Ctx) -> s3.Bucket:
    return s3.Bucket(c.stack, c.id("Bucket"))


MISUSE = [
    # --- SageMakerLlmEndpoint: the bugs the issue names ----------------------------------------------------
    case(LLM, "tensor_parallel_degree", lambda c: llm(c, tensor_parallel_degree=0), "from 1 to 8", "tp-0"),
    case(LLM, "tensor_parallel_degree", lambda c: llm(c, tensor_parallel_degree="1"), "an integer", "tp-str"),
    case(LLM, "max_model_len", lambda c: llm(c, max_model_len=-1), "from 1 to 16777216", "len-negative"),
    case(LLM, "memory_per_copy_mb", lambda c: llm(c, memory_per_copy_mb=0), "at least 128", "memory-0"),
    case(
        LLM,
        "max_model_len",
        lambda c: llm(c, weights=ModelWeights.from_hub("qwen/qwen3-8b"), max_model_len=40961),
        r"at most 40960, the maximum context of qwen/qwen3-8b",
        "len-beyond-model",
    ),
    case(
        LLM, "image_repository", lambda c: llm(c, image_uri=token_image(c)), "ecr.IRepository", "token-image"
    ),
    # --- types: strings are not lists or constructs ----------------------------------------------------------
    case(LLM, "instance_types", lambda c: llm(c, instance_types="ml.g6e.2xlarge"), "not a list", "types-str"),
    case(LLM, "weights", lambda c: llm(c, weights=S3_WEIGHTS), "a ModelWeights", "weights-str"),
    case(LLM, "vpc", lambda c: llm(c, vpc="vpc-0123"), "an IVpc", "vpc-str"),
    case(LLM, "vpc_subnets", lambda c: llm(c, vpc_subnets="private"), "a SubnetSelection", "subnets-str"),
    case(LLM, "scaling", lambda c: llm(c, scaling={"min_capacity": 1}), "a ScalingOptions", "scaling-dict"),
    case(LLM, "scaling", lambda c: llm(c, scaling={}), "a ScalingOptions", "scaling-empty-dict"),
    case(LLM, "alarm_thresholds", lambda c: llm(c, alarm_thresholds=0.01), "an AlarmThresholds", "thr"),
    case(LLM, "alarm_topic", lambda c: llm(c, alarm_topic="arn:aws:sns:us-east-1:1:t"), "an ITopic", "topic"),
    case(LLM, "data_capture_bucket", lambda c: llm(c, data_capture_bucket="b"), "an IBucket", "capture"),
    case(LLM, "volume_kms_key", lambda c: llm(c, volume_kms_key="arn:aws:kms:k"), "an IKey", "volume-key"),
    case(LLM, "encryption_key", lambda c: llm(c, encryption_key="alias/x"), "an IKey", "key-str"),
    case(LLM, "log_retention", lambda c: llm(c, log_retention=90), "RetentionDays", "retention-int"),
    case(LLM, "inference_components", lambda c: llm(c, inference_components="false"), "True or False", "ic"),
    case(
        LLM,
        "startup_health_check_timeout",
        lambda c: llm(c, startup_health_check_timeout=600),
        "a Duration",
        "t",
    ),
    case(LLM, "environment['A']", lambda c: llm(c, environment={"A": 1}), "a string", "env-int"),
    case(
        LLM,
        "engine_args['max-num-seqs']",
        lambda c: llm(c, engine_args={"max-num-seqs": 8}),
        "a string",
        "arg",
    ),
    case(LLM, "engine_args", lambda c: llm(c, engine_args=["x"]), "a mapping", "args-list"),
    # --- values and ranges ---------------------------------------------------------------------------------------
    case(LLM, "engine", lambda c: llm(c, engine="tgi"), "one of 'vllm', 'sglang', 'lmi', 'byoc'", "engine"),
    case(LLM, "image_uri", lambda c: llm(c, engine="byoc"), "your ECR image URI with engine 'byoc'", "byoc"),
    case(
        LLM,
        "image_uri",
        lambda c: llm(c, image_uri="vllm/vllm-openai:v0.10.1"),
        "an Amazon ECR",
        "public-img",
    ),
    case(
        LLM,
        "inference_ami_version",
        lambda c: llm(c, engine="byoc", image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/llm:latest"),
        r"cannot be derived from image .*llm:latest' \(CUDA version unknown\)",
        "ami-underivable",
    ),
    case(LLM, "inference_ami_version", lambda c: llm(c, inference_ami_version="al2-gpu-9"), "one of", "ami"),
    case(
        LLM,
        "image_repository",
        lambda c: llm(c, image_repository=ecr.Repository(c.stack, c.id("R"))),
        "None unless image_uri is set",
        "repository-alone",
    ),
    case(LLM, "instance_types", lambda c: llm(c, instance_types=[]), "1 to 5 items", "no-types"),
    case(LLM, "instance_types", lambda c: llm(c, instance_types=["ml.g5.xlarge"] * 6), "1 to 5 items", "six"),
    case(
        LLM,
        "instance_types[1]",
        lambda c: llm(c, instance_types=["ml.g6e.2xlarge", "ml.g6e.2xlarge"]),
        "at most once",
        "duplicate-types",
    ),
    case(
        LLM, "instance_types[0]", lambda c: llm(c, instance_types=["ml.t2.medium"]), "a GPU instance", "cpu"
    ),
    case(
        LLM,
        "instance_types[0]",
        lambda c: llm(c, instance_types=["g6e.2xlarge"]),
        r"ProductionVariantInstanceType .*\(closest: ml.g6e.2xlarge",
        "no-ml",
    ),
    case(
        LLM,
        "instance_types[1]",
        lambda c: llm(c, instance_types=["ml.g6e.2xlarge", "ml.g5.12xlarg"]),
        r"ProductionVariantInstanceType .*\(closest: ml.g5.12xlarge",
        "mistyped-pool",
    ),
    case(
        LLM,
        "tensor_parallel_degree",
        lambda c: llm(c, tensor_parallel_degree=2),
        r"1 to 1 \(ml.g6e.2xlarge has 1 GPU",
        "tp-over-gpus",
    ),
    case(
        LLM,
        "tensor_parallel_degree",
        lambda c: llm(c, instance_types=["ml.g6e.12xlarge", "ml.g5.2xlarge"], tensor_parallel_degree=4),
        r"1 to 1 \(ml.g5.2xlarge",
        "tp-every-pool",
    ),
    case(
        LLM,
        "memory_per_copy_mb",
        lambda c: llm(c, instance_types=["ml.g5.2xlarge"], memory_per_copy_mb=65536),
        r"at most 32768 \(the host memory of ml.g5.2xlarge\)",
        "memory-over-host",
    ),
    case(LLM, "max_concurrent_sequences", lambda c: llm(c, max_concurrent_sequences=0), "from 1", "seqs-0"),
    case(LLM, "routing", lambda c: llm(c, routing="ROUND_ROBIN"), "one of 'LEAST_OUTSTANDING", "routing"),
    case(
        LLM,
        "routing",
        lambda c: llm(c, instance_types=["ml.g6e.2xlarge", "ml.g5.2xlarge"], routing="RANDOM"),
        "LEAST_OUTSTANDING_REQUESTS with 2 instance pools",
        "pools-need-lor",
    ),
    case(
        LLM, "prefix_length", lambda c: llm(c, routing="PREFIX_AWARE", prefix_length=512), "1024 to", "prefix"
    ),
    case(
        LLM,
        "prefix_concurrency_threshold",
        lambda c: llm(c, prefix_concurrency_threshold=0),
        "1 to 1024",
        "pct",
    ),
    case(
        LLM,
        "capacity_reservation_arn",
        lambda c: llm(c, capacity_reservation_arn="cr-1"),
        "training-plan",
        "cr",
    ),
    case(
        LLM,
        "startup_health_check_timeout",
        lambda c: llm(c, startup_health_check_timeout=cdk.Duration.seconds(59)),
        "from 1 minute to 1 hour",
        "startup-short",
    ),
    case(
        LLM,
        "model_download_timeout",
        lambda c: llm(c, model_download_timeout=cdk.Duration.seconds(3601)),
        "from 1 minute to 1 hour",
        "download-long",
    ),
    case(
        LLM,
        "provision_timeout",
        lambda c: llm(c, provision_timeout=cdk.Duration.seconds(299)),
        "from 5 minutes to 1 hour",
        "provision-short",
    ),
    case(
        LLM,
        "startup_health_check_timeout",
        lambda c: llm(c, startup_health_check_timeout=cdk.Duration.minutes(c.number_token())),
        r"Duration.seconds\(token\)",
        "token-minutes",
    ),
    case(
        LLM,
        "volume_kms_key",
        lambda c: llm(c, volume_kms_key=kms.Key(c.stack, c.id("Key"))),
        r"no key with instance types \['ml.g6e.2xlarge'\], which have local NVMe",
        "nvme-kms",
    ),
    case(
        LLM,
        "data_capture_percentage",
        lambda c: llm(c, data_capture_bucket=bucket(c), data_capture_percentage=0),
        "from 1 to 100",
        "capture-0",
    ),
    case(
        LLM,
        "data_capture_percentage",
        lambda c: llm(c, data_capture_percentage="20"),
        "an integer",
        "capture-str",
    ),
    case(
        LLM,
        "scaling.scale_to_zero",
        lambda c: llm(c, inference_components=False, scaling=ScalingOptions(scale_to_zero=True)),
        "False for a single-model endpoint",
        "zero-single-model",
    ),
    case(
        LLM,
        "engine_args",
        lambda c: llm(c, engine_args={"tensor-parallel-size": "2"}),
        "sets SM_VLLM_TENSOR_PARALLEL_SIZE",
        "managed-arg",
    ),
    case(LLM, "engine_args key", lambda c: llm(c, engine_args={"--max num": "2"}), "matching", "arg-key"),
    case(
        LLM, "environment", lambda c: llm(c, environment={"SM_VLLM_MODEL": "x"}), "do not already set", "env"
    ),
    case(LLM, "environment key", lambda c: llm(c, environment={"MY-VAR": "x"}), "matching", "env-key"),
    case(
        LLM,
        "environment",
        lambda c: llm(c, environment={f"V{i}": "x" for i in range(100)}),
        "at most 100 container variables",
        "env-count",
    ),
    case(
        LLM,
        "environment['V']",
        lambda c: llm(c, environment={"V": "x" * 1025}),
        "at most 1024 characters",
        "env-long",
    ),
    case(
        LLM,
        "vpc_subnets",
        lambda c: llm(c, vpc=public_only_vpc(c)),
        "no 'Private' subnet groups",
        "no-private",
    ),
    case(
        LLM,
        "image_uri",
        lambda c: SageMakerLlmEndpoint(
            cdk.Stack(c.stack.node.root, c.id("Far"), env=cdk.Environment(region="xx-far-1")),
            "Llm",
            weights=ModelWeights.from_hub("Qwen/Qwen3-8B"),
            instance_types=["ml.g6e.2xlarge"],
            vpc=ec2.Vpc.from_vpc_attributes(
                c.stack,
                c.id("Imported"),
                vpc_id="vpc-1",
                availability_zones=["a"],
                private_subnet_ids=["s-1"],
            ),
        ),
        "Region xx-far-1 has no Deep Learning Containers registry",
        "region-without-dlc",
    ),
    case(
        f"{LLM}.grant_invoke",
        "grantee",
        lambda c: llm(c).grant_invoke("arn:aws:iam::123456789012:role/app"),
        "an IGrantable",
        "grantee-str",
    ),
    case(
        f"{LLM}.grant_invoke",
        "bearer_token",
        lambda c: llm(c).grant_invoke(
            iam.Role(c.stack, c.id("R"), assumed_by=iam.AccountRootPrincipal()), bearer_token=1
        ),
        "True or False",
        "bearer-int",
    ),
    # --- ScalingOptions ----------------------------------------------------------------------------------------------
    case(
        "ScalingOptions",
        "idle_scale_in",
        lambda c: ScalingOptions(scale_to_zero=True, idle_scale_in=cdk.Duration.seconds(90)),
        "whole number of minutes",
        "idle-90s",
    ),
    case(
        "ScalingOptions", "min_capacity", lambda c: ScalingOptions(min_capacity="1"), "an integer", "min-str"
    ),
    case("ScalingOptions", "min_capacity", lambda c: ScalingOptions(min_capacity=0), "at least 1", "min-0"),
    case(
        "ScalingOptions",
        "min_capacity",
        lambda c: ScalingOptions(min_capacity=3, max_capacity=2),
        r"at most max_capacity \(2\)",
        "min-over-max",
    ),
    case(
        "ScalingOptions",
        "max_capacity",
        lambda c: ScalingOptions(max_capacity=1.5),
        "an integer",
        "max-float",
    ),
    case(
        "ScalingOptions",
        "target_concurrency",
        lambda c: ScalingOptions(target_concurrency=0),
        "greater than 0",
        "target-0",
    ),
    case(
        "ScalingOptions",
        "target_concurrency",
        lambda c: ScalingOptions(target_concurrency="8"),
        "a number",
        "target-str",
    ),
    case(
        "ScalingOptions",
        "scale_to_zero",
        lambda c: ScalingOptions(scale_to_zero="yes"),
        "True or False",
        "zero-str",
    ),
    case(
        "ScalingOptions",
        "idle_scale_in",
        lambda c: ScalingOptions(idle_scale_in=cdk.Duration.minutes(30)),
        "None unless scale_to_zero",
        "idle-no-zero",
    ),
    case(
        "ScalingOptions",
        "idle_scale_in",
        lambda c: ScalingOptions(scale_to_zero=True, idle_scale_in=cdk.Duration.minutes(1500)),
        "from 1 minute to 1 day",
        "idle-long",
    ),
    case(
        "ScalingOptions",
        "idle_scale_in",
        lambda c: ScalingOptions(scale_to_zero=True, idle_scale_in=cdk.Duration.seconds(c.number_token())),
        "known at synth time",
        "idle-token",
    ),
    case(
        "ScalingOptions",
        "scale_in_cooldown",
        lambda c: ScalingOptions(scale_in_cooldown=300),
        "a Duration",
        "cooldown-int",
    ),
    case(
        "ScalingOptions",
        "scale_out_cooldown",
        lambda c: ScalingOptions(scale_out_cooldown=cdk.Duration.millis(1500)),
        "whole seconds",
        "cooldown-ms",
    ),
    # --- ModelWeights ------------------------------------------------------------------------------------------------
    case(
        "ModelWeights.from_bucket",
        "bucket",
        lambda c: ModelWeights.from_bucket("my-bucket", "m/"),
        "an IBucket",
        "bucket-str",
    ),
    case(
        "ModelWeights.from_bucket",
        "prefix",
        lambda c: ModelWeights.from_bucket(bucket(c), "models/x"),
        "ending with '/'",
        "no-slash",
    ),
    case(
        "ModelWeights.from_bucket",
        "prefix",
        lambda c: ModelWeights.from_bucket(bucket(c), "/m/"),
        "ending with '/'",
        "leading-slash",
    ),
    case(
        "ModelWeights.from_bucket",
        "prefix",
        lambda c: ModelWeights.from_bucket(bucket(c), ["m/"]),
        "ending with '/'",
        "prefix-list",
    ),
    case(
        "ModelWeights.from_s3_uri",
        "uri",
        lambda c: ModelWeights.from_s3_uri("s3://bucket/models/x"),
        r"s3://<bucket>/<prefix>/",
        "uri-no-slash",
    ),
    case(
        "ModelWeights.from_s3_uri",
        "uri",
        lambda c: ModelWeights.from_s3_uri("https://bucket/m/"),
        r"s3://<bucket>/<prefix>/",
        "uri-https",
    ),
    case(
        "ModelWeights.from_s3_uri",
        "uri",
        lambda c: ModelWeights.from_s3_uri(c.text_token()),
        "known at synth time",
        "uri-token",
    ),
    case(
        "ModelWeights.from_s3_uri",
        "key",
        lambda c: ModelWeights.from_s3_uri(S3_WEIGHTS, key="alias/k"),
        "an IKey",
        "key-str",
    ),
    case(
        "ModelWeights.from_hub",
        "model_id",
        lambda c: ModelWeights.from_hub("not a model"),
        "<organisation>/<model>",
        "hub",
    ),
    case(
        "ModelWeights.from_hub",
        "model_id",
        lambda c: ModelWeights.from_hub(None),
        "<organisation>/<model>",
        "hub-none",
    ),
    case("ModelWeights", "bucket_name", lambda c: ModelWeights(), "exactly one of bucket_name", "empty"),
    case(
        "ModelWeights",
        "bucket_name",
        lambda c: ModelWeights(bucket_name="b", hub_model_id="o/m"),
        "exactly one of",
        "both",
    ),
    case(
        "ModelWeights",
        "hub_model_id",
        lambda c: ModelWeights(hub_model_id="o/m", prefix="m/"),
        "no prefix",
        "hub-prefix",
    ),
    case(
        "ModelWeights",
        "bucket_name",
        lambda c: ModelWeights(bucket_name="Bad_Bucket", prefix="m/"),
        "an S3 bucket name",
        "bucket-name",
    ),
    # --- AlarmThresholds ---------------------------------------------------------------------------------------------
    case(
        "AlarmThresholds",
        "error_rate",
        lambda c: AlarmThresholds(error_rate=0),
        "greater than 0 and at most 1",
        "rate-0",
    ),
    case(
        "AlarmThresholds",
        "error_rate",
        lambda c: AlarmThresholds(error_rate=5),
        "greater than 0 and at most 1",
        "rate-5",
    ),
    case("AlarmThresholds", "error_rate", lambda c: AlarmThresholds(error_rate="1%"), "a number", "rate-str"),
    case(
        "AlarmThresholds",
        "gpu_memory_percent",
        lambda c: AlarmThresholds(gpu_memory_percent=120),
        "at most 100",
        "gpu",
    ),
    case(
        "AlarmThresholds",
        "disk_percent",
        lambda c: AlarmThresholds(disk_percent=0),
        "greater than 0",
        "disk-0",
    ),
    case(
        "AlarmThresholds",
        "latency_slo",
        lambda c: AlarmThresholds(latency_slo=cdk.Duration.seconds(0)),
        "at least",
        "slo-0",
    ),
    case(
        "AlarmThresholds", "latency_slo", lambda c: AlarmThresholds(latency_slo=30), "a Duration", "slo-int"
    ),
    case(
        "AlarmThresholds",
        "latency_slo",
        lambda c: AlarmThresholds(latency_slo=cdk.Duration.seconds(c.number_token())),
        "known at synth time",
        "slo-token",
    ),
    # --- EndpointMetrics ---------------------------------------------------------------------------------------------
    case(
        "EndpointMetrics",
        "endpoint_name",
        lambda c: metrics(endpoint_name=""),
        "a SageMaker name",
        "name-empty",
    ),
    case(
        "EndpointMetrics",
        "endpoint_name",
        lambda c: metrics(endpoint_name="my_endpoint"),
        "a SageMaker name",
        "underscore",
    ),
    case(
        "EndpointMetrics",
        "variant_name",
        lambda c: metrics(variant_name=None),
        "a SageMaker name",
        "variant-none",
    ),
    case(
        "EndpointMetrics",
        "inference_component_name",
        lambda c: metrics(inference_component_name="x" * 64),
        "a SageMaker name",
        "ic-long",
    ),
    case(
        "EndpointMetrics.metric",
        "statistic",
        lambda c: metrics().model_latency("p1000"),
        "a CloudWatch statistic",
        "stat",
    ),
    case(
        "EndpointMetrics.metric",
        "statistic",
        lambda c: metrics().concurrent_requests("avg"),
        "a CloudWatch statistic",
        "avg",
    ),
    case(
        "EndpointMetrics.metric",
        "metric_name",
        lambda c: metrics().metric(""),
        "a non-empty string",
        "metric-empty",
    ),
    case(
        "EndpointMetrics.metric",
        "period",
        lambda c: metrics().metric("M", period=cdk.Duration.seconds(45)),
        "multiple of 60",
        "period",
    ),
    case(
        "EndpointMetrics.metric",
        "per_variant",
        lambda c: metrics().metric("M", per_variant="yes"),
        "True or False",
        "per-variant",
    ),
    # --- Capacity (reachable as SageMakerLlmEndpoint.capacity) -----------------------------------------------------
    case(
        "Capacity",
        "instance_types",
        lambda c: Capacity.plan(
            "ml.g5.xlarge", inference_components=True, tensor_parallel_degree=None, memory_per_copy_mb=1024
        ),
        "not a list",
        "str",
    ),
    case(
        "Capacity",
        "instance_types[0]",
        lambda c: Capacity.plan(
            [1], inference_components=True, tensor_parallel_degree=None, memory_per_copy_mb=1024
        ),
        "a non-empty string",
        "int",
    ),
    case(
        "Capacity",
        "inference_components",
        lambda c: Capacity.plan(
            ["ml.g5.xlarge"], inference_components=None, tensor_parallel_degree=None, memory_per_copy_mb=1024
        ),
        "True or False",
        "ic-none",
    ),
    case(
        "Capacity",
        "tensor_parallel_degree",
        lambda c: Capacity.plan(
            ["ml.g5.xlarge"], inference_components=True, tensor_parallel_degree=9, memory_per_copy_mb=1024
        ),
        "from 1 to 8",
        "tp-9",
    ),
    case(
        "Capacity",
        "memory_per_copy_mb",
        lambda c: Capacity.plan(
            ["ml.g5.xlarge"], inference_components=True, tensor_parallel_degree=1, memory_per_copy_mb=12.5
        ),
        "an integer",
        "memory-float",
    ),
    # --- the internal constructs a user can reach (endpoint.scaling, endpoint.monitoring, the execution role) ----
    case(
        "ConcurrencyScaling",
        "options",
        lambda c: ConcurrencyScaling(c.stack, c.id(), options=None, metrics=metrics()),
        "a ScalingOptions",
        "options-none",
    ),
    case(
        "ConcurrencyScaling",
        "options",
        lambda c: ConcurrencyScaling(c.stack, c.id(), options={"min_capacity": 1}, metrics=metrics()),
        "a ScalingOptions",
        "options-dict",
    ),
    case(
        "ConcurrencyScaling",
        "metrics",
        lambda c: ConcurrencyScaling(c.stack, c.id(), options=ScalingOptions(), metrics="ep"),
        "an EndpointMetrics",
        "metrics-str",
    ),
    case(
        "ConcurrencyScaling",
        "metrics",
        lambda c: ConcurrencyScaling(c.stack, c.id(), options=ScalingOptions(), metrics=None),
        "an EndpointMetrics",
        "metrics-none",
    ),
    case(
        "ConcurrencyScaling",
        "options",
        lambda c: ConcurrencyScaling(c.stack, c.id(), options=AlarmThresholds(), metrics=metrics()),
        "a ScalingOptions",
        "options-other",
    ),
    case(
        "EndpointMonitoring",
        "metrics",
        lambda c: monitoring(c, metrics=None),
        "an EndpointMetrics",
        "metrics-none",
    ),
    case(
        "EndpointMonitoring",
        "metrics",
        lambda c: monitoring(c, metrics={"endpoint_name": "ep"}),
        "an EndpointMetrics",
        "metrics-dict",
    ),
    case(
        "EndpointMonitoring",
        "topic",
        lambda c: monitoring(c, topic="arn:aws:sns:us-east-1:1:t"),
        "an ITopic",
        "topic-str",
    ),
    case("EndpointMonitoring", "topic", lambda c: monitoring(c, topic=None), "an ITopic", "topic-none"),
    case(
        "EndpointMonitoring",
        "thresholds",
        lambda c: monitoring(c, thresholds=0.01),
        "an AlarmThresholds",
        "thresholds",
    ),
    case("ExecutionRole", "endpoint_name", lambda c: role(c, endpoint_name=""), "a non-empty string", "name"),
    case("ExecutionRole", "image", lambda c: role(c, image="123.dkr.ecr/x"), "a ResolvedImage", "image-str"),
    case("ExecutionRole", "weights", lambda c: role(c, weights="s3://b/m/"), "a ModelWeights", "weights-str"),
    case(
        "ExecutionRole", "subnet_ids", lambda c: role(c, subnet_ids="subnet-1"), "not a list", "subnets-str"
    ),
    case(
        "ExecutionRole", "subnet_ids", lambda c: role(c, subnet_ids=[]), "at least 1 items", "subnets-empty"
    ),
    case(
        "ExecutionRole",
        "security_group",
        lambda c: role(c, security_group="sg-1"),
        "an ISecurityGroup",
        "sg-str",
    ),
    case(
        "ExecutionRole", "log_retention", lambda c: role(c, log_retention=30), "a RetentionDays", "retention"
    ),
]


@pytest.mark.parametrize(("owner", "param", "action", "match"), MISUSE)
def test_misuse_names_the_construct_and_the_parameter(
    shared: Ctx, owner: str, param: str, action: Callable[[Ctx], Any], match: str
) -> None:
    with pytest.raises(ArgumentError) as raised:
        action(shared)
    error = raised.value
    assert (error.owner, error.param) == (owner, param), str(error)
    assert str(error).startswith(f"{owner}: parameter '{param}' got "), str(error)
    assert re.search(match, error.accepted), str(error)
    assert "context key" not in str(error)


def test_each_class_has_at_least_five_misuse_cases() -> None:
    owners = [p.values[0].split(".")[0] for p in MISUSE]
    counts = {owner: owners.count(owner) for owner in set(owners)}
    expected = {
        LLM,
        "ScalingOptions",
        "ModelWeights",
        "AlarmThresholds",
        "EndpointMetrics",
        "Capacity",
        "ConcurrencyScaling",
        "EndpointMonitoring",
        "ExecutionRole",
    }
    assert set(counts) == expected
    assert all(n >= 5 for n in counts.values()), counts


# --- no raw error for any wrong-typed argument ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "param",
    [
        p
        for p in inspect.signature(SageMakerLlmEndpoint.__init__).parameters
        if p not in ("self", "scope", "construct_id")
    ],
)
def test_any_wrong_type_for_an_endpoint_prop_is_an_argument_error(shared: Ctx, param: str) -> None:
    assert_junk_refused_by_name_or_accepted(lambda **kw: llm(shared, **kw), "SageMakerLlmEndpoint", param)


# A valid instance of each props class; the sweep replaces one field at a time.
PROPS_BASES: dict[type, Callable[..., Any]] = {
    ScalingOptions: ScalingOptions,
    AlarmThresholds: AlarmThresholds,
    ModelWeights: lambda **kw: ModelWeights(**{"bucket_name": "my-models", "prefix": "qwen/", **kw}),
    EndpointMetrics: metrics,
}


# ModelWeights takes exactly one of bucket_name and hub_model_id: setting both is reported on bucket_name.
ONE_OF = {ModelWeights: ("bucket_name",)}


@pytest.mark.parametrize("props_class", PROPS_BASES)
def test_any_wrong_type_for_a_props_field_is_an_argument_error(props_class: type) -> None:
    build = PROPS_BASES[props_class]
    assert isinstance(build(), props_class)
    for field in fields(props_class):
        assert_junk_refused_by_name_or_accepted(
            build, props_class.__name__, field.name, also_named=ONE_OF.get(props_class, ())
        )


# --- tokens: accepted where a deploy-time value makes sense, and rendered unparsed -----------------------------------


def resolved(c: Ctx, value: Any) -> Any:
    return c.stack.resolve(value)


def only(template: Template, resource_type: str) -> dict[str, Any]:
    (resource,) = template.find_resources(resource_type).values()
    return dict(resource)


def test_image_from_a_repository_token_is_pulled_from_that_repository(ctx: Ctx) -> None:
    repository = ecr.Repository(ctx.stack, "Repo")
    uri = repository.repository_uri_for_tag("1.0-cu124")
    endpoint = llm(
        ctx,
        engine="byoc",
        image_uri=uri,
        image_repository=repository,
        inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1",
    )
    template = Template.from_stack(ctx.stack)
    container = only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]
    assert container["Image"] == resolved(ctx, uri)
    statements = template.to_json()["Resources"][
        ctx.stack.get_logical_id(endpoint.role.node.find_child("DefaultPolicy").node.default_child)
    ]["Properties"]["PolicyDocument"]["Statement"]
    (pull,) = [s for s in statements if "ecr:BatchGetImage" in s["Action"]]
    assert pull["Resource"] == resolved(ctx, repository.repository_arn)


def test_a_token_image_needs_the_host_ami(ctx: Ctx) -> None:
    repository = ecr.Repository(ctx.stack, "Repo")
    with pytest.raises(ArgumentError, match=r"'inference_ami_version'.*a deploy-time image URI"):
        llm(ctx, engine="byoc", image_uri=repository.repository_uri_for_tag("1"), image_repository=repository)


def test_token_prefix_and_bucket_name_reach_the_template_and_pass_nag(ctx: Ctx) -> None:
    prefix, bucket_name = ctx.text_token(), ctx.text_token()
    own = llm(ctx, weights=ModelWeights.from_bucket(s3.Bucket(ctx.stack, "Weights"), prefix))
    imported = s3.Bucket.from_bucket_name(ctx.stack, "Other", bucket_name)
    other = llm(ctx, weights=ModelWeights.from_bucket(imported, "models/m/"))
    resources = Template.from_stack(ctx.stack).to_json()["Resources"]

    def uri_parts(endpoint: SageMakerLlmEndpoint) -> list[Any]:
        model = resources[ctx.stack.get_logical_id(endpoint.model)]["Properties"]
        parts: list[Any] = model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]["Fn::Join"][
            1
        ]
        return parts

    assert resolved(ctx, prefix) in uri_parts(own)
    assert resolved(ctx, bucket_name) in uri_parts(other)
    # The prefix wildcard on the token is acknowledged under the name cdk-nag gives it (it used to fail synth).
    report = AwsSolutionsChecks().validate_scope(ctx.stack.node.root)
    findings = [
        (v.rule_name, r.construct_path)
        for v in report.violations
        for r in v.violating_resources
        if r.construct_path.startswith("Test/Llm")
    ]
    assert findings == []
    assert report.violations, "the test's own VPC and bucket have findings: nag did run"


def test_tokens_in_strings_and_second_durations_are_passed_through(ctx: Ctx) -> None:
    model_id, served, flag, arn = (ctx.text_token() for _ in range(4))
    startup = ctx.number_token()
    cooldown = ctx.number_token()
    endpoint = llm(
        ctx,
        weights=ModelWeights.from_hub(model_id),
        served_model_name=served,
        engine_args={"enable-prefix-caching": flag},
        capacity_reservation_arn=arn,
        startup_health_check_timeout=cdk.Duration.seconds(startup),
        scaling=ScalingOptions(scale_in_cooldown=cdk.Duration.seconds(cooldown)),
    )
    template = Template.from_stack(ctx.stack)
    env = only(template, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == resolved(ctx, model_id)
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == resolved(ctx, served)
    assert env["SM_VLLM_ENABLE_PREFIX_CACHING"] == resolved(ctx, flag)
    (variant,) = only(template, "AWS::SageMaker::EndpointConfig")["Properties"]["ProductionVariants"]
    assert variant["CapacityReservationConfig"]["MlReservationArn"] == resolved(ctx, arn)
    component = only(template, "AWS::SageMaker::InferenceComponent")["Properties"]["Specification"]
    assert component["StartupParameters"]["ContainerStartupHealthCheckTimeoutInSeconds"] == resolved(
        ctx, startup
    )
    policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")["Properties"]
    assert policy["TargetTrackingScalingPolicyConfiguration"]["ScaleInCooldown"] == resolved(ctx, cooldown)
    assert endpoint.environment["SM_VLLM_MODEL"] == model_id


def test_metrics_of_an_endpoint_named_by_a_token(ctx: Ctx) -> None:
    name = ctx.text_token()
    metric = EndpointMetrics(endpoint_name=name, variant_name="AllTraffic").invocations()
    assert resolved(ctx, metric.dimensions["EndpointName"]) == resolved(ctx, name)


@pytest.mark.parametrize("shape", [ENDPOINT_INSTANCE_TYPES, CLUSTER_INSTANCE_TYPES])
def test_every_gpu_type_the_library_knows_is_one_sagemaker_accepts(shape: str) -> None:
    """botocore 1.44.8 (constraints.txt), botocore/data/sagemaker/2017-07-24/service-2.json: the enums
    ProductionVariantInstanceType (CreateEndpointConfig) and ClusterInstanceType (CreateCluster)."""
    missing = [n for n in GPU_INSTANCE_TYPES if SAGEMAKER_PREFIX + n not in sagemaker_instance_types(shape)]
    assert not missing, missing
