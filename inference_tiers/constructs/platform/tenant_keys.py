"""A LiteLLM team and virtual key per platform tenant, delivered as a Secret in the tenant's namespace (see
:mod:`inference_tiers.k8s.tenant_keys`). The proxy pods' NetworkPolicy is ``PlatformGateway``'s."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref
from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.k8s.sandbox_tenancy import TenantSpec
from inference_tiers.k8s.tenant_keys import (
    TenantModelAccess,
    provisioner_objects,
    tenant_key_objects,
)
from inference_tiers.litellm.config import LITELLM_IMAGE
from inference_tiers.validation import Args


class TenantModelKeys(Construct):
    """Gives each tenant a LiteLLM team (models, budget, rate limits) and a key in Secret ``litellm-key``.

    A Job in the gateway's namespace calls LiteLLM's management API with the master key (by secretKeyRef) and
    writes each key into its tenant's namespace, where a Role lets it touch only that Secret. The Job's name
    hashes its spec: a changed setting runs it again; working keys are kept; a removed tenant's team is blocked.

    Make ``provisioner`` depend on the gateway's chart (the Job waits up to 8 minutes for the proxy to be ready)
    and each of ``tenant_manifests`` on its tenant's namespace.

    Attributes: ``tenants`` (the checked pairs), ``tenant_manifests`` (namespace to ``KubernetesManifest``: the
    empty Secret, the Role and its binding), ``provisioner`` (``KubernetesManifest``: ServiceAccount, ConfigMap,
    Job, its NetworkPolicy).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        gateway: GatewayEndpoint,
        tenants: Sequence[tuple[TenantSpec, TenantModelAccess]],
        image: str = LITELLM_IMAGE,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider); its VPC is where Aurora, Valkey and the VPC
            endpoints the proxy calls are.
        :param gateway: the platform's LiteLLM gateway (namespace, Service, pod labels, master key Secret).
        :param tenants: each tenant with its model access; at least one, each namespace once.
        :param image: the provisioner's image (it needs ``python3``). Default: the pinned LiteLLM image.
        """
        super().__init__(scope, construct_id)
        args = Args("TenantModelKeys")
        args.implements("cluster", cluster, eks.ICluster)
        args.instance("gateway", gateway, GatewayEndpoint)

        def pair(name: str, value: object) -> tuple[TenantSpec, TenantModelAccess]:
            accepted = "a (TenantSpec, TenantModelAccess) pair"
            if not isinstance(value, tuple | list) or len(value) != 2:
                raise args.error(name, value, accepted)
            args.instance(f"{name}[0]", value[0], TenantSpec, accepted)
            args.instance(f"{name}[1]", value[1], TenantModelAccess, accepted)
            return value[0], value[1]

        self.tenants = args.sequence("tenants", tenants, pair, min_items=1, max_items=500)
        """The checked (TenantSpec, TenantModelAccess) pairs."""
        names = [tenant.namespace for tenant, _ in self.tenants]
        args.sequence("tenants (namespaces)", names, unique=True)
        args.text(
            "image", image, pattern=r"\S+:\S+", description="a pinned image with python3", allow_token=False
        )
        vpc_cidr = cluster.vpc.vpc_cidr_block
        ref = as_cluster_ref(cluster)
        self.tenant_manifests = {
            tenant.namespace: eks.KubernetesManifest(
                self, f"Tenant-{tenant.name}", cluster=ref, manifest=tenant_key_objects(tenant, gateway)
            )
            for tenant, _ in self.tenants
        }
        """Per tenant namespace, the ``KubernetesManifest`` of its empty key Secret, Role and RoleBinding."""
        self.provisioner = eks.KubernetesManifest(
            self,
            "Provisioner",
            cluster=ref,
            manifest=provisioner_objects(gateway, self.tenants, image=image, vpc_cidr=vpc_cidr),
        )
        """The ``KubernetesManifest`` of the provisioner: ServiceAccount, ConfigMap, Job and NetworkPolicy."""
        for manifest in self.tenant_manifests.values():
            self.provisioner.node.add_dependency(manifest)
