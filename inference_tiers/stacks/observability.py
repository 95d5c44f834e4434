"""The ``observability`` tier: one Prometheus workspace, rules and alerting for every tier
(``InferenceTiers-Observability``).

What it collects from, in order:

- EKS: ``observability.eks_cluster_arn`` with ``scraper_subnet_ids`` and ``scraper_security_group_ids`` (any
  cluster, for example the hyperpod or disaggregated stack's, deployed separately); otherwise, with
  ``-c tier=disaggregated,observability``, the disaggregated stack's cluster (its private subnets, one per AZ, and
  the EKS cluster security group, which its GPU nodes carry), whose RBAC for the scraper is added to that cluster.
- ECS: with ``-c tier=gateway,observability``, an ADOT collector sidecar in the gateway's task (LiteLLM metrics to
  the workspace, OTLP traces to X-Ray).
- Bedrock and SageMaker publish to CloudWatch, which the optional Grafana workspace reads directly.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    TierSpec,
    boolean,
    email_address,
    integer,
    items,
    number,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.observability import ADOT_IMAGE, ObservabilityHub
from inference_tiers.litellm.config import MASTER_KEY_PREFIX
from inference_tiers.litellm.config import PORT as LITELLM_PORT
from inference_tiers.observability.rules import AlertThresholds
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-Observability"
DISAGGREGATED_STACK = "InferenceTiers-Disaggregated"
GATEWAY_STACK = "InferenceTiers-Gateway"
_CLUSTER_ARN = r"arn:aws(-[a-z-]+)?:eks:[a-z0-9-]{1,20}:[0-9]{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99}"


@dataclass(frozen=True)
class ObservabilitySettings:
    """Settings of the observability tier (context keys ``observability.<field>``, defaults in cdk.json)."""

    retention_days: int = setting(integer(1, 1095), "Days the Prometheus workspace keeps samples.")
    alarm_email: str | None = setting(
        email_address(),
        "Subscribe this address to the alert topic (empty: no subscription).",
    )
    grafana: bool = setting(
        boolean(), "Create an Amazon Managed Grafana workspace (needs IAM Identity Center in the account)."
    )
    eks_cluster_arn: str | None = setting(
        optional(text(_CLUSTER_ARN, description="an EKS cluster ARN")),
        "Scrape this EKS cluster (empty: the disaggregated stack's cluster when it is in this app, else none).",
    )
    scraper_subnet_ids: tuple[str, ...] = setting(
        items(text(r"subnet-[0-9a-f]{8,17}", description="a subnet id"), max_items=5),
        "2-5 private subnets of that cluster's VPC, each in its own AZ.",
    )
    scraper_security_group_ids: tuple[str, ...] = setting(
        items(text(r"sg-[0-9a-f]{8,17}", description="a security group id"), max_items=5),
        "1-5 security groups for the scraper that reach the pods' metrics ports (the EKS cluster security group).",
    )
    ttft_p90_seconds: float = setting(number(0.01, 600), "Alert above this p90 time to first token (s).")
    inter_token_p90_seconds: float = setting(
        number(0.001, 60), "Alert above this p90 inter-token latency (s)."
    )
    queue_depth: int = setting(integer(1, 100_000), "Alert above this many waiting requests per model.")
    kv_cache_usage_ratio: float = setting(number(0.01, 1), "Alert above this KV-cache usage (0-1).")
    gpu_utilization_percent: float = setting(number(1, 100), "Alert above this average GPU utilisation (%).")
    gpu_memory_ratio: float = setting(number(0.01, 1), "Alert above this GPU memory use (0-1).")
    gateway_error_ratio: float = setting(number(0.001, 1), "Alert above this share of failed gateway calls.")
    budget_remaining_ratio: float = setting(
        number(0.001, 1), "Alert below this share of a team's/key's budget."
    )
    efa_drops_per_second: float = setting(number(0, 1e9), "Alert above these EFA receive drops per second.")

    def __post_init__(self) -> None:
        scraper = {
            "observability.scraper_subnet_ids": len(self.scraper_subnet_ids),
            "observability.scraper_security_group_ids": len(self.scraper_security_group_ids),
        }
        if self.eks_cluster_arn is None:
            for key, count in scraper.items():
                if count:
                    raise ConfigError(key, count, "empty unless observability.eks_cluster_arn is set")
            return
        if len(self.scraper_subnet_ids) < 2:
            raise ConfigError(
                "observability.scraper_subnet_ids",
                list(self.scraper_subnet_ids),
                "2 to 5 subnet ids in distinct AZs (observability.eks_cluster_arn is set)",
            )
        if not self.scraper_security_group_ids:
            raise ConfigError(
                "observability.scraper_security_group_ids",
                [],
                "1 to 5 security group ids (observability.eks_cluster_arn is set)",
            )

    def thresholds(self) -> AlertThresholds:
        names = {f.name for f in fields(AlertThresholds)}
        return AlertThresholds(**{name: getattr(self, name) for name in names})

    def account_requirements(self) -> AccountRequirements:
        # The collector sidecar's image (pulled by the gateway's tasks when both tiers are deployed together).
        return AccountRequirements(
            images=(ImageNeed(ADOT_IMAGE, "inference_tiers.constructs.observability:ADOT_IMAGE"),)
        )


class ObservabilityStack(Stack):
    """The observability tier: ObservabilityHub plus the collectors of the tiers it can see."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ObservabilitySettings,
        disaggregated: Stack | None = None,
        gateway: Stack | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.hub = ObservabilityHub(
            self,
            "Hub",
            thresholds=settings.thresholds(),
            retention_days=settings.retention_days,
            alarm_email=settings.alarm_email,
            grafana=settings.grafana,
        )
        if settings.eks_cluster_arn:
            self.hub.add_eks_scraper(
                "EksScraper",
                cluster_arn=settings.eks_cluster_arn,
                subnet_ids=settings.scraper_subnet_ids,
                security_group_ids=settings.scraper_security_group_ids,
                cluster_label=settings.eks_cluster_arn.rsplit("/", 1)[-1],
            )
        elif disaggregated is not None:
            self._scrape_disaggregated(disaggregated)
        if gateway is not None:
            proxy = getattr(gateway, "gateway")  # noqa: B009 (GatewayStack.gateway)
            # LiteLLM 1.104.0 answers /metrics only with a key (require_auth_for_metrics_endpoint; audit W1).
            self.hub.add_ecs_collector(
                proxy.task_definition,
                metrics_port=LITELLM_PORT,
                log_group=proxy.log_group,
                metrics_key=ecs.Secret.from_secrets_manager(proxy.master_key_secret),
                metrics_key_prefix=MASTER_KEY_PREFIX,
            )
            proxy.export_traces()  # the sidecar receives OTLP on 127.0.0.1:4318
        CfnOutput(self, "WorkspaceArn", value=self.hub.workspace_arn)
        CfnOutput(self, "PrometheusEndpoint", value=self.hub.prometheus_endpoint)
        CfnOutput(self, "RemoteWriteUrl", value=self.hub.remote_write_url)
        CfnOutput(self, "AlertTopicArn", value=self.hub.alert_topic.topic_arn)
        if self.hub.grafana_workspace is not None:
            CfnOutput(
                self,
                "GrafanaUrl",
                value=f"https://{self.hub.grafana_workspace.attr_endpoint}",
                description="Push the dashboards: inference-tiers dashboards push --grafana-workspace <id>",
            )
            CfnOutput(self, "GrafanaWorkspaceId", value=self.hub.grafana_workspace.attr_id)

    def _scrape_disaggregated(self, stack: Stack) -> None:
        eks = getattr(stack, "eks")  # noqa: B009 (DisaggregatedStack.eks: EksCluster)
        vpc: ec2.IVpc = getattr(stack, "vpc")  # noqa: B009
        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, one_per_az=True)
        self.hub.add_eks_scraper(
            "DisaggregatedScraper",
            cluster_arn=eks.cluster.cluster_arn,
            subnet_ids=subnets.subnet_ids,
            security_group_ids=[eks.cluster_security_group_id],
            cluster_label="disaggregated",
            # In the hub, as before: this app deploys the disaggregated stack first, and it never uses the hub.
            scope=self.hub,
            cluster=eks.cluster,
        )


def build(app: Construct, settings: ObservabilitySettings) -> list[Stack]:
    """The disaggregated and gateway stacks, when this app builds them too (TIER_ORDER puts them first)."""
    found = {name: app.node.try_find_child(name) for name in (DISAGGREGATED_STACK, GATEWAY_STACK)}
    disaggregated, gateway = (s if isinstance(s, Stack) else None for s in found.values())
    return [
        ObservabilityStack(
            app,
            STACK_NAME,
            settings=settings,
            disaggregated=disaggregated,
            gateway=gateway,
            description="inference-tiers: Prometheus workspace, rules, alerting and Grafana for every tier",
        )
    ]


TIER = Tier(spec=TierSpec("observability", ObservabilitySettings), build=build)
