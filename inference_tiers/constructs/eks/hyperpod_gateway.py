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

Scale to zero (``min_replicas`` 0) needs a signal that exists while no model pod runs: vLLM's series vanish with
the pods, and nothing scrapes the Endpoint Picker into AMP. The gateway's NLB does exist, and CloudWatch counts
the connections it takes (``AWS/NetworkELB`` ``NewFlowCount``, dimension ``LoadBalancer=net/<name>/<id>``): the
gateway names its NLB (:func:`gateway_load_balancer_name`) and the endpoint gets a CloudWatch wake trigger on
that metric (:func:`wake_trigger`), which the operator's KEDA reads with its role's ``cloudwatch:GetMetricData``.

One routing story per tier (docs/hyperpod.md "Choosing the request path"): the operator's own routing
(``intelligentRoutingSpec``, ``pdSpec``) is the tier's default way to route by prefix, KV cache or session; this
gateway stays only for what that path cannot do: serving LoRA adapters with adapter affinity (the operator's
routing strategies are prefixaware, kvaware, session and roundrobin, none adapter-aware: CRD v1
``intelligentRoutingSpec.routingStrategy``) and scale to zero woken by the gateway's NLB. The two are never
rendered together (:func:`hyperpod_model_pool`). The operator's ``InferenceGatewayConfig`` is not rendered: no
pinned public source has its CRD (aws/sagemaker-hyperpod-cli @ 011ca927 ships none).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import NamedTuple

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.inference_gateway import InferenceGateway
from inference_tiers.constructs.hyperpod.inference_operator import HyperPodInferenceOperator
from inference_tiers.k8s.hyperpod_inference import (
    CloudWatchTrigger,
    InferenceEndpoint,
    PrometheusTrigger,
)
from inference_tiers.k8s.inference_gateway import ModelPool, PoolScaling
from inference_tiers.k8s.inference_gateway_scaling import ScaledTarget, kv_cache_query, queue_query
from inference_tiers.k8s.inference_gateway_settings import InferenceGatewaySettings
from inference_tiers.validation import Args

# The label the operator puts on every pod of an endpoint, valued with the endpoint's metadata.name.
ENDPOINT_POD_LABEL = "app"
WAKE_TRIGGER_NAME = "gateway-new-flows"
# New connections per minute per replica: far above any real rate, so the wake trigger never asks for more than
# one replica (the queue and KV-cache triggers scale out); it only lifts the endpoint from zero.
WAKE_TARGET_NEW_FLOWS = 1_000_000
# CloudWatch's NLB metrics are 1-minute datapoints that land a minute or two late: each query reads the last
# three minutes (KEDA takes the newest datapoint there; none at all reads as minValue 0).
WAKE_PERIOD_SECONDS = 60
WAKE_COLLECTION_SECONDS = 180
# An NLB drops a TCP flow after 350 s without traffic (its default TCP idle timeout). A cooldown longer than that
# means the connections of clients that went quiet are gone before the pods are: their next request opens a new
# connection, which is a new flow that wakes the endpoint (a request on a kept-alive flow would not count).
NLB_TCP_IDLE_TIMEOUT_SECONDS = 350
SCALE_TO_ZERO_COOLDOWN_SECONDS = 600


def hyperpod_model_pool(endpoint: InferenceEndpoint) -> ModelPool:
    """The InferencePool of ``endpoint``'s pods: its EPP sends each request straight to the vLLM container.

    The target port is the worker's own port (where vLLM also serves ``/metrics`` for the EPP's scorers), not
    the operator's request-limit sidecar in front of it: the EPP's queue and KV-cache view replaces that limit.
    The pool's adapters are the ones the worker serves (``endpoint.lora``), so the EPP's LoRA affinity scorer
    is there exactly when the pods load adapters.

    Refused beside the operator's own routers (``endpoint.routing``, ``endpoint.prefill_decode``): the EPP
    sends its requests to the pods itself, past them, so they would route only the load balancer's traffic
    (and prefill/decode pods are two Deployments no one pool stands for).
    """
    args = Args("hyperpod_model_pool")
    for field, value in (("routing", endpoint.routing), ("prefill_decode", endpoint.prefill_decode)):
        if value is not None:
            raise args.error(
                f"endpoint.{field}",
                value,
                "None behind the inference gateway: its Endpoint Picker chooses the pod itself, past the "
                "operator's router",
            )
    return ModelPool(
        name=endpoint.name,
        namespace=endpoint.namespace,
        selector={ENDPOINT_POD_LABEL: endpoint.resource_name},
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


def gateway_load_balancer_name(scope: Construct) -> str:
    """A name for the gateway's NLB, the same on every synth of ``scope``: ``inference-gw-<12 hex>``.

    ELB names are unique per Region and account and at most 32 characters; CloudFormation stack names are
    unique per Region and account too, so a hash of the stack's name and the construct's path tells two
    deployments in one account and Region apart.
    """
    stack = Stack.of(scope)
    digest = hashlib.sha256(f"{stack.stack_name}/{scope.node.path}".encode()).hexdigest()[:12]
    return f"inference-gw-{digest}"


def wake_trigger(load_balancer_full_name: str) -> CloudWatchTrigger:
    """Wake the endpoint from zero on any new connection to the gateway's NLB (``net/<name>/<id>``, a token)."""
    return CloudWatchTrigger(
        name=WAKE_TRIGGER_NAME,
        namespace="AWS/NetworkELB",
        metric_name="NewFlowCount",
        dimensions={"LoadBalancer": load_balancer_full_name},
        target_value=WAKE_TARGET_NEW_FLOWS,
        statistic="Sum",
        period_seconds=WAKE_PERIOD_SECONDS,
        activation_target_value=0,
        collection_seconds=WAKE_COLLECTION_SECONDS,
    )


class HyperPodGateway(NamedTuple):
    """What :func:`add_hyperpod_gateway` returns: the gateway, and the endpoint to apply behind it."""

    gateway: InferenceGateway
    endpoint: InferenceEndpoint
    """The endpoint given, with the wake trigger on the gateway's NLB added where it scales to zero."""


def add_hyperpod_gateway(
    scope: Construct,
    cluster: eks.ICluster,
    operator: HyperPodInferenceOperator,
    endpoint: InferenceEndpoint,
    settings: InferenceGatewaySettings,
) -> HyperPodGateway:
    """The hyperpod tier's gateway: Istio in front of ``endpoint``'s pods, the Endpoint Picker choosing one.

    KEDA is the operator's (``install_keda=False``) and scales the pods through the endpoint's
    ``autoScalingSpec`` (:func:`queue_triggers`), so the gateway renders no ScaledObject of its own. Apply the
    returned endpoint (``HyperPodModelEndpoint(endpoint=...)``): where ``endpoint`` scales to zero it carries the
    wake trigger, which reads the gateway's NLB, so that manifest waits for the gateway.
    """
    args = Args("add_hyperpod_gateway")
    args.instance("settings", settings, InferenceGatewaySettings, "an InferenceGatewaySettings")
    args.instance("operator", operator, HyperPodInferenceOperator, "a HyperPodInferenceOperator")
    args.instance("endpoint", endpoint, InferenceEndpoint, "an InferenceEndpoint")
    pool = hyperpod_model_pool(endpoint)
    if tuple(settings.lora_adapters) != tuple(pool.adapters):
        raise args.error(
            "settings.lora_adapters",
            [a.name for a in settings.lora_adapters],
            f"the adapters the endpoint's pods serve (endpoint.lora: {[a.name for a in pool.adapters]})",
        )
    scaling = endpoint.autoscaling
    to_zero = scaling is not None and scaling.min_replicas == 0
    if scaling is not None and to_zero and scaling.cooldown_seconds <= NLB_TCP_IDLE_TIMEOUT_SECONDS:
        raise args.error(
            "endpoint.autoscaling.cooldown_seconds",
            scaling.cooldown_seconds,
            f"more than {NLB_TCP_IDLE_TIMEOUT_SECONDS} (the NLB's TCP idle timeout) when min_replicas is 0, e.g. "
            f"{SCALE_TO_ZERO_COOLDOWN_SECONDS}: a client still holding a connection when the pods go would "
            "send its next request on it, which is no new flow and never wakes the endpoint",
        )
    gateway = InferenceGateway(
        scope,
        "InferenceGateway",
        cluster=cluster,
        namespace=pool.namespace,
        backend=pool,
        install_keda=False,
        request_timeout_seconds=settings.request_timeout_seconds,
        load_balancer_name=gateway_load_balancer_name(scope) if to_zero else None,
    )
    # After the operator add-on, whose AWS Load Balancer Controller creates the NLB. Not after the model: the
    # pool needs no pod to exist, and at zero the model's manifest reads this gateway's NLB, so it comes after.
    gateway.node.add_dependency(operator)
    if scaling is None or not to_zero:
        return HyperPodGateway(gateway, endpoint)
    assert gateway.load_balancer_full_name is not None  # named above
    woken = dataclasses.replace(
        scaling, trigger=(*scaling.triggers, wake_trigger(gateway.load_balancer_full_name))
    )
    return HyperPodGateway(gateway, dataclasses.replace(endpoint, autoscaling=woken))
