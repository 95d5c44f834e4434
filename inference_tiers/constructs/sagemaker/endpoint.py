"""SageMakerLlmEndpoint: an open or fine-tuned LLM on a SageMaker real-time endpoint, built on the L1s.

What the existing libraries miss and this construct does (see docs/sagemaker.md):

- inference components by default (per-copy scaling, rolling copy updates, scale-to-zero), single model as
  an option; concurrency-based autoscaling (``scaling.py``);
- capacity fallback over up to five prioritised instance pools with the least-outstanding-requests routing
  pools require, an optional ML capacity reservation or training plan, a provisioning timeout
  (``capacity.py``);
- the host AMI derived from the container's CUDA version, engine conventions and pinned images
  (``engines.py``); start-up and download timeouts sized for large models;
- a least-privilege execution role (``security.py``), with the Model depending on the role's policy
  because ``CreateModel`` checks ECR and S3 access when it runs; private subnets; KMS where the instance type
  allows it;
- generated names for immutable resources (Model, EndpointConfig), so updates never collide; stable generated
  names for the Endpoint and inference component, which alarms and scaling targets refer to;
- enhanced metrics every 10 s, detailed observability, alarms to an encrypted topic and a dashboard
  (``monitoring.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jsii
from aws_cdk import Annotations, Aws, Duration, Names, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.encryption import encrypted_alarm_topic, retained_key
from inference_tiers.constructs.common.nag import acknowledge, nag_resource_id
from inference_tiers.constructs.sagemaker.capacity import (
    Capacity,
    capacity_reservation_config,
    routing_config,
)
from inference_tiers.constructs.sagemaker.engines import (
    ENGINE_CONVENTIONS,
    ENGINES,
    ENVIRONMENT_VARIABLE,
    INFERENCE_AMI_VERSIONS,
    MAX_ENVIRONMENT_VALUE,
    MAX_ENVIRONMENT_VARIABLES,
    MODEL_MOUNT_PATH,
    EngineConvention,
    dlc_image,
    ecr_image,
    inference_ami_for_cuda,
)
from inference_tiers.constructs.sagemaker.monitoring import (
    AlarmThresholds,
    EndpointMetrics,
    EndpointMonitoring,
)
from inference_tiers.constructs.sagemaker.scaling import ConcurrencyScaling, ScalingOptions
from inference_tiers.constructs.sagemaker.security import ExecutionRole
from inference_tiers.constructs.sagemaker.weights import ModelWeights
from inference_tiers.ops.models import context_limit
from inference_tiers.validation import Args, is_token

VARIANT_NAME = "AllTraffic"
# Large models take tens of minutes to download and load; SageMaker accepts 60-3600 s.
DEFAULT_MODEL_TIMEOUT = Duration.minutes(30)
_MODEL_TIMEOUT_RANGE = {"minimum": Duration.seconds(60), "maximum": Duration.seconds(3600)}
_PROVISION_TIMEOUT_RANGE = {"minimum": Duration.seconds(300), "maximum": Duration.seconds(3600)}
# Engine limits: positive, and far above any model's context or batch today (a typo, not a model, beyond).
_MAX_MODEL_LEN = 16_777_216
_MAX_CONCURRENT_SEQUENCES = 65_536
# VpcConfig.Subnets takes 1 to 16 subnets.
_MAX_SUBNETS = 16
_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Rolling updates: large models load for tens of minutes; the bake time lets the rollback alarms
# (3 of 5 one-minute periods) evaluate before the next batch.
_ROLLING_TIMEOUT_SECONDS = 7200
_ROLLING_BAKE_SECONDS = 300


# Synth warning: the weights' bucket is created in the endpoint's own stack (empty when both first deploy).
NEW_BUCKET_WARNING = "inference-tiers:sagemaker-weights-in-new-bucket"


@jsii.implements(iam.IGrantable, ec2.IConnectable)
class SageMakerLlmEndpoint(Construct):
    """An LLM served by vLLM, SGLang, LMI or your own container on a SageMaker real-time endpoint.

    Props (keyword-only). Each is checked when the construct is created: a wrong type, value or combination
    raises ArgumentError (a ValueError) naming this construct and the parameter. Props documented as accepting
    tokens take deploy-time values (a ``CfnParameter``, an attribute of another resource) unparsed.

    - ``weights``: :class:`ModelWeights` (S3 prefix recommended, or a hub model id).
    - ``instance_types``: a list of 1 to 5 distinct ``ml.`` GPU instance types in priority order; more than one
      makes capacity-fallback instance pools.
    - ``vpc``: an ``ec2.IVpc``; ``vpc_subnets``: an ``ec2.SubnetSelection`` of 1 to 16 subnets (default: the
      private subnets with egress).
    - ``engine``: ``vllm`` (default), ``sglang``, ``lmi`` or ``byoc``.
    - ``image_uri``: an ECR image replacing the engine's pinned DLC (required for ``byoc``; tokens accepted, such
      as ``repository.repository_uri_for_tag(...)``, together with ``image_repository`` and
      ``inference_ami_version``); ``image_repository``: the ``ecr.IRepository`` it is in (default: read from a
      literal ``image_uri``).
    - ``served_model_name``: the model name clients send (default: the hub id, or the engine's default for S3;
      tokens accepted).
    - ``tensor_parallel_degree``: GPUs per model copy, 1 or more and at most the GPU count of every pool
      (default: 1 for inference components, every GPU of the smallest pool for a single model).
    - ``max_model_len``, ``max_concurrent_sequences``: positive engine limits (default: the engine's own).
    - ``engine_args``: further engine flags, ``{"enable-prefix-caching": "true"}`` (string values, tokens
      accepted), mapped to the engine's variable convention; ``environment``: raw extra variables (plaintext in
      the template: no secrets). At most 100 variables in all, values of at most 1024 characters.
    - ``inference_components``: True (default) or False for a single-model endpoint.
    - ``memory_per_copy_mb``: host memory reserved per inference-component copy, 128 MB up to the host memory of
      the smallest pool (default 16384).
    - ``routing``: ``LEAST_OUTSTANDING_REQUESTS`` (default), ``PREFIX_AWARE`` (with ``prefix_length`` 1024-65536,
      default 4096, and ``prefix_concurrency_threshold`` 1-1024, default 16) or ``RANDOM``. Pools need the default.
    - ``provision_timeout``: how long to keep trying pools after capacity errors (300-3600 s; default: the
      service's).
    - ``capacity_reservation_arn``: an ML capacity reservation or training plan to draw instances from only
      (tokens accepted).
    - ``inference_ami_version``: host AMI (default: derived from the image's CUDA version).
    - ``startup_health_check_timeout``, ``model_download_timeout``: 60-3600 s (default 30 minutes each; the three
      timeouts accept deploy-time durations).
    - ``scaling``: :class:`ScalingOptions` (default: 1 to 2, target 16 concurrent requests, no scale-to-zero).
    - ``volume_kms_key``: KMS key for the instance storage volume; rejected on local-NVMe instance types,
      which SageMaker encrypts itself and where ``CreateEndpointConfig`` fails with a key.
    - ``encryption_key``: KMS key for the log groups and alarm topic (default: a new key with rotation, retained).
    - ``data_capture_bucket`` (default none: capture off), ``data_capture_percentage`` 1-100 with a bucket (default 20).
    - ``alarm_topic``: an ``sns.ITopic`` where alarms go (default: a new KMS-encrypted topic);
      ``alarm_thresholds``: :class:`AlarmThresholds` (default: its defaults).
    - ``log_retention``: an ``aws_logs.RetentionDays`` for the endpoint's log groups (default three months).

    Attributes: ``model``, ``endpoint_config``, ``endpoint``, ``inference_component`` (None for single model),
    ``role``, ``security_group``, ``log_groups``, ``scaling``, ``monitoring``, ``dashboard``, ``capacity``,
    ``endpoint_name``, ``inference_component_name``, ``endpoint_arn``, ``openai_base_url``, ``environment``.
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
        image_repository: ecr.IRepository | None = None,
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
        # --- validation: everything a user typed is checked before any resource exists ---------------------
        args = self._args = Args("SageMakerLlmEndpoint")
        weights = args.instance(
            "weights", weights, ModelWeights, "a ModelWeights (ModelWeights.from_bucket, ...)"
        )
        if isinstance(weights.bucket, s3.Bucket) and Stack.of(weights.bucket) is Stack.of(self):
            Annotations.of(self).add_warning_v2(
                NEW_BUCKET_WARNING,
                f"The weights come from a bucket this stack creates ({weights.bucket.node.path}): on the deploy that "
                "creates it the bucket is empty, the model cannot be downloaded and the deploy rolls back. Deploy "
                "the bucket without this endpoint first, upload the weights, then add the endpoint (acknowledge "
                "this warning then).",
            )
        vpc = args.implements("vpc", vpc, ec2.IVpc)
        subnet_ids = _subnet_ids(args, vpc, vpc_subnets)
        convention = ENGINE_CONVENTIONS[args.one_of("engine", engine, ENGINES)]
        if convention.image is None and image_uri is None:
            raise args.error("image_uri", None, f"your ECR image URI with engine {engine!r}")
        if served_model_name is not None:
            args.text("served_model_name", served_model_name, max_length=MAX_ENVIRONMENT_VALUE)
        inference_components = args.boolean("inference_components", inference_components)
        self.capacity = Capacity.plan(
            instance_types,
            inference_components=inference_components,
            tensor_parallel_degree=tensor_parallel_degree,
            memory_per_copy_mb=memory_per_copy_mb,
            args=args,
        )
        """The checked placement (``Capacity``): instance types in priority order, GPUs and host memory per
        model copy, and how many instances a number of copies needs."""
        if max_model_len is not None:
            args.integer("max_model_len", max_model_len, minimum=1, maximum=_MAX_MODEL_LEN)
            beyond = context_limit(weights.hub_model_id, max_model_len)
            if beyond is not None:
                raise args.error("max_model_len", max_model_len, beyond)
        if max_concurrent_sequences is not None:
            args.integer(
                "max_concurrent_sequences",
                max_concurrent_sequences,
                minimum=1,
                maximum=_MAX_CONCURRENT_SEQUENCES,
            )
        scaling = ScalingOptions() if scaling is None else args.instance("scaling", scaling, ScalingOptions)
        scaling.check_topology(args, inference_components=inference_components)
        routing_property = routing_config(
            routing,
            capacity=self.capacity,
            prefix_length=prefix_length,
            concurrency_threshold=prefix_concurrency_threshold,
            args=args,
        )
        reservation = capacity_reservation_config(capacity_reservation_arn, args=args)
        if inference_ami_version is not None:
            args.one_of("inference_ami_version", inference_ami_version, INFERENCE_AMI_VERSIONS)
        if volume_kms_key is not None:
            args.implements("volume_kms_key", volume_kms_key, kms.IKey)
            if self.capacity.local_nvme_types:
                raise args.error(
                    "volume_kms_key",
                    volume_kms_key,
                    f"no key with instance types {self.capacity.local_nvme_types}, which have local NVMe "
                    f"storage (SageMaker rejects KmsKeyId on instances with local storage and encrypts their "
                    f"NVMe volumes itself), or EBS-only instance types",
                )
        if encryption_key is not None:
            args.implements("encryption_key", encryption_key, kms.IKey)
        if data_capture_bucket is not None:
            args.implements("data_capture_bucket", data_capture_bucket, s3.IBucket)
        # The percentage is used only with a bucket (0 then means nothing; the tier passes its "off" value).
        args.integer(
            "data_capture_percentage",
            data_capture_percentage,
            minimum=0 if data_capture_bucket is None else 1,
            maximum=100,
        )
        if alarm_topic is not None:
            args.implements("alarm_topic", alarm_topic, sns.ITopic)
        if alarm_thresholds is not None:
            args.instance("alarm_thresholds", alarm_thresholds, AlarmThresholds, "an AlarmThresholds")
        args.instance(
            "log_retention",
            log_retention,
            logs.RetentionDays,
            "an aws_logs.RetentionDays, such as THREE_MONTHS",
        )
        startup_seconds = args.seconds(
            "startup_health_check_timeout", startup_health_check_timeout, **_MODEL_TIMEOUT_RANGE
        )
        download_seconds = args.seconds(
            "model_download_timeout", model_download_timeout, **_MODEL_TIMEOUT_RANGE
        )
        provision_seconds = (
            None
            if provision_timeout is None
            else args.seconds("provision_timeout", provision_timeout, **_PROVISION_TIMEOUT_RANGE)
        )
        # The container: image, host AMI and environment (engine_args and environment are checked here).
        if image_uri is not None:
            image = ecr_image(self, image_uri, args=args, repository=image_repository)
        elif image_repository is not None:
            raise args.error("image_repository", image_repository, "None unless image_uri is set")
        else:
            assert convention.image is not None  # checked above: only byoc has no pinned image
            image = dlc_image(self, convention.image, args=args)
        self.inference_ami_version = inference_ami_version or inference_ami_for_cuda(
            image.cuda_version, image=image_uri or str(convention.image), args=args
        )
        """The variant's host AMI (``InferenceAmiVersion``): ``inference_ami_version``, or the
        one derived from the image's CUDA version."""
        self.environment = self._environment(
            convention,
            weights,
            served_model_name=served_model_name,
            max_model_len=max_model_len,
            max_concurrent_sequences=max_concurrent_sequences,
            engine_args={} if engine_args is None else engine_args,
            extra={} if environment is None else environment,
        )
        """The container's environment variables: the engine's settings from the props, then
        ``environment``. Plaintext in the template."""

        # --- names: stable and generated. Alarms, scaling targets and the invoke URL refer to them; only a
        # change of name replaces an Endpoint. Model and EndpointConfig (immutable) get CloudFormation names.
        self.stack = Stack.of(self)
        """The stack this endpoint is in (``Stack.of(endpoint)``)."""
        self.endpoint_name = Names.unique_resource_name(self, max_length=56, separator="-").lower()
        """The endpoint's name, generated from the construct path (lower case, at most 56 characters) and
        stable across updates: for clients, ``SageMakerTarget`` and anything else that refers to the
        endpoint."""
        self.inference_component_name = f"{self.endpoint_name}-ic" if inference_components else None
        """The inference component's name, ``<endpoint_name>-ic``; ``None`` for a
        single-model endpoint."""
        self.variant_name = VARIANT_NAME
        """The production variant's name, ``AllTraffic`` (a dimension of the variant's metrics)."""
        self.endpoint_arn = self.stack.format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name
        )
        """The endpoint's ARN in this stack's account and Region (what :meth:`grant_invoke`
        grants)."""
        self.metrics = EndpointMetrics(
            endpoint_name=self.endpoint_name,
            variant_name=VARIANT_NAME,
            inference_component_name=self.inference_component_name,
        )
        """This endpoint's CloudWatch metrics (:class:`EndpointMetrics`): the inference component's, or the
        variant's for a single model."""

        # --- security: key, network, role -----------------------------------------------------------------------
        self.encryption_key = encryption_key or retained_key(
            self, "Key", f"Logs and alarm topic of SageMaker endpoint {self.endpoint_name}"
        )
        """The key of the log groups and of the default alarm topic: ``encryption_key``, or a new key
        with yearly rotation, retained."""
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"SageMaker endpoint {self.endpoint_name} model containers",
            allow_all_outbound=False,
        )
        """The model containers' security group: no ingress, and egress only on HTTPS (443, to any IPv4
        address) for S3 and model hubs."""
        # HTTPS only: the S3 gateway endpoint for the weights, and the model hub through NAT for hub weights.
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to S3 and model hubs"
        )
        self._connections = ec2.Connections(security_groups=[self.security_group])
        execution = ExecutionRole(
            self,
            "Execution",
            endpoint_name=self.endpoint_name,
            inference_component_name=self.inference_component_name,
            image=image,
            weights=weights,
            encryption_key=self.encryption_key,
            log_retention=log_retention,
            vpc=vpc,
            subnet_ids=subnet_ids,
            security_group=self.security_group,
        )
        self.role = execution.role
        """The execution role SageMaker assumes to pull the image, read the weights, write logs and attach
        network interfaces: the role to grant further permissions to."""
        self.log_groups = execution.log_groups
        """The containers' log groups, encrypted with :attr:`encryption_key` and retained:
        ``/aws/sagemaker/Endpoints/<endpoint_name>`` and, with an inference component,
        ``/aws/sagemaker/InferenceComponents/<inference_component_name>``."""

        # --- model --------------------------------------------------------------------------------------------------
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                mode="SingleModel",
                environment=self.environment,
                model_data_source=_model_data_source(weights),
            ),
            enable_network_isolation=weights.is_s3,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=[self.security_group.security_group_id], subnets=subnet_ids
            ),
        )
        """The SageMaker model (``CfnModel``, generated name): image, environment and weights, in the VPC;
        network-isolated with S3 weights."""
        # CreateModel validates ECR and S3 access, so the role's policy must exist first: depending on the
        # Role construct makes the Model depend on its DefaultPolicy too.
        self.model.node.add_dependency(self.role)
        if not weights.is_s3:
            acknowledge(
                self.model,
                "InferenceTiers-SM2[NetworkIsolation]",
                "hub weights are downloaded by the container at start, through the VPC's NAT and its HTTPS-only "
                "security group; S3 weights run network-isolated",
            )
            skip_check(
                self.model,
                "CKV_AWS_370",
                "Hub weights are downloaded by the container at start, so the model cannot be network-isolated; "
                "it reaches the hub through the VPC's NAT and its HTTPS-only security group (S3 weights run isolated)",
            )

        # --- alarms first: deployments roll back on them ------------------------------------------------------------
        self.monitoring = EndpointMonitoring(
            self,
            "Monitoring",
            metrics=self.metrics,
            topic=alarm_topic or encrypted_alarm_topic(self, self.encryption_key),
            thresholds=alarm_thresholds or AlarmThresholds(),
        )
        """The alarms and dashboard (:class:`EndpointMonitoring`); its error-rate and latency alarms also
        roll back deployments."""
        rollback_alarms = [self.monitoring.error_rate_alarm, self.monitoring.latency_alarm]
        # Deployment guardrails read the rollback alarms with the execution role.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:DescribeAlarms"], resources=[a.alarm_arn for a in rollback_alarms]
            )
        )

        # --- endpoint config and endpoint ------------------------------------------------------------------------
        initial_instances = self.capacity.instances_for(scaling.min_capacity)
        self.max_instance_count = self.capacity.instances_for(scaling.max_capacity)
        """The instances ``scaling.max_capacity`` copies need: the ceiling of managed instance
        scaling with inference components."""
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            model_name=None if inference_components else self.model.attr_model_name,
            instance_type=self.capacity.instance_type(),
            instance_pools=self.capacity.instance_pools(),
            initial_instance_count=initial_instances,
            initial_variant_weight=1,
            inference_ami_version=self.inference_ami_version,
            routing_config=routing_property,
            # Inference components: SageMaker adds and removes instances as copies need them.
            managed_instance_scaling=(
                sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED",
                    min_instance_count=0 if scaling.scale_to_zero else initial_instances,
                    max_instance_count=self.max_instance_count,
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
            capacity_reservation_config=reservation,
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
            vpc_config=(
                sagemaker.CfnEndpointConfig.VpcConfigProperty(
                    security_group_ids=[self.security_group.security_group_id], subnets=subnet_ids
                )
                if inference_components
                else None
            ),
            enable_network_isolation=weights.is_s3 if inference_components else None,
            kms_key_id=volume_kms_key.key_arn if volume_kms_key else None,
            metrics_config=sagemaker.CfnEndpointConfig.MetricsConfigProperty(
                enable_enhanced_metrics=True,
                metric_publish_frequency_in_seconds=10,
                enable_detailed_observability=True,
            ),
            data_capture_config=self._data_capture(data_capture_bucket, data_capture_percentage),
        )
        """The endpoint configuration (``CfnEndpointConfig``, generated name): the variant's instance
        type or pools, AMI, routing, enhanced metrics every 10 s and data capture."""
        self.endpoint_config.node.add_dependency(self.role)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Autoscaling owns the instance count: a stack update must not reset it to the initial count.
            retain_all_variant_properties=True,
            # Inference components roll out per copy (below); a single model rolls out per instance batch.
            deployment_config=None if inference_components else _endpoint_rolling_update(rollback_alarms),
        )
        """The endpoint (``CfnEndpoint``) named :attr:`endpoint_name`; with a single model, updates roll
        a quarter of the instances at a time."""

        # --- inference component ----------------------------------------------------------------------------------
        self.inference_component: sagemaker.CfnInferenceComponent | None = None
        """The inference component (``CfnInferenceComponent``) named
        :attr:`inference_component_name`, updated one copy at a time; ``None`` for a single-model endpoint."""
        if self.inference_component_name is not None:
            self.inference_component = self._inference_component(
                self.inference_component_name,
                copies=scaling.min_capacity,
                startup_seconds=startup_seconds,
                download_seconds=download_seconds,
                rollback_alarms=rollback_alarms,
            )
            self.inference_component.node.add_dependency(self.role)

        # --- autoscaling: copies of the component, or instances of the single model ------------------------------
        self.scaling = ConcurrencyScaling(self, "Scaling", options=scaling, metrics=self.metrics)
        """The concurrency autoscaling (``ConcurrencyScaling``) of the component's copies, or of the
        instances for a single model."""
        self.scaling.node.add_dependency(self.inference_component or self.endpoint)

    # --- public API ---------------------------------------------------------------------------------------------

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The execution role (:attr:`role`): what another resource's ``grant_*`` methods give access to when
        passed this endpoint."""
        return self.role

    @property
    def connections(self) -> ec2.Connections:
        """The model containers' security group: let them reach a resource with
        ``resource.connections.allow_default_port_from(endpoint)``."""
        return self._connections

    @property
    def dashboard(self) -> cloudwatch.Dashboard:
        """The CloudWatch dashboard of :attr:`monitoring` (generated name)."""
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
        args = Args("SageMakerLlmEndpoint.grant_invoke")
        grantee = args.implements("grantee", grantee, iam.IGrantable)
        actions = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
        if args.boolean("bearer_token", bearer_token):
            actions.append("sagemaker:CallWithBearerToken")
        return iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=[self.endpoint_arn])

    def metric(
        self, metric_name: str, *, namespace: str = "AWS/SageMaker", statistic: str = "Sum"
    ) -> cloudwatch.Metric:
        """Any metric of this endpoint (or of its inference component); see :class:`EndpointMetrics`."""
        return self.metrics.metric(metric_name, namespace=namespace, statistic=statistic)

    def metric_invocations(self) -> cloudwatch.Metric:
        """Requests served (``EndpointMetrics.invocations``)."""
        return self.metrics.invocations()

    def metric_invocation_5xx_error_rate(self) -> cloudwatch.Metric:
        """The share of requests answered with a server error (``EndpointMetrics.invocation_5xx_error_rate``)."""
        return self.metrics.invocation_5xx_error_rate()

    def metric_model_latency(self, statistic: str = "p90") -> cloudwatch.Metric:
        """Model latency in microseconds, ``statistic`` over the period (``EndpointMetrics.model_latency``)."""
        return self.metrics.model_latency(statistic)

    def metric_concurrent_requests(self, statistic: str = "Maximum") -> cloudwatch.Metric:
        """In-flight requests per copy or model, the scaling signal (``EndpointMetrics.concurrent_requests``)."""
        return self.metrics.concurrent_requests(statistic)

    def metric_gpu_utilization(self) -> cloudwatch.Metric:
        """GPU utilization in percent (``EndpointMetrics.gpu_utilization``)."""
        return self.metrics.gpu_utilization()

    def metric_gpu_memory_utilization(self) -> cloudwatch.Metric:
        """GPU memory used in percent (``EndpointMetrics.gpu_memory_utilization``)."""
        return self.metrics.gpu_memory_utilization()

    # --- internals ------------------------------------------------------------------------------------------------

    def _environment(
        self,
        convention: EngineConvention,
        weights: ModelWeights,
        *,
        served_model_name: str | None,
        max_model_len: int | None,
        max_concurrent_sequences: int | None,
        engine_args: Mapping[str, str],
        extra: Mapping[str, str],
    ) -> dict[str, str]:
        """The engine's variables, then ``extra``; warns when a hub token would sit in plaintext."""
        args = self._args

        def value(param: str, v: object) -> str:
            return args.text(param, v, min_length=0, max_length=MAX_ENVIRONMENT_VALUE)

        env = convention.environment(
            model=MODEL_MOUNT_PATH if weights.hub_model_id is None else weights.hub_model_id,
            served_model_name=served_model_name or weights.hub_model_id,
            tensor_parallel_degree=self.capacity.gpus_per_copy,
            max_model_len=max_model_len,
            max_concurrent_sequences=max_concurrent_sequences,
            engine_args=args.mapping("engine_args", engine_args, value, key_pattern=convention.arg_pattern),
            args=args,
        )
        for name, v in args.mapping("environment", extra, value, key_pattern=ENVIRONMENT_VARIABLE).items():
            if name in env:
                raise args.error("environment", name, "a variable the engine settings do not already set")
            env[name] = v
        if len(env) > MAX_ENVIRONMENT_VARIABLES:
            raise args.error(
                "environment",
                sorted(env),
                f"at most {MAX_ENVIRONMENT_VARIABLES} container variables in all (engine settings included)",
            )
        tokens = sorted(set(env) & set(_TOKEN_VARIABLES))
        if tokens:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:sagemaker-plaintext-token",
                f"{', '.join(tokens)} is a plaintext environment variable: it is readable in the template, "
                f"DescribeModel and CloudFormation events. Stage the weights in S3 (ModelWeights.from_s3_uri) "
                f"instead.",
            )
        return env

    def _inference_component(
        self,
        name: str,
        *,
        copies: int,
        startup_seconds: float,
        download_seconds: float,
        rollback_alarms: Sequence[cloudwatch.Alarm],
    ) -> sagemaker.CfnInferenceComponent:
        ic = sagemaker.CfnInferenceComponent
        return ic(
            self,
            "InferenceComponent",
            endpoint_name=self.endpoint.attr_endpoint_name,
            inference_component_name=name,
            variant_name=VARIANT_NAME,
            specification=ic.InferenceComponentSpecificationProperty(
                model_name=self.model.attr_model_name,
                compute_resource_requirements=ic.InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=self.capacity.gpus_per_copy,
                    min_memory_required_in_mb=self.capacity.memory_per_copy_mb,
                ),
                startup_parameters=ic.InferenceComponentStartupParametersProperty(
                    container_startup_health_check_timeout_in_seconds=startup_seconds,
                    model_data_download_timeout_in_seconds=download_seconds,
                ),
            ),
            runtime_config=ic.InferenceComponentRuntimeConfigProperty(copy_count=copies),
            deployment_config=ic.InferenceComponentDeploymentConfigProperty(
                # One copy at a time: an update never needs twice the GPUs.
                rolling_update_policy=ic.InferenceComponentRollingUpdatePolicyProperty(
                    maximum_batch_size=ic.InferenceComponentCapacitySizeProperty(type="COPY_COUNT", value=1),
                    rollback_maximum_batch_size=ic.InferenceComponentCapacitySizeProperty(
                        type="CAPACITY_PERCENT", value=100
                    ),
                    maximum_execution_timeout_in_seconds=_ROLLING_TIMEOUT_SECONDS,
                    wait_interval_in_seconds=_ROLLING_BAKE_SECONDS,
                ),
                auto_rollback_configuration=ic.AutoRollbackConfigurationProperty(
                    alarms=[ic.AlarmProperty(alarm_name=a.alarm_name) for a in rollback_alarms]
                ),
            ),
        )

    def _data_capture(
        self, bucket: s3.IBucket | None, percentage: int
    ) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        if bucket is None:
            return None
        prefix = f"data-capture/{self.endpoint_name}/"
        objects = bucket.arn_for_objects(f"{prefix}*")
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[objects]))
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant(self.role, "kms:GenerateDataKey", "kms:Encrypt")
        acknowledge(
            self.role.node.find_child("DefaultPolicy"),
            f"AwsSolutions-IAM5[Resource::{nag_resource_id(self, objects)}]",
            "SageMaker writes one capture file per batch of requests with generated names; the wildcard "
            "covers only this endpoint's capture prefix and the role can only put objects there",
        )
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


def _subnet_ids(args: Args, vpc: ec2.IVpc, selection: ec2.SubnetSelection | None) -> list[str]:
    """The chosen subnets' ids (1 to 16; a deploy-time list passes unchecked)."""
    chosen = (
        ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        if selection is None
        else args.instance("vpc_subnets", selection, ec2.SubnetSelection)
    )
    try:
        subnet_ids = vpc.select_subnets(
            availability_zones=chosen.availability_zones,
            one_per_az=chosen.one_per_az,
            subnet_filters=chosen.subnet_filters,
            subnet_group_name=chosen.subnet_group_name,
            subnets=chosen.subnets,
            subnet_type=chosen.subnet_type,
        ).subnet_ids
    except RuntimeError as error:  # jsii: the VPC has no subnets of the selected type or group
        raise args.error("vpc_subnets", selection, f"a selection this VPC can satisfy ({error})") from error
    if not is_token(subnet_ids) and not 1 <= len(subnet_ids) <= _MAX_SUBNETS:
        raise args.error(
            "vpc_subnets", selection, f"a selection of 1 to {_MAX_SUBNETS} subnets (got {len(subnet_ids)})"
        )
    return list(subnet_ids)


def _model_data_source(weights: ModelWeights) -> sagemaker.CfnModel.ModelDataSourceProperty | None:
    """An uncompressed S3 prefix, mounted at /opt/ml/model (None: the container downloads from a hub)."""
    if not weights.is_s3:
        return None
    return sagemaker.CfnModel.ModelDataSourceProperty(
        s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
            s3_uri=weights.s3_uri, s3_data_type="S3Prefix", compression_type="None"
        )
    )


def _endpoint_rolling_update(
    alarms: Sequence[cloudwatch.Alarm],
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    """A quarter of the instances at a time, rolled back (all at once) when a rollback alarm fires."""
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
            maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=25),
            rollback_maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                type="CAPACITY_PERCENT", value=100
            ),
            maximum_execution_timeout_in_seconds=_ROLLING_TIMEOUT_SECONDS,
            wait_interval_in_seconds=_ROLLING_BAKE_SECONDS,
        ),
        auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]
        ),
    )
