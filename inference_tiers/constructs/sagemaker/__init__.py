"""Tier 2 constructs: the SageMaker real-time LLM endpoint with its scaling, weights and monitoring options."""

from inference_tiers.constructs.sagemaker.endpoint import SageMakerLlmEndpoint
from inference_tiers.constructs.sagemaker.monitoring import AlarmThresholds, EndpointMetrics
from inference_tiers.constructs.sagemaker.scaling import ScalingOptions
from inference_tiers.constructs.sagemaker.weights import ModelWeights

__all__ = [
    "AlarmThresholds",
    "EndpointMetrics",
    "ModelWeights",
    "SageMakerLlmEndpoint",
    "ScalingOptions",
]
