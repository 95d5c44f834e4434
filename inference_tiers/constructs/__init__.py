"""Reusable constructs, importable into any CDK app: ``from inference_tiers.constructs import Guardrail``."""

from inference_tiers.constructs.bedrock_monitoring import BedrockMonitoring
from inference_tiers.constructs.disaggregated_monitoring import DisaggregatedMonitoring
from inference_tiers.constructs.disaggregated_serving import DisaggregatedServing
from inference_tiers.constructs.eks_cluster import AddonVersions, EksCluster
from inference_tiers.constructs.guardrail import (
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
    RegexFilter,
    WordFilter,
)
from inference_tiers.constructs.hyperpod_cluster import HyperPodCluster, HyperPodInstanceGroup, HyperPodTaint
from inference_tiers.constructs.hyperpod_dependencies import HyperPodDependencyChart
from inference_tiers.constructs.hyperpod_inference_operator import HyperPodInferenceOperator
from inference_tiers.constructs.hyperpod_model_endpoint import HyperPodModelEndpoint
from inference_tiers.constructs.hyperpod_network import HyperPodNetwork
from inference_tiers.constructs.hyperpod_observability import HyperPodObservability
from inference_tiers.constructs.inference_profile import ApplicationInferenceProfile
from inference_tiers.constructs.invocation_logging import ModelInvocationLogging
from inference_tiers.constructs.model_access import (
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
    Geography,
    ModelInvokeAccess,
    invoke_statements,
)
from inference_tiers.constructs.sagemaker_endpoint import SageMakerLlmEndpoint
from inference_tiers.constructs.sagemaker_monitoring import AlarmThresholds, EndpointMetrics
from inference_tiers.constructs.sagemaker_scaling import ScalingOptions
from inference_tiers.constructs.sagemaker_weights import ModelWeights

__all__ = [
    "AddonVersions",
    "AlarmThresholds",
    "ApplicationInferenceProfile",
    "ApplicationProfile",
    "AutomatedReasoning",
    "BedrockMonitoring",
    "ContentFilter",
    "ContentFilterType",
    "ContextualGrounding",
    "CrossRegionProfile",
    "DeniedTopic",
    "DisaggregatedMonitoring",
    "DisaggregatedServing",
    "EksCluster",
    "EndpointMetrics",
    "FilterStrength",
    "FoundationModel",
    "Geography",
    "Guardrail",
    "GuardrailAction",
    "GuardrailTier",
    "HyperPodCluster",
    "HyperPodDependencyChart",
    "HyperPodInferenceOperator",
    "HyperPodInstanceGroup",
    "HyperPodModelEndpoint",
    "HyperPodNetwork",
    "HyperPodObservability",
    "HyperPodTaint",
    "IGuardrail",
    "ImportedGuardrail",
    "Modality",
    "ModelInvocationLogging",
    "ModelInvokeAccess",
    "ModelWeights",
    "PiiAction",
    "PiiEntity",
    "PiiEntityType",
    "RegexFilter",
    "SageMakerLlmEndpoint",
    "ScalingOptions",
    "WordFilter",
    "invoke_statements",
]
