"""The ``gateway`` tier: a LiteLLM gateway in front of every other tier (``InferenceTiers-Gateway``).

Where each model target comes from, in order:

- Bedrock: with ``-c tier=bedrock,gateway`` the bedrock stack's guardrail (and its application inference
  profile, when it has one) directly; otherwise ``gateway.guardrail_arn``/``guardrail_version``/
  ``guardrail_kms_key_arn`` (the bedrock stack's outputs) or, left empty, stack parameters of the same names
  that ``cdk deploy --parameters`` must fill. The model is ``gateway.bedrock_model_id`` through the
  ``gateway.bedrock_inference_profile`` geography, or ``gateway.bedrock_application_profile_arn``.
- SageMaker: ``gateway.sagemaker_endpoint_name``, or with ``-c tier=sagemaker,gateway`` the sagemaker stack's
  endpoint; none otherwise.
- EKS services: ``gateway.openai_models`` (name -> base URL and served model).

The HTTPS certificate is ``gateway.certificate_arn`` or, left empty, the ``CertificateArn`` stack parameter;
``gateway.allow_http=true`` serves plain HTTP instead, for a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, CfnParameter, Duration, Stack
from aws_cdk import aws_certificatemanager as acm
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    ImageNeed,
    TierSpec,
    boolean,
    choice,
    integer,
    ipv4_cidr,
    items,
    mapping,
    number,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.bedrock.guardrail import ImportedGuardrail
from inference_tiers.constructs.bedrock.model_access import (
    MODEL_ID_PATTERN,
    ApplicationProfile,
    CrossRegionProfile,
    Geography,
    ModelSource,
    has_geography_prefix,
)
from inference_tiers.constructs.common.console import dashboard_url
from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.constructs.gateway import (
    BedrockTarget,
    GatewayMonitoring,
    IVersionedGuardrail,
    LiteLLMGateway,
    OpenAICompatibleTarget,
    SageMakerTarget,
)
from inference_tiers.constructs.gateway.proxy import FARGATE_MEMORY_MIB, fargate_memory_text
from inference_tiers.constructs.gateway.targets import GatewayTarget
from inference_tiers.litellm.config import (
    LITELLM_IMAGE,
    MAX_REQUESTS_PER_MINUTE,
    MODEL_NAME_PATTERN,
    RouterOptions,
)
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-Gateway"
BEDROCK_STACK = "InferenceTiers-Bedrock"
SAGEMAKER_STACK = "InferenceTiers-SageMaker"

_GUARDRAIL_ARN = r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+"
_KMS_KEY_ARN = r"arn:aws(-[a-z-]+)?:kms:[a-z0-9-]{1,20}:[0-9]{12}:key/[a-f0-9-]{36}"
_CERT_ARN = r"arn:aws(-[a-z-]+)?:acm:[a-z0-9-]{1,20}:[0-9]{12}:certificate/[a-f0-9-]{36}"
_AIP_ARN = r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:application-inference-profile/[a-z0-9]+"
_NAME = text(MODEL_NAME_PATTERN, description="a model name such as nova-lite")
_URL = text(r"https?://[^\s/?#]+(/[^\s?#]*)?", description="an http(s) URL such as http://10.1.0.5:30000/v1")


def _openai_model(key: str, raw: Any) -> tuple[str, str]:
    """``{"base_url": "...", "served_model": "..."}`` -> (base URL, served model)."""
    accepted = 'an object {"base_url": "http://...:30000/v1", "served_model": "<model the server serves>"}'
    if not isinstance(raw, dict) or set(raw) != {"base_url", "served_model"}:
        raise ConfigError(key, raw, accepted)
    return _URL(f"{key}.base_url", raw["base_url"]), text()(f"{key}.served_model", raw["served_model"])


@dataclass(frozen=True)
class GatewaySettings:
    """Settings of the gateway tier (context keys ``gateway.<field>``, defaults in cdk.json)."""

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
    bedrock_model_name: str = setting(_NAME, "The name clients send for the Bedrock model.")
    bedrock_model_id: str = setting(
        text(MODEL_ID_PATTERN, description="a Bedrock foundation-model id such as amazon.nova-2-lite-v1:0"),
        "Bedrock model, without geography prefix (the bedrock tier's bedrock.model_id).",
    )
    bedrock_inference_profile: str = setting(
        choice(*(g.value for g in Geography)),
        "Cross-Region inference profile geography of the Bedrock model.",
    )
    bedrock_application_profile_arn: str | None = setting(
        optional(text(_AIP_ARN, description="an application inference profile ARN")),
        "Call the Bedrock model through this application inference profile (the bedrock stack's output).",
    )
    guardrail_arn: str | None = setting(
        optional(text(_GUARDRAIL_ARN, description="a guardrail ARN")),
        "The tier-1 guardrail (the bedrock stack's GuardrailArn; empty: the bedrock stack in this app, or a "
        "stack parameter).",
    )
    guardrail_version: str | None = setting(
        optional(text(r"[1-9][0-9]{0,7}", description="a numbered guardrail version")),
        "The guardrail's version (the bedrock stack's GuardrailVersion).",
    )
    guardrail_kms_key_arn: str | None = setting(
        optional(text(_KMS_KEY_ARN, description="a KMS key ARN")),
        "The guardrail's KMS key, which callers must be able to decrypt with.",
    )
    sagemaker_endpoint_name: str | None = setting(
        optional(text(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", description="a SageMaker endpoint name")),
        "A SageMaker endpoint to serve (empty: the sagemaker stack in this app, or none).",
    )
    sagemaker_inference_component: str | None = setting(
        optional(text(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", description="an inference component name")),
        "Its inference component (the sagemaker stack's InferenceComponentName).",
    )
    sagemaker_model_name: str = setting(_NAME, "The name clients send for the SageMaker model.")
    openai_models: dict[str, tuple[str, str]] = setting(
        mapping(_openai_model, key_pattern=MODEL_NAME_PATTERN, max_items=20),
        "OpenAI-compatible servers (EKS tiers): name -> {base_url, served_model}.",
    )
    fallbacks: dict[str, tuple[str, ...]] = setting(
        mapping(items(_NAME, min_items=1, max_items=5), key_pattern=MODEL_NAME_PATTERN, max_items=20),
        "Model name -> model names tried in order when it fails.",
    )
    allow_unguarded_fallbacks: bool = setting(
        boolean(),
        "Let gateway.fallbacks send a call to the guarded Bedrock model on to a model without its guardrail.",
    )
    requests_per_minute: dict[str, int] = setting(
        mapping(integer(1, MAX_REQUESTS_PER_MINUTE), key_pattern=MODEL_NAME_PATTERN, max_items=20),
        "Model name -> the most calls it accepts per UTC minute across all tasks (counted in Valkey); past it a "
        "call gets 429 or goes to the model's fallback (empty: no limit).",
    )
    request_timeout_seconds: int = setting(
        integer(5, 3600), "A call's time limit (the ALB idle timeout follows)."
    )
    num_retries: int = setting(integer(0, 10), "Retries of a failed call.")
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
        optional(text(r"[^@\s]+@[^@\s]+\.[^@\s]+", description="an email address")),
        "Subscribe this address to the alarm topic.",
    )

    def __post_init__(self) -> None:
        if self.allow_http and self.certificate_arn is not None:
            raise ConfigError(
                "gateway.allow_http", True, "false when gateway.certificate_arn is set (HTTPS is then used)"
            )
        if has_geography_prefix(self.bedrock_model_id):
            raise ConfigError(
                "gateway.bedrock_model_id",
                self.bedrock_model_id,
                "a foundation-model id without the geography prefix (set gateway.bedrock_inference_profile)",
            )
        if self.cpu not in FARGATE_MEMORY_MIB:
            raise ConfigError("gateway.cpu", self.cpu, "one of " + ", ".join(map(str, FARGATE_MEMORY_MIB)))
        if self.memory_mib not in FARGATE_MEMORY_MIB[self.cpu]:
            raise ConfigError("gateway.memory_mib", self.memory_mib, fargate_memory_text(self.cpu))
        if self.sagemaker_inference_component and not self.sagemaker_endpoint_name:
            raise ConfigError(
                "gateway.sagemaker_inference_component",
                self.sagemaker_inference_component,
                "empty unless gateway.sagemaker_endpoint_name names the endpoint it runs on",
            )
        given = [self.guardrail_arn, self.guardrail_version]
        if any(given) and not all(given):
            raise ConfigError(
                "gateway.guardrail_version" if self.guardrail_arn else "gateway.guardrail_arn",
                None,
                "both gateway.guardrail_arn and gateway.guardrail_version, or neither",
            )
        if self.max_count < self.desired_count:
            raise ConfigError(
                "gateway.max_count", self.max_count, f"at least gateway.desired_count ({self.desired_count})"
            )
        names = {self.bedrock_model_name, self.sagemaker_model_name, *self.openai_models}
        unknown_limited = sorted(set(self.requests_per_minute) - names)
        if unknown_limited:
            raise ConfigError(
                "gateway.requests_per_minute",
                self.requests_per_minute,
                f"model names among {sorted(names)} (not {unknown_limited})",
            )
        for source, targets in self.fallbacks.items():
            unknown = sorted({source, *targets} - names)
            if unknown:
                raise ConfigError(
                    f"gateway.fallbacks.{source}",
                    list(targets),
                    f"model names among {sorted(names)} (not {unknown})",
                )
            unguarded = sorted(set(targets) - {self.bedrock_model_name})
            if source == self.bedrock_model_name and unguarded and not self.allow_unguarded_fallbacks:
                raise ConfigError(
                    f"gateway.fallbacks.{source}",
                    list(targets),
                    f"no model without the tier-1 guardrail (not {unguarded}) as a fallback of the guarded "
                    "Bedrock model, unless gateway.allow_unguarded_fallbacks=true",
                )
            limited = sorted(set(targets) & set(self.requests_per_minute))
            if limited:
                raise ConfigError(
                    f"gateway.fallbacks.{source}",
                    list(targets),
                    f"fallbacks without a gateway.requests_per_minute limit (not {limited}): a fallback answers "
                    "as one more deployment of this model, and LiteLLM counts a limit per deployment",
                )

    def account_requirements(self) -> AccountRequirements:
        profile = CrossRegionProfile(self.bedrock_model_id, Geography(self.bedrock_inference_profile))
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
            arn = settings.certificate_arn or self._parameter(
                "CertificateArn", _CERT_ARN, "ACM certificate of the gateway's HTTPS listeners"
            )
            certificate = acm.Certificate.from_certificate_arn(self, "Certificate", arn)
        self.gateway = LiteLLMGateway(
            self,
            "Gateway",
            vpc=self.vpc,
            models=self._models(settings, bedrock, sagemaker),
            certificate=certificate,
            allow_http=settings.allow_http,
            domain_name=settings.domain_name,
            client_cidrs=list(settings.client_cidrs) or None,
            admin_cidrs=list(settings.admin_cidrs) or None,
            router=RouterOptions(
                request_timeout_seconds=settings.request_timeout_seconds,
                num_retries=settings.num_retries,
                fallbacks={name: list(targets) for name, targets in settings.fallbacks.items()},
                allow_unguarded_fallbacks=settings.allow_unguarded_fallbacks,
                requests_per_minute=settings.requests_per_minute,
            ),
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
        acknowledge(
            self.gateway.task_role,
            "InferenceTiers-BR5",
            "model-invocation logging is one setting per account and Region, owned by the bedrock tier "
            "(bedrock.invocation_logging=true); a second configuration from this stack would overwrite it",
        )
        if settings.allow_http:
            acknowledge(
                self.gateway,
                "InferenceTiers-GW2",
                "gateway.allow_http=true is the test-only opt-in for plain HTTP listeners, and the construct "
                "adds a synth warning saying so",
            )

    def _parameter(self, name: str, pattern: str, description: str) -> str:
        return CfnParameter(
            self, name, type="String", allowed_pattern=pattern, description=f"{description} (required)"
        ).value_as_string

    def _models(
        self, settings: GatewaySettings, bedrock: Stack | None, sagemaker: Stack | None
    ) -> list[GatewayTarget]:
        guardrail, model = self._bedrock(settings, bedrock)
        models: list[GatewayTarget] = [BedrockTarget(settings.bedrock_model_name, model, guardrail)]
        endpoint = getattr(sagemaker, "endpoint", None)
        if settings.sagemaker_endpoint_name:
            models.append(
                SageMakerTarget(
                    settings.sagemaker_model_name,
                    settings.sagemaker_endpoint_name,
                    inference_component=settings.sagemaker_inference_component,
                )
            )
        elif endpoint is not None:
            models.append(
                SageMakerTarget(
                    settings.sagemaker_model_name,
                    endpoint.endpoint_name,
                    inference_component=endpoint.inference_component_name,
                )
            )
        for name, (base_url, served_model) in settings.openai_models.items():
            models.append(OpenAICompatibleTarget(name, base_url, served_model))
        return models

    def _bedrock(
        self, settings: GatewaySettings, bedrock: Stack | None
    ) -> tuple[IVersionedGuardrail, ModelSource]:
        system = CrossRegionProfile(settings.bedrock_model_id, Geography(settings.bedrock_inference_profile))
        model: ModelSource = system
        if settings.bedrock_application_profile_arn:
            model = ApplicationProfile(settings.bedrock_application_profile_arn, system)
        if settings.guardrail_arn and settings.guardrail_version:
            return ImportedGuardrail(
                guardrail_arn=settings.guardrail_arn,
                guardrail_version=settings.guardrail_version,
                kms_key_arn=settings.guardrail_kms_key_arn,
            ), model
        if bedrock is not None:
            profile = getattr(bedrock, "inference_profile", None)
            if profile is not None and not settings.bedrock_application_profile_arn:
                model = profile.model_source
            # The guardrail contract: the version comes from the bedrock stack's SSM parameter, not an export.
            return getattr(bedrock, "guardrail").for_consumer(self), model  # noqa: B009 (BedrockStack.guardrail)
        return ImportedGuardrail(
            guardrail_arn=self._parameter("GuardrailArn", _GUARDRAIL_ARN, "The bedrock stack's GuardrailArn"),
            guardrail_version=self._parameter(
                "GuardrailVersion", r"[1-9][0-9]{0,7}", "The bedrock stack's GuardrailVersion"
            ),
            kms_key_arn=settings.guardrail_kms_key_arn
            or self._parameter(
                "GuardrailKmsKeyArn", _KMS_KEY_ARN, "The KMS key of the bedrock stack's guardrail"
            ),
        ), model


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
