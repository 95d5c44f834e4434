"""DisaggregatedServing: vLLM prefill/decode pools joined by Mooncake over EFA, behind vllm-router, on EKS.

The manifests come from :mod:`inference_tiers.k8s.disaggregated` (pure, tested alone); this construct builds
the images, fills in deploy-time values (account, region, VPC CIDR) and applies the manifests to the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.eks.lora_reader import LoraAdapterReader
from inference_tiers.k8s.disaggregated import (
    DEFAULT_GPU_NODE_LABELS,
    LOAD_BALANCER_PORT,
    DisaggregatedWorkloadSpec,
    image_reference,
    render_namespace,
    render_workload,
)
from inference_tiers.k8s.inference_gateway_lora import LORA_INIT_IMAGE, LoraServing
from inference_tiers.validation import Args

ASSETS = ASSETS_DIR / "disaggregated"
# The Dockerfiles of the two images (docs/disaggregated.md, "Images"); every version in them is pinned.
VLLM_DOCKERFILE_DIR = ASSETS / "vllm"
ROUTER_DOCKERFILE_DIR = ASSETS / "router"


class DisaggregatedServing(Construct):
    """Prefill and decode vLLM pools (MooncakeConnector over EFA), vllm-router and an internal NLB on EKS.

    :param cluster: the EKS cluster (with a kubectl provider) whose GPU node group has EFA devices.
    :param model_id: Hugging Face model id vLLM serves (weights are downloaded at pod start), or a path vLLM
        can load; a deploy-time token is accepted.
    :param instance_type: EC2 type of the GPU nodes (must support EFA); sizes TP, EFA devices and memory.
    :param prefill_replicas: prefill pods (one per node), 1-64. Default 1.
    :param decode_replicas: decode pods (one per node), 1-64. Default 1.
    :param tensor_parallel_size: TP of every pod, a divisor of the node's GPUs. Default: all GPUs of the node.
    :param max_model_len: context length, 256-10485760. Default: the model's.
    :param namespace: namespace created for the workload. Default ``inference``.
    :param name: prefix of every Kubernetes object (and the router's selectors). Default ``vllm-pd``.
    :param image_uri: vLLM image (vLLM + EFA user space + ``mooncake-transfer-engine-efa-cuda13``) with a
        pinned tag or digest, or a token (``repository.repository_uri_for_tag(...)``). Default: built from
        ``assets/disaggregated/vllm/Dockerfile`` as a CDK image asset by ``cdk deploy`` (needs Docker there) and
        pushed to the CDK bootstrap's container asset repository (docs/disaggregated.md, "Images").
    :param router_image_uri: vllm-router image, as ``image_uri``. Default: built from
        ``assets/disaggregated/router/Dockerfile`` the same way.
    :param enable_kv_store: add ``mooncake_master`` and the shared KV pool (``MooncakeStoreConnector`` through
        ``MultiConnector``). Default False (docs/disaggregated.md: reported unstable upstream, vLLM PR #56939).
    :param kv_store_segment_gib_per_rank: DRAM per GPU rank given to the pool, 1-1024. Default 32.
    :param hf_token_secret_name: Secret (key ``token``) with a Hugging Face token for gated models, created
        by you (a token is accepted); None for public models. Default ``hf-token``.
    :param gpu_node_labels: labels that select the EFA GPU nodes (besides the instance type). Default
        ``{"inference-tiers/node-pool": "gpu-efa"}`` (the EFA node group's label). The pods tolerate the
        ``nvidia.com/gpu`` taint.
    :param router_replicas: router pods, 1-10. Default 1.
    :param allowed_cidrs: IPv4 CIDRs of the clients the internal load balancer admits (tokens accepted, for
        example a CIDR exported by another stack). Default: the cluster VPC's CIDR.
    :param startup_timeout_minutes: how long a vLLM pod may take to start, 10-240. Default 60.
    :param extra_env: more environment for the vLLM pods (for example ``MC_EFA_NIC_SELECTION=local`` to register
        GPU memory only on each GPU's local EFA devices); values may be tokens. Default: none.
    :param efa_devices: EFA devices each vLLM pod requests, 1 to the instance's: what the node group attaches
        (``EfaNodeGroup.efa_interfaces``). Default: all of the instance's.
    :param lora: LoRA adapters every prefill and decode pod serves (``LoraServing``): an init container copies
        them from S3 with the pods' own ServiceAccount, whose EKS Pod Identity role (:attr:`lora_role`) may
        read only the adapter folders. Default: none.
    :param lora_init_image: image of that init container (AWS CLI), pinned. Default :data:`LORA_INIT_IMAGE`.
    :param adapter_key: KMS key of the adapter objects (SSE-KMS); the role may decrypt with it. Only with
        ``lora``. Default: none.
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
        enable_kv_store: bool = False,
        kv_store_segment_gib_per_rank: int = 32,
        hf_token_secret_name: str | None = "hf-token",
        gpu_node_labels: Mapping[str, str] | None = None,
        router_replicas: int = 1,
        allowed_cidrs: Sequence[str] | None = None,
        startup_timeout_minutes: int = 60,
        extra_env: Mapping[str, str] | None = None,
        efa_devices: int | None = None,
        lora: LoraServing | None = None,
        lora_init_image: str = LORA_INIT_IMAGE,
        adapter_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("DisaggregatedServing")
        if adapter_key is not None:
            args.implements("adapter_key", adapter_key, kms.IKey)
            if lora is None:
                raise args.error("adapter_key", adapter_key, "None when no lora adapters are given")
        cluster = args.implements("cluster", cluster, eks.ICluster)
        if cluster.kubectl_provider is None:
            raise args.error(
                "cluster",
                cluster,
                "a cluster created with kubectl_provider_options (a kubectl layer such as KubectlV35Layer), "
                "which add_manifest needs",
            )
        if image_uri is not None:
            image_reference(args, "image_uri", image_uri)
        if router_image_uri is not None:
            image_reference(args, "router_image_uri", router_image_uri)

        # Images nobody passed are built from the packaged Dockerfiles at deploy time (CDK image assets), so a
        # first deploy needs no manual push; their URIs are deploy-time tokens.
        self.vllm_image_asset: ecr_assets.DockerImageAsset | None = None
        """The vLLM image built from ``assets/disaggregated/vllm/Dockerfile`` by ``cdk deploy``;
        ``None`` when ``image_uri`` is given."""
        self.router_image_asset: ecr_assets.DockerImageAsset | None = None
        """The vllm-router image built from ``assets/disaggregated/router/Dockerfile`` by
        ``cdk deploy``; ``None`` when ``router_image_uri`` is given."""
        if image_uri is None:
            self.vllm_image_asset = _image_asset(self, "VllmImage", VLLM_DOCKERFILE_DIR)
            image_uri = self.vllm_image_asset.image_uri
        if router_image_uri is None:
            self.router_image_asset = _image_asset(self, "RouterImage", ROUTER_DOCKERFILE_DIR)
            router_image_uri = self.router_image_asset.image_uri

        # The pure spec makes every other check, reported as this construct's (same parameter names).
        self.spec = DisaggregatedWorkloadSpec(
            model_id=model_id,
            instance_type=instance_type,
            vllm_image=image_uri,
            router_image=router_image_uri,
            prefill_replicas=prefill_replicas,
            decode_replicas=decode_replicas,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            name=name,
            namespace=namespace,
            enable_kv_store=enable_kv_store,
            kv_store_segment_gib_per_rank=kv_store_segment_gib_per_rank,
            hf_token_secret_name=hf_token_secret_name,
            gpu_node_labels=DEFAULT_GPU_NODE_LABELS if gpu_node_labels is None else gpu_node_labels,
            router_replicas=router_replicas,
            allowed_cidrs=(cluster.vpc.vpc_cidr_block,) if allowed_cidrs is None else allowed_cidrs,
            startup_timeout_minutes=startup_timeout_minutes,
            extra_env={} if extra_env is None else extra_env,
            efa_devices=efa_devices,
            lora=lora,
            lora_init_image=lora_init_image,
            owner=args.owner,
        )
        """The checked workload (``DisaggregatedWorkloadSpec``) the manifests are rendered from: model,
        images, replicas, tensor parallelism, labels and the rest of the props."""
        self.cluster = cluster
        """The EKS cluster the manifests are applied to."""
        self.vllm_image_uri = image_uri
        """The image the prefill and decode pods run: ``image_uri``, or the built
        :attr:`vllm_image_asset`'s URI (a deploy-time token)."""
        self.router_image_uri = router_image_uri
        """The image the router pods run: ``router_image_uri``, or the built
        :attr:`router_image_asset`'s URI (a deploy-time token)."""

        # Namespace first, then everything in it: one kubectl apply each, ordered by a dependency.
        self.namespace_manifest = eks.KubernetesManifest(
            self, "Namespace", cluster=cluster, manifest=[render_namespace(self.spec)]
        )
        """The manifest that creates the namespace, applied before :attr:`workload_manifest`."""
        self.workload_manifest = eks.KubernetesManifest(
            self, "Workload", cluster=cluster, manifest=render_workload(self.spec)
        )
        """The manifest of every namespaced object: the prefill and decode Deployments, the router with its
        internal NLB Service, and the KV store or LoRA ServiceAccount when enabled. Add a dependency on it for
        anything that needs the workload applied."""
        self.workload_manifest.node.add_dependency(self.namespace_manifest)
        self.lora_role: iam.Role | None = None
        """The role the vLLM pods copy their LoRA adapters with (None without ``lora``)."""
        if self.spec.lora is not None and self.spec.lora_service_account is not None:
            reader = LoraAdapterReader(
                self,
                "LoraReader",
                cluster=cluster,
                namespace=self.spec.namespace,
                service_account=self.spec.lora_service_account,
                lora=self.spec.lora,
                key=adapter_key,
                description=f"Reads the LoRA adapters of the {self.spec.name} prefill and decode pods",
            )
            self.lora_role = reader.role
            # The association first: the pods' credentials are injected when a pod is created.
            self.workload_manifest.node.add_dependency(reader)

        self.router_service_name = self.spec.resource_name("router")
        """The router's Service name, ``<name>-router``, in :attr:`namespace`: the Service
        behind the internal load balancer at :attr:`router_hostname`."""
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
        """The Kubernetes namespace the workload runs in (``namespace``)."""
        return self.spec.namespace


def _image_asset(scope: Construct, construct_id: str, directory: Path) -> ecr_assets.DockerImageAsset:
    """``directory``'s Dockerfile, built for the x86_64 GPU nodes by ``cdk deploy`` and pushed to the CDK
    bootstrap's container asset repository (tagged with the content hash, which that repository keeps
    immutable)."""
    return ecr_assets.DockerImageAsset(
        scope, construct_id, directory=str(directory), platform=ecr_assets.Platform.LINUX_AMD64
    )
