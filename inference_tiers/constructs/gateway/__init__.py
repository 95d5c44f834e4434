"""The gateway tier's constructs: the LiteLLM proxy on ECS (LiteLLMGateway), its state and its targets."""

from inference_tiers.constructs.gateway.monitoring import GatewayMonitoring
from inference_tiers.constructs.gateway.proxy import LiteLLMGateway
from inference_tiers.constructs.gateway.state import GatewayCache, GatewayDatabase
from inference_tiers.constructs.gateway.targets import (
    BedrockTarget,
    IVersionedGuardrail,
    OpenAICompatibleTarget,
    SageMakerTarget,
)

__all__ = [
    "BedrockTarget",
    "GatewayCache",
    "GatewayDatabase",
    "GatewayMonitoring",
    "IVersionedGuardrail",
    "LiteLLMGateway",
    "OpenAICompatibleTarget",
    "SageMakerTarget",
]
