"""Tier 2 ``sagemaker``: an open model on a SageMaker real-time endpoint, in its own VPC.

``npx cdk deploy -c tier=sagemaker`` deploys ``InferenceTiers-SageMaker``: a VPC (private subnets with egress,
flow logs, an S3 gateway endpoint), a KMS-encrypted model bucket (unless ``sagemaker.model_s3_uri`` points at
existing weights) and a :class:`SageMakerLlmEndpoint` configured from the ``sagemaker.*`` context keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from aws_cdk import Annotations, Aws, CfnOutput, Duration, Stack
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    InstanceNeed,
    TierSpec,
    WeightsNeed,
    boolean,
    choice,
    integer,
    items,
    mapping,
    number,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.common.console import dashboard_url
from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.constructs.common.storage import access_logs_bucket, private_bucket
from inference_tiers.constructs.sagemaker.capacity import (
    MAX_INSTANCE_POOLS,
    ROUTING_STRATEGIES,
    Capacity,
    capacity_reservation_config,
    routing_config,
)
from inference_tiers.constructs.sagemaker.endpoint import NEW_BUCKET_WARNING, SageMakerLlmEndpoint
from inference_tiers.constructs.sagemaker.engines import (
    ENGINE_CONVENTIONS,
    ENGINES,
    INFERENCE_AMI_VERSIONS,
    Engine,
    parse_ecr_image,
)
from inference_tiers.constructs.sagemaker.monitoring import AlarmThresholds
from inference_tiers.constructs.sagemaker.scaling import ScalingOptions
from inference_tiers.constructs.sagemaker.weights import ModelWeights
from inference_tiers.constructs.sagemaker.workload import BenchmarkWorkload
from inference_tiers.ops.bench.workload import WorkloadSpec, load_workload, parse_workload
from inference_tiers.ops.models import context_limit
from inference_tiers.tier import Tier
from inference_tiers.validation import Args, ArgumentError

STACK_NAME = "InferenceTiers-SageMaker"
KEY_PREFIX = "sagemaker."
# Where to upload the weights when the stack creates the model bucket: models/<model_id>/.
MODEL_PREFIX = "models/"
# The stack output naming that prefix (preflight reads it before the deploy that adds the endpoint).
WEIGHTS_OUTPUT = "ModelWeightsPrefix"

_CIDR = r"10\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.0\.0/16"
# The construct rules the settings reuse raise ArgumentError; _as_context_key names the context key instead.
_SETTINGS = Args("SageMakerSettings")
# Construct parameters whose context key has another name.
_CONTEXT_KEYS = {"scaling.scale_to_zero": "scale_to_zero", "idle_scale_in": "idle_minutes"}


@contextmanager
def _as_context_key(key: str | None = None) -> Iterator[None]:
    """Re-raise a construct's ArgumentError as a ConfigError for ``sagemaker.<key>`` (default: the context key
    named like the parameter)."""
    try:
        yield
    except ArgumentError as error:
        name = key or _CONTEXT_KEYS.get(error.param, error.param)
        raise ConfigError(f"{KEY_PREFIX}{name}", error.value, error.accepted) from error


def _benchmark_workload(key: str, raw: Any) -> WorkloadSpec:
    """A bench workload spec: inline (a JSON object in cdk.json) or the path of its YAML file (``-c``)."""
    try:
        if isinstance(raw, str):
            return load_workload(Path(raw))
        return parse_workload(raw, f"context key '{key}'")
    except ValueError as error:
        raise ConfigError(
            key, raw, f"a bench workload spec (docs/bench.md) or its file's path: {error}"
        ) from None


@dataclass(frozen=True)
class SageMakerSettings:
    """The ``sagemaker.*`` context keys (defaults in cdk.json)."""

    engine: str = setting(
        choice(*ENGINES), "serving engine: vllm, sglang, lmi or byoc (byoc needs image_uri)"
    )
    image_uri: str | None = setting(
        optional(text(max_length=512)),
        "ECR image replacing the engine's pinned Deep Learning Container; empty: the pinned DLC",
    )
    model_id: str = setting(
        text(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?", max_length=96),
        "model name clients send, the hub id for model_source=hub, and the upload prefix models/<model_id>/",
    )
    model_source: str = setting(
        choice("s3", "hub"), "s3: uncompressed weights under an S3 prefix; hub: download model_id"
    )
    model_s3_uri: str | None = setting(
        optional(text(max_length=1024)),
        "existing weights (s3://bucket/prefix/); empty: a model bucket this stack creates, prefix models/<model_id>/",
    )
    create_endpoint: bool | None = setting(
        optional(boolean()),
        "empty: an endpoint unless the weights would come from the model bucket this stack creates, empty until "
        "you upload them (then set true); true or false: always or never",
    )
    instance_types: tuple[str, ...] = setting(
        items(text(r"ml\.[a-z0-9]+\.[a-z0-9]+"), min_items=1, max_items=MAX_INSTANCE_POOLS),
        "ml. GPU instance types in priority order; two or more make capacity-fallback instance pools",
    )
    topology: str = setting(
        choice("inference-component", "single-model"), "inference-component or single-model"
    )
    tensor_parallel_degree: int | None = setting(
        optional(integer(1, 8)),
        "GPUs per model copy; empty: 1 for inference components, all GPUs for single-model",
    )
    max_model_len: int = setting(integer(256, 1_048_576), "maximum tokens per sequence (prompt plus output)")
    max_concurrent_sequences: int = setting(integer(1, 4096), "sequences the engine batches at once per copy")
    engine_args: dict[str, str] = setting(
        mapping(text(max_length=1024)), 'extra engine flags, e.g. {"enable-prefix-caching": "true"}'
    )
    environment: dict[str, str] = setting(
        mapping(text(max_length=1024), key_pattern=r"[A-Z_][A-Z0-9_]{0,127}"),
        "extra container environment variables (plaintext: no secrets)",
    )
    memory_per_copy_mb: int = setting(
        integer(1024, 2_097_152), "host memory reserved per inference-component copy"
    )
    inference_ami_version: str | None = setting(
        optional(choice(*INFERENCE_AMI_VERSIONS)), "host AMI; empty: derived from the image's CUDA version"
    )
    routing: str = setting(
        choice(*ROUTING_STRATEGIES), "request routing; instance pools need LEAST_OUTSTANDING_REQUESTS"
    )
    prefix_length: int = setting(
        integer(1024, 65536), "prefix-aware routing: prefix length (routing=PREFIX_AWARE)"
    )
    prefix_concurrency_threshold: int = setting(
        integer(1, 1024), "prefix-aware routing: in-flight requests before spilling to another instance"
    )
    provision_timeout_seconds: int = setting(
        integer(300, 3600),
        "with two or more instance_types: how long SageMaker keeps trying pools after capacity errors",
    )
    capacity_reservation_arn: str | None = setting(
        optional(text(max_length=258)),
        "ML capacity reservation or training plan to draw instances from only; empty: on-demand",
    )
    startup_timeout_seconds: int = setting(integer(60, 3600), "container start-up health-check timeout")
    download_timeout_seconds: int = setting(integer(60, 3600), "model download timeout")
    min_capacity: int = setting(
        integer(1, 100), "copies (or instances, single-model) kept while scale_to_zero is off"
    )
    max_capacity: int = setting(integer(1, 100), "maximum copies (or instances, single-model)")
    target_concurrency: int = setting(integer(1, 4096), "in-flight requests per copy (or model) to scale at")
    scale_to_zero: bool = setting(
        boolean(), "allow 0 copies and instances (inference-component topology only)"
    )
    idle_minutes: int = setting(
        integer(0, 1440), "with scale_to_zero: release every copy after this many idle minutes; 0: never"
    )
    latency_slo_ms: int = setting(integer(100, 600_000), "p90 model-latency alarm threshold (whole response)")
    error_rate_percent: float = setting(number(0.01, 100), "5XX error-rate alarm threshold")
    data_capture_percent: int = setting(
        integer(0, 100), "requests and responses captured to an encrypted bucket; 0: off"
    )
    vpc_cidr: str = setting(text(_CIDR, description="a 10.x.0.0/16 CIDR"), "the tier's VPC CIDR")
    benchmark_workload: WorkloadSpec | None = setting(
        optional(_benchmark_workload),
        "opt-in: a bench workload spec (inline or a YAML path) rendered as an AI workload config for SageMaker's "
        "recommendation and benchmark jobs; empty: none",
    )

    def __post_init__(self) -> None:
        # The constructs' own rules, reported under this tier's context keys.
        with _as_context_key():
            capacity = self.capacity()
            routing_config(
                self.routing,
                capacity=capacity,
                prefix_length=self.prefix_length,
                concurrency_threshold=self.prefix_concurrency_threshold,
                args=_SETTINGS,
            )
            capacity_reservation_config(self.capacity_reservation_arn, args=_SETTINGS)
            if self.image_uri is not None:
                parse_ecr_image(self.image_uri, args=_SETTINGS)
            self.scaling_options().check_topology(_SETTINGS, inference_components=self.inference_components)
        if self.model_s3_uri is not None:
            with _as_context_key("model_s3_uri"):
                ModelWeights.from_s3_uri(self.model_s3_uri)
        beyond = context_limit(self.model_id, self.max_model_len)
        if beyond is not None:
            raise ConfigError(f"{KEY_PREFIX}max_model_len", self.max_model_len, beyond)
        if self.engine == "byoc" and self.image_uri is None:
            raise ConfigError(
                f"{KEY_PREFIX}image_uri", self.image_uri, "your ECR image URI when engine is byoc"
            )
        if self.target_concurrency > self.max_concurrent_sequences:
            raise ConfigError(
                f"{KEY_PREFIX}target_concurrency",
                self.target_concurrency,
                f"at most max_concurrent_sequences ({self.max_concurrent_sequences}): beyond it requests only queue",
            )
        if self.model_source == "hub" and self.model_s3_uri is not None:
            raise ConfigError(
                f"{KEY_PREFIX}model_s3_uri", self.model_s3_uri, "empty when model_source is hub"
            )

    @property
    def weights_in_new_bucket(self) -> bool:
        """The weights come from the model bucket this stack creates (empty until the user uploads them)."""
        return self.model_source == "s3" and self.model_s3_uri is None

    @property
    def builds_endpoint(self) -> bool:
        """``create_endpoint``, or when empty: an endpoint unless it would load from the new, empty bucket
        (the inference component cannot download weights and the deploy rolls back)."""
        if self.create_endpoint is not None:
            return self.create_endpoint
        return not self.weights_in_new_bucket

    @property
    def inference_components(self) -> bool:
        return self.topology == "inference-component"

    def scaling_options(self) -> ScalingOptions:
        # Idle scale-in applies only to scale-to-zero; idle_minutes=0 turns it off.
        idle = self.scale_to_zero and self.idle_minutes > 0
        return ScalingOptions(
            min_capacity=self.min_capacity,
            max_capacity=self.max_capacity,
            target_concurrency=self.target_concurrency,
            scale_to_zero=self.scale_to_zero,
            idle_scale_in=Duration.minutes(self.idle_minutes) if idle else None,
        )

    def capacity(self) -> Capacity:
        return Capacity.plan(
            self.instance_types,
            inference_components=self.inference_components,
            tensor_parallel_degree=self.tensor_parallel_degree,
            memory_per_copy_mb=self.memory_per_copy_mb,
            args=_SETTINGS,
        )

    def account_requirements(self) -> AccountRequirements:
        """Endpoint instance quota per pool (any pool may have to supply every instance), the reservation and
        the container image (none when the deploy creates no endpoint)."""
        count = self.capacity().instances_for(self.max_capacity)
        return AccountRequirements(
            instances=tuple(InstanceNeed("sagemaker-endpoint", name, count) for name in self.instance_types),
            capacity_reservation_ids=(self.capacity_reservation_arn,)
            if self.capacity_reservation_arn
            else (),
            images=(self._image(),) if self.builds_endpoint else (),
            model_weights=self._weights_need() if self.builds_endpoint else None,
        )

    def _weights_need(self) -> WeightsNeed | None:
        if self.model_source == "hub":
            return None
        if self.model_s3_uri is not None:
            return WeightsNeed(s3_uri=self.model_s3_uri)
        return WeightsNeed(stack_name=STACK_NAME, output_key=WEIGHTS_OUTPUT)

    def _image(self) -> ImageNeed:
        if self.image_uri is not None:
            return ImageNeed(self.image_uri, f"{KEY_PREFIX}image_uri")
        pinned = ENGINE_CONVENTIONS[cast(Engine, self.engine)].image
        assert pinned is not None  # __post_init__: only byoc has no pinned image, and byoc needs image_uri
        # The engine's pinned Deep Learning Container; image_uri is the key that replaces it.
        return ImageNeed(str(pinned), f"{KEY_PREFIX}image_uri", source="aws-dlc")


class SageMakerStack(Stack):
    """``InferenceTiers-SageMaker``: VPC, model bucket, and the endpoint with its dashboard and alarms."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: SageMakerSettings, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.key = retained_key(
            self, "Key", "inference-tiers sagemaker: model bucket, data capture, flow logs"
        )
        # One NAT gateway: egress for hub downloads; S3 traffic goes through the gateway endpoint.
        self.vpc = create_private_vpc(
            self,
            "Vpc",
            cidr=settings.vpc_cidr,
            flow_log_key=self.key,
            flow_log_retention=logs.RetentionDays.THREE_MONTHS,
        )
        self.access_logs: s3.Bucket | None = None
        self.model_bucket: s3.Bucket | None = None
        weights = self._weights(settings)
        if self.model_bucket is not None:
            prefix = f"s3://{self.model_bucket.bucket_name}/{MODEL_PREFIX}{settings.model_id}/"
            CfnOutput(self, WEIGHTS_OUTPUT, value=prefix, description="Upload the model weights here")
            if not settings.builds_endpoint:
                self._upload_steps(settings, prefix)
        if not settings.builds_endpoint:
            return
        capture = self._bucket("CaptureBucket") if settings.data_capture_percent > 0 else None
        self.endpoint = SageMakerLlmEndpoint(
            self,
            "Llm",
            weights=weights,
            instance_types=settings.instance_types,
            vpc=self.vpc,
            engine=settings.engine,
            image_uri=settings.image_uri,
            served_model_name=settings.model_id,
            tensor_parallel_degree=settings.tensor_parallel_degree,
            max_model_len=settings.max_model_len,
            max_concurrent_sequences=settings.max_concurrent_sequences,
            engine_args=settings.engine_args,
            environment=settings.environment,
            inference_components=settings.inference_components,
            memory_per_copy_mb=settings.memory_per_copy_mb,
            routing=settings.routing,
            prefix_length=settings.prefix_length,
            prefix_concurrency_threshold=settings.prefix_concurrency_threshold,
            # The provisioning timeout governs falling back across pools; one instance type has none to try.
            provision_timeout=(
                Duration.seconds(settings.provision_timeout_seconds)
                if len(settings.instance_types) > 1
                else None
            ),
            capacity_reservation_arn=settings.capacity_reservation_arn,
            inference_ami_version=settings.inference_ami_version,
            startup_health_check_timeout=Duration.seconds(settings.startup_timeout_seconds),
            model_download_timeout=Duration.seconds(settings.download_timeout_seconds),
            scaling=settings.scaling_options(),
            data_capture_bucket=capture,
            data_capture_percentage=settings.data_capture_percent,
            alarm_thresholds=AlarmThresholds(
                error_rate=settings.error_rate_percent / 100,
                latency_slo=Duration.millis(settings.latency_slo_ms),
            ),
        )
        if self.model_bucket is not None:
            Annotations.of(self.endpoint).acknowledge_warning(
                NEW_BUCKET_WARNING,
                "create_endpoint=true over the stack's model bucket: its first deploy created the bucket without "
                "the endpoint, and preflight checks the weights under the prefix before this one",
            )
        self._outputs(self.endpoint, settings)
        if settings.benchmark_workload is not None:
            self.benchmark_workload = BenchmarkWorkload(
                self, "BenchmarkWorkload", workload=settings.benchmark_workload
            )
            CfnOutput(self, "BenchmarkWorkloadConfigName", value=self.benchmark_workload.workload_config_name)

    def _bucket(self, construct_id: str) -> s3.Bucket:
        """A KMS-encrypted, TLS-only, retained bucket whose access logs go to the stack's log bucket."""
        if self.access_logs is None:
            self.access_logs = access_logs_bucket(self, "AccessLogs")
        return private_bucket(
            self,
            construct_id,
            key=self.key,
            access_logs=self.access_logs,
            access_logs_prefix=f"{construct_id}/",
        )

    def _weights(self, settings: SageMakerSettings) -> ModelWeights:
        if settings.model_source == "hub":
            return ModelWeights.from_hub(settings.model_id)
        if settings.model_s3_uri is not None:
            return ModelWeights.from_s3_uri(settings.model_s3_uri)
        self.model_bucket = self._bucket("ModelBucket")
        return ModelWeights.from_bucket(self.model_bucket, f"{MODEL_PREFIX}{settings.model_id}/")

    def _upload_steps(self, settings: SageMakerSettings, prefix: str) -> None:
        """The two steps to the endpoint, in an output, and in a synth warning when the empty default chose to
        build none."""
        add_endpoint = (
            f'set "{KEY_PREFIX}create_endpoint": true in cdk.json (keep it: a deploy without it removes the '
            "endpoint) and run npx cdk deploy -c tier=sagemaker"
        )
        CfnOutput(
            self,
            "NextSteps",
            value=f"1. aws s3 sync <local model dir> {prefix} --exclude '.cache/*'  2. {add_endpoint}",
            description="How to add the endpoint",
        )
        if settings.create_endpoint is None:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:sagemaker-no-endpoint-until-weights",
                "No endpoint in this deploy: the weights come from the model bucket this stack creates, which is "
                f"empty until you upload them. After the deploy: 1. upload the uncompressed weights to the "
                f"{WEIGHTS_OUTPUT} output (models/{settings.model_id}/ of the bucket) 2. {add_endpoint}. "
                f"Or serve existing weights with {KEY_PREFIX}model_s3_uri, or {KEY_PREFIX}model_source=hub.",
            )

    def _outputs(self, endpoint: SageMakerLlmEndpoint, settings: SageMakerSettings) -> None:
        CfnOutput(self, "EndpointName", value=endpoint.endpoint_name)
        if endpoint.inference_component_name is not None:
            CfnOutput(self, "InferenceComponentName", value=endpoint.inference_component_name)
        CfnOutput(self, "InvokeUrl", value=endpoint.openai_base_url)
        CfnOutput(
            self,
            "DashboardUrl",
            value=dashboard_url(endpoint.dashboard),
        )
        body = json.dumps(
            {
                "model": settings.model_id,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 64,
            }
        )
        component = (
            f" --inference-component-name {endpoint.inference_component_name}"
            if endpoint.inference_component_name
            else ""
        )
        CfnOutput(
            self,
            "InvokeExample",
            value=f"aws sagemaker-runtime invoke-endpoint --region {Aws.REGION} --endpoint-name "
            f"{endpoint.endpoint_name}{component} --content-type application/json "
            f"--cli-binary-format raw-in-base64-out --body '{body}' /dev/stdout",
        )


def build(app: Construct, settings: SageMakerSettings) -> list[Stack]:
    return [
        SageMakerStack(
            app, STACK_NAME, settings=settings, description="inference-tiers tier 2: SageMaker endpoint"
        )
    ]


TIER = Tier(spec=TierSpec("sagemaker", SageMakerSettings), build=build)
