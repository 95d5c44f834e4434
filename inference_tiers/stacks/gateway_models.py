"""The model settings the ``gateway`` and ``platform`` tiers share: which models their LiteLLM serves, with the
tier-1 guardrail, and how calls retry and fall back (context keys ``<tier>.<field>``). One parser and one builder
for both runtimes (ECS there, the platform's cluster here), as the proxy configuration has one renderer.

Where each model target comes from, in order:

- Bedrock: the bedrock stack's guardrail when the app builds it (``gateway`` only); otherwise
  ``<tier>.guardrail_arn``/``guardrail_version``/``guardrail_kms_key_arn`` (the bedrock stack's outputs) or, left
  empty, stack parameters of the same names that ``cdk deploy --parameters`` must fill. The model is
  ``<tier>.bedrock_model_id`` through the ``<tier>.bedrock_inference_profile`` geography, or
  ``<tier>.bedrock_application_profile_arn``.
- SageMaker: ``<tier>.sagemaker_endpoint_name``, or the sagemaker stack's endpoint (``gateway`` only); none otherwise.
- OpenAI-compatible servers: ``<tier>.openai_models`` (name -> base URL and served model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from aws_cdk import CfnParameter, Stack

from inference_tiers.config import (
    ConfigError,
    boolean,
    choice,
    integer,
    items,
    mapping,
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
from inference_tiers.constructs.gateway import (
    BedrockTarget,
    IVersionedGuardrail,
    OpenAICompatibleTarget,
    SageMakerTarget,
)
from inference_tiers.constructs.gateway.targets import GatewayTarget
from inference_tiers.litellm.config import MAX_REQUESTS_PER_MINUTE, MODEL_NAME_PATTERN, RouterOptions

GUARDRAIL_ARN = r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+"
KMS_KEY_ARN = r"arn:aws(-[a-z-]+)?:kms:[a-z0-9-]{1,20}:[0-9]{12}:key/[a-f0-9-]{36}"
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
class GatewayModelSettings:
    """The models a tier's LiteLLM serves and its router options (context keys ``<tier_name>.<field>``)."""

    tier_name: ClassVar[str]
    """The tier whose context keys these are (errors name ``<tier_name>.<field>``)."""

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
        optional(text(GUARDRAIL_ARN, description="a guardrail ARN")),
        "The tier-1 guardrail (the bedrock stack's GuardrailArn; empty: the bedrock stack in this app, or a "
        "stack parameter).",
    )
    guardrail_version: str | None = setting(
        optional(text(r"[1-9][0-9]{0,7}", description="a numbered guardrail version")),
        "The guardrail's version (the bedrock stack's GuardrailVersion).",
    )
    guardrail_kms_key_arn: str | None = setting(
        optional(text(KMS_KEY_ARN, description="a KMS key ARN")),
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
        "Let the fallbacks send a call to the guarded Bedrock model on to a model without its guardrail.",
    )
    requests_per_minute: dict[str, int] = setting(
        mapping(integer(1, MAX_REQUESTS_PER_MINUTE), key_pattern=MODEL_NAME_PATTERN, max_items=20),
        "Model name -> the most calls it accepts per UTC minute across all proxies (counted in Valkey); past it "
        "a call gets 429 or goes to the model's fallback (empty: no limit).",
    )
    request_timeout_seconds: int = setting(
        integer(5, 3600), "A call's time limit (the ALB idle timeout follows)."
    )
    num_retries: int = setting(integer(0, 10), "Retries of a failed call.")

    def __post_init__(self) -> None:
        tier = self.tier_name
        if has_geography_prefix(self.bedrock_model_id):
            raise ConfigError(
                f"{tier}.bedrock_model_id",
                self.bedrock_model_id,
                f"a foundation-model id without the geography prefix (set {tier}.bedrock_inference_profile)",
            )
        if self.sagemaker_inference_component and not self.sagemaker_endpoint_name:
            raise ConfigError(
                f"{tier}.sagemaker_inference_component",
                self.sagemaker_inference_component,
                f"empty unless {tier}.sagemaker_endpoint_name names the endpoint it runs on",
            )
        given = [self.guardrail_arn, self.guardrail_version]
        if any(given) and not all(given):
            raise ConfigError(
                f"{tier}.guardrail_version" if self.guardrail_arn else f"{tier}.guardrail_arn",
                None,
                f"both {tier}.guardrail_arn and {tier}.guardrail_version, or neither",
            )
        names = self.model_names()
        unknown_limited = sorted(set(self.requests_per_minute) - names)
        if unknown_limited:
            raise ConfigError(
                f"{tier}.requests_per_minute",
                self.requests_per_minute,
                f"model names among {sorted(names)} (not {unknown_limited})",
            )
        for source, targets in self.fallbacks.items():
            unknown = sorted({source, *targets} - names)
            if unknown:
                raise ConfigError(
                    f"{tier}.fallbacks.{source}",
                    list(targets),
                    f"model names among {sorted(names)} (not {unknown})",
                )
            unguarded = sorted(set(targets) - {self.bedrock_model_name})
            if source == self.bedrock_model_name and unguarded and not self.allow_unguarded_fallbacks:
                raise ConfigError(
                    f"{tier}.fallbacks.{source}",
                    list(targets),
                    f"no model without the tier-1 guardrail (not {unguarded}) as a fallback of the guarded "
                    f"Bedrock model, unless {tier}.allow_unguarded_fallbacks=true",
                )
            limited = sorted(set(targets) & set(self.requests_per_minute))
            if limited:
                raise ConfigError(
                    f"{tier}.fallbacks.{source}",
                    list(targets),
                    f"fallbacks without a {tier}.requests_per_minute limit (not {limited}): a fallback answers "
                    "as one more deployment of this model, and LiteLLM counts a limit per deployment",
                )

    def model_names(self) -> set[str]:
        """The names clients may send: the Bedrock model, the SageMaker model and each OpenAI-compatible one
        (the SageMaker name counts even when no endpoint is configured, as the gateway tier always has)."""
        return {self.bedrock_model_name, self.sagemaker_model_name, *self.openai_models}

    def router_options(self) -> RouterOptions:
        """Timeouts, retries, fallbacks and limits of the proxy's router."""
        return RouterOptions(
            request_timeout_seconds=self.request_timeout_seconds,
            num_retries=self.num_retries,
            fallbacks={name: list(targets) for name, targets in self.fallbacks.items()},
            allow_unguarded_fallbacks=self.allow_unguarded_fallbacks,
            requests_per_minute=self.requests_per_minute,
        )

    def profile(self) -> CrossRegionProfile:
        """The Bedrock model's cross-Region inference profile."""
        return CrossRegionProfile(self.bedrock_model_id, Geography(self.bedrock_inference_profile))


def stack_parameter(stack: Stack, name: str, pattern: str, description: str) -> str:
    """A required string parameter of ``stack`` (for a value the settings leave to deploy time)."""
    return CfnParameter(
        stack, name, type="String", allowed_pattern=pattern, description=f"{description} (required)"
    ).value_as_string


def gateway_models(
    stack: Stack,
    settings: GatewayModelSettings,
    *,
    bedrock: Stack | None = None,
    sagemaker: Stack | None = None,
) -> list[GatewayTarget]:
    """The targets ``settings`` name, in ``stack`` (see the module docstring for where each comes from)."""
    guardrail, model = _bedrock(stack, settings, bedrock)
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
    _check_router_names(settings, {model.name for model in models})
    return models


def _check_router_names(settings: GatewayModelSettings, served: set[str]) -> None:
    """The router settings name only models the gateway serves: the SageMaker model is served only with
    ``sagemaker_endpoint_name`` or with the ``sagemaker`` tier deployed beside it, which the settings alone do
    not know (``model_names`` counts it always)."""
    tier = settings.tier_name
    why = (
        f"model names the gateway serves, among {sorted(served)} (the SageMaker model only with "
        f"{tier}.sagemaker_endpoint_name or the sagemaker tier deployed with it)"
    )
    for source, targets in settings.fallbacks.items():
        if {source, *targets} - served:
            raise ConfigError(f"{tier}.fallbacks.{source}", list(targets), why)
    if set(settings.requests_per_minute) - served:
        raise ConfigError(f"{tier}.requests_per_minute", dict(settings.requests_per_minute), why)


def _bedrock(
    stack: Stack, settings: GatewayModelSettings, bedrock: Stack | None
) -> tuple[IVersionedGuardrail, ModelSource]:
    system = settings.profile()
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
        return getattr(bedrock, "guardrail").for_consumer(stack), model  # noqa: B009 (BedrockStack.guardrail)
    return ImportedGuardrail(
        guardrail_arn=stack_parameter(
            stack, "GuardrailArn", GUARDRAIL_ARN, "The bedrock stack's GuardrailArn"
        ),
        guardrail_version=stack_parameter(
            stack, "GuardrailVersion", r"[1-9][0-9]{0,7}", "The bedrock stack's GuardrailVersion"
        ),
        kms_key_arn=settings.guardrail_kms_key_arn
        or stack_parameter(
            stack, "GuardrailKmsKeyArn", KMS_KEY_ARN, "The KMS key of the bedrock stack's guardrail"
        ),
    ), model
