"""The hyperpod tier's use of :class:`InferenceGateway` (a module of its own: the generic construct must not
import a tier's constructs, which import the EKS package back).

The HyperPod Inference Operator creates the vLLM pods and their KEDA ScaledObject from the
``InferenceEndpointConfig``; the gateway adds only the routing in front of them. Two facts tie the two together:

- The operator labels every model pod ``app=<InferenceEndpointConfig metadata.name>``: AWS's own HyperPod CLI
  finds an endpoint's pods by that label (aws/sagemaker-hyperpod-cli @ 011ca927123e02b35a399935bbb3ab1905fe33c7,
  ``src/sagemaker/hyperpod/inference/hp_endpoint.py`` ``list_pods``, and ``hp_jumpstart_endpoint.py`` alike).
  The InferencePool selects exactly those pods, in the endpoint's namespace.
- The queue-driven scaling stays the operator's: ``spec.autoScalingSpec.prometheusTriggerList`` on the same
  queue and KV-cache queries the shared builder writes for KEDA ScaledObjects, read from the tier's AMP
  workspace by the operator's bundled KEDA (whose role already holds ``aps:QueryMetrics`` on it).
"""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.inference_gateway import InferenceGateway
from inference_tiers.constructs.hyperpod.model_endpoint import HyperPodModelEndpoint
from inference_tiers.k8s.hyperpod_inference import InferenceEndpoint, PrometheusTrigger
from inference_tiers.k8s.inference_gateway import ModelPool, PoolScaling
from inference_tiers.k8s.inference_gateway_scaling import ScaledTarget, kv_cache_query, queue_query
from inference_tiers.k8s.inference_gateway_settings import InferenceGatewaySettings
from inference_tiers.validation import Args

# The label the operator puts on every pod of an endpoint, valued with the endpoint's metadata.name.
ENDPOINT_POD_LABEL = "app"


def hyperpod_model_pool(endpoint: InferenceEndpoint) -> ModelPool:
    """The InferencePool of ``endpoint``'s pods: its EPP sends each request straight to the vLLM container.

    The target port is the worker's own port (where vLLM also serves ``/metrics`` for the EPP's scorers), not
    the operator's request-limit sidecar in front of it: the EPP's queue and KV-cache view replaces that limit.
    The pool's adapters are the ones the worker serves (``endpoint.lora``), so the EPP's LoRA affinity scorer
    is there exactly when the pods load adapters.
    """
    return ModelPool(
        name=endpoint.name,
        namespace=endpoint.namespace,
        selector={ENDPOINT_POD_LABEL: endpoint.name},
        model_name=endpoint.name,
        target_port=endpoint.worker.port,
        adapters=endpoint.lora.adapters if endpoint.lora else (),
    )


def queue_triggers(
    server_address: str, model_name: str, scaling: PoolScaling
) -> tuple[PrometheusTrigger, ...]:
    """The operator's Prometheus triggers on vLLM's queue and KV cache, from the shared ScaledObject queries.

    vLLM labels its series with ``model_name`` (the served name, the endpoint's name here), so that label
    alone tells this endpoint's pods apart in the workspace. ``Average`` divides the summed queue by the
    replicas (as KEDA's ``AverageValue``); the KV-cache mean is compared as it is (``Value``).
    """
    target = ScaledTarget(model_name, {"model_name": model_name}, scaling)
    return (
        PrometheusTrigger(
            server_address,
            queue_query(target),
            scaling.waiting_per_replica,
            name="queue",
            metric_type="Average",
        ),
        PrometheusTrigger(
            server_address,
            kv_cache_query(target),
            scaling.kv_cache_utilisation,
            name="kv-cache",
            metric_type="Value",
        ),
    )


def add_hyperpod_gateway(
    scope: Construct,
    cluster: eks.ICluster,
    model: HyperPodModelEndpoint,
    settings: InferenceGatewaySettings,
) -> InferenceGateway:
    """The hyperpod tier's gateway: Istio in front of the endpoint's pods, the Endpoint Picker choosing one.

    KEDA is the operator's (``install_keda=False``) and scales the pods through the endpoint's
    ``autoScalingSpec`` (:func:`queue_triggers`), so the gateway renders no ScaledObject of its own.
    """
    args = Args("add_hyperpod_gateway")
    args.instance("settings", settings, InferenceGatewaySettings, "an InferenceGatewaySettings")
    args.instance("model", model, HyperPodModelEndpoint, "a HyperPodModelEndpoint")
    pool = hyperpod_model_pool(model.endpoint)
    if tuple(settings.lora_adapters) != tuple(pool.adapters):
        raise args.error(
            "settings.lora_adapters",
            [a.name for a in settings.lora_adapters],
            f"the adapters the endpoint's pods serve (model.endpoint.lora: {[a.name for a in pool.adapters]})",
        )
    gateway = InferenceGateway(
        scope,
        "InferenceGateway",
        cluster=cluster,
        namespace=pool.namespace,
        backend=pool,
        install_keda=False,
        request_timeout_seconds=settings.request_timeout_seconds,
    )
    # After the endpoint: the operator (with the load-balancer controller that serves the gateway's NLB) and
    # the pods the pool selects.
    gateway.node.add_dependency(model)
    return gateway
