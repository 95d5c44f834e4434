"""The ``gateway`` tier: a LiteLLM gateway in front of every other tier (``InferenceTiers-Gateway``).

Its models, guardrail and router options are :class:`~inference_tiers.stacks.gateway_models.GatewayModelSettings`
(shared with the ``platform`` tier), with the bedrock and sagemaker stacks of this app when it builds them.

The HTTPS certificate is ``gateway.certificate_arn`` or, left empty, the ``CertificateArn`` stack parameter;
``gateway.allow_http=true`` serves plain HTTP instead, for a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_certificatemanager as acm
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    TierSpec,
    boolean,
    email_address,
    integer,
    ipv4_cidr,
    items,
    number,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.common.console import dashboard_url
from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.nag import acknowledge, acknowledge_invocation_logging
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.constructs.gateway import (
    GatewayMonitoring,
    LiteLLMGateway,
)
from inference_tiers.constructs.gateway.proxy import FARGATE_MEMORY_MIB, fargate_memory_text
from inference_tiers.litellm.config import (
    LITELLM_IMAGE,
)
from inference_tiers.stacks.gateway_models import GatewayModelSettings, gateway_models, stack_parameter
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-Gateway"
BEDROCK_STACK = "InferenceTiers-Bedrock"
SAGEMAKER_STACK = "InferenceTiers-SageMaker"

_CERT_ARN = r"arn:aws(-[a-z-]+)?:acm:[a-z0-9-]{1,20}:[0-9]{12}:certificate/[a-f0-9-]{36}"


@dataclass(frozen=True)
class GatewaySettings(GatewayModelSettings):
    """Settings of the gateway tier (context keys ``gateway.<field>``, defaults in cdk.json); the models are
    :class:`GatewayModelSettings`'."""

    tier_name: ClassVar[str] = "gateway"

    certificate_arn: str | None = setting(
        optional(text(_CERT_ARN, description="an ACM certificate ARN")),
        "ACM certificate of the HTTPS listeners (empty: the CertificateArn stack parameter).",
    )
    allow_http: bool = setting(boolean(), "Serve plain HTTP (80/8080) instead of HTTPS: for a test only.")
    domain_name: str | None = setting(
        optional(
            text(r"([a-z0-9-]{1,63}\.)+[a-z]{2,63}", description="a DNS name such as llm.example.internal")
        ),
        "Forward only requests with this Host header (empty: any host).",
    )
    vpc_cidr: str = setting(ipv4_cidr(16, 24), "CIDR of the gateway's VPC.")
    client_cidrs: tuple[str, ...] = setting(
        items(ipv4_cidr(8, 32), max_items=20), "Who may call the API listener (empty: the VPC's CIDR)."
    )
    admin_cidrs: tuple[str, ...] = setting(
        items(ipv4_cidr(8, 32), max_items=20), "Who may reach the admin listener (empty: the VPC's CIDR)."
    )
    desired_count: int = setting(integer(2, 100), "Tasks at start and autoscaling minimum (at least 2 AZs).")
    max_count: int = setting(integer(2, 100), "Autoscaling maximum.")
    requests_per_target: int = setting(
        integer(1, 100_000), "Scale out above this many requests per task per minute."
    )
    cpu: int = setting(integer(1024, 16384), "Task vCPU units (1024, 2048, 4096, 8192 or 16384).")
    memory_mib: int = setting(integer(2048, 122880), "Task memory (MiB).")
    workers: int = setting(integer(1, 32), "Proxy worker processes per task.")
    request_logging: bool = setting(
        boolean(),
        "Log one JSON line per request (LiteLLM's INFO level), for debugging; costs every request its "
        "formatting. Off: warnings and errors only, the spend log is the per-request audit.",
    )
    error_rate_alarm_percent: float = setting(number(0.01, 100), "Alarm above this 5xx share (%).")
    latency_p99_alarm_ms: int = setting(integer(1, 3_600_000), "Alarm above this p99 response time (ms).")
    database_connections_alarm: int = setting(integer(1, 100_000), "Alarm above this many DB connections.")
    alarm_email: str | None = setting(
        email_address(),
        "Subscribe this address to the alarm topic.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.allow_http and self.certificate_arn is not None:
            raise ConfigError(
                "gateway.allow_http", True, "false when gateway.certificate_arn is set (HTTPS is then used)"
            )
        if self.cpu not in FARGATE_MEMORY_MIB:
            raise ConfigError("gateway.cpu", self.cpu, "one of " + ", ".join(map(str, FARGATE_MEMORY_MIB)))
        if self.memory_mib not in FARGATE_MEMORY_MIB[self.cpu]:
            raise ConfigError("gateway.memory_mib", self.memory_mib, fargate_memory_text(self.cpu))
        if self.max_count < self.desired_count:
            raise ConfigError(
                "gateway.max_count", self.max_count, f"at least gateway.desired_count ({self.desired_count})"
            )

    def account_requirements(self) -> AccountRequirements:
        profile = self.profile()
        return AccountRequirements(
            bedrock_model_id=self.bedrock_model_id,
            bedrock_inference_profile_id=profile.profile_id,
            images=(ImageNeed(LITELLM_IMAGE, "inference_tiers.litellm.config:LITELLM_IMAGE"),),
        )


class GatewayStack(Stack):
    """The gateway tier: VPC, LiteLLMGateway (ECS, ALB, Aurora, Valkey), dashboard and alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: GatewaySettings,
        bedrock: Stack | None = None,
        sagemaker: Stack | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        key = retained_key(self, "Key", "Encrypts the gateway tier's logs, secrets, database and cache")
        self.vpc = create_private_vpc(self, "Vpc", cidr=settings.vpc_cidr, flow_log_key=key)
        certificate = None
        if not settings.allow_http:
            arn = settings.certificate_arn or stack_parameter(
                self, "CertificateArn", _CERT_ARN, "ACM certificate of the gateway's HTTPS listeners"
            )
            certificate = acm.Certificate.from_certificate_arn(self, "Certificate", arn)
        self.gateway = LiteLLMGateway(
            self,
            "Gateway",
            vpc=self.vpc,
            models=gateway_models(self, settings, bedrock=bedrock, sagemaker=sagemaker),
            certificate=certificate,
            allow_http=settings.allow_http,
            domain_name=settings.domain_name,
            client_cidrs=list(settings.client_cidrs) or None,
            admin_cidrs=list(settings.admin_cidrs) or None,
            router=settings.router_options(),
            desired_count=settings.desired_count,
            max_count=settings.max_count,
            requests_per_target=settings.requests_per_target,
            cpu=settings.cpu,
            memory_mib=settings.memory_mib,
            workers=settings.workers,
            request_logging=settings.request_logging,
            encryption_key=key,
        )
        self._acknowledge_inference_checks(settings)
        self.monitoring = GatewayMonitoring(
            self,
            "Monitoring",
            gateway=self.gateway,
            error_rate_alarm_percent=settings.error_rate_alarm_percent,
            latency_p99_alarm=Duration.millis(settings.latency_p99_alarm_ms),
            database_connections_alarm=settings.database_connections_alarm,
            alarm_email=settings.alarm_email,
        )
        CfnOutput(
            self, "GatewayUrl", value=self.gateway.url, description="OpenAI-compatible base URL (+ /v1)"
        )
        CfnOutput(
            self, "AdminUrl", value=self.gateway.admin_url, description="Admin API (keys, teams, budgets)"
        )
        CfnOutput(self, "MasterKeySecretArn", value=self.gateway.master_key_secret.secret_arn)
        CfnOutput(self, "Models", value=", ".join(m.name for m in self.gateway.models))
        CfnOutput(self, "DashboardUrl", value=dashboard_url(self.monitoring.dashboard))

    def _acknowledge_inference_checks(self, settings: GatewaySettings) -> None:
        acknowledge_invocation_logging(self.gateway.task_role)
        if settings.allow_http:
            acknowledge(
                self.gateway,
                "InferenceTiers-GW2",
                "gateway.allow_http=true is the test-only opt-in for plain HTTP listeners, and the construct "
                "adds a synth warning saying so",
            )


def build(app: Construct, settings: GatewaySettings) -> list[Stack]:
    """The bedrock and sagemaker stacks, when this app builds them too (TIER_ORDER puts them first)."""
    found = {name: app.node.try_find_child(name) for name in (BEDROCK_STACK, SAGEMAKER_STACK)}
    bedrock, sagemaker = (s if isinstance(s, Stack) else None for s in found.values())
    return [
        GatewayStack(
            app,
            STACK_NAME,
            settings=settings,
            bedrock=bedrock,
            sagemaker=sagemaker,
            description="inference-tiers: LiteLLM gateway in front of every tier",
        )
    ]


TIER = Tier(spec=TierSpec("gateway", GatewaySettings), build=build)
