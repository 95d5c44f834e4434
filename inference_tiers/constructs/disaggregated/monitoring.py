"""DisaggregatedMonitoring: Container Insights plus the vLLM and router metrics, a dashboard and alarms.

Collection: the ``amazon-cloudwatch-observability`` EKS add-on (CloudWatch agent, Container Insights, GPU
metrics). Its agent also runs an OpenTelemetry pipeline given in the add-on configuration: a Prometheus
receiver scrapes the annotated vLLM, router and mooncake_master pods of this workload (each agent only the
pods on its own node) and the ``awsemf`` exporter writes them to CloudWatch. That pipeline keeps Prometheus
histograms, which matters because TTFT and inter-token latency are histograms (the agent's classic
``prometheus`` section drops histograms altogether). They arrive as statistic sets of the per-interval count
and sum, so Average is the mean over the period; Prometheus histograms carry no min/max, hence no Maximum or
percentiles.

Mooncake: the pipeline keeps none of the point-to-point ``MooncakeConnector``'s own metrics (the pinned v0.33.0
exports ``vllm:mooncake_xfer_time_seconds`` and failure counters), so transfer health is derived: the router's
decode/prefill error counters (a decode error after a successful prefill is a failed KV hand-off) and the difference between decode-side and prefill-side
TTFT (the decode waits for the pushed KV). ``MooncakeStoreConnector`` metrics are added with the KV store.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from inference_tiers.constructs.common.console import lazy_dashboard_url
from inference_tiers.constructs.common.encryption import (
    allow_log_encryption,
    encrypted_alarm_topic,
    retained_key,
)
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.trust import pod_identity_principal
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing
from inference_tiers.k8s.disaggregated import COMPONENT_LABEL, Role
from inference_tiers.validation import Args

# Pinned add-on build. v6.2.0-eksbuild.1 is the first the CloudWatch docs name for OpenTelemetry-based Container
# Insights; the agent's appended collector configuration (``agent.otelConfig``) supports the prometheus receiver,
# the resource and batch processors and the awsemf exporter used below. Check the build is offered for the
# cluster's Kubernetes version: `aws eks describe-addon-versions --addon-name amazon-cloudwatch-observability`.
CLOUDWATCH_OBSERVABILITY_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_OBSERVABILITY_ADDON_VERSION = "v6.2.0-eksbuild.1"
METRIC_NAMESPACE = "InferenceTiers/Disaggregated"
DIMENSIONS = ("ClusterName", "Namespace", "Role")

# Prometheus names this pipeline keeps. vLLM names are in vllm-metrics-v0.33.0.txt of the pinned vLLM; the router
# names are compiled into the vllm-router 0.1.17 wheel. Both lists are checked by the tests.
VLLM_HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:mooncake_store_operation_time_seconds",
)
VLLM_SCALARS = (
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:num_preemptions_total",
    "vllm:mooncake_store_operation_failed_keys_total",
)
ROUTER_COUNTERS = (
    "vllm_router_pd_requests_total",
    "vllm_router_pd_prefill_errors_total",
    "vllm_router_pd_decode_errors_total",
)


def _name_regex(names: tuple[str, ...], suffix: str = "") -> str:
    return "(" + "|".join(n.replace(".", "\\.") for n in names) + ")" + suffix


def otel_config(*, cluster_name: str, namespace: str, log_group_name: str) -> dict[str, Any]:
    """The agent's OpenTelemetry pipeline: scrape this namespace's annotated pods, export to CloudWatch."""
    kept = (
        _name_regex(VLLM_HISTOGRAMS, "(_bucket|_sum|_count)?")
        + "|"
        + _name_regex(VLLM_SCALARS + ROUTER_COUNTERS)
    )
    return {
        "receivers": {
            "prometheus/inference_tiers": {
                "config": {
                    "scrape_configs": [
                        {
                            "job_name": "inference-tiers-disaggregated",
                            "scrape_interval": "30s",
                            "kubernetes_sd_configs": [
                                {
                                    "role": "pod",
                                    "namespaces": {"names": [namespace]},
                                    # The agent is a DaemonSet: each one scrapes only its own node's pods.
                                    "selectors": [
                                        {"role": "pod", "field": "spec.nodeName=${env:K8S_NODE_NAME}"}
                                    ],
                                }
                            ],
                            "relabel_configs": [
                                {
                                    "source_labels": [
                                        "__meta_kubernetes_pod_annotation_prometheus_io_scrape"
                                    ],
                                    "action": "keep",
                                    "regex": "true",
                                },
                                {
                                    "source_labels": [
                                        "__address__",
                                        "__meta_kubernetes_pod_annotation_prometheus_io_port",
                                    ],
                                    "action": "replace",
                                    "regex": "([^:]+)(?::\\d+)?;(\\d+)",
                                    # $$ escapes the collector's own ${...} expansion.
                                    "replacement": "$$1:$$2",
                                    "target_label": "__address__",
                                },
                                {
                                    "source_labels": [
                                        "__meta_kubernetes_pod_label_"
                                        + COMPONENT_LABEL.replace(".", "_").replace("/", "_")
                                    ],
                                    "target_label": "Role",
                                },
                                {
                                    "source_labels": ["__meta_kubernetes_namespace"],
                                    "target_label": "Namespace",
                                },
                            ],
                            "metric_relabel_configs": [
                                {"source_labels": ["__name__"], "action": "keep", "regex": kept}
                            ],
                        }
                    ]
                }
            }
        },
        "processors": {
            "resource/inference_tiers": {
                "attributes": [{"key": "ClusterName", "value": cluster_name, "action": "upsert"}]
            },
            "batch/inference_tiers": {"timeout": "60s"},
        },
        "exporters": {
            "awsemf/inference_tiers": {
                "namespace": METRIC_NAMESPACE,
                "log_group_name": log_group_name,
                "dimension_rollup_option": "NoDimensionRollup",
                "resource_to_telemetry_conversion": {"enabled": True},
                "metric_declarations": [
                    {
                        "dimensions": [list(DIMENSIONS)],
                        "metric_name_selectors": [
                            f"^{_name_regex(VLLM_HISTOGRAMS + VLLM_SCALARS + ROUTER_COUNTERS)}$"
                        ],
                    }
                ],
            }
        },
        "service": {
            "pipelines": {
                "metrics/inference_tiers": {
                    "receivers": ["prometheus/inference_tiers"],
                    "processors": ["resource/inference_tiers", "batch/inference_tiers"],
                    "exporters": ["awsemf/inference_tiers"],
                }
            }
        },
    }


class DisaggregatedMonitoring(Construct):
    """Container Insights add-on, vLLM/router metrics in CloudWatch, a dashboard and alarms to SNS.

    :param cluster: the EKS cluster (needs the EKS Pod Identity agent add-on for the agent's role).
    :param serving: the workload to watch (namespace, role labels, whether the KV store is on).
    :param addon_version: ``amazon-cloudwatch-observability`` version (``v<major>.<minor>.<patch>-eksbuild.<n>``,
        or a token). Default ``CLOUDWATCH_OBSERVABILITY_ADDON_VERSION``.
    :param alarm_topic: where alarms go. Default: a new SNS topic encrypted with ``encryption_key``.
    :param encryption_key: KMS key of the metrics log group and of the default alarm topic. Default: a new
        key with rotation, retained with the logs it protects. A key you pass must let CloudWatch Logs use it
        (this construct adds that statement to a key defined in your app; an imported key's policy is yours).
    :param ttft_alarm_seconds: alarm when the mean decode-side TTFT stays above this, 0.05-600. Default 10.
    :param transfer_failure_alarm_count: alarm when P/D hand-off errors in 5 minutes reach this, 1-10000.
        Default 1.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        serving: DisaggregatedServing,
        addon_version: str = CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
        alarm_topic: sns.ITopic | None = None,
        encryption_key: kms.IKey | None = None,
        ttft_alarm_seconds: float = 10.0,
        transfer_failure_alarm_count: int = 1,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("DisaggregatedMonitoring")
        cluster = args.implements("cluster", cluster, eks.ICluster)
        serving = args.instance("serving", serving, DisaggregatedServing)
        addon_version = args.text(
            "addon_version",
            addon_version,
            pattern=r"v\d+\.\d+\.\d+-eksbuild\.\d+",
            description="an EKS add-on version such as v6.2.0-eksbuild.1",
        )
        if alarm_topic is not None:
            alarm_topic = args.implements("alarm_topic", alarm_topic, sns.ITopic)
        if encryption_key is not None:
            encryption_key = args.implements("encryption_key", encryption_key, kms.IKey)
        ttft_alarm_seconds = args.number("ttft_alarm_seconds", ttft_alarm_seconds, minimum=0.05, maximum=600)
        transfer_failure_alarm_count = args.integer(
            "transfer_failure_alarm_count", transfer_failure_alarm_count, minimum=1, maximum=10_000
        )
        self._cluster_name = cluster.cluster_name
        self._namespace = serving.namespace

        self.encryption_key: kms.IKey = encryption_key or retained_key(
            self, "Key", "Encrypts the disaggregated tier's metrics log group and alarm topic"
        )
        """The key of the metrics log group and of the default alarm topic: ``encryption_key``, or a
        new key with yearly rotation, retained."""
        # EMF log events land here; CloudWatch extracts the metrics from them. CloudWatch Logs encrypts them
        # with the key (the agent writing them needs no key permission).
        log_group_name = f"/aws/containerinsights/{cluster.cluster_name}/inference-tiers"
        allow_log_encryption(self.encryption_key, self, log_group_name)
        self.log_group = logs.LogGroup(
            self,
            "MetricsLogGroup",
            log_group_name=log_group_name,
            encryption_key=self.encryption_key,
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.RETAIN,
        )
        """``/aws/containerinsights/<cluster>/inference-tiers``: the agent writes the vLLM and router metrics
        here as EMF events, which CloudWatch turns into metrics (kept one month, encrypted with
        :attr:`encryption_key`, retained)."""

        self.agent_role = iam.Role(
            self,
            "AgentRole",
            assumed_by=pod_identity_principal(self, cluster.cluster_arn),
            description="CloudWatch agent of the amazon-cloudwatch-observability add-on (EKS Pod Identity)",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy")],
        )
        """The CloudWatch agent's role (EKS Pod Identity for the ``cloudwatch-agent`` service account,
        ``CloudWatchAgentServerPolicy``)."""
        acknowledge(
            self.agent_role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/CloudWatchAgentServerPolicy]",
            "CloudWatchAgentServerPolicy is the policy AWS documents for the Container Insights agent; it only "
            "puts metrics and log events and describes EC2 tags and volumes, nothing broader.",
        )

        self.addon = eks_l1.CfnAddon(
            self,
            "CloudWatchObservability",
            cluster_name=cluster.cluster_name,
            addon_name=CLOUDWATCH_OBSERVABILITY_ADDON,
            addon_version=addon_version,
            resolve_conflicts="OVERWRITE",
            pod_identity_associations=[
                eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    service_account="cloudwatch-agent", role_arn=self.agent_role.role_arn
                )
            ],
            configuration_values=Stack.of(self).to_json_string(
                {
                    "agent": {
                        "otelConfig": otel_config(
                            cluster_name=cluster.cluster_name,
                            namespace=serving.namespace,
                            log_group_name=self.log_group.log_group_name,
                        )
                    }
                }
            ),
        )
        """The ``amazon-cloudwatch-observability`` EKS add-on (``CfnAddon``), configured with the agent's
        OpenTelemetry pipeline for this workload."""

        self.alarm_key: kms.IKey | None = None
        """The key of the alarm topic this construct creates (:attr:`encryption_key`), or None when you passed
        ``alarm_topic``: the key to let further publishers use."""
        if alarm_topic is None:
            alarm_topic = encrypted_alarm_topic(self, self.encryption_key)
            self.alarm_key = self.encryption_key
        self.alarm_topic = alarm_topic
        """The SNS topic every alarm notifies: ``alarm_topic``, or a new one encrypted with
        :attr:`encryption_key`; subscribe to it."""

        decode_ttft = self.metric_time_to_first_token("decode")
        prefill_ttft = self.metric_time_to_first_token("prefill")
        self.ttft_alarm = decode_ttft.create_alarm(
            self,
            "TtftAlarm",
            alarm_description=f"Mean decode-side time to first token above {ttft_alarm_seconds} s",
            threshold=ttft_alarm_seconds,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        """Alarms when the mean decode-side time to first token is above ``ttft_alarm_seconds`` in 3 of 5
        one-minute periods."""
        transfer_failures = self.metric_transfer_failures()
        self.transfer_failure_alarm = transfer_failures.create_alarm(
            self,
            "TransferFailureAlarm",
            alarm_description="Prefill/decode KV hand-off errors reported by vllm-router",
            threshold=transfer_failure_alarm_count,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        """Alarms when vllm-router reports ``transfer_failure_alarm_count`` or more prefill
        and decode errors (KV hand-off failures) in 5 minutes."""
        self.alarms = [self.ttft_alarm, self.transfer_failure_alarm]
        """Every alarm: :attr:`ttft_alarm`, :attr:`transfer_failure_alarm` and, with the KV store, the
        Mooncake store failure alarm."""
        self.kv_store_failure_alarm: cw.Alarm | None = None
        """Alarms when Mooncake store operations fail for some keys (any in a 5-minute period), or None without
        the KV store."""
        if serving.spec.enable_kv_store:
            self.kv_store_failure_alarm = self._sum_of_roles(
                "vllm:mooncake_store_operation_failed_keys_total", "Mooncake store failed keys"
            ).create_alarm(
                self,
                "KvStoreFailureAlarm",
                alarm_description="Mooncake store operations that failed for some keys",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            self.alarms.append(self.kv_store_failure_alarm)
        for alarm in self.alarms:
            alarm.add_alarm_action(cw_actions.SnsAction(alarm_topic))

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        """The CloudWatch dashboard (generated name, 3-hour default range): TTFT, inter-token latency, queue
        depth, KV-cache usage, KV hand-off time and failures, and alarm states. Its console URL is
        :attr:`dashboard_url`."""
        handoff = cw.MathExpression(
            expression="decode - prefill",
            using_metrics={"decode": decode_ttft, "prefill": prefill_ttft},
            label="KV hand-off (decode TTFT - prefill TTFT), derived",
            period=Duration.minutes(1),
        )
        roles: tuple[Role, Role] = ("prefill", "decode")
        widgets: list[cw.IWidget] = [
            cw.GraphWidget(
                title="Time to first token (s, mean; decode = what clients see)",
                left=[
                    decode_ttft,
                    prefill_ttft,
                ],
                left_annotations=[cw.HorizontalAnnotation(value=ttft_alarm_seconds, label="alarm")],
            ),
            cw.GraphWidget(
                title="Inter-token latency (s, decode)",
                left=[
                    self.metric_inter_token_latency(),
                ],
            ),
            cw.GraphWidget(
                title="Queue depth (requests waiting / running)",
                left=[self.metric_queue_depth(role) for role in roles],
                right=[self._metric("vllm:num_requests_running", role, "Maximum") for role in roles],
            ),
            cw.GraphWidget(
                title="KV-cache usage (fraction of GPU KV blocks)",
                left=[self.metric_kv_cache_usage(role) for role in roles],
                left_y_axis=cw.YAxisProps(min=0, max=1),
            ),
            cw.GraphWidget(
                title="Mooncake KV transfer time (derived: decode minus prefill TTFT)",
                left=[handoff],
            ),
            cw.GraphWidget(
                title="Mooncake KV transfer failures (router P/D errors, per 5 min)",
                left=[
                    transfer_failures,
                    self._metric("vllm_router_pd_prefill_errors_total", "router", "Sum", 5),
                    self._metric("vllm_router_pd_decode_errors_total", "router", "Sum", 5),
                ],
                right=[self._metric("vllm_router_pd_requests_total", "router", "Sum", 5)],
            ),
        ]
        if serving.spec.enable_kv_store:
            widgets.append(
                cw.GraphWidget(
                    title="Mooncake store operations (time s, failed keys)",
                    left=[
                        self._metric("vllm:mooncake_store_operation_time_seconds", role, "Average")
                        for role in roles
                    ],
                    right=[
                        self._metric("vllm:mooncake_store_operation_failed_keys_total", role, "Sum", 5)
                        for role in roles
                    ],
                )
            )
        widgets.append(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms))
        for i in range(0, len(widgets), 2):
            self.dashboard.add_widgets(*(w for w in widgets[i : i + 2]))

    dashboard_url = lazy_dashboard_url()
    """Console URL of the dashboard (a deploy-time string). Reading it adds the partition's console-host
    mapping to the dashboard's stack, so a stack that never uses the URL gets no unreferenced mapping."""

    def _metric(self, name: str, role: str, statistic: str, minutes: int = 1) -> cw.Metric:
        """One series of the exporter's single dimension set (ClusterName, Namespace, Role)."""
        return cw.Metric(
            namespace=METRIC_NAMESPACE,
            metric_name=name,
            dimensions_map={"ClusterName": self._cluster_name, "Namespace": self._namespace, "Role": role},
            statistic=statistic,
            period=Duration.minutes(minutes),
            label=f"{name} {role} {statistic}",
        )

    def _sum_of_roles(self, name: str, label: str) -> cw.MathExpression:
        """A counter summed over the prefill and decode pods, per 5 minutes (missing data counts as 0)."""
        return cw.MathExpression(
            expression="FILL(prefill, 0) + FILL(decode, 0)",
            using_metrics={role: self._metric(name, role, "Sum", 5) for role in ("prefill", "decode")},
            label=label,
            period=Duration.minutes(5),
        )

    def metric_time_to_first_token(self, role: Role, *, statistic: str = "Average") -> cw.Metric:
        """TTFT histogram as seen by one role's pods (decode: what clients see behind the router)."""
        return self._metric("vllm:time_to_first_token_seconds", role, statistic)

    def metric_inter_token_latency(self, *, statistic: str = "Average") -> cw.Metric:
        """vLLM's ``inter_token_latency_seconds`` of the decode pool (seconds between generated tokens)."""
        return self._metric("vllm:inter_token_latency_seconds", "decode", statistic)

    def metric_queue_depth(self, role: Role) -> cw.Metric:
        """vLLM's ``num_requests_waiting`` of the ``role`` pool (prefill or decode; Maximum)."""
        return self._metric("vllm:num_requests_waiting", role, "Maximum")

    def metric_kv_cache_usage(self, role: Role) -> cw.Metric:
        """vLLM's ``kv_cache_usage_perc`` of the ``role`` pool (0 to 1; Maximum)."""
        return self._metric("vllm:kv_cache_usage_perc", role, "Maximum")

    def metric_transfer_failures(self) -> cw.MathExpression:
        """Router-reported prefill and decode errors per 5 minutes (the P/D hand-off failures)."""
        return cw.MathExpression(
            expression="FILL(prefill, 0) + FILL(decode, 0)",
            using_metrics={
                "prefill": self._metric("vllm_router_pd_prefill_errors_total", "router", "Sum", 5),
                "decode": self._metric("vllm_router_pd_decode_errors_total", "router", "Sum", 5),
            },
            label="P/D hand-off errors",
            period=Duration.minutes(5),
        )
