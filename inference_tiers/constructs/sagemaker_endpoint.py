"""SageMakerLlmEndpoint: an open or fine-tuned LLM on a SageMaker real-time endpoint, built on the L1s.

What the existing libraries miss and this construct does (see docs/sagemaker.md):

- inference components by default (per-copy scaling, rolling copy updates, scale-to-zero), single model as
  an option; concurrency-based autoscaling (``sagemaker_scaling``);
- capacity fallback over up to five prioritised instance pools (least-outstanding-requests routing, which
  pools require), optional ML capacity reservation or training plan, provisioning timeout;
- the host AMI derived from the container's CUDA version; start-up and download timeouts sized for large models;
- a least-privilege execution role, with the Model depending on the role's policy (``CreateModel`` checks
  ECR and S3 access when it runs); private subnets; KMS where the instance type allows it;
- generated names for immutable resources (Model, EndpointConfig), so updates never collide; stable generated
  names for the Endpoint and inference component, which alarms and scaling targets refer to;
- enhanced metrics every 10 s, detailed observability, alarms to an encrypted topic and a dashboard.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import jsii
from aws_cdk import Annotations, ArnFormat, Aws, Duration, Names, RemovalPolicy, Stack, Token
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from inference_tiers.constructs.sagemaker_engines import (
    INFERENCE_AMI_VERSIONS,
    MODEL_MOUNT_PATH,
    ResolvedImage,
    dlc_image,
    ecr_image,
    engine_convention,
    inference_ami_for_cuda,
)
from inference_tiers.constructs.sagemaker_monitoring import (
    AlarmThresholds,
    EndpointMetrics,
    EndpointMonitoring,
)
from inference_tiers.constructs.sagemaker_scaling import ConcurrencyScaling, ScalingOptions
from inference_tiers.constructs.sagemaker_weights import ModelWeights
from inference_tiers.instance_types import GpuInstanceType, gpu_instance_type
from inference_tiers.nag import acknowledge

Routing = Literal["LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM"]
ROUTING_STRATEGIES: tuple[Routing, ...] = ("LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM")
MAX_INSTANCE_POOLS = 5
VARIANT_NAME = "AllTraffic"
_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Large models take tens of minutes to download and load; SageMaker accepts 60-3600 s.
DEFAULT_MODEL_TIMEOUT = Duration.minutes(30)
_RESERVATION_ARN = re.compile(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:[a-z0-9-]{1,14}/\S+")


def instance_pools(instance_types: Sequence[str], *, key: str = "instance_types") -> list[GpuInstanceType]:
    """The facts for 1 to 5 SageMaker GPU instance types, in priority order; ValueError otherwise."""
    if not 1 <= len(instance_types) <= MAX_INSTANCE_POOLS:
        raise ValueError(
            f"{key}: got {len(instance_types)} instance types {list(instance_types)}; expected 1 to "
            f"{MAX_INSTANCE_POOLS} (SageMaker instance pools hold at most {MAX_INSTANCE_POOLS} types)"
        )
    if len(set(instance_types)) != len(instance_types):
        raise ValueError(f"{key}: got {list(instance_types)}; expected distinct instance types")
    return [
        gpu_instance_type(name, key=f"{key}[{i}]", sagemaker=True) for i, name in enumerate(instance_types)
    ]


def copies_per_instance(
    pools: Sequence[GpuInstanceType], *, gpus_per_copy: int, memory_per_copy_mb: int
) -> int:
    """How many copies fit on the smallest pool, by GPUs and by host memory (at least one, validated elsewhere)."""
    return max(
        1,
        min(min(p.gpus // gpus_per_copy, (p.memory_gib * 1024) // memory_per_copy_mb) for p in pools),
    )


def max_instance_count(
    pools: Sequence[GpuInstanceType],
    *,
    inference_components: bool,
    max_capacity: int,
    gpus_per_copy: int,
    memory_per_copy_mb: int,
) -> int:
    """Instances needed at ``max_capacity`` copies (inference components) or instances (single model)."""
    if not inference_components:
        return max_capacity
    per_instance = copies_per_instance(
        pools, gpus_per_copy=gpus_per_copy, memory_per_copy_mb=memory_per_copy_mb
    )
    return math.ceil(max_capacity / per_instance)


def _seconds(value: Duration, *, key: str, minimum: int, maximum: int) -> int:
    seconds = int(value.to_seconds())
    if not minimum <= seconds <= maximum:
        raise ValueError(f"{key}: got {seconds} seconds; expected {minimum} to {maximum} seconds")
    return seconds


@jsii.implements(iam.IGrantable, ec2.IConnectable)
class SageMakerLlmEndpoint(Construct):
    """An LLM served by vLLM, SGLang, LMI or your own container on a SageMaker real-time endpoint.

    Props (keyword-only):

    - ``weights``: :class:`ModelWeights` (S3 prefix recommended, or a hub model id).
    - ``instance_types``: 1 to 5 ``ml.`` GPU instance types in priority order; more than one makes
      capacity-fallback instance pools.
    - ``vpc``; ``vpc_subnets`` (default: private subnets with egress).
    - ``engine``: ``vllm`` (default), ``sglang``, ``lmi`` or ``byoc``.
    - ``image_uri``: an ECR image replacing the engine's pinned DLC (required for ``byoc``).
    - ``served_model_name``: the model name clients send (default: the hub id, or none for S3 weights).
    - ``tensor_parallel_degree``: GPUs per model copy (default: all GPUs of the smallest pool, for single
      model; 1 for inference components); at most the GPU count of every pool.
    - ``max_model_len``, ``max_concurrent_sequences``: engine limits (default: the engine's own).
    - ``engine_args``: further engine flags, ``{"enable-prefix-caching": "true"}``, mapped to the engine's
      variable convention; ``environment``: raw extra variables (plaintext in the template: no secrets).
    - ``inference_components``: True (default) or False for a single-model endpoint.
    - ``memory_per_copy_mb``: host memory reserved per inference-component copy (default 16384).
    - ``routing``: ``LEAST_OUTSTANDING_REQUESTS`` (default), ``PREFIX_AWARE`` (with ``prefix_length`` 1024-65536,
      default 4096, and ``prefix_concurrency_threshold`` 1-1024, default 16) or ``RANDOM``. Pools need the default.
    - ``provision_timeout``: how long to keep trying pools after capacity errors (300-3600 s; default service's).
    - ``capacity_reservation_arn``: an ML capacity reservation or training plan to draw instances from only.
    - ``inference_ami_version``: host AMI (default: derived from the image's CUDA version).
    - ``startup_health_check_timeout``, ``model_download_timeout``: 60-3600 s (default 30 minutes each).
    - ``scaling``: :class:`ScalingOptions` (default: 1 to 2, target 16 concurrent requests, no scale-to-zero).
    - ``volume_kms_key``: KMS key for the instance storage volume; rejected on local-NVMe instance types,
      which SageMaker encrypts itself and where ``CreateEndpointConfig`` fails with a key.
    - ``encryption_key``: KMS key for the log groups and alarm topic (default: a new key with rotation, retained).
    - ``data_capture_bucket`` (default none: capture off), ``data_capture_percentage`` (default 20).
    - ``alarm_topic``: where alarms go (default: a new KMS-encrypted topic); ``alarm_thresholds``.
    - ``log_retention``: endpoint log retention (default three months).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        weights: ModelWeights,
        instance_types: Sequence[str],
        vpc: ec2.IVpc,
        vpc_subnets: ec2.SubnetSelection | None = None,
        engine: str = "vllm",
        image_uri: str | None = None,
        served_model_name: str | None = None,
        tensor_parallel_degree: int | None = None,
        max_model_len: int | None = None,
        max_concurrent_sequences: int | None = None,
        engine_args: Mapping[str, str] | None = None,
        environment: Mapping[str, str] | None = None,
        inference_components: bool = True,
        memory_per_copy_mb: int = 16384,
        routing: str = "LEAST_OUTSTANDING_REQUESTS",
        prefix_length: int = 4096,
        prefix_concurrency_threshold: int = 16,
        provision_timeout: Duration | None = None,
        capacity_reservation_arn: str | None = None,
        inference_ami_version: str | None = None,
        startup_health_check_timeout: Duration = DEFAULT_MODEL_TIMEOUT,
        model_download_timeout: Duration = DEFAULT_MODEL_TIMEOUT,
        scaling: ScalingOptions | None = None,
        volume_kms_key: kms.IKey | None = None,
        encryption_key: kms.IKey | None = None,
        data_capture_bucket: s3.IBucket | None = None,
        data_capture_percentage: int = 20,
        alarm_topic: sns.ITopic | None = None,
        alarm_thresholds: AlarmThresholds | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
    ) -> None:
        super().__init__(scope, construct_id)
        scaling = scaling or ScalingOptions()
        convention = engine_convention(engine)
        pools = instance_pools(instance_types)
        scaling.validate(inference_components=inference_components)
        if routing not in ROUTING_STRATEGIES:
            raise ValueError(f"routing: got {routing!r}; expected one of {', '.join(ROUTING_STRATEGIES)}")
        if len(pools) > 1 and routing != "LEAST_OUTSTANDING_REQUESTS":
            raise ValueError(
                f"routing: got {routing!r} with {len(pools)} instance pools; expected LEAST_OUTSTANDING_REQUESTS "
                f"(SageMaker requires it for instance pools), or a single instance type"
            )
        smallest_gpus = min(p.gpus for p in pools)
        tp = tensor_parallel_degree or (1 if inference_components else smallest_gpus)
        for pool in pools:
            if not 1 <= tp <= pool.gpus:
                raise ValueError(
                    f"tensor_parallel_degree: got {tp}; expected 1 to {pool.gpus} (ml.{pool.name} has "
                    f"{pool.gpus} GPU{'s' if pool.gpus > 1 else ''}; every instance pool must fit one model copy)"
                )
            if inference_components and memory_per_copy_mb > pool.memory_gib * 1024:
                raise ValueError(
                    f"memory_per_copy_mb: got {memory_per_copy_mb}; expected at most {pool.memory_gib * 1024} "
                    f"(the host memory of ml.{pool.name})"
                )
        if volume_kms_key is not None:
            nvme = [f"ml.{p.name}" for p in pools if p.local_nvme]
            if nvme:
                raise ValueError(
                    f"volume_kms_key: got a key with instance types {nvme}, which have local NVMe storage; "
                    f"expected no key (SageMaker rejects KmsKeyId on instances with local storage and encrypts "
                    f"their NVMe volumes itself), or EBS-only instance types"
                )
        if (
            capacity_reservation_arn is not None
            and not Token.is_unresolved(capacity_reservation_arn)
            and not _RESERVATION_ARN.fullmatch(capacity_reservation_arn)
        ):
            raise ValueError(
                f"capacity_reservation_arn: got {capacity_reservation_arn!r}; expected an ML reservation or "
                f"training-plan ARN: arn:aws:sagemaker:<region>:<account>:training-plan/<name>"
            )
        if routing == "PREFIX_AWARE":
            if not 1024 <= prefix_length <= 65536:
                raise ValueError(f"prefix_length: got {prefix_length}; expected 1024 to 65536")
            if not 1 <= prefix_concurrency_threshold <= 1024:
                raise ValueError(
                    f"prefix_concurrency_threshold: got {prefix_concurrency_threshold}; expected 1 to 1024"
                )
        if data_capture_bucket is not None and not 0 < data_capture_percentage <= 100:
            raise ValueError(f"data_capture_percentage: got {data_capture_percentage}; expected 1 to 100")
        startup_seconds = _seconds(
            startup_health_check_timeout, key="startup_health_check_timeout", minimum=60, maximum=3600
        )
        download_seconds = _seconds(
            model_download_timeout, key="model_download_timeout", minimum=60, maximum=3600
        )
        provision_seconds = (
            None
            if provision_timeout is None
            else _seconds(provision_timeout, key="provision_timeout", minimum=300, maximum=3600)
        )
        if convention.engine == "byoc" and image_uri is None:
            raise ValueError("image_uri: got None with engine 'byoc'; expected your ECR image URI")

        self.inference_components = inference_components
        self.instance_pools = pools
        self.tensor_parallel_degree = tp
        self.scaling_options = scaling
        # Stable, generated names: alarms, scaling targets and the invoke URL refer to them, and only a change
        # of name replaces an Endpoint. Model and EndpointConfig (immutable) keep CloudFormation-generated names.
        self.endpoint_name = Names.unique_resource_name(self, max_length=56, separator="-").lower()
        self.inference_component_name = f"{self.endpoint_name}-ic" if inference_components else None
        self.variant_name = VARIANT_NAME
        self.metrics = EndpointMetrics(
            endpoint_name=self.endpoint_name,
            variant_name=VARIANT_NAME,
            inference_component_name=self.inference_component_name,
        )
        self.stack = Stack.of(self)
        self.endpoint_arn = self.stack.format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name
        )

        image: ResolvedImage
        if image_uri is not None:
            image = ecr_image(self, image_uri)
            image_label = image_uri
        else:
            assert convention.image is not None  # every engine but byoc pins a DLC; byoc requires image_uri
            image = dlc_image(self, convention.image)
            image_label = f"{convention.image.repository}:{convention.image.tag}"
        self.image_uri = image.uri
        if inference_ami_version is None:
            inference_ami_version = inference_ami_for_cuda(image.cuda_version, image=image_label)
        elif inference_ami_version not in INFERENCE_AMI_VERSIONS:
            raise ValueError(
                f"inference_ami_version: got {inference_ami_version!r}; expected one of {', '.join(INFERENCE_AMI_VERSIONS)}"
            )
        self.inference_ami_version = inference_ami_version

        model_location = MODEL_MOUNT_PATH if weights.is_s3 else weights.hub_model_id
        assert model_location is not None
        env = convention.environment(
            model=model_location,
            served_model_name=served_model_name or weights.hub_model_id,
            tensor_parallel_degree=tp,
            max_model_len=max_model_len,
            max_concurrent_sequences=max_concurrent_sequences,
            engine_args=engine_args or {},
        )
        for name, value in (environment or {}).items():
            if name in env:
                raise ValueError(
                    f"environment: got {name!r}, which the engine settings already set; expected a new name"
                )
            env[name] = value
        tokens = sorted(set(env) & set(_TOKEN_VARIABLES))
        if tokens:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:sagemaker-plaintext-token",
                f"{', '.join(tokens)} is a plaintext environment variable: it is readable in the template, "
                f"DescribeModel and CloudFormation events. Stage the weights in S3 (ModelWeights.from_s3_uri) instead.",
            )
        self.environment = env

        # --- security: key, role, network -------------------------------------------------------------
        self.encryption_key = encryption_key or kms.Key(
            self,
            "Key",
            description=f"Logs and alarm topic of SageMaker endpoint {self.endpoint_name}",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"Execution role of SageMaker endpoint {self.endpoint_name}",
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"SageMaker endpoint {self.endpoint_name} model containers",
            allow_all_outbound=False,
        )
        # HTTPS only: the S3 gateway endpoint for the weights, and the model hub through NAT for hub weights.
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to S3 and model hubs"
        )
        self._connections = ec2.Connections(security_groups=[self.security_group])
        selection = vpc_subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        subnets = vpc.select_subnets(
            availability_zones=selection.availability_zones,
            one_per_az=selection.one_per_az,
            subnet_filters=selection.subnet_filters,
            subnet_group_name=selection.subnet_group_name,
            subnets=selection.subnets,
            subnet_type=selection.subnet_type,
        )
        vpc_config = {
            "security_group_ids": [self.security_group.security_group_id],
            "subnets": subnets.subnet_ids,
        }
        self.log_groups = self._log_groups(log_retention)
        self._grant_execution(image, weights)

        # --- model, endpoint config, endpoint, inference component -------------------------------------
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                mode="SingleModel",
                environment=env,
                model_data_source=(
                    sagemaker.CfnModel.ModelDataSourceProperty(
                        s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                            s3_uri=weights.s3_uri, s3_data_type="S3Prefix", compression_type="None"
                        )
                    )
                    if weights.is_s3
                    else None
                ),
            ),
            enable_network_isolation=weights.is_s3,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(**vpc_config),
        )
        # CreateModel validates ECR and S3 access: the policy must exist first (Role alone is not enough).
        self.model.node.add_dependency(self.role)

        self.monitoring = EndpointMonitoring(
            self,
            "Monitoring",
            metrics=self.metrics,
            topic=alarm_topic or self._alarm_topic(),
            thresholds=alarm_thresholds or AlarmThresholds(),
        )
        rollback_alarms = [self.monitoring.error_rate_alarm, self.monitoring.latency_alarm]
        # Deployment guardrails read the rollback alarms with the execution role.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:DescribeAlarms"], resources=[a.alarm_arn for a in rollback_alarms]
            )
        )

        max_instances = max_instance_count(
            pools,
            inference_components=inference_components,
            max_capacity=scaling.max_capacity,
            gpus_per_copy=tp,
            memory_per_copy_mb=memory_per_copy_mb,
        )
        self.max_instance_count = max_instances
        initial_instances = max_instance_count(
            pools,
            inference_components=inference_components,
            max_capacity=scaling.min_capacity,
            gpus_per_copy=tp,
            memory_per_copy_mb=memory_per_copy_mb,
        )
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            model_name=None if inference_components else self.model.attr_model_name,
            instance_type=instance_types[0] if len(pools) == 1 else None,
            instance_pools=(
                [
                    sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=name, priority=priority)
                    for priority, name in enumerate(instance_types, start=1)
                ]
                if len(pools) > 1
                else None
            ),
            initial_instance_count=initial_instances,
            initial_variant_weight=1,
            inference_ami_version=inference_ami_version,
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy=routing,
                prefix_aware_routing_config=(
                    sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
                        prefix_length=prefix_length, concurrency_threshold=prefix_concurrency_threshold
                    )
                    if routing == "PREFIX_AWARE"
                    else None
                ),
            ),
            # Inference components: SageMaker adds and removes instances as copies need them.
            managed_instance_scaling=(
                sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED",
                    min_instance_count=0 if scaling.scale_to_zero else initial_instances,
                    max_instance_count=max_instances,
                )
                if inference_components
                else None
            ),
            # For inference components these timeouts are set per component (StartupParameters).
            container_startup_health_check_timeout_in_seconds=None
            if inference_components
            else startup_seconds,
            model_data_download_timeout_in_seconds=None if inference_components else download_seconds,
            variant_instance_provision_timeout_in_seconds=provision_seconds,
            capacity_reservation_config=(
                sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
                    capacity_reservation_preference="capacity-reservations-only",
                    ml_reservation_arn=capacity_reservation_arn,
                )
                if capacity_reservation_arn
                else None
            ),
        )
        if volume_kms_key is not None:
            volume_kms_key.grant(self.role, "kms:CreateGrant", "kms:Decrypt", "kms:GenerateDataKey*")
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[variant],
            # An endpoint hosting inference components has no model on its variant: it takes its role,
            # network and isolation settings here.
            execution_role_arn=self.role.role_arn if inference_components else None,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(**vpc_config)
            if inference_components
            else None,
            enable_network_isolation=weights.is_s3 if inference_components else None,
            kms_key_id=volume_kms_key.key_arn if volume_kms_key else None,
            metrics_config=sagemaker.CfnEndpointConfig.MetricsConfigProperty(
                enable_enhanced_metrics=True,
                metric_publish_frequency_in_seconds=10,
                enable_detailed_observability=True,
            ),
            data_capture_config=self._data_capture(data_capture_bucket, data_capture_percentage),
        )
        self.endpoint_config.node.add_dependency(self.role)
        rolling = {
            "maximum_execution_timeout_in_seconds": 7200,  # large models load for tens of minutes
            "wait_interval_in_seconds": 300,  # bake time: rollback alarms evaluate 3 of 5 minutes
        }
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Autoscaling owns the instance count: a stack update must not reset it to the initial count.
            retain_all_variant_properties=True,
            deployment_config=(
                None
                if inference_components
                else sagemaker.CfnEndpoint.DeploymentConfigProperty(
                    rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                        maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                            type="CAPACITY_PERCENT", value=25
                        ),
                        rollback_maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                            type="CAPACITY_PERCENT", value=100
                        ),
                        **rolling,
                    ),
                    auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                        alarms=[
                            sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name)
                            for a in rollback_alarms
                        ]
                    ),
                )
            ),
        )
        self.inference_component: sagemaker.CfnInferenceComponent | None = None
        if self.inference_component_name is not None:
            self.inference_component = sagemaker.CfnInferenceComponent(
                self,
                "InferenceComponent",
                endpoint_name=self.endpoint.attr_endpoint_name,
                inference_component_name=self.inference_component_name,
                variant_name=VARIANT_NAME,
                specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    model_name=self.model.attr_model_name,
                    compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                        number_of_accelerator_devices_required=tp,
                        min_memory_required_in_mb=memory_per_copy_mb,
                    ),
                    startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                        container_startup_health_check_timeout_in_seconds=startup_seconds,
                        model_data_download_timeout_in_seconds=download_seconds,
                    ),
                ),
                runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                    copy_count=scaling.min_capacity
                ),
                deployment_config=sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
                    # One copy at a time: an update never needs twice the GPUs.
                    rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
                        maximum_batch_size=sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
                            type="COPY_COUNT", value=1
                        ),
                        rollback_maximum_batch_size=sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
                            type="CAPACITY_PERCENT", value=100
                        ),
                        **rolling,
                    ),
                    auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
                        alarms=[
                            sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=a.alarm_name)
                            for a in rollback_alarms
                        ]
                    ),
                ),
            )
            self.inference_component.node.add_dependency(self.role)

        # --- autoscaling ---------------------------------------------------------------------------------
        if self.inference_component_name is not None:
            assert self.inference_component is not None
            self.scaling = ConcurrencyScaling(
                self,
                "Scaling",
                options=scaling,
                resource_id=f"inference-component/{self.inference_component_name}",
                scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION,
                no_capacity_failures=self.metrics.no_capacity_invocation_failures(),
                invocations=self.metrics.invocations(),
            )
            self.scaling.node.add_dependency(self.inference_component)
        else:
            self.scaling = ConcurrencyScaling(
                self,
                "Scaling",
                options=scaling,
                resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
                scalable_dimension="sagemaker:variant:DesiredInstanceCount",
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
            )
            self.scaling.node.add_dependency(self.endpoint)
        self._acknowledge_findings(weights, data_capture_bucket)

    # --- public API ---------------------------------------------------------------------------------------

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self.role

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    @property
    def dashboard(self) -> cloudwatch.Dashboard:
        return self.monitoring.dashboard

    @property
    def openai_base_url(self) -> str:
        """The OpenAI-compatible base URL (append ``/chat/completions``); callers sign or use a bearer token."""
        base = f"https://runtime.sagemaker.{Aws.REGION}.{Aws.URL_SUFFIX}/endpoints/{self.endpoint_name}"
        if self.inference_component_name is not None:
            base += f"/inference-components/{self.inference_component_name}"
        return base + "/openai/v1"

    def grant_invoke(self, grantee: iam.IGrantable, *, bearer_token: bool = False) -> iam.Grant:
        """Allow ``grantee`` to invoke the endpoint, streaming included; ``bearer_token`` adds the
        OpenAI-compatible bearer-token API (``sagemaker:CallWithBearerToken``)."""
        actions = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
        if bearer_token:
            actions.append("sagemaker:CallWithBearerToken")
        return iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=[self.endpoint_arn])

    def metric(
        self, metric_name: str, *, namespace: str = "AWS/SageMaker", statistic: str = "Sum"
    ) -> cloudwatch.Metric:
        """Any metric of this endpoint (or of its inference component); see :class:`EndpointMetrics`."""
        return self.metrics.metric(metric_name, namespace=namespace, statistic=statistic)

    def metric_invocations(self) -> cloudwatch.Metric:
        return self.metrics.invocations()

    def metric_invocation_5xx_error_rate(self) -> cloudwatch.Metric:
        return self.metrics.invocation_5xx_error_rate()

    def metric_model_latency(self, statistic: str = "p90") -> cloudwatch.Metric:
        return self.metrics.model_latency(statistic)

    def metric_concurrent_requests(self, statistic: str = "Maximum") -> cloudwatch.Metric:
        return self.metrics.concurrent_requests(statistic)

    def metric_gpu_utilization(self) -> cloudwatch.Metric:
        return self.metrics.gpu_utilization()

    def metric_gpu_memory_utilization(self) -> cloudwatch.Metric:
        return self.metrics.gpu_memory_utilization()

    # --- internals ------------------------------------------------------------------------------------------

    def _log_groups(self, retention: logs.RetentionDays) -> list[logs.LogGroup]:
        """Create the log groups SageMaker writes to, so they are encrypted, retained and expire."""
        names = [f"/aws/sagemaker/Endpoints/{self.endpoint_name}"]
        if self.inference_component_name is not None:
            names.append(f"/aws/sagemaker/InferenceComponents/{self.inference_component_name}")
        stack = Stack.of(self)
        groups = []
        for construct_id, name in zip(("EndpointLogs", "ComponentLogs"), names, strict=False):
            arn = stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            self.encryption_key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                    actions=[
                        "kms:Encrypt*",
                        "kms:Decrypt*",
                        "kms:ReEncrypt*",
                        "kms:GenerateDataKey*",
                        "kms:Describe*",
                    ],
                    resources=["*"],
                    conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": arn}},
                )
            )
            groups.append(
                logs.LogGroup(
                    self,
                    construct_id,
                    log_group_name=name,
                    encryption_key=self.encryption_key,
                    retention=retention,
                    removal_policy=RemovalPolicy.RETAIN,
                )
            )
        return groups

    def _alarm_topic(self) -> sns.Topic:
        # CloudWatch must be able to use the key to publish to the encrypted topic.
        self.encryption_key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        return sns.Topic(self, "AlarmTopic", master_key=self.encryption_key, enforce_ssl=True)

    def _grant_execution(self, image: ResolvedImage, weights: ModelWeights) -> None:
        """The execution role: pull this image, read these weights, write these logs, manage ENIs."""
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                resources=[image.repository_arn],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        for statement in weights.read_statements(self):
            self.role.add_to_principal_policy(statement)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[f"{group.log_group_arn}" for group in self.log_groups],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["cloudwatch:PutMetricData"], resources=["*"])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],
            )
        )

    def _data_capture(
        self, bucket: s3.IBucket | None, percentage: int
    ) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        if bucket is None:
            return None
        prefix = f"data-capture/{self.endpoint_name}/"
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{prefix}*")])
        )
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant(self.role, "kms:GenerateDataKey", "kms:Encrypt")
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=percentage,
            destination_s3_uri=f"s3://{bucket.bucket_name}/{prefix}",
            kms_key_id=bucket.encryption_key.key_arn if bucket.encryption_key else None,
            capture_options=[
                sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=mode)
                for mode in ("Input", "Output")
            ],
            capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                json_content_types=["application/json"]
            ),
        )

    def _acknowledge_findings(self, weights: ModelWeights, capture_bucket: s3.IBucket | None) -> None:
        policy = self.role.node.find_child("DefaultPolicy")
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData and the ec2 network-interface actions SageMaker "
            "needs to place the model in the VPC support no resource-level permissions; image pulls, logs and "
            "model reads are scoped to their ARNs in the same policy",
        )
        weights_id = weights.nag_resource_id(self)
        if weights_id is not None:
            acknowledge(
                policy,
                f"AwsSolutions-IAM5[Resource::{weights_id}]",
                "The model is a directory of files (config, tokenizer, safetensors shards) that SageMaker copies "
                "as a whole; the wildcard covers only objects under this model's prefix",
            )
        if capture_bucket is not None:
            cfn_bucket = capture_bucket.node.default_child
            bucket_id = (
                f"<{Stack.of(self).get_logical_id(cfn_bucket)}.Arn>"
                if isinstance(cfn_bucket, s3.CfnBucket)
                else capture_bucket.bucket_arn
            )
            acknowledge(
                policy,
                f"AwsSolutions-IAM5[Resource::{bucket_id}/data-capture/{self.endpoint_name}/*]",
                "SageMaker writes one capture file per batch of requests with generated names; the wildcard "
                "covers only this endpoint's capture prefix and the role can only put objects there",
            )
