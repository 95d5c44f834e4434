"""DisaggregatedServing: vLLM prefill/decode pools joined by Mooncake over EFA, behind vllm-router, on EKS.

The manifests come from :mod:`inference_tiers.k8s.disaggregated` (pure, tested alone); this construct picks
the images, fills in deploy-time values (account, region, VPC CIDR) and applies the manifests to the cluster.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

from aws_cdk import Aws, Duration, Token
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.k8s.disaggregated import (
    DEFAULT_GPU_NODE_LABELS,
    LOAD_BALANCER_PORT,
    DisaggregatedWorkloadSpec,
    render_namespace,
    render_workload,
)

ASSETS = ASSETS_DIR / "disaggregated"

# The tags the Dockerfiles under assets/disaggregated build (docs/disaggregated.md, "Images"). They name every
# pinned part, so a tag always means the same contents.
VLLM_IMAGE_REPOSITORY = "inference-tiers/vllm-mooncake-efa"
VLLM_IMAGE_TAG = "vllm0.33.0-mooncake0.3.13.post1-efa1.50.0"
ROUTER_IMAGE_REPOSITORY = "inference-tiers/vllm-router"
ROUTER_IMAGE_TAG = "0.1.17"


def _is_ipv4_cidr(value: str) -> bool:
    try:
        ipaddress.IPv4Network(value)
    except ValueError:
        return False
    return True


def default_image_uri(repository: str, tag: str) -> str:
    """``<account>.dkr.ecr.<region>.<suffix>/<repository>:<tag>`` of the deploying account and region."""
    return f"{Aws.ACCOUNT_ID}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{repository}:{tag}"


class DisaggregatedServing(Construct):
    """Prefill and decode vLLM pools (MooncakeConnector over EFA), vllm-router and an internal NLB on EKS.

    :param cluster: the EKS cluster (with a kubectl provider) whose GPU node group has EFA devices.
    :param model_id: Hugging Face model id vLLM serves (weights are downloaded at pod start).
    :param instance_type: EC2 type of the GPU nodes (must support EFA); sizes TP, EFA devices and memory.
    :param prefill_replicas: prefill pods (one per node), 1-64. Default 1.
    :param decode_replicas: decode pods (one per node), 1-64. Default 1.
    :param tensor_parallel_size: TP of every pod, a divisor of the node's GPUs. Default: all GPUs of the node.
    :param max_model_len: context length. Default: the model's.
    :param namespace: namespace created for the workload. Default ``inference``.
    :param name: prefix of every Kubernetes object (and the router's selectors). Default ``vllm-pd``.
    :param image_uri: vLLM image (vLLM + EFA user space + ``mooncake-transfer-engine-efa``). Default: the
        pinned tag ``inference-tiers/vllm-mooncake-efa:<VLLM_IMAGE_TAG>`` in the deploying account's ECR, built
        from ``assets/disaggregated/vllm/Dockerfile`` (docs/disaggregated.md, "Images").
    :param router_image_uri: vllm-router image. Default: ``inference-tiers/vllm-router:0.1.17`` in the
        deploying account's ECR, built from ``assets/disaggregated/router/Dockerfile``.
    :param build_images: build both images from the Dockerfiles as CDK assets at deploy time (needs Docker
        where ``cdk deploy`` runs) instead of using the URIs. Default False.
    :param enable_kv_store: add ``mooncake_master`` and the shared KV pool (``MooncakeStoreConnector`` through
        ``MultiConnector``). Default False (docs/disaggregated.md: reported unstable upstream, vLLM PR #56939).
    :param kv_store_segment_gib_per_rank: DRAM per GPU rank given to the pool. Default 32.
    :param hf_token_secret_name: Secret (key ``token``) with a Hugging Face token for gated models, created
        by you; None for public models. Default ``hf-token``.
    :param gpu_node_labels: labels that select the EFA GPU nodes (besides the instance type). Default
        ``{"inference-tiers/node-pool": "gpu-efa"}`` (the EFA node group's label). The pods tolerate the ``nvidia.com/gpu`` taint.
    :param router_replicas: router pods, 1-10. Default 1.
    :param allowed_cidrs: clients the internal load balancer admits. Default: the cluster VPC's CIDR.
    :param startup_timeout_minutes: how long a vLLM pod may take to start, 10-240. Default 60.
    :param extra_env: more environment for the vLLM pods (for example ``MC_EFA_NIC_SELECTION=local`` to register
        GPU memory only on each GPU's local EFA devices). Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        model_id: str,
        instance_type: str,
        prefill_replicas: int = 1,
        decode_replicas: int = 1,
        tensor_parallel_size: int | None = None,
        max_model_len: int | None = None,
        namespace: str = "inference",
        name: str = "vllm-pd",
        image_uri: str | None = None,
        router_image_uri: str | None = None,
        build_images: bool = False,
        enable_kv_store: bool = False,
        kv_store_segment_gib_per_rank: int = 32,
        hf_token_secret_name: str | None = "hf-token",
        gpu_node_labels: Mapping[str, str] | None = None,
        router_replicas: int = 1,
        allowed_cidrs: Sequence[str] | None = None,
        startup_timeout_minutes: int = 60,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if cluster.kubectl_provider is None:
            raise ValueError(
                f"cluster: got {cluster.node.path!r} without a kubectl provider; expected a cluster created with "
                "kubectl_provider_options (a kubectl layer such as KubectlV35Layer), which add_manifest needs"
            )
        if build_images and (image_uri is not None or router_image_uri is not None):
            raise ValueError(
                f"build_images: got True together with image_uri={image_uri!r} / "
                f"router_image_uri={router_image_uri!r}; expected either build_images=True or image URIs"
            )

        for cidr in allowed_cidrs or ():
            if not Token.is_unresolved(cidr) and not _is_ipv4_cidr(cidr):
                raise ValueError(
                    f"allowed_cidrs: got {cidr!r}; expected IPv4 CIDR blocks such as 10.0.0.0/16 "
                    "(the load balancer's loadBalancerSourceRanges)"
                )

        self.vllm_image_asset: ecr_assets.DockerImageAsset | None = None
        self.router_image_asset: ecr_assets.DockerImageAsset | None = None
        if build_images:
            self.vllm_image_asset = ecr_assets.DockerImageAsset(
                self, "VllmImage", directory=str(ASSETS / "vllm"), platform=ecr_assets.Platform.LINUX_AMD64
            )
            self.router_image_asset = ecr_assets.DockerImageAsset(
                self,
                "RouterImage",
                directory=str(ASSETS / "router"),
                platform=ecr_assets.Platform.LINUX_AMD64,
            )
            vllm_image = self.vllm_image_asset.image_uri
            router_image = self.router_image_asset.image_uri
        else:
            vllm_image = image_uri or default_image_uri(VLLM_IMAGE_REPOSITORY, VLLM_IMAGE_TAG)
            router_image = router_image_uri or default_image_uri(ROUTER_IMAGE_REPOSITORY, ROUTER_IMAGE_TAG)

        self.spec = DisaggregatedWorkloadSpec(
            model_id=model_id,
            instance_type=instance_type,
            vllm_image=vllm_image,
            router_image=router_image,
            prefill_replicas=prefill_replicas,
            decode_replicas=decode_replicas,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            name=name,
            namespace=namespace,
            enable_kv_store=enable_kv_store,
            kv_store_segment_gib_per_rank=kv_store_segment_gib_per_rank,
            hf_token_secret_name=hf_token_secret_name,
            gpu_node_labels=dict(gpu_node_labels if gpu_node_labels is not None else DEFAULT_GPU_NODE_LABELS),
            router_replicas=router_replicas,
            allowed_cidrs=tuple(allowed_cidrs)
            if allowed_cidrs is not None
            else (cluster.vpc.vpc_cidr_block,),
            startup_timeout_minutes=startup_timeout_minutes,
            extra_env=dict(extra_env or {}),
        )
        self.cluster = cluster
        self.vllm_image_uri = vllm_image
        self.router_image_uri = router_image

        # Namespace first, then everything in it: one kubectl apply each, ordered by a dependency.
        self.namespace_manifest = eks.KubernetesManifest(
            self, "Namespace", cluster=cluster, manifest=[render_namespace(self.spec)]
        )
        self.workload_manifest = eks.KubernetesManifest(
            self, "Workload", cluster=cluster, manifest=render_workload(self.spec)
        )
        self.workload_manifest.node.add_dependency(self.namespace_manifest)

        self.router_service_name = self.spec.resource_name("router")
        # The internal NLB's DNS name, read back from the Service once the cloud controller has created it.
        load_balancer = eks.KubernetesObjectValue(
            self,
            "RouterLoadBalancer",
            cluster=cluster,
            object_type="service",
            object_name=self.router_service_name,
            object_namespace=self.spec.namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            timeout=Duration.minutes(15),
        )
        load_balancer.node.add_dependency(self.workload_manifest)
        self.router_hostname = load_balancer.value
        """DNS name of the internal load balancer (a deploy-time token)."""
        self.router_endpoint = f"http://{self.router_hostname}:{LOAD_BALANCER_PORT}"
        """OpenAI-compatible base URL of the router (``/v1/chat/completions``), reachable inside the VPC."""

    @property
    def namespace(self) -> str:
        return self.spec.namespace
