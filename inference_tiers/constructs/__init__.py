"""Reusable constructs, importable into any CDK app."""

from inference_tiers.constructs.sagemaker_endpoint import SageMakerLlmEndpoint as SageMakerLlmEndpoint
from inference_tiers.constructs.sagemaker_monitoring import AlarmThresholds as AlarmThresholds
from inference_tiers.constructs.sagemaker_monitoring import EndpointMetrics as EndpointMetrics
from inference_tiers.constructs.sagemaker_scaling import ScalingOptions as ScalingOptions
from inference_tiers.constructs.sagemaker_weights import ModelWeights as ModelWeights
