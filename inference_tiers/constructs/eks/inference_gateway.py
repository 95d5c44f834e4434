"""InferenceGateway: Istio + Gateway API Inference Extension + KEDA in front of vLLM pools on EKS.

The one shared construct of the smart inference gateway (docs/inference-gateway.md). It installs, in order:
the pinned Gateway API and Inference Extension CRDs (a chart holding only ``crds/``), Istio's ``base`` and
``istiod`` charts with the inference extension switched on, KEDA (optional: HyperPod's operator add-on brings
its own), then one manifest with every pool's InferencePool and Endpoint Picker, the Gateway, its HTTPRoute and
a KEDA ScaledObject per scaled Deployment. The objects come from the pure renderers in
:mod:`inference_tiers.k8s.inference_gateway` and its ``_scaling`` module (validated there against the CRDs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from inference_tiers.constructs.common.nag import acknowledge, acknowledge_chart_asset_read
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.k8s.inference_gateway import (
    CRD_CHART_DIR,
    GATEWAY_CLASS,
    GATEWAY_PORT,
    ISTIO_CHART_REPOSITORY,
    ISTIO_VERSION,
    KEDA_CHART_REPOSITORY,
    KEDA_VERSION,
    GatewaySpec,
    Manifest,
    ModelPool,
    pool_backend,
    render_endpoint_picker,
    render_gateway,
    render_http_route,
    render_inference_pool,
    service_backend,
)
from inference_tiers.k8s.inference_gateway_scaling import (
    CloudWatchMetrics,
    MetricsSource,
    PrometheusMetrics,
    ScaledTarget,
    render_scaled_object,
    render_trigger_authentication,
)
from inference_tiers.validation import Args

ISTIO_NAMESPACE = "istio-system"
# Without this flag (pilot/pkg/features/experimental.go, default false) istiod ignores HTTPRoutes whose backend is
# an InferencePool. The 1.30 istiod chart reads container env from top-level ``env`` (``pilot.env`` is the
# IstioOperator spelling, which this chart ignores).
ISTIOD_VALUES: dict[str, object] = {"env": {"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"}}
KEDA_VALUES: dict[str, object] = {"podIdentity": {"aws": {"irsa": {"enabled": False}}}}
KEDA_NAMESPACE = "keda"
KEDA_OPERATOR_SERVICE_ACCOUNT = "keda-operator"
TRIGGER_AUTHENTICATION = "keda-aws"


@dataclass(frozen=True)
class ServiceBackend:
    """A plain Service the route sends everything to (vllm-router, which picks the prefill/decode pair).

    :param name: the Service's name, in the gateway's namespace.
    :param port: the Service port the route sends to.
    """

    name: str
    """The Service's name, in the gateway's namespace."""
    port: int
    """The Service port the route sends requests to."""


def nlb_full_name(name: str, dns_name: str) -> str:
    """``net/<name>/<id>`` of the NLB named ``name`` whose DNS name is ``dns_name`` (a token), at deploy time.

    An NLB's DNS name is ``<name>-<id>.elb.<region>.amazonaws.com`` and its ARN ends in ``net/<name>/<id>``
    (the CloudWatch dimension): the id is what follows ``<name>-`` in the first DNS label.
    """
    first_label = Fn.select(0, Fn.split(".", dns_name))
    return Fn.join("/", ["net", name, Fn.select(1, Fn.split(f"{name}-", first_label))])


class InferenceGateway(Construct):
    """An internal, inference-aware gateway for vLLM pools on an EKS cluster.

    :param cluster: the EKS cluster (with a kubectl provider).
    :param namespace: the existing namespace of the vLLM pods; every object of the gateway goes there.
    :param backend: what the route sends requests to: a :class:`ModelPool` (an InferencePool whose Endpoint
        Picker chooses the pod) or a :class:`ServiceBackend`.
    :param pools: the InferencePools (and Endpoint Pickers) to create; ``backend`` may be one of them.
        Default: ``backend`` when it is a pool, else none.
    :param scaled_targets: Deployments KEDA scales on their queue and KV cache (one ScaledObject each).
        Default none.
    :param metrics: where KEDA reads the vLLM series (required with ``scaled_targets``).
    :param model_name: the served model name, for the scale-from-zero trigger. Default: the backend pool's.
    :param install_keda: install the pinned KEDA chart with an EKS Pod Identity role. Default True; False where
        the cluster already runs KEDA (HyperPod's inference operator add-on), whose role must then read
        ``metrics``.
    :param allowed_cidrs: client CIDRs the internal NLB admits (tokens accepted). Default: the VPC's CIDR.
    :param name: Gateway and HTTPRoute name. Default ``inference-gateway``.
    :param request_timeout_seconds: the route's request timeout, 1-3600. Default 600.
    :param load_balancer_name: name the NLB (1-32 characters, unique per Region and account), so that its
        CloudWatch metrics can be named at synth: :attr:`load_balancer_full_name`. Default None: the AWS Load
        Balancer Controller names it.
    :param internal_load_balancer: give the gateway an internal NLB for clients in the VPC. False: a ClusterIP
        Service only, reached by in-cluster clients (:attr:`endpoint` is its cluster DNS name; no NLB exists to
        bypass whatever fronts the gateway). Default True.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        backend: ModelPool | ServiceBackend,
        pools: Sequence[ModelPool] | None = None,
        scaled_targets: Sequence[ScaledTarget] = (),
        metrics: MetricsSource | None = None,
        model_name: str | None = None,
        install_keda: bool = True,
        allowed_cidrs: Sequence[str] | None = None,
        name: str = "inference-gateway",
        request_timeout_seconds: int = 600,
        load_balancer_name: str | None = None,
        internal_load_balancer: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("InferenceGateway")
        cluster = args.implements("cluster", cluster, eks.ICluster)
        if cluster.kubectl_provider is None:
            raise args.error("cluster", cluster, "a cluster created with kubectl_provider_options")
        if not isinstance(backend, ModelPool | ServiceBackend):
            raise args.error("backend", backend, "a ModelPool or a ServiceBackend")
        pools = args.sequence(
            "pools",
            [backend] if pools is None and isinstance(backend, ModelPool) else (pools or []),
            lambda n, v: args.instance(n, v, ModelPool),
        )
        targets = args.sequence(
            "scaled_targets", scaled_targets, lambda n, v: args.instance(n, v, ScaledTarget)
        )
        if targets and metrics is None:
            raise args.error(
                "metrics", metrics, "a PrometheusMetrics or CloudWatchMetrics with scaled_targets"
            )
        if metrics is not None and not isinstance(metrics, PrometheusMetrics | CloudWatchMetrics):
            raise args.error("metrics", metrics, "a PrometheusMetrics or CloudWatchMetrics")
        args.boolean("install_keda", install_keda)
        args.boolean("internal_load_balancer", internal_load_balancer)
        if not internal_load_balancer and (allowed_cidrs is not None or load_balancer_name is not None):
            raise args.error(
                "allowed_cidrs" if allowed_cidrs is not None else "load_balancer_name",
                allowed_cidrs if allowed_cidrs is not None else load_balancer_name,
                "None without an internal load balancer (internal_load_balancer=False)",
            )
        for index, pool in enumerate(pools):
            if pool.namespace != namespace:
                raise args.error(
                    f"pools[{index}].namespace", pool.namespace, f"the gateway's namespace {namespace!r}"
                )
        if model_name is None:
            model_name = (
                backend.model_name
                if isinstance(backend, ModelPool)
                else pools[0].model_name
                if pools
                else "none"
            )
        self.spec = GatewaySpec(
            name=name,
            namespace=namespace,
            allowed_cidrs=(
                []
                if not internal_load_balancer
                else [cluster.vpc.vpc_cidr_block]
                if allowed_cidrs is None
                else list(allowed_cidrs)
            ),
            request_timeout_seconds=request_timeout_seconds,
            load_balancer_name=load_balancer_name,
            load_balancer=internal_load_balancer,
        )
        """The ``GatewaySpec`` the Gateway and HTTPRoute are rendered from: name, namespace, allowed client
        CIDRs, request timeout (seconds) and NLB name."""
        self.cluster = cluster
        """The EKS cluster the gateway's charts and manifests are installed on."""

        crd_chart = s3_assets.Asset(self, "CrdChart", path=str(CRD_CHART_DIR))
        self.crds = eks.HelmChart(
            self,
            "Crds",
            cluster=cluster,
            chart_asset=crd_chart,
            release="inference-gateway-crds",
            namespace="kube-system",
        )
        """The Helm release ``inference-gateway-crds`` (in ``kube-system``) with the pinned Gateway API and
        Inference Extension CRDs."""
        acknowledge_chart_asset_read(cluster.kubectl_provider, crd_chart)
        self.istio_base = self._istio_chart("IstioBase", "base", {})
        """Istio's ``base`` chart (release ``istio-base`` in ``istio-system``), installed after
        :attr:`crds`."""
        self.istio_base.node.add_dependency(self.crds)
        self.istiod = self._istio_chart("Istiod", "istiod", ISTIOD_VALUES)
        """Istio's ``istiod`` chart (release ``istio-istiod`` in ``istio-system``) with the inference
        extension switched on, installed after :attr:`istio_base`."""
        self.istiod.node.add_dependency(self.istio_base)

        self.keda: eks.HelmChart | None = None
        """The KEDA chart (release ``keda`` in namespace ``keda``), or None when this construct installs none
        (no ``scaled_targets``, or ``install_keda=False``)."""
        self.keda_role: iam.Role | None = None
        """The EKS Pod Identity role of the KEDA operator this construct installs, which may read ``metrics``
        (``cloudwatch:GetMetricData``, or ``aps:QueryMetrics`` on the workspace); None when :attr:`keda` is
        None. The role to grant further permissions to when KEDA scales on other sources."""
        if targets and install_keda:
            assert metrics is not None
            self.keda = self._keda(metrics)

        objects: list[Manifest] = []
        for pool in pools:
            objects += [render_inference_pool(pool), *render_endpoint_picker(pool)]
        route_backend = (
            pool_backend(backend)
            if isinstance(backend, ModelPool)
            else service_backend(backend.name, backend.port)
        )
        objects += [render_gateway(self.spec), render_http_route(self.spec, route_backend)]
        if targets:
            assert metrics is not None
            # KEDA signs with its AWS identity for CloudWatch and AMP; an in-cluster Prometheus needs none.
            signed = isinstance(metrics, CloudWatchMetrics) or metrics.region is not None
            if signed:
                objects.append(render_trigger_authentication(TRIGGER_AUTHENTICATION, namespace))
            objects += [
                render_scaled_object(
                    namespace,
                    target,
                    model_name=model_name,
                    metrics=metrics,
                    trigger_authentication=TRIGGER_AUTHENTICATION if signed else None,
                )
                for target in targets
            ]
        self.manifest = eks.KubernetesManifest(self, "Objects", cluster=cluster, manifest=objects)
        """The manifest with every pool's InferencePool and Endpoint Picker, the Gateway, its HTTPRoute and,
        with ``scaled_targets``, KEDA's TriggerAuthentication and one ScaledObject per target. Make anything
        that sends requests through the gateway depend on it."""
        self.manifest.node.add_dependency(self.istiod)
        if self.keda is not None:
            self.manifest.node.add_dependency(self.keda)

        self.load_balancer: eks.KubernetesObjectValue | None = None
        """Reads the hostname of the gateway proxy's Service (``<name>-istio``) once its internal NLB exists,
        waiting up to 15 minutes; its ``value`` is the NLB's DNS name (a deploy-time token). None without an
        internal load balancer."""
        self.load_balancer_full_name: str | None = None
        """``net/<name>/<id>``, the NLB's ``LoadBalancer`` dimension in ``AWS/NetworkELB`` (a deploy-time token;
        with ``load_balancer_name`` only, else None)."""
        # Istio names the proxy it deploys for a Gateway "<gateway>-<class>".
        service = f"{name}-{GATEWAY_CLASS}"
        self.endpoint = f"http://{service}.{namespace}.svc.cluster.local:{GATEWAY_PORT}"
        """OpenAI-compatible base URL of the gateway: its internal NLB (a deploy-time token), or without one its
        Service's cluster DNS name."""
        if not internal_load_balancer:
            return
        # The NLB's DNS name comes back here.
        load_balancer = eks.KubernetesObjectValue(
            self,
            "LoadBalancer",
            cluster=cluster,
            object_type="service",
            object_name=service,
            object_namespace=namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            timeout=Duration.minutes(15),
        )
        load_balancer.node.add_dependency(self.manifest)
        self.load_balancer = load_balancer
        self.endpoint = f"http://{load_balancer.value}:{GATEWAY_PORT}"
        if load_balancer_name:
            self.load_balancer_full_name = nlb_full_name(load_balancer_name, load_balancer.value)

    def _istio_chart(self, construct_id: str, chart: str, values: dict[str, object]) -> eks.HelmChart:
        return eks.HelmChart(
            self,
            construct_id,
            cluster=self.cluster,
            chart=chart,
            repository=ISTIO_CHART_REPOSITORY,
            version=ISTIO_VERSION,
            release=f"istio-{chart}",
            namespace=ISTIO_NAMESPACE,
            create_namespace=True,
            values=values,
        )

    def _keda(self, metrics: MetricsSource) -> eks.HelmChart:
        stack = Stack.of(self)
        identity = PodIdentityRole(
            self,
            "KedaRole",
            cluster=self.cluster,
            namespace=KEDA_NAMESPACE,
            service_account=KEDA_OPERATOR_SERVICE_ACCOUNT,
            description="KEDA operator: reads the vLLM queue and KV-cache metrics it scales on (EKS Pod Identity)",
        )
        self.keda_role = identity.role
        if isinstance(metrics, CloudWatchMetrics):
            self.keda_role.add_to_policy(
                iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])
            )
            acknowledge(
                self.keda_role,
                "AwsSolutions-IAM5[Resource::*]",
                "cloudwatch:GetMetricData supports no resource-level permissions (Service Authorization "
                "Reference: resource type none); the role reads metrics only.",
            )
        elif metrics.region is not None:
            # Amazon Managed Service for Prometheus: the workspace id ends the query URL.
            workspace = metrics.url.rstrip("/").rsplit("/", 1)[-1]
            self.keda_role.add_to_policy(
                iam.PolicyStatement(
                    actions=["aps:QueryMetrics"],
                    resources=[
                        stack.format_arn(service="aps", resource="workspace", resource_name=workspace)
                    ],
                )
            )
        chart = eks.HelmChart(
            self,
            "Keda",
            cluster=self.cluster,
            chart="keda",
            repository=KEDA_CHART_REPOSITORY,
            version=KEDA_VERSION,
            release="keda",
            namespace=KEDA_NAMESPACE,
            create_namespace=True,
            # EKS Pod Identity, not IRSA: the association gives the operator its credentials.
            values=KEDA_VALUES,
        )
        # The operator's first credentials come from the association: create it before the pods start.
        chart.node.add_dependency(identity.association)
        return chart
