from inference_tiers.constructs.sagemaker_endpoint import SageMakerLlmEndpoint
from inference_tiers.constructs.sagemaker_monitoring import AlarmThresholds, EndpointMetrics
from inference_tiers.constructs.sagemaker_scaling import ScalingOptions
from inference_tiers.constructs.sagemaker_weights import ModelWeights

__all__ = [
    "AlarmThresholds",
    "EndpointMetrics",
    "ModelWeights",
    "SageMakerLlmEndpoint",
    "ScalingOptions",
]
