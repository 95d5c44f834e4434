"""Tier 1 constructs: Guardrail (+ version), model invoke grants that enforce it, application inference profiles, invocation logging, monitoring."""

from inference_tiers.constructs.bedrock.guardrail import (
    AutomatedReasoning,
    ContentFilter,
    ContentFilterType,
    ContextualGrounding,
    DeniedTopic,
    FilterStrength,
    Guardrail,
    GuardrailAction,
    GuardrailTier,
    IGuardrail,
    ImportedGuardrail,
    Modality,
    PiiAction,
    PiiEntity,
    PiiEntityType,
    PublishedGuardrail,
    RegexFilter,
    WordFilter,
)
from inference_tiers.constructs.bedrock.inference_profile import ApplicationInferenceProfile
from inference_tiers.constructs.bedrock.invocation_logging import ModelInvocationLogging
from inference_tiers.constructs.bedrock.model_access import (
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
    Geography,
    ModelInvokeAccess,
    invoke_statements,
)
from inference_tiers.constructs.bedrock.monitoring import BedrockMonitoring

__all__ = [
    "ApplicationInferenceProfile",
    "ApplicationProfile",
    "AutomatedReasoning",
    "BedrockMonitoring",
    "ContentFilter",
    "ContentFilterType",
    "ContextualGrounding",
    "CrossRegionProfile",
    "DeniedTopic",
    "FilterStrength",
    "FoundationModel",
    "Geography",
    "Guardrail",
    "GuardrailAction",
    "GuardrailTier",
    "IGuardrail",
    "ImportedGuardrail",
    "Modality",
    "ModelInvocationLogging",
    "ModelInvokeAccess",
    "PiiAction",
    "PiiEntity",
    "PiiEntityType",
    "PublishedGuardrail",
    "RegexFilter",
    "WordFilter",
    "invoke_statements",
]
