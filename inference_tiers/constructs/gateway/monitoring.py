"""Dashboard and alarms of a LiteLLMGateway, each from the source that sees it first:

- 5xx rate and p99 latency: the load balancer (``AWS/ApplicationELB``), which also counts what never reached
  a task;
- database connections: Aurora (``AWS/RDS`` ``DatabaseConnections``);
- budget exceeded: a metric filter on the proxy's request log group (LiteLLM logs ``Budget has been exceeded``
  when it refuses a key or team over budget), published as ``InferenceTiers/Gateway`` ``BudgetExceeded``.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_logs as logs
from constructs import Construct

from inference_tiers.config import EMAIL_PATTERN
from inference_tiers.constructs.common.encryption import encrypted_alarm_topic
from inference_tiers.constructs.gateway.proxy import LiteLLMGateway
from inference_tiers.validation import Args

NAMESPACE = "InferenceTiers/Gateway"
BUDGET_MESSAGE = "Budget has been exceeded"
_PERIOD = Duration.minutes(5)
LATENCY_P99_ALARM = Duration.seconds(30)


class GatewayMonitoring(Construct):
    """Alarms (to an encrypted SNS topic) and a dashboard for ``gateway``.

    :param gateway: the gateway to watch.
    :param error_rate_alarm_percent: alarm when 5xx responses exceed this share of requests (default 1).
    :param latency_p99_alarm: alarm when p99 response time exceeds this (default 30 s).
    :param database_connections_alarm: alarm above this many connections (default 400).
    :param alarm_email: subscribe this address to the topic. Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        gateway: LiteLLMGateway,
        error_rate_alarm_percent: float = 1,
        latency_p99_alarm: Duration = LATENCY_P99_ALARM,
        database_connections_alarm: int = 400,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("GatewayMonitoring")
        args.instance("gateway", gateway, LiteLLMGateway)
        args.number("error_rate_alarm_percent", error_rate_alarm_percent, minimum=0.01, maximum=100)
        args.duration("latency_p99_alarm", latency_p99_alarm, minimum=Duration.millis(1), whole_seconds=False)
        args.integer("database_connections_alarm", database_connections_alarm, minimum=1, maximum=100_000)
        if alarm_email is not None:
            args.text("alarm_email", alarm_email, pattern=EMAIL_PATTERN, description="an email")
        self.topic = encrypted_alarm_topic(self, gateway.encryption_key, email=alarm_email)
        """The SNS topic every alarm notifies (TLS only, encrypted with the gateway's key, ``alarm_email``
        subscribed): subscribe further endpoints to it."""
        alb = gateway.load_balancer.metrics
        requests = alb.request_count(period=_PERIOD)
        errors = cloudwatch.MathExpression(
            expression="100 * (FILL(target5xx, 0) + FILL(elb5xx, 0)) / FILL(requests, 1)",
            using_metrics={
                "target5xx": alb.http_code_target(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, period=_PERIOD),
                "elb5xx": alb.http_code_elb(elbv2.HttpCodeElb.ELB_5XX_COUNT, period=_PERIOD),
                "requests": requests,
            },
            label="5xx responses (%)",
            period=_PERIOD,
        )
        latency = gateway.target_group.metrics.target_response_time(statistic="p99", period=_PERIOD)
        connections = gateway.database.cluster.metric_database_connections(
            statistic="Maximum", period=_PERIOD
        )
        logs.MetricFilter(
            self,
            "BudgetExceededFilter",
            log_group=gateway.log_group,
            filter_pattern=logs.FilterPattern.literal(f'"{BUDGET_MESSAGE}"'),
            metric_namespace=NAMESPACE,
            metric_name="BudgetExceeded",
            metric_value="1",
            default_value=0,
        )
        budget = cloudwatch.Metric(
            namespace=NAMESPACE, metric_name="BudgetExceeded", statistic="Sum", period=_PERIOD
        )
        self.alarms = {
            "ErrorRate": errors.create_alarm(
                self,
                "ErrorRateAlarm",
                threshold=error_rate_alarm_percent,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                alarm_description="Gateway 5xx responses above the threshold (load balancer metrics)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "LatencyP99": latency.create_alarm(
                self,
                "LatencyAlarm",
                threshold=latency_p99_alarm.to_milliseconds() / 1000,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                alarm_description="Gateway p99 response time above the threshold (seconds, load balancer)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "DatabaseConnections": connections.create_alarm(
                self,
                "DatabaseConnectionsAlarm",
                threshold=database_connections_alarm,
                evaluation_periods=2,
                alarm_description="Aurora connections near the pool limit (tasks x workers x pool size)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "BudgetExceeded": budget.create_alarm(
                self,
                "BudgetExceededAlarm",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                alarm_description="A key, user or team was refused for exceeding its budget (proxy logs)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
        }
        """Every alarm by name: ``ErrorRate``, ``LatencyP99``, ``DatabaseConnections``, ``BudgetExceeded`` and
        ``RotationRestart`` (the restart after a database password rotation failed)."""
        self.alarms["RotationRestart"] = gateway.restart_handler.metric_errors(period=_PERIOD).create_alarm(
            self,
            "RotationRestartAlarm",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            alarm_description="The restart after a database password rotation failed: restart the service by "
            "hand (docs/gateway.md, the rotation path)",
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        for alarm in self.alarms.values():
            alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        """The CloudWatch dashboard (generated name): requests, 5xx rate, p99 response time, task CPU and
        memory, database connections and budget refusals."""
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Requests", left=[requests], width=8),
            cloudwatch.GraphWidget(title="5xx responses (%)", left=[errors], width=8),
            cloudwatch.GraphWidget(title="Response time p99 (s)", left=[latency], width=8),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Tasks: CPU and memory (%)",
                left=[gateway.service.metric_cpu_utilization(), gateway.service.metric_memory_utilization()],
                width=8,
            ),
            cloudwatch.GraphWidget(title="Database connections", left=[connections], width=8),
            cloudwatch.GraphWidget(title="Budget refusals", left=[budget], width=8),
        )
