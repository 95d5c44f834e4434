"""Tier 1, ``bedrock``: foundation models through Amazon Bedrock, guarded, attributed, logged and watched.

``InferenceTiers-Bedrock`` composes the constructs in ``inference_tiers.constructs``: a guardrail (and its
version), an application inference profile with cost-allocation tags over a cross-Region inference profile,
an application role whose invoke access enforces the guardrail, optional model-invocation logging, and a
dashboard with alarms.

Default model: Amazon Nova 2 Lite (``amazon.nova-2-lite-v1:0``) through the ``us`` cross-Region profile. It is
a current Amazon model served only through cross-Region inference (us, eu, jp and global profiles), with
streaming and guardrail support, and, being first-party, it needs no Marketplace subscription or use-case
form before the first call. Any model id with a profile in the chosen geography works (``bedrock.model_id``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    TierSpec,
    boolean,
    choice,
    email_address,
    integer,
    mapping,
    number,
    optional,
    setting,
    text,
)
from inference_tiers.constructs.bedrock.guardrail import Guardrail, GuardrailTier
from inference_tiers.constructs.bedrock.inference_profile import TAG_PATTERN, ApplicationInferenceProfile
from inference_tiers.constructs.bedrock.invocation_logging import ModelInvocationLogging
from inference_tiers.constructs.bedrock.model_access import (
    MODEL_ID_PATTERN,
    CrossRegionProfile,
    FoundationModel,
    Geography,
    ModelInvokeAccess,
    ModelSource,
    has_geography_prefix,
)
from inference_tiers.constructs.bedrock.monitoring import BedrockMonitoring
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.tier import Tier

STACK_NAME = "InferenceTiers-Bedrock"
NO_PROFILE = "none"

# CloudWatch Logs accepts only these retention periods (days), in RetentionDays' declaration order.
_RETENTION_DAYS = dict(
    zip(
        (
            1,
            3,
            5,
            7,
            14,
            30,
            60,
            90,
            120,
            150,
            180,
            365,
            400,
            545,
            731,
            1096,
            1827,
            2192,
            2557,
            2922,
            3288,
            3653,
        ),
        (r for r in logs.RetentionDays if r is not logs.RetentionDays.INFINITE),
        strict=True,
    )
)

_NON_EMPTY_TAG_VALUE = text(TAG_PATTERN, description="a tag value", max_length=256)


def _tag_value(key: str, raw: Any) -> str:
    """A tag value; unlike text(), empty is allowed, as it is for Bedrock tags (0-256 characters)."""
    return "" if raw == "" else str(_NON_EMPTY_TAG_VALUE(key, raw))


_PRINCIPAL = (
    r"account|[0-9]{12}|arn:aws(-[a-z-]+)?:iam::[0-9]{12}:(root|role/[\w+=,.@/-]+|user/[\w+=,.@/-]+)"
    r"|[a-z0-9-]+(\.[a-z0-9-]+)*\.amazonaws\.com"
)


@dataclass(frozen=True)
class BedrockSettings:
    """Settings of the bedrock tier (context keys ``bedrock.<field>``, defaults in cdk.json)."""

    model_id: str = setting(
        text(MODEL_ID_PATTERN, description="a Bedrock foundation-model id such as amazon.nova-2-lite-v1:0"),
        "Foundation model to serve, without geography prefix.",
    )
    inference_profile: str = setting(
        choice(*(g.value for g in Geography), NO_PROFILE),
        "Cross-Region inference profile geography (us, eu, apac, jp, au, ca, us-gov, global) or 'none' to call "
        "the model in the stack's Region.",
    )
    application_inference_profile: bool = setting(
        boolean(), "Create an application inference profile (cost-allocation tags) and call through it."
    )
    cost_tags: dict[str, str] = setting(
        mapping(_tag_value, key_pattern=r"[a-zA-Z0-9 ._:/=+@-]{1,128}"),
        "Tags on the application inference profile; activate them as cost-allocation tags.",
    )
    application_role_principal: str = setting(
        text(
            _PRINCIPAL,
            description="'account' (this account's root), a 12-digit account id, an IAM role/user ARN, or a "
            "service principal such as lambda.amazonaws.com",
        ),
        "Who may assume the application role that holds the guarded invoke access.",
    )
    guardrail_tier: str = setting(choice("CLASSIC", "STANDARD"), "Guardrail safeguard tier.")
    guardrail_profile: str | None = setting(
        optional(
            text(
                r"[a-z0-9-]+\.guardrail\.v[0-9:]+",
                description="a guardrail profile id such as us.guardrail.v1:0",
            )
        ),
        "Cross-Region guardrail profile id; required for the STANDARD tier.",
    )
    invocation_logging: bool = setting(
        boolean(),
        "Turn on model-invocation logging for the whole account and Region (only one stack per account and "
        "Region may do this).",
    )
    log_retention_days: int = setting(
        integer(1, 3653), "Retention of invocation logs in CloudWatch Logs, in days."
    )
    log_object_expiration_days: int = setting(
        integer(1, 3650), "Days before invocation-log objects expire in S3."
    )
    tpm_quota: int = setting(
        integer(1, 1_000_000_000), "The account's tokens-per-minute quota for the model (Service Quotas)."
    )
    tpm_alarm_percent: float = setting(number(1, 100), "Alarm above this share of the TPM quota (%).")
    latency_p99_alarm_ms: int = setting(
        integer(1, 3_600_000), "Alarm when p99 invocation latency exceeds (ms)."
    )
    ttft_p90_alarm_ms: int = setting(integer(1, 600_000), "Alarm when p90 time to first token exceeds (ms).")
    server_error_rate_alarm_percent: float = setting(
        number(0.01, 100), "Alarm above this server-error rate (%)."
    )
    throttle_alarm_count: int = setting(
        integer(0, 1_000_000), "Alarm when 5-minute throttles exceed, 15 min running."
    )
    guardrail_intervention_alarm_percent: float = setting(
        number(0.01, 100), "Alarm above this guardrail intervention rate (%)."
    )
    alarm_email: str | None = setting(
        email_address(),
        "Subscribe this address to the alarm topic (empty: subscribe yourself later).",
    )

    def __post_init__(self) -> None:
        if has_geography_prefix(self.model_id):
            raise ConfigError(
                "bedrock.model_id",
                self.model_id,
                "a foundation-model id without the geography prefix (set bedrock.inference_profile instead)",
            )
        reserved = sorted(key for key in self.cost_tags if key.lower().startswith("aws:"))
        if reserved:
            raise ConfigError(
                "bedrock.cost_tags",
                self.cost_tags,
                f"tag keys that do not start with 'aws:' (reserved for AWS; got {', '.join(reserved)})",
            )
        if self.log_retention_days not in _RETENTION_DAYS:
            raise ConfigError(
                "bedrock.log_retention_days",
                self.log_retention_days,
                "one of CloudWatch Logs' retention periods: " + ", ".join(map(str, sorted(_RETENTION_DAYS))),
            )
        if self.guardrail_tier == GuardrailTier.STANDARD.value and self.guardrail_profile is None:
            raise ConfigError(
                "bedrock.guardrail_tier",
                self.guardrail_tier,
                "CLASSIC, or STANDARD together with bedrock.guardrail_profile (for example us.guardrail.v1:0): "
                "the STANDARD tier runs only with cross-Region inference",
            )
        if self.inference_profile == NO_PROFILE and not self.application_inference_profile:
            raise ConfigError(
                "bedrock.inference_profile",
                self.inference_profile,
                "a geography, or 'none' only with bedrock.application_inference_profile=true (this tier always "
                "calls through an inference profile, so that an ARN can be granted and its cost attributed)",
            )

    @property
    def system_profile(self) -> CrossRegionProfile | None:
        if self.inference_profile == NO_PROFILE:
            return None
        return CrossRegionProfile(model_id=self.model_id, geography=Geography(self.inference_profile))

    def account_requirements(self) -> AccountRequirements:
        profile = self.system_profile
        return AccountRequirements(
            bedrock_model_id=self.model_id,
            bedrock_inference_profile_id=profile.profile_id if profile else None,
        )


def _principal(value: str) -> iam.IPrincipal:
    if value == "account":
        return iam.AccountRootPrincipal()
    if re.fullmatch(r"[0-9]{12}", value):
        return iam.AccountPrincipal(value)
    if value.startswith("arn:"):
        return iam.ArnPrincipal(value)
    return iam.ServicePrincipal(value)


class BedrockStack(Stack):
    """The bedrock tier: guardrail, inference profile, enforced invoke access, logging, dashboard and alarms."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: BedrockSettings, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.guardrail = Guardrail(
            self,
            "Guardrail",
            description="inference-tiers bedrock tier default guardrail",
            tier=settings.guardrail_tier,
            cross_region_guardrail_profile=settings.guardrail_profile,
        )

        system_profile = settings.system_profile
        source = system_profile or FoundationModel(model_id=settings.model_id)
        model: ModelSource = source
        self.inference_profile: ApplicationInferenceProfile | None = None
        if settings.application_inference_profile:
            self.inference_profile = ApplicationInferenceProfile(
                self,
                "InferenceProfile",
                model_source=source,
                # Fixed text: the description pattern forbids what some valid model ids contain ('--', >171
                # characters), and the model is in the profile's model source anyway.
                description="inference-tiers bedrock tier application profile",
                cost_tags=settings.cost_tags,
            )
            model = self.inference_profile.model_source

        self.application_role = iam.Role(
            self,
            "ApplicationRole",
            assumed_by=_principal(settings.application_role_principal),
            description="Application role: invokes the tier's model, only with its guardrail version",
            max_session_duration=Duration.hours(1),
        )
        self.invoke_access = ModelInvokeAccess(
            self, "InvokeAccess", grantee=self.application_role, model=model, guardrail=self.guardrail
        )

        self.invocation_logging: ModelInvocationLogging | None = None
        if settings.invocation_logging:
            self.invocation_logging = ModelInvocationLogging(
                self,
                "InvocationLogging",
                log_retention=_RETENTION_DAYS[settings.log_retention_days],
                object_expiration=Duration.days(settings.log_object_expiration_days),
            )
        else:
            acknowledge(
                self.application_role,
                "InferenceTiers-BR5",
                "model-invocation logging is one setting per account and Region, so this tier turns it on only "
                "with bedrock.invocation_logging=true (default false: it would overwrite an existing setting)",
            )

        # Runtime metrics are reported per ModelId, the id each call named: the system profile's (or the model's)
        # for direct callers, the application profile's own id for the calls this tier's app makes through it.
        self.monitoring = BedrockMonitoring(
            self,
            "Monitoring",
            model_id=source.invoke_id(self),
            application_profile_id=self.inference_profile.profile_id if self.inference_profile else None,
            tpm_quota=settings.tpm_quota,
            guardrail=self.guardrail,
            log_delivery_alarm=settings.invocation_logging,
            tpm_alarm_percent=settings.tpm_alarm_percent,
            latency_p99_alarm=Duration.millis(settings.latency_p99_alarm_ms),
            ttft_p90_alarm=Duration.millis(settings.ttft_p90_alarm_ms),
            server_error_rate_alarm_percent=settings.server_error_rate_alarm_percent,
            throttle_alarm_count=settings.throttle_alarm_count,
            intervention_rate_alarm_percent=settings.guardrail_intervention_alarm_percent,
            alarm_email=settings.alarm_email,
        )
        if self.inference_profile is not None:
            profile_arn = self.inference_profile.profile_arn
        else:
            assert system_profile is not None  # BedrockSettings rejects no profile at all
            profile_arn = system_profile.arn(self)
        self._outputs(model_id=self.invoke_access.model_id, profile_arn=profile_arn)

    def _outputs(self, *, model_id: str, profile_arn: str) -> None:
        guardrail = self.guardrail
        CfnOutput(
            self,
            "GuardrailId",
            value=guardrail.guardrail_id,
            description="Guardrail id (guardrailIdentifier)",
        )
        CfnOutput(
            self,
            "GuardrailVersion",
            value=guardrail.guardrail_version,
            description="Guardrail version to pass",
        )
        CfnOutput(self, "GuardrailArn", value=guardrail.guardrail_arn, description="Guardrail ARN")
        CfnOutput(
            self,
            "GuardrailVersionParameter",
            value=guardrail.version_parameter_name,
            description="SSM parameter that holds the current guardrail version (read it; never import it)",
        )
        CfnOutput(
            self, "InferenceProfileArn", value=profile_arn, description="Inference profile the app calls"
        )
        CfnOutput(self, "ModelId", value=model_id, description="The modelId to call")
        CfnOutput(
            self, "ApplicationRoleArn", value=self.application_role.role_arn, description="Role to assume"
        )
        CfnOutput(
            self,
            "DashboardUrl",
            value=self.monitoring.dashboard_url,
        )
        CfnOutput(
            self,
            "ConverseExample",
            description="Run with credentials of the application role",
            value=(
                f"aws bedrock-runtime converse --region {self.region} --model-id {model_id} "
                '--messages \'[{"role":"user","content":[{"text":"Hello"}]}]\' '
                f"--guardrail-config guardrailIdentifier={guardrail.guardrail_id},"
                f"guardrailVersion={guardrail.guardrail_version},trace=enabled"
            ),
        )


def build(app: Construct, settings: BedrockSettings) -> list[Stack]:
    return [
        BedrockStack(
            app, STACK_NAME, settings=settings, description="inference-tiers: Bedrock + Guardrails tier"
        )
    ]


TIER = Tier(spec=TierSpec("bedrock", BedrockSettings), build=build)
