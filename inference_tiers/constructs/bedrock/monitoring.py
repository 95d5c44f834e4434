"""Dashboard and alarms for one Bedrock model (or inference profile), its guardrail and invocation logging.

Bedrock's runtime metrics (``AWS/Bedrock``) carry only the ``ModelId`` dimension: the model or profile id the
call named. Calls through an application inference profile are reported under that profile's own id, not its
source's (awslabs/bedrock-usage-analyzer@4ba03085 ``core/profile_fetcher.py:39-86`` collects each APPLICATION
profile's ``inferenceProfileId`` and ``core/metrics_fetcher.py:828-840`` queries ``ModelId=<that id>`` besides
the system profile's, to total a model's use). With ``application_profile_id`` every alarm and graph therefore
combines both series. Alarms publish to a KMS-encrypted SNS topic exposed as :attr:`BedrockMonitoring.topic` so
users subscribe what they like (or set ``alarm_email``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from constructs import Construct

from inference_tiers.config import EMAIL_PATTERN
from inference_tiers.constructs.bedrock.guardrail import Guardrail, metric_options
from inference_tiers.constructs.bedrock.model_access import MODEL_ID_PATTERN
from inference_tiers.constructs.common.console import lazy_dashboard_url
from inference_tiers.constructs.common.encryption import encrypted_alarm_topic, retained_key
from inference_tiers.validation import Args

NAMESPACE = "AWS/Bedrock"
FIVE_MINUTES = Duration.minutes(5)
DEFAULT_LATENCY_P99_ALARM = Duration.seconds(30)
DEFAULT_TTFT_P90_ALARM = Duration.seconds(3)
LOG_DELIVERY_FAILURES = (
    "ModelInvocationLogsCloudWatchDeliveryFailure",
    "ModelInvocationLogsS3DeliveryFailure",
)


# What a ``ModelId`` dimension holds: a model or system-profile id, or an (application) profile ARN.
_MODEL_DIMENSION = (
    rf"([a-z-]+\.)?{MODEL_ID_PATTERN}|arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]*:[0-9]{{0,12}}:[a-z-]+/[^\s]+"
)


# botocore bedrock ``InferenceProfileId`` (an application profile's id, the last part of its ARN).
_PROFILE_ID = r"[a-zA-Z0-9-:.]{1,64}"
# Statistics whose values add up across series; any other (percentiles, Average, Maximum) cannot be summed.
_ADDITIVE = {"sum", "samplecount"}


def _percent(args: Args, param: str, value: Any) -> float:
    return args.number(param, value, minimum=0, maximum=100, exclusive_minimum=True)


def _alarm_duration(args: Args, param: str, value: Any, maximum: Duration) -> Duration:
    """A threshold Duration known at synth time (the alarm threshold and its description are in ms)."""
    checked = args.duration(param, value, minimum=Duration.millis(1), maximum=maximum, whole_seconds=False)
    if checked.is_unresolved():
        raise args.error(param, value, "a Duration known at synth time (not a deploy-time token)")
    return checked


class BedrockMonitoring(Construct):
    """CloudWatch dashboard and alarms for Bedrock invocations of ``model_id``.

    :param model_id: the ``ModelId`` dimension (foundation-model or inference-profile id the app calls).
    :param application_profile_id: the id of an application inference profile over ``model_id`` that the
        app calls (``ApplicationInferenceProfile.profile_id``; a deploy-time value works). Bedrock reports
        those calls under this id, so every metric combines both series: counts and token use are summed,
        other statistics take the higher of the two. Default none (only ``model_id``).
    :param tpm_quota: the account's tokens-per-minute quota for this model, from Service Quotas; the TPM
        alarm compares ``EstimatedTPMQuotaUsage`` to it.
    :param guardrail: adds guardrail widgets and an intervention-rate alarm. Default none.
    :param log_delivery_alarm: alarm on invocation-log delivery failures (turn on with invocation logging).
    :param tpm_alarm_percent: alarm above this share of the TPM quota. Default 80.
    :param latency_p99_alarm: alarm when p99 ``InvocationLatency`` (request to last token) is above. Default 30 s.
    :param ttft_p90_alarm: alarm when p90 ``TimeToFirstToken`` (streaming) is above. Default 3 s.
    :param server_error_rate_alarm_percent: alarm above this percentage of server errors. Default 1.
    :param throttle_alarm_count: alarm when throttles in 5 minutes exceed this, 3 periods running. Default 0.
    :param intervention_rate_alarm_percent: alarm above this guardrail intervention rate. Default 20.
    :param alarm_email: subscribe this address to the alarm topic (a ``CfnParameter`` value works). Default none.

    :attr:`dashboard_url` is the dashboard's console link; reading it adds the partition's console-host mapping
    to the stack (only then, so a stack that does not use it carries no unreferenced mapping).
    """

    dashboard_url = lazy_dashboard_url()
    """Console URL of the dashboard (a deploy-time string). Reading it adds the partition's console-host
    mapping to the dashboard's stack, so a stack that never uses the URL gets no unreferenced mapping."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model_id: str,
        tpm_quota: int,
        application_profile_id: str | None = None,
        guardrail: Guardrail | None = None,
        log_delivery_alarm: bool = False,
        tpm_alarm_percent: float = 80,
        latency_p99_alarm: Duration = DEFAULT_LATENCY_P99_ALARM,
        ttft_p90_alarm: Duration = DEFAULT_TTFT_P90_ALARM,
        server_error_rate_alarm_percent: float = 1,
        throttle_alarm_count: int = 0,
        intervention_rate_alarm_percent: float = 20,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("BedrockMonitoring")
        args.text(
            "model_id",
            model_id,
            pattern=_MODEL_DIMENSION,
            max_length=2048,
            description="the ModelId the application calls (a model or inference-profile id, or a profile ARN)",
        )
        if application_profile_id is not None:
            args.text(
                "application_profile_id",
                application_profile_id,
                pattern=_PROFILE_ID,
                description="an application inference profile id (letters, digits, '-', ':' and '.', 1-64)",
            )
        # Synth-time numbers: they are written into the alarms' descriptions and the quota math expression.
        args.integer("tpm_quota", tpm_quota, minimum=1, maximum=1_000_000_000)
        if guardrail is not None:
            args.instance("guardrail", guardrail, Guardrail, "a Guardrail (its metrics feed the dashboard)")
        args.boolean("log_delivery_alarm", log_delivery_alarm)
        _percent(args, "tpm_alarm_percent", tpm_alarm_percent)
        _alarm_duration(args, "latency_p99_alarm", latency_p99_alarm, Duration.hours(1))
        _alarm_duration(args, "ttft_p90_alarm", ttft_p90_alarm, Duration.minutes(10))
        _percent(args, "server_error_rate_alarm_percent", server_error_rate_alarm_percent)
        args.integer("throttle_alarm_count", throttle_alarm_count, minimum=0, maximum=1_000_000)
        _percent(args, "intervention_rate_alarm_percent", intervention_rate_alarm_percent)
        if alarm_email is not None:  # an address from a CfnParameter is accepted, unparsed
            args.text(
                "alarm_email",
                alarm_email,
                pattern=EMAIL_PATTERN,
                description="an email address",
            )
        self.model_id = model_id
        """The ``ModelId`` dimension of direct calls (the model or inference-profile id, or profile ARN)."""
        self.model_ids = (model_id,) if application_profile_id is None else (model_id, application_profile_id)
        """Every ``ModelId`` series the metrics and alarms combine: ``model_id``, then the application
        profile's id when given."""
        self.tpm_quota = tpm_quota
        """The tokens-per-minute quota that :meth:`metric_tpm_quota_usage_percent` and the TPM alarm divide
        by."""

        self.topic_key = retained_key(self, "TopicKey", "Encrypts the Bedrock alarm topic")
        """The key (new, retained) that encrypts :attr:`topic`."""
        self.topic = encrypted_alarm_topic(self, self.topic_key, email=alarm_email)
        """The encrypted SNS topic every alarm publishes to: subscribe your notifications to it
        (``alarm_email`` is subscribed when given)."""

        subject = model_id if application_profile_id is None else f"{model_id} and its application profile"
        self.alarms: list[cloudwatch.Alarm] = []
        """Every alarm of this construct: throttles, server-error rate, p99 latency, p90 time to first token,
        TPM quota use, and the guardrail and log-delivery alarms when turned on."""
        self._alarm(
            "Throttles",
            self.metric("InvocationThrottles"),
            threshold=throttle_alarm_count,
            evaluation_periods=3,
            description=f"Bedrock throttled {subject} for 15 minutes: raise the quota or spread the load",
        )
        self._alarm(
            "ServerErrorRate",
            self._rate("InvocationServerErrors", "Server error rate (%)"),
            threshold=server_error_rate_alarm_percent,
            evaluation_periods=3,
            description=f"More than {server_error_rate_alarm_percent:g}% of {subject} invocations fail server-side",
        )
        self._alarm(
            "LatencyP99",
            self.metric("InvocationLatency", statistic="p99"),
            threshold=latency_p99_alarm.to_milliseconds(),
            evaluation_periods=3,
            description=f"p99 latency of {subject} is above {latency_p99_alarm.to_milliseconds()} ms",
        )
        self._alarm(
            "TimeToFirstTokenP90",
            self.metric("TimeToFirstToken", statistic="p90"),
            threshold=ttft_p90_alarm.to_milliseconds(),
            evaluation_periods=3,
            description=f"p90 time to first token of {subject} is above {ttft_p90_alarm.to_milliseconds()} ms",
        )
        self._alarm(
            "TpmQuotaUsage",
            self.metric_tpm_quota_usage_percent(),
            threshold=tpm_alarm_percent,
            evaluation_periods=5,
            description=f"{subject} uses more than {tpm_alarm_percent:g}% of its {tpm_quota} tokens-per-minute quota",
        )
        if guardrail is not None:
            self._alarm(
                "GuardrailInterventionRate",
                guardrail.metric_intervention_rate(),
                threshold=intervention_rate_alarm_percent,
                evaluation_periods=3,
                description=f"The guardrail intervened on more than {intervention_rate_alarm_percent:g}% of calls",
            )
        if log_delivery_alarm:
            self._alarm(
                "LogDeliveryFailures",
                cloudwatch.MathExpression(
                    expression="FILL(cw, 0) + FILL(s3, 0)",
                    using_metrics={
                        "cw": self._account_metric(LOG_DELIVERY_FAILURES[0]),
                        "s3": self._account_metric(LOG_DELIVERY_FAILURES[1]),
                    },
                    label="Invocation-log delivery failures",
                    period=FIVE_MINUTES,
                ),
                threshold=0,
                evaluation_periods=1,
                description="Bedrock could not deliver model-invocation logs to S3 or CloudWatch Logs",
            )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(6))
        """The CloudWatch dashboard of the model (invocations, latency, tokens, errors, quota use, the
        guardrail and log delivery when turned on, alarm status); add widgets to it."""
        self.dashboard.add_widgets(*self._widgets(guardrail, log_delivery_alarm))

    def metric(self, metric_name: str, **props: Any) -> cloudwatch.IMetric:
        """An ``AWS/Bedrock`` metric of this model (Sum over 5 minutes unless overridden) over every series of
        :attr:`model_ids`; ``props``: ``cloudwatch.MetricOptions`` but ``dimensions_map``.

        With two series it is metric math: ``SUM`` for Sum and SampleCount, ``MAX`` for any other statistic. A
        percentile of all calls cannot be derived from the two series' percentiles, and the higher of them
        crosses an alarm threshold whenever either group of callers does (direct calls, or calls through the
        application profile), so a latency alarm misses neither."""
        args = Args("BedrockMonitoring.metric")
        args.text("metric_name", metric_name, allow_token=False)
        options = {"statistic": "Sum", "period": FIVE_MINUTES, **metric_options(args, props)}
        series = [
            cloudwatch.Metric(
                namespace=NAMESPACE, metric_name=metric_name, dimensions_map={"ModelId": model_id}, **options
            )
            for model_id in self.model_ids
        ]
        if len(series) == 1:
            return series[0]
        statistic = options["statistic"]
        # Ids unique per metric and statistic, so that an expression can combine several of these.
        prefix = re.sub(r"[^a-z0-9]", "_", f"{metric_name}_{statistic}".lower())
        ids = {f"{prefix}_{index}": metric for index, metric in enumerate(series)}
        combine = "SUM" if statistic.lower() in _ADDITIVE else "MAX"
        return cloudwatch.MathExpression(
            expression=f"{combine}([{', '.join(ids)}])",
            using_metrics=ids,
            label=options.get("label", f"{metric_name} ({statistic})"),
            period=options["period"],
            **{key: options[key] for key in ("color",) if key in options},
        )

    def metric_tpm_quota_usage_percent(self) -> cloudwatch.MathExpression:
        """``EstimatedTPMQuotaUsage`` per minute as a percentage of the configured TPM quota."""
        return cloudwatch.MathExpression(
            expression=f"100 * usage / {self.tpm_quota}",
            using_metrics={"usage": self.metric("EstimatedTPMQuotaUsage", period=Duration.minutes(1))},
            label="TPM quota used (%)",
            period=Duration.minutes(1),
        )

    def _rate(self, metric_name: str, label: str) -> cloudwatch.MathExpression:
        return cloudwatch.MathExpression(
            expression="IF(invocations > 0, 100 * errors / invocations, 0)",
            using_metrics={"errors": self.metric(metric_name), "invocations": self.metric("Invocations")},
            label=label,
            period=FIVE_MINUTES,
        )

    @staticmethod
    def _account_metric(metric_name: str) -> cloudwatch.Metric:
        """Metrics Bedrock publishes across all model ids (no dimension)."""
        return cloudwatch.Metric(
            namespace=NAMESPACE, metric_name=metric_name, statistic="Sum", period=FIVE_MINUTES
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        evaluation_periods: int,
        description: str,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)

    def _widgets(self, guardrail: Guardrail | None, log_delivery: bool) -> Sequence[cloudwatch.IWidget]:
        def graph(title: str, metrics: Sequence[cloudwatch.IMetric], **props: Any) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=8, **props)

        latency = [self.metric("InvocationLatency", statistic=s, label=s) for s in ("p50", "p90", "p99")]
        ttft = [self.metric("TimeToFirstToken", statistic=s, label=s) for s in ("p50", "p90", "p99")]
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.TextWidget(markdown=f"# Bedrock: {self.model_id}", width=24, height=1),
            graph("Invocations", [self.metric("Invocations")]),
            graph("Invocation latency (ms)", latency),
            graph("Time to first token (ms)", ttft),
            graph("Tokens", [self.metric("InputTokenCount"), self.metric("OutputTokenCount")]),
            graph(
                "Throttles and errors",
                [
                    self.metric(n)
                    for n in ("InvocationThrottles", "InvocationClientErrors", "InvocationServerErrors")
                ],
            ),
            graph(
                "TPM quota used (%)",
                [self.metric_tpm_quota_usage_percent()],
                left_annotations=[cloudwatch.HorizontalAnnotation(value=100, label="quota")],
            ),
        ]
        if guardrail is not None:
            widgets += [
                graph(
                    "Guardrail evaluations",
                    [guardrail.metric_invocations(), guardrail.metric_invocations_intervened()],
                ),
                graph("Guardrail intervention rate (%)", [guardrail.metric_intervention_rate()]),
                graph("Guardrail latency (ms)", [guardrail.metric_invocation_latency()]),
            ]
        if log_delivery:
            widgets.append(
                graph(
                    "Invocation-log delivery failures",
                    [self._account_metric(n) for n in LOG_DELIVERY_FAILURES],
                )
            )
        widgets.append(cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24))
        return widgets
