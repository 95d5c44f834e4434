"""Application Auto Scaling for SageMaker real-time endpoints: concurrency target tracking and scale-to-zero.

Real-time endpoints publish the high-resolution concurrency metrics every 10 s and count streaming requests
until their last token, so they are the signal to scale an LLM endpoint on (invocation counts lag, and the
backlog metrics exist only for asynchronous endpoints).

- Inference components scale copies: resource ``inference-component/<name>``, dimension
  ``sagemaker:inference-component:DesiredCopyCount``, metric
  ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``.
- Single-model endpoints scale instances: resource ``endpoint/<name>/variant/<variant>``, dimension
  ``sagemaker:variant:DesiredInstanceCount``, metric ``SageMakerVariantConcurrentRequestsPerModelHighResolution``.
- Scale-to-zero (inference components only): minimum 0 copies, and a step-scaling policy adds a copy when
  ``NoCapacityInvocationFailures`` is reported, because target tracking cannot scale out from zero copies
  (there is no per-copy concurrency to track). An optional idle policy sets 0 copies after a period with
  no requests, served or failed for lack of a copy.

App Auto Scaling uses its service-linked role (AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from constructs import Construct

from inference_tiers.constructs.sagemaker.monitoring import EndpointMetrics
from inference_tiers.validation import Args

_SERVICE_LINKED_ROLE = "sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"


@dataclass(frozen=True)
class ScalingOptions:
    """How the endpoint scales. Capacities count copies (inference components) or instances (single model).

    - ``min_capacity``: the floor while scale-to-zero is off, and the initial capacity (default 1).
    - ``max_capacity``: the ceiling, at least ``min_capacity`` (default 2).
    - ``target_concurrency``: in-flight requests per copy or per model to hold, more than 0 (default 16); about
      0.7 of the concurrency at which a load test saturates the engine.
    - ``scale_to_zero``: allow 0 copies and 0 instances (inference components only; default off). The first
      request after a scale-in fails with a no-capacity error while a copy starts, so clients must retry.
    - ``idle_scale_in``: with scale-to-zero, set 0 copies after this long without invocations, 1 to 1440 whole
      minutes (default off).
    - ``scale_in_cooldown`` / ``scale_out_cooldown``: target-tracking cooldowns in whole seconds (defaults 5 min
      and 1 min; deploy-time durations are accepted).

    Every option is checked when the options are created: a wrong one raises ArgumentError naming it.
    """

    min_capacity: int = 1
    """The floor while scale-to-zero is off, and the initial capacity, in copies or instances, at
    least 1 (default 1)."""
    max_capacity: int = 2
    """The ceiling in copies or instances, at least :attr:`min_capacity` (default 2)."""
    target_concurrency: float = 16
    """In-flight requests per copy or per model that target tracking holds, more than 0
    (default 16)."""
    scale_to_zero: bool = False
    """Allow 0 copies and 0 instances (inference components only; default False): a request that
    finds no copy fails and adds one, so clients must retry."""
    idle_scale_in: Duration | None = None
    """With scale-to-zero, set 0 copies after this long without requests, 1 to 1440 whole minutes
    known at synth time; ``None`` (default): never."""
    scale_in_cooldown: Duration = Duration.minutes(5)
    """Target tracking's scale-in cooldown, in whole seconds (default 5 minutes)."""
    scale_out_cooldown: Duration = Duration.minutes(1)
    """Target tracking's scale-out cooldown, in whole seconds (default 1 minute)."""

    def __post_init__(self) -> None:
        args = Args("ScalingOptions")
        args.integer("min_capacity", self.min_capacity, minimum=1)
        args.integer("max_capacity", self.max_capacity, minimum=1)
        if self.min_capacity > self.max_capacity:
            raise args.error(
                "min_capacity",
                self.min_capacity,
                f"at most max_capacity ({self.max_capacity}); use scale_to_zero for a floor of 0",
            )
        args.number("target_concurrency", self.target_concurrency, minimum=0, exclusive_minimum=True)
        args.boolean("scale_to_zero", self.scale_to_zero)
        args.seconds("scale_in_cooldown", self.scale_in_cooldown)
        args.seconds("scale_out_cooldown", self.scale_out_cooldown)
        if self.idle_scale_in is None:
            return
        idle = args.duration(
            "idle_scale_in", self.idle_scale_in, minimum=Duration.minutes(1), maximum=Duration.days(1)
        )
        # The idle alarm counts one-minute periods, so the length must be known now, in whole minutes.
        if idle.is_unresolved() or idle.to_seconds() % 60:
            raise args.error(
                "idle_scale_in", idle, "a whole number of minutes known at synth time (Duration.minutes(n))"
            )
        if not self.scale_to_zero:
            raise args.error("idle_scale_in", idle, "None unless scale_to_zero is True")

    @property
    def floor(self) -> int:
        """The scalable target's minimum capacity: 0 with scale-to-zero, otherwise :attr:`min_capacity`."""
        return 0 if self.scale_to_zero else self.min_capacity

    def check_topology(self, args: Args, *, inference_components: bool) -> None:
        """Scale-to-zero needs inference components; raise ``args``' ArgumentError for ``scaling.scale_to_zero``."""
        if self.scale_to_zero and not inference_components:
            raise args.error(
                "scaling.scale_to_zero",
                self.scale_to_zero,
                "False for a single-model endpoint (SageMaker scales to zero only endpoints that host "
                "inference components)",
            )


class ConcurrencyScaling(Construct):
    """A scalable target with concurrency target tracking, plus the scale-to-zero step policies when enabled.

    Attributes: ``target``, ``target_tracking``, and with scale-to-zero ``scale_out_from_zero`` with its
    ``no_capacity_alarm``, and ``idle_scale_in`` with its ``idle_alarm`` (None when not created).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        options: ScalingOptions,
        metrics: EndpointMetrics,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("ConcurrencyScaling")
        options = args.instance("options", options, ScalingOptions)
        metrics = args.instance("metrics", metrics, EndpointMetrics, "an EndpointMetrics")
        component = metrics.inference_component_name
        if component is not None:
            resource_id = f"inference-component/{component}"
            scalable_dimension = "sagemaker:inference-component:DesiredCopyCount"
            predefined_metric = appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION
        else:
            resource_id = f"endpoint/{metrics.endpoint_name}/variant/{metrics.variant_name}"
            scalable_dimension = "sagemaker:variant:DesiredInstanceCount"
            predefined_metric = (
                appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION
            )
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=resource_id,
            scalable_dimension=scalable_dimension,
            min_capacity=options.floor,
            max_capacity=options.max_capacity,
            # App Auto Scaling acts through its service-linked role for SageMaker endpoints; naming it here
            # stops CDK creating a role of its own.
            role=iam.Role.from_role_arn(
                self,
                "ServiceLinkedRole",
                Stack.of(self).format_arn(
                    service="iam",
                    region="",
                    resource="role",
                    resource_name=f"aws-service-role/{_SERVICE_LINKED_ROLE}",
                ),
                mutable=False,
            ),
        )
        # The template omits RoleARN so that App Auto Scaling creates the service-linked role on first use
        # (an explicit ARN requires the role to exist already).
        cfn_target = self.target.node.default_child
        assert isinstance(cfn_target, appscaling.CfnScalableTarget)
        cfn_target.add_property_deletion_override("RoleARN")
        self.target_tracking = self.target.scale_to_track_metric(
            "ConcurrencyTracking",
            predefined_metric=predefined_metric,
            target_value=options.target_concurrency,
            scale_in_cooldown=options.scale_in_cooldown,
            scale_out_cooldown=options.scale_out_cooldown,
        )
        self.scale_out_from_zero: appscaling.StepScalingAction | None = None
        self.no_capacity_alarm: cloudwatch.Alarm | None = None
        self.idle_scale_in: appscaling.StepScalingAction | None = None
        self.idle_alarm: cloudwatch.Alarm | None = None
        if not options.scale_to_zero:
            return

        # Any request that finds no copy adds one; a short cooldown because the first copy takes minutes.
        self.scale_out_from_zero = appscaling.StepScalingAction(
            self,
            "ScaleOutFromZero",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=Duration.minutes(1),
        )
        self.scale_out_from_zero.add_adjustment(adjustment=1, lower_bound=0)
        self.no_capacity_alarm = cloudwatch.Alarm(
            self,
            "NoCapacityAlarm",
            alarm_description="Requests found no model copy: add one (scale out from zero).",
            # One minute: AWS documents no high-resolution (10 s) publication of this metric, and a 10 s alarm
            # over one-minute data would see no datapoint in most periods and never scale out from zero.
            metric=metrics.no_capacity_invocation_failures().with_(
                statistic="Maximum", period=Duration.minutes(1)
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.no_capacity_alarm.add_alarm_action(
            cloudwatch_actions.ApplicationScalingAction(self.scale_out_from_zero)
        )

        if options.idle_scale_in is None:
            return
        self.idle_scale_in = appscaling.StepScalingAction(
            self,
            "IdleScaleIn",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
        )
        self.idle_scale_in.add_adjustment(adjustment=0, upper_bound=0)
        minutes = int(options.idle_scale_in.to_minutes())
        # Demand is served requests plus those that found no copy. Counting only invocations would keep this
        # alarm in ALARM after a scale-in to zero, and App Auto Scaling re-runs a step policy while its alarm
        # stays in ALARM: it would set 0 copies again while the copy added for a no-capacity request is still
        # starting. One minute with a failed request puts the alarm back to OK. No traffic publishes no
        # datapoints: FILL turns the gaps into zeros so the alarm sees a quiet period.
        self.idle_alarm = cloudwatch.Alarm(
            self,
            "IdleAlarm",
            alarm_description=f"No requests for {minutes} minutes: release every model copy.",
            metric=cloudwatch.MathExpression(
                expression="FILL(invocations, 0) + FILL(noCapacity, 0)",
                using_metrics={
                    "invocations": metrics.invocations().with_(statistic="Sum", period=Duration.minutes(1)),
                    "noCapacity": metrics.no_capacity_invocation_failures().with_(
                        statistic="Sum", period=Duration.minutes(1)
                    ),
                },
                period=Duration.minutes(1),
                label="Requests, served or not (gaps as 0)",
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=minutes,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        self.idle_alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(self.idle_scale_in))
