"""CloudWatch metrics, alarms and a dashboard for a SageMaker LLM endpoint.

Namespaces and dimensions (docs: monitoring-cloudwatch, monitoring-cloudwatch-enhanced-metrics):

- ``AWS/SageMaker`` invocation metrics: ``InferenceComponentName`` for an inference component, otherwise
  ``EndpointName`` + ``VariantName``. ``ModelLatency`` is in microseconds and, for streamed responses, covers
  the whole response. ``Invocation5XXErrors`` is 0 or 1 per request, so its Average is the error rate.
- Utilisation: ``/aws/sagemaker/InferenceComponents`` (per component) or ``/aws/sagemaker/Endpoints`` (per
  variant); the ``*Normalized`` metrics are 0-100 whatever the GPU count. Disk is per variant.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from inference_tiers.validation import Args

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
ENDPOINTS_NAMESPACE = "/aws/sagemaker/Endpoints"
COMPONENTS_NAMESPACE = "/aws/sagemaker/InferenceComponents"
ONE_MINUTE = Duration.minutes(1)
# SageMaker's name rule for endpoints, variants and inference components.
RESOURCE_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
# CloudWatch statistics: the five basic ones, percentiles (p99, p99.9) and the trimmed/winsorized/percentile-rank
# forms (tm90, TM(10%:90%), wm99, tc90, ts90, PR(:300), IQM).
STATISTIC = (
    r"SampleCount|Average|Sum|Minimum|Maximum|IQM"
    r"|(?:p|tm|wm|tc|ts)(?:100|[0-9]{1,2}(?:\.[0-9]{1,10})?)"
    r"|(?i:tm|wm|tc|ts|pr)\([0-9.]*%?:[0-9.]*%?\)"
)


@dataclass(frozen=True)
class EndpointMetrics:
    """Builds the CloudWatch metrics of one endpoint variant, or of one inference component on it.

    :param endpoint_name: the endpoint (a token is accepted).
    :param variant_name: the production variant.
    :param inference_component_name: the inference component whose metrics to build. Default: none (the
        variant's).
    """

    endpoint_name: str
    """The endpoint's name (a token is accepted): a dimension of the variant's metrics."""
    variant_name: str
    """The production variant's name: a dimension of the variant's metrics (disk utilisation, and
    every metric for a single model)."""
    inference_component_name: str | None = None
    """The inference component whose metrics to build (dimension
    ``InferenceComponentName``); ``None``: the variant's."""

    def __post_init__(self) -> None:
        args = Args("EndpointMetrics")
        for param in ("endpoint_name", "variant_name"):
            args.text(param, getattr(self, param), pattern=RESOURCE_NAME, description="a SageMaker name")
        if self.inference_component_name is not None:
            args.text(
                "inference_component_name",
                self.inference_component_name,
                pattern=RESOURCE_NAME,
                description="a SageMaker name",
            )

    def _dimensions(self, *, per_variant: bool = False) -> dict[str, str]:
        if self.inference_component_name is not None and not per_variant:
            return {"InferenceComponentName": self.inference_component_name}
        return {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}

    def metric(
        self,
        metric_name: str,
        *,
        namespace: str = SAGEMAKER_NAMESPACE,
        statistic: str = "Sum",
        period: Duration = ONE_MINUTE,
        per_variant: bool = False,
    ) -> cloudwatch.Metric:
        """Any metric of this endpoint; ``per_variant`` uses the variant dimensions even for a component."""
        args = Args("EndpointMetrics.metric")
        args.text("metric_name", metric_name, max_length=255, allow_token=False)
        args.text("namespace", namespace, max_length=255, allow_token=False)
        args.text(
            "statistic",
            statistic,
            pattern=STATISTIC,
            allow_token=False,
            description="a CloudWatch statistic: Average, Sum, Minimum, Maximum, SampleCount, or p90, tm99, "
            "TM(10%:90%) and the like",
        )
        period = args.duration("period", period, minimum=Duration.seconds(1))
        seconds = None if period.is_unresolved() else period.to_seconds()
        if seconds is None or (seconds not in (1, 5, 10, 30) and seconds % 60):
            raise args.error(
                "period", period, "1, 5, 10 or 30 seconds or a multiple of 60 seconds, known at synth time"
            )
        args.boolean("per_variant", per_variant)
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric_name,
            dimensions_map=self._dimensions(per_variant=per_variant),
            statistic=statistic,
            period=period,
        )

    def invocations(self) -> cloudwatch.Metric:
        """``Invocations``: requests served."""
        return self.metric("Invocations")

    def invocation_4xx_error_rate(self) -> cloudwatch.Metric:
        """``Invocation4XXErrors`` averaged: the share of requests answered with a client error (0 to 1)."""
        return self.metric("Invocation4XXErrors", statistic="Average")

    def invocation_5xx_error_rate(self) -> cloudwatch.Metric:
        """``Invocation5XXErrors`` averaged: the share of requests answered with a server error (0 to 1)."""
        return self.metric("Invocation5XXErrors", statistic="Average")

    def model_latency(self, statistic: str = "p90") -> cloudwatch.Metric:
        """Microseconds."""
        return self.metric("ModelLatency", statistic=statistic)

    def concurrent_requests(self, statistic: str = "Maximum") -> cloudwatch.Metric:
        """In-flight requests per copy (inference component) or per model (single model), every 10 s."""
        name = "ConcurrentRequestsPerCopy" if self.inference_component_name else "ConcurrentRequestsPerModel"
        return self.metric(name, statistic=statistic, period=Duration.seconds(10))

    def _utilisation_namespace(self) -> str:
        return COMPONENTS_NAMESPACE if self.inference_component_name else ENDPOINTS_NAMESPACE

    def gpu_utilization(self) -> cloudwatch.Metric:
        """``GPUUtilizationNormalized``: GPU utilization in percent of all GPUs (Average)."""
        return self.metric(
            "GPUUtilizationNormalized", namespace=self._utilisation_namespace(), statistic="Average"
        )

    def gpu_memory_utilization(self) -> cloudwatch.Metric:
        """``GPUMemoryUtilizationNormalized``: GPU memory used, in percent (Average)."""
        return self.metric(
            "GPUMemoryUtilizationNormalized", namespace=self._utilisation_namespace(), statistic="Average"
        )

    def disk_utilization(self) -> cloudwatch.Metric:
        """``DiskUtilization`` of the variant's instances, in percent (Maximum)."""
        return self.metric(
            "DiskUtilization", namespace=ENDPOINTS_NAMESPACE, statistic="Maximum", per_variant=True
        )

    def no_capacity_invocation_failures(self) -> cloudwatch.Metric:
        """Requests that found no copy to serve them (inference components; the scale-from-zero signal)."""
        if self.inference_component_name is None:
            raise ValueError("NoCapacityInvocationFailures is published for inference components only")
        return self.metric("NoCapacityInvocationFailures")

    def capacity_units(self) -> cloudwatch.MathExpression:
        """One line per running copy (inference component) or instance (single model), from enhanced metrics."""
        if self.inference_component_name is not None:
            query = (
                f'Namespace="{COMPONENTS_NAMESPACE}" MetricName="CPUUtilizationNormalized" '
                f'InferenceComponentName="{self.inference_component_name}" ContainerId'
            )
        else:
            query = (
                f'Namespace="{ENDPOINTS_NAMESPACE}" MetricName="CPUUtilizationNormalized" '
                f'EndpointName="{self.endpoint_name}" VariantName="{self.variant_name}" InstanceId'
            )
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', 'SampleCount', 60)",
            using_metrics={},
            label="",
            period=Duration.minutes(1),
        )


@dataclass(frozen=True)
class AlarmThresholds:
    """Alarm thresholds, checked when created. Defaults: 1% 5XX rate, 30 s p90 model latency, 95% GPU memory,
    85% disk.

    - ``error_rate``: a fraction in (0, 1]; ``latency_slo``: a Duration over 0 (milliseconds allowed);
    - ``gpu_memory_percent``, ``disk_percent``: percentages in (0, 100].
    """

    error_rate: float = 0.01
    """Alarm when this fraction of requests, in (0, 1], fails with 5XX errors (default 0.01, 1%)."""
    latency_slo: Duration = Duration.seconds(30)
    """Alarm when p90 model latency reaches this (default 30 seconds; milliseconds allowed, known at
    synth time)."""
    gpu_memory_percent: float = 95
    """Alarm when GPU memory use reaches this percentage, in (0, 100] (default 95)."""
    disk_percent: float = 85
    """Alarm when the instances' disk use reaches this percentage, in (0, 100] (default 85)."""

    def __post_init__(self) -> None:
        args = Args("AlarmThresholds")
        args.number("error_rate", self.error_rate, minimum=0, maximum=1, exclusive_minimum=True)
        # A zero threshold would keep the latency alarm, a deployment rollback alarm, always in ALARM.
        latency = args.duration(
            "latency_slo", self.latency_slo, minimum=Duration.millis(1), whole_seconds=False
        )
        if latency.is_unresolved():
            raise args.error("latency_slo", latency, "a Duration known at synth time (it sets the threshold)")
        for param in ("gpu_memory_percent", "disk_percent"):
            args.number(param, getattr(self, param), minimum=0, maximum=100, exclusive_minimum=True)


class EndpointMonitoring(Construct):
    """Alarms (to ``topic``) and a dashboard for one endpoint.

    ``error_rate_alarm`` and ``latency_alarm`` are also the deployment auto-rollback alarms. ``alarms`` lists
    every alarm; ``dashboard`` is the CloudWatch dashboard (generated name).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        metrics: EndpointMetrics,
        topic: sns.ITopic,
        thresholds: AlarmThresholds,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("EndpointMonitoring")
        metrics = args.instance("metrics", metrics, EndpointMetrics, "an EndpointMetrics")
        topic = args.implements("topic", topic, sns.ITopic)
        thresholds = args.instance("thresholds", thresholds, AlarmThresholds, "an AlarmThresholds")
        latency_micros = thresholds.latency_slo.to_milliseconds() * 1000
        self.error_rate_alarm = self._alarm(
            "ErrorRate",
            metrics.invocation_5xx_error_rate(),
            threshold=thresholds.error_rate,
            description=f"At least {thresholds.error_rate:.2%} of requests fail with 5XX errors.",
        )
        self.latency_alarm = self._alarm(
            "LatencySlo",
            metrics.model_latency("p90"),
            threshold=latency_micros,
            # Milliseconds / 1000, not to_seconds(): that raises for an SLO that is not a whole number of seconds.
            description=f"p90 model latency at or above the {latency_micros / 1_000_000:g} s SLO.",
        )
        self.gpu_memory_alarm = self._alarm(
            "GpuMemory",
            metrics.gpu_memory_utilization(),
            threshold=thresholds.gpu_memory_percent,
            description=f"GPU memory at or above {thresholds.gpu_memory_percent}% (engines preallocate about 90%): "
            "out-of-memory or KV-cache pressure.",
        )
        self.disk_alarm = self._alarm(
            "Disk",
            metrics.disk_utilization(),
            threshold=thresholds.disk_percent,
            description=f"Instance disk at or above {thresholds.disk_percent}% (weights plus compile caches).",
        )
        self.alarms = [self.error_rate_alarm, self.latency_alarm, self.gpu_memory_alarm, self.disk_alarm]
        self.no_capacity_alarm: cloudwatch.Alarm | None = None
        if metrics.inference_component_name is not None:
            self.no_capacity_alarm = self._alarm(
                "NoCapacity",
                metrics.no_capacity_invocation_failures(),
                threshold=1,
                evaluation_periods=1,
                description="Requests failed because no model copy was available (capacity or cold start).",
            )
            self.alarms.append(self.no_capacity_alarm)
        for alarm in self.alarms:
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(topic))
            alarm.add_ok_action(cloudwatch_actions.SnsAction(topic))

        unit = "copy" if metrics.inference_component_name else "model"
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        self.dashboard.add_widgets(
            _graph("Invocations", [metrics.invocations()]),
            _graph(
                "Error rate (4XX, 5XX)",
                [metrics.invocation_4xx_error_rate(), metrics.invocation_5xx_error_rate()],
            ),
            _graph(
                "Model latency (microseconds)",
                [metrics.model_latency(stat) for stat in ("p50", "p90", "p99")],
                annotations=[cloudwatch.HorizontalAnnotation(value=latency_micros, label="SLO")],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                f"Concurrent requests per {unit}",
                [metrics.concurrent_requests("Maximum"), metrics.concurrent_requests("Average")],
            ),
            _graph(
                "GPU and GPU memory utilisation (%)",
                [metrics.gpu_utilization(), metrics.gpu_memory_utilization()],
            ),
            _graph(
                f"Running {'copies' if unit == 'copy' else 'instances'} (one line each)",
                [metrics.capacity_units()],
            ),
        )
        bottom = [_graph("Disk utilisation (%)", [metrics.disk_utilization()])]
        if metrics.inference_component_name is not None:
            bottom.append(
                _graph("No-capacity invocation failures", [metrics.no_capacity_invocation_failures()])
            )
        self.dashboard.add_widgets(*bottom)

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        evaluation_periods: int = 5,
    ) -> cloudwatch.Alarm:
        # 3 of 5 one-minute periods: a sustained problem, not one slow or failed request.
        return cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=min(3, evaluation_periods),
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )


def _graph(
    title: str,
    metrics: list[cloudwatch.IMetric],
    *,
    annotations: list[cloudwatch.HorizontalAnnotation] | None = None,
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=metrics, left_annotations=annotations, width=8, height=6)
