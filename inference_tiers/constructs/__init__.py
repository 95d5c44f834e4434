"""Reusable constructs, importable into any CDK app: ``from inference_tiers.constructs import Guardrail``.

One subpackage per area (``bedrock``, ``sagemaker``, ``eks``, ``hyperpod``, ``disaggregated``, ``gateway``,
``sandbox``, ``observability``, ``common``);
every public name is re-exported here as well, with the specifications the constructors take (``InferenceEndpoint``, ``ModelPool``,
``TenancySpec``, ``AlertThresholds``, ``RouterOptions``, ...), which live beside the code that renders them. A name is imported from its subpackage when it is first used
(PEP 562), so an app that uses one area does not load the constructs of every other one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inference_tiers.constructs.bedrock import (
        ApplicationInferenceProfile as ApplicationInferenceProfile,
    )
    from inference_tiers.constructs.bedrock import (
        ApplicationProfile as ApplicationProfile,
    )
    from inference_tiers.constructs.bedrock import (
        AutomatedReasoning as AutomatedReasoning,
    )
    from inference_tiers.constructs.bedrock import (
        BedrockMonitoring as BedrockMonitoring,
    )
    from inference_tiers.constructs.bedrock import (
        ContentFilter as ContentFilter,
    )
    from inference_tiers.constructs.bedrock import (
        ContentFilterType as ContentFilterType,
    )
    from inference_tiers.constructs.bedrock import (
        ContextualGrounding as ContextualGrounding,
    )
    from inference_tiers.constructs.bedrock import (
        CrossRegionProfile as CrossRegionProfile,
    )
    from inference_tiers.constructs.bedrock import (
        DeniedTopic as DeniedTopic,
    )
    from inference_tiers.constructs.bedrock import (
        FilterStrength as FilterStrength,
    )
    from inference_tiers.constructs.bedrock import (
        FoundationModel as FoundationModel,
    )
    from inference_tiers.constructs.bedrock import (
        Geography as Geography,
    )
    from inference_tiers.constructs.bedrock import (
        Guardrail as Guardrail,
    )
    from inference_tiers.constructs.bedrock import (
        GuardrailAction as GuardrailAction,
    )
    from inference_tiers.constructs.bedrock import (
        GuardrailTier as GuardrailTier,
    )
    from inference_tiers.constructs.bedrock import (
        IGuardrail as IGuardrail,
    )
    from inference_tiers.constructs.bedrock import (
        ImportedGuardrail as ImportedGuardrail,
    )
    from inference_tiers.constructs.bedrock import (
        Modality as Modality,
    )
    from inference_tiers.constructs.bedrock import (
        ModelInvocationLogging as ModelInvocationLogging,
    )
    from inference_tiers.constructs.bedrock import (
        ModelInvokeAccess as ModelInvokeAccess,
    )
    from inference_tiers.constructs.bedrock import (
        PiiAction as PiiAction,
    )
    from inference_tiers.constructs.bedrock import (
        PiiEntity as PiiEntity,
    )
    from inference_tiers.constructs.bedrock import (
        PiiEntityType as PiiEntityType,
    )
    from inference_tiers.constructs.bedrock import (
        RegexFilter as RegexFilter,
    )
    from inference_tiers.constructs.bedrock import (
        WordFilter as WordFilter,
    )
    from inference_tiers.constructs.bedrock import (
        invoke_statements as invoke_statements,
    )
    from inference_tiers.constructs.disaggregated import (
        DisaggregatedMonitoring as DisaggregatedMonitoring,
    )
    from inference_tiers.constructs.disaggregated import (
        DisaggregatedServing as DisaggregatedServing,
    )
    from inference_tiers.constructs.eks import (
        AddonVersions as AddonVersions,
    )
    from inference_tiers.constructs.eks import (
        ClusterExporters as ClusterExporters,
    )
    from inference_tiers.constructs.eks import (
        EfaNodeGroup as EfaNodeGroup,
    )
    from inference_tiers.constructs.eks import (
        EksCluster as EksCluster,
    )
    from inference_tiers.constructs.eks import (
        GpuDevicePlugins as GpuDevicePlugins,
    )
    from inference_tiers.constructs.eks import (
        InferenceGateway as InferenceGateway,
    )
    from inference_tiers.constructs.eks import (
        ServiceBackend as ServiceBackend,
    )
    from inference_tiers.constructs.gateway import (
        BedrockTarget as BedrockTarget,
    )
    from inference_tiers.constructs.gateway import (
        GatewayCache as GatewayCache,
    )
    from inference_tiers.constructs.gateway import (
        GatewayDatabase as GatewayDatabase,
    )
    from inference_tiers.constructs.gateway import (
        GatewayMonitoring as GatewayMonitoring,
    )
    from inference_tiers.constructs.gateway import (
        IVersionedGuardrail as IVersionedGuardrail,
    )
    from inference_tiers.constructs.gateway import (
        LiteLLMGateway as LiteLLMGateway,
    )
    from inference_tiers.constructs.gateway import (
        OpenAICompatibleTarget as OpenAICompatibleTarget,
    )
    from inference_tiers.constructs.gateway import (
        SageMakerTarget as SageMakerTarget,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodCluster as HyperPodCluster,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodDependencyChart as HyperPodDependencyChart,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodInferenceOperator as HyperPodInferenceOperator,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodInstanceGroup as HyperPodInstanceGroup,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodKvCacheStore as HyperPodKvCacheStore,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodModelEndpoint as HyperPodModelEndpoint,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodNetwork as HyperPodNetwork,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodObservability as HyperPodObservability,
    )
    from inference_tiers.constructs.hyperpod import (
        HyperPodTaint as HyperPodTaint,
    )
    from inference_tiers.constructs.hyperpod.network import (
        hyperpod_ips_per_instance as hyperpod_ips_per_instance,
    )
    from inference_tiers.constructs.observability import (
        ObservabilityHub as ObservabilityHub,
    )
    from inference_tiers.constructs.platform.gateway import (
        PlatformGateway as PlatformGateway,
    )
    from inference_tiers.constructs.platform.observability import (
        PlatformObservability as PlatformObservability,
    )
    from inference_tiers.constructs.platform.observability import (
        amp_metrics as amp_metrics,
    )
    from inference_tiers.constructs.platform.pool import (
        PlatformInferencePool as PlatformInferencePool,
    )
    from inference_tiers.constructs.platform.tenant_keys import (
        TenantModelKeys as TenantModelKeys,
    )
    from inference_tiers.constructs.sagemaker import (
        AlarmThresholds as AlarmThresholds,
    )
    from inference_tiers.constructs.sagemaker import (
        EndpointMetrics as EndpointMetrics,
    )
    from inference_tiers.constructs.sagemaker import (
        ModelWeights as ModelWeights,
    )
    from inference_tiers.constructs.sagemaker import (
        SageMakerLlmEndpoint as SageMakerLlmEndpoint,
    )
    from inference_tiers.constructs.sagemaker import (
        ScalingOptions as ScalingOptions,
    )
    from inference_tiers.constructs.sandbox import (
        AgentSandboxController as AgentSandboxController,
    )
    from inference_tiers.constructs.sandbox import (
        Karpenter as Karpenter,
    )
    from inference_tiers.constructs.sandbox import (
        KataSandboxNodes as KataSandboxNodes,
    )
    from inference_tiers.constructs.sandbox import (
        PodIdentityRole as PodIdentityRole,
    )
    from inference_tiers.constructs.sandbox import (
        SandboxIsolation as SandboxIsolation,
    )
    from inference_tiers.constructs.sandbox import (
        SandboxTenant as SandboxTenant,
    )
    from inference_tiers.k8s.efa_exporter import (
        EfaExporterSpec as EfaExporterSpec,
    )
    from inference_tiers.k8s.gpu_pool import (
        GpuPoolSpec as GpuPoolSpec,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        AutoScaling as AutoScaling,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        CloudWatchTrigger as CloudWatchTrigger,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        InferenceEndpoint as InferenceEndpoint,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        IntelligentRouting as IntelligentRouting,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        KvCache as KvCache,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        S3ModelSource as S3ModelSource,
    )
    from inference_tiers.k8s.hyperpod_inference import (
        VllmWorker as VllmWorker,
    )
    from inference_tiers.k8s.inference_gateway import (
        LoraAdapter as LoraAdapter,
    )
    from inference_tiers.k8s.inference_gateway import (
        ModelPool as ModelPool,
    )
    from inference_tiers.k8s.inference_gateway import (
        PoolScaling as PoolScaling,
    )
    from inference_tiers.k8s.inference_gateway_scaling import (
        PrometheusMetrics as PrometheusMetrics,
    )
    from inference_tiers.k8s.inference_gateway_scaling import (
        ScaledTarget as ScaledTarget,
    )
    from inference_tiers.k8s.platform_names import (
        GatewayEndpoint as GatewayEndpoint,
    )
    from inference_tiers.k8s.sandbox_nodes import (
        kata_overhead as kata_overhead,
    )
    from inference_tiers.k8s.sandbox_tenancy import (
        TenancySpec as TenancySpec,
    )
    from inference_tiers.k8s.tenant_keys import (
        TenantModelAccess as TenantModelAccess,
    )
    from inference_tiers.litellm.config import (
        RouterOptions as RouterOptions,
    )
    from inference_tiers.observability.rules import (
        AlertThresholds as AlertThresholds,
    )

# public name -> the module that defines it: a construct's subpackage, or (for the specifications the
# constructors take) the module that renders them
_SUBPACKAGE: dict[str, str] = {
    "ApplicationInferenceProfile": "inference_tiers.constructs.bedrock",
    "ApplicationProfile": "inference_tiers.constructs.bedrock",
    "AutomatedReasoning": "inference_tiers.constructs.bedrock",
    "BedrockMonitoring": "inference_tiers.constructs.bedrock",
    "ContentFilter": "inference_tiers.constructs.bedrock",
    "ContentFilterType": "inference_tiers.constructs.bedrock",
    "ContextualGrounding": "inference_tiers.constructs.bedrock",
    "CrossRegionProfile": "inference_tiers.constructs.bedrock",
    "DeniedTopic": "inference_tiers.constructs.bedrock",
    "FilterStrength": "inference_tiers.constructs.bedrock",
    "FoundationModel": "inference_tiers.constructs.bedrock",
    "Geography": "inference_tiers.constructs.bedrock",
    "Guardrail": "inference_tiers.constructs.bedrock",
    "GuardrailAction": "inference_tiers.constructs.bedrock",
    "GuardrailTier": "inference_tiers.constructs.bedrock",
    "IGuardrail": "inference_tiers.constructs.bedrock",
    "ImportedGuardrail": "inference_tiers.constructs.bedrock",
    "Modality": "inference_tiers.constructs.bedrock",
    "ModelInvocationLogging": "inference_tiers.constructs.bedrock",
    "ModelInvokeAccess": "inference_tiers.constructs.bedrock",
    "PiiAction": "inference_tiers.constructs.bedrock",
    "PiiEntity": "inference_tiers.constructs.bedrock",
    "PiiEntityType": "inference_tiers.constructs.bedrock",
    "RegexFilter": "inference_tiers.constructs.bedrock",
    "WordFilter": "inference_tiers.constructs.bedrock",
    "invoke_statements": "inference_tiers.constructs.bedrock",
    "DisaggregatedMonitoring": "inference_tiers.constructs.disaggregated",
    "DisaggregatedServing": "inference_tiers.constructs.disaggregated",
    "AddonVersions": "inference_tiers.constructs.eks",
    "ClusterExporters": "inference_tiers.constructs.eks",
    "EfaNodeGroup": "inference_tiers.constructs.eks",
    "EksCluster": "inference_tiers.constructs.eks",
    "GpuDevicePlugins": "inference_tiers.constructs.eks",
    "InferenceGateway": "inference_tiers.constructs.eks",
    "ServiceBackend": "inference_tiers.constructs.eks",
    "BedrockTarget": "inference_tiers.constructs.gateway",
    "GatewayCache": "inference_tiers.constructs.gateway",
    "GatewayDatabase": "inference_tiers.constructs.gateway",
    "GatewayMonitoring": "inference_tiers.constructs.gateway",
    "IVersionedGuardrail": "inference_tiers.constructs.gateway",
    "LiteLLMGateway": "inference_tiers.constructs.gateway",
    "OpenAICompatibleTarget": "inference_tiers.constructs.gateway",
    "SageMakerTarget": "inference_tiers.constructs.gateway",
    "HyperPodCluster": "inference_tiers.constructs.hyperpod",
    "HyperPodDependencyChart": "inference_tiers.constructs.hyperpod",
    "HyperPodInferenceOperator": "inference_tiers.constructs.hyperpod",
    "HyperPodInstanceGroup": "inference_tiers.constructs.hyperpod",
    "HyperPodKvCacheStore": "inference_tiers.constructs.hyperpod",
    "HyperPodModelEndpoint": "inference_tiers.constructs.hyperpod",
    "HyperPodNetwork": "inference_tiers.constructs.hyperpod",
    "HyperPodObservability": "inference_tiers.constructs.hyperpod",
    "HyperPodTaint": "inference_tiers.constructs.hyperpod",
    "ObservabilityHub": "inference_tiers.constructs.observability",
    "PlatformGateway": "inference_tiers.constructs.platform.gateway",
    "PlatformObservability": "inference_tiers.constructs.platform.observability",
    "PlatformInferencePool": "inference_tiers.constructs.platform.pool",
    "amp_metrics": "inference_tiers.constructs.platform.observability",
    "TenantModelKeys": "inference_tiers.constructs.platform.tenant_keys",
    "AlarmThresholds": "inference_tiers.constructs.sagemaker",
    "EndpointMetrics": "inference_tiers.constructs.sagemaker",
    "ModelWeights": "inference_tiers.constructs.sagemaker",
    "SageMakerLlmEndpoint": "inference_tiers.constructs.sagemaker",
    "ScalingOptions": "inference_tiers.constructs.sagemaker",
    "AgentSandboxController": "inference_tiers.constructs.sandbox",
    "Karpenter": "inference_tiers.constructs.sandbox",
    "KataSandboxNodes": "inference_tiers.constructs.sandbox",
    "PodIdentityRole": "inference_tiers.constructs.sandbox",
    "SandboxIsolation": "inference_tiers.constructs.sandbox",
    "SandboxTenant": "inference_tiers.constructs.sandbox",
    "hyperpod_ips_per_instance": "inference_tiers.constructs.hyperpod.network",
    "EfaExporterSpec": "inference_tiers.k8s.efa_exporter",
    "AutoScaling": "inference_tiers.k8s.hyperpod_inference",
    "CloudWatchTrigger": "inference_tiers.k8s.hyperpod_inference",
    "InferenceEndpoint": "inference_tiers.k8s.hyperpod_inference",
    "IntelligentRouting": "inference_tiers.k8s.hyperpod_inference",
    "KvCache": "inference_tiers.k8s.hyperpod_inference",
    "S3ModelSource": "inference_tiers.k8s.hyperpod_inference",
    "VllmWorker": "inference_tiers.k8s.hyperpod_inference",
    "GpuPoolSpec": "inference_tiers.k8s.gpu_pool",
    "LoraAdapter": "inference_tiers.k8s.inference_gateway",
    "ModelPool": "inference_tiers.k8s.inference_gateway",
    "PoolScaling": "inference_tiers.k8s.inference_gateway",
    "PrometheusMetrics": "inference_tiers.k8s.inference_gateway_scaling",
    "ScaledTarget": "inference_tiers.k8s.inference_gateway_scaling",
    "GatewayEndpoint": "inference_tiers.k8s.platform_names",
    "kata_overhead": "inference_tiers.k8s.sandbox_nodes",
    "TenantModelAccess": "inference_tiers.k8s.tenant_keys",
    "TenancySpec": "inference_tiers.k8s.sandbox_tenancy",
    "RouterOptions": "inference_tiers.litellm.config",
    "AlertThresholds": "inference_tiers.observability.rules",
}

__all__ = sorted(_SUBPACKAGE)


def __getattr__(name: str) -> Any:
    if name not in _SUBPACKAGE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SUBPACKAGE[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_SUBPACKAGE])
