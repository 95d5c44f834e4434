"""The disaggregated tier's use of :class:`InferenceGateway` (a module of its own: the generic construct
must not import a tier's constructs, which import the EKS package back)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from constructs import Construct, IDependable

from inference_tiers.constructs.disaggregated.monitoring import METRIC_NAMESPACE
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing
from inference_tiers.constructs.eks.inference_gateway import InferenceGateway, ServiceBackend
from inference_tiers.k8s.disaggregated import LOAD_BALANCER_PORT, ROLES
from inference_tiers.k8s.inference_gateway_scaling import CloudWatchMetrics, ScaledTarget
from inference_tiers.k8s.inference_gateway_settings import InferenceGatewaySettings


def add_disaggregated_gateway(
    scope: Construct,
    serving: DisaggregatedServing,
    settings: InferenceGatewaySettings,
    *,
    wait_for: Sequence[IDependable] = (),
) -> InferenceGateway:
    """The disaggregated tier's gateway: Istio in front of vllm-router, KEDA scaling prefill and decode apart.

    vllm-router stays the one that picks the prefill/decode pair (cache-aware prefill, power-of-two decode):
    the v1.5.0 Endpoint Picker has no prefill/decode handler, so no InferencePool is put in front of the pods.
    KEDA reads the pools' queue and KV-cache series from CloudWatch, where DisaggregatedMonitoring's pipeline
    writes them per Role.
    """
    spec = serving.spec
    cluster_name = serving.cluster.cluster_name
    gateway = InferenceGateway(
        scope,
        "InferenceGateway",
        cluster=serving.cluster,
        namespace=spec.namespace,
        backend=ServiceBackend(spec.resource_name("router"), LOAD_BALANCER_PORT),
        scaled_targets=[
            ScaledTarget(
                spec.resource_name(role),
                {"ClusterName": cluster_name, "Namespace": spec.namespace, "Role": role},
                settings.pools[role],
            )
            for role in ROLES
        ],
        metrics=CloudWatchMetrics(namespace=METRIC_NAMESPACE, region=Aws.REGION),
        model_name=spec.model_id,
        allowed_cidrs=spec.allowed_cidrs,
        request_timeout_seconds=settings.request_timeout_seconds,
    )
    # wait_for: the Pod Identity agent (KEDA's credentials) and the monitoring pipeline (the series it reads).
    gateway.node.add_dependency(serving, *wait_for)
    return gateway
