"""PlatformInferencePool: an elastic GPU pool on the platform's cluster, behind the project's inference gateway,
registered in the platform's LiteLLM gateway as one more model (what each part renders:
:mod:`inference_tiers.k8s.gpu_pool`)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref, kubectl_cluster
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.inference_gateway import InferenceGateway
from inference_tiers.constructs.eks.lora_reader import LoraAdapterReader
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.k8s.gpu_pool import (
    GPU_NODE_POOL,
    GPU_TOLERATION,
    LORA_SERVICE_ACCOUNT,
    GpuPoolSpec,
    gpu_node_pool,
    litellm_models,
    namespace,
    pool_network_policies,
    vllm_deployment,
)
from inference_tiers.k8s.inference_gateway_lora import LoraServing, lora_service_account
from inference_tiers.k8s.inference_gateway_scaling import PrometheusMetrics
from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.k8s.sandbox_nodes import karpenter_node_class
from inference_tiers.k8s.tenant_keys import model_registration_objects
from inference_tiers.litellm.config import LITELLM_IMAGE
from inference_tiers.validation import Args

GATEWAY_NAME = "inference-gateway"


class PlatformInferencePool(Construct):
    """GPU nodes from Karpenter only while vLLM needs them, vLLM scaled by KEDA on its queue (from zero), the
    inference gateway (Istio + the Endpoint Picker: prefix-cache-aware routing, and LoRA-aware with
    ``spec.lora_adapters``) in front, and the pool added to LiteLLM as model ``spec.served_model_name`` (and one
    model per adapter): tenants reach it with their own key, and nothing reaches it but LiteLLM.

    The LiteLLM gateway must store models in its database (``store_model_in_db``: the platform's does), since
    the pool is added through ``/model/new`` by a Job in the gateway's namespace; the gateway's own
    configuration is not changed, so adding the pool touches nothing the gateway was deployed with.

    Attributes: ``spec``, ``namespace_manifest``, ``device_plugins`` (NVIDIA only), ``nodes`` (EC2NodeClass and
    NodePool), ``adapter_reader`` (the LoRA adapters' S3 reader role, or None), ``workload`` (vLLM Deployment
    and the NetworkPolicies), ``gateway`` (the
    :class:`~inference_tiers.constructs.eks.inference_gateway.InferenceGateway`), ``models`` (the LiteLLM model
    entries), ``registration`` (the Job).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        karpenter: Karpenter,
        subnets: Sequence[ec2.ISubnet],
        gateway: GatewayEndpoint,
        metrics: PrometheusMetrics,
        spec: GpuPoolSpec,
        scraper_cidrs: Sequence[str] | None = None,
        image: str = LITELLM_IMAGE,
    ) -> None:
        """
        :param cluster: the platform's EKS cluster (with a kubectl provider and the Pod Identity agent).
        :param karpenter: the Karpenter installation that launches the GPU nodes (its node identity is used).
        :param subnets: private subnets for the GPU nodes (at least one).
        :param gateway: the platform's LiteLLM gateway the pool is registered with.
        :param metrics: where KEDA reads vLLM's and the Endpoint Picker's series (the platform's AMP workspace,
            which its managed scraper fills from the pods' ``prometheus.io`` annotations).
        :param spec: the pool's model, nodes and scaling.
        :param scraper_cidrs: the metrics scraper's subnets, admitted to the metrics ports. Default: the VPC's.
        :param image: the registration Job's image (it needs ``python3``). Default: the pinned LiteLLM image.
        """
        super().__init__(scope, construct_id)
        args = Args("PlatformInferencePool")
        kubectl_cluster(args, "cluster", cluster)
        args.instance("karpenter", karpenter, Karpenter)
        checked_subnets = args.sequence(
            "subnets", subnets, lambda n, v: args.implements(n, v, ec2.ISubnet), min_items=1, max_items=16
        )
        args.instance("gateway", gateway, GatewayEndpoint)
        args.instance("metrics", metrics, PrometheusMetrics)
        self.spec = args.instance("spec", spec, GpuPoolSpec)
        """The checked :class:`~inference_tiers.k8s.gpu_pool.GpuPoolSpec`."""
        scrapers = args.sequence(
            "scraper_cidrs",
            [cluster.vpc.vpc_cidr_block] if scraper_cidrs is None else scraper_cidrs,
            lambda n, v: args.text(n, v),
            min_items=1,
            max_items=16,
        )
        args.text(
            "image", image, pattern=r"\S+:\S+", description="a pinned image with python3", allow_token=False
        )
        ref = as_cluster_ref(cluster)

        self.namespace_manifest = eks.KubernetesManifest(
            self, "Namespace", cluster=ref, manifest=[namespace(spec)]
        )
        """The pool's namespace."""
        self.device_plugins = GpuDevicePlugins(
            self, "DevicePlugins", cluster=cluster, tolerations=[GPU_TOLERATION], efa=False
        )
        """The NVIDIA device plugin, on the GPU nodes (they carry no EFA)."""
        self.nodes = eks.KubernetesManifest(
            self,
            "Nodes",
            cluster=ref,
            manifest=[
                karpenter_node_class(
                    GPU_NODE_POOL,
                    ami_alias=spec.ami_alias,
                    root_volume_gib=spec.root_volume_gib,
                    instance_profile=karpenter.instance_profile.ref,
                    subnet_ids=[subnet.subnet_id for subnet in checked_subnets],
                    # The cluster security group: the AMP scraper's ENIs carry it and reach the metrics ports.
                    security_group_ids=[cluster.cluster_security_group_id],
                    volume_kms_key_id=karpenter.volume_key.key_arn,
                    tags={"inference-tiers:tier": "platform", "inference-tiers:pool": "gpu"},
                ),
                gpu_node_pool(spec),
            ],
        )
        """The EC2NodeClass and NodePool the GPU nodes are launched from."""
        # The chart installs the NodePool CRDs; the nodes need their access entry to join.
        self.nodes.node.add_dependency(karpenter.chart, karpenter.node_access)

        self.adapter_reader: LoraAdapterReader | None = None
        """The Pod Identity role the vLLM pods read their LoRA adapters with (None without adapters)."""
        identity = []
        if spec.lora_adapters:
            self.adapter_reader = LoraAdapterReader(
                self,
                "AdapterReader",
                cluster=ref,
                namespace=spec.namespace,
                service_account=LORA_SERVICE_ACCOUNT,
                lora=LoraServing(
                    tuple(spec.lora_adapters), region=Aws.REGION, max_lora_rank=spec.max_lora_rank
                ),
                description="Platform inference pool: the vLLM pods read their LoRA adapter folders",
            )
            identity = [lora_service_account(spec.namespace, LORA_SERVICE_ACCOUNT)]
        self.workload = eks.KubernetesManifest(
            self,
            "Workload",
            cluster=ref,
            manifest=[
                *identity,
                vllm_deployment(spec, region=Aws.REGION),
                *pool_network_policies(
                    spec, gateway_name=GATEWAY_NAME, litellm=gateway, scraper_cidrs=scrapers
                ),
            ],
        )
        """The vLLM Deployment and the NetworkPolicies of the pool (and LiteLLM's egress to it)."""
        self.workload.node.add_dependency(self.namespace_manifest, self.nodes, self.device_plugins)
        if self.adapter_reader is not None:
            # The first pod's init container asks for credentials: the association exists before it.
            self.workload.node.add_dependency(self.adapter_reader)

        self.gateway = InferenceGateway(
            self,
            "InferenceGateway",
            cluster=ref,
            namespace=spec.namespace,
            backend=spec.model_pool(),
            scaled_targets=[spec.scaled_target()],
            metrics=metrics,
            name=GATEWAY_NAME,
            # In-cluster only: LiteLLM is its one client, so no NLB exists to bypass the tenants' keys.
            internal_load_balancer=False,
        )
        """The project's inference gateway in front of the vLLM pods: Istio, the Endpoint Picker, KEDA."""
        self.gateway.node.add_dependency(self.workload)

        self.models = litellm_models(spec, f"{self.gateway.endpoint}/v1")
        """The LiteLLM model entries the registration Job adds (``/model/new``): the model, each adapter."""
        self.registration = eks.KubernetesManifest(
            self,
            "Registration",
            cluster=ref,
            manifest=model_registration_objects(gateway, self.models, image=image),
        )
        """The Job in the gateway's namespace that adds the pool to LiteLLM."""
        self.registration.node.add_dependency(self.gateway.manifest)
