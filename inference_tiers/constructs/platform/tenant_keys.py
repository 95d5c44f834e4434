"""A LiteLLM team and virtual key per platform tenant, delivered as a Secret in the tenant's namespace, and the
NetworkPolicy of the gateway's proxy pods (see :mod:`inference_tiers.k8s.tenant_keys`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aws_cdk import Token
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref
from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.k8s.sandbox_tenancy import TenantSpec
from inference_tiers.k8s.tenant_keys import (
    TenantModelAccess,
    gateway_network_policies,
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
    Job, its NetworkPolicy), ``gateway_policy`` (``KubernetesManifest``: the proxy pods' NetworkPolicy).
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
        alb_cidrs: Sequence[str] | None = None,
        scraper_cidrs: Sequence[str] | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider); its VPC is where Aurora, Valkey and the VPC
            endpoints the proxy calls are.
        :param gateway: the platform's LiteLLM gateway (namespace, Service, pod labels, master key Secret).
        :param tenants: each tenant with its model access; at least one, each namespace once.
        :param image: the provisioner's image (it needs ``python3``). Default: the pinned LiteLLM image.
        :param alb_cidrs: the load balancer's subnets, allowed to the proxy port. Default: the VPC's CIDR.
        :param scraper_cidrs: the metrics scraper's subnets, allowed to the metrics port. Default: the VPC's CIDR.
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

        def cidr(name: str, value: object) -> str:
            text = args.text(name, value, description="an IPv4 CIDR such as 10.0.0.0/16")
            if not Token.is_unresolved(text):
                try:
                    ipaddress.IPv4Network(text)
                except ValueError:
                    raise args.error(name, value, "an IPv4 CIDR such as 10.0.0.0/16") from None
            return text

        albs = args.sequence("alb_cidrs", alb_cidrs or [vpc_cidr], cidr, min_items=1, max_items=16)
        scrapers = args.sequence(
            "scraper_cidrs", scraper_cidrs or [vpc_cidr], cidr, min_items=1, max_items=16
        )
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
        self.gateway_policy = eks.KubernetesManifest(
            self,
            "GatewayPolicy",
            cluster=ref,
            manifest=gateway_network_policies(
                gateway, vpc_cidr=vpc_cidr, alb_cidrs=albs, scraper_cidrs=scrapers
            ),
        )
        """The ``KubernetesManifest`` of the proxy pods' NetworkPolicy."""
