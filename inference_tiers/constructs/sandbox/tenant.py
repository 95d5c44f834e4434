"""One sandbox tenant: its namespace and objects (see :mod:`inference_tiers.k8s.sandbox_tenancy`) and an IAM
role for its sandboxes through EKS Pod Identity, with no permissions until you grant some."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref
from inference_tiers.constructs.sandbox.controller import AgentSandboxController
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.constructs.sandbox.isolation import SandboxIsolation
from inference_tiers.k8s.sandbox_tenancy import (
    SANDBOX_SERVICE_ACCOUNT,
    TenancySpec,
    TenantSpec,
    namespace,
    tenant_manifests,
)
from inference_tiers.validation import Args


class SandboxTenant(Construct):
    """A tenant namespace with quota, limits, default-deny networking, a sandbox template and a warm pool.

    Its isolation is enforced by the cluster's ``SandboxIsolation``, which it requires.

    Attributes: ``spec`` (``TenantSpec``), ``namespace`` (its name), ``role`` (the sandboxes' ``iam.Role``: grant
    it what the tenant's sandboxes may call), ``namespace_manifest``, ``manifest`` (everything in it).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        controller: AgentSandboxController,
        isolation: SandboxIsolation,
        tenancy: TenancySpec,
        name: str,
        max_sandboxes: int = 10,
        cpu_millicores: int = 1000,
        memory_mib: int = 2048,
        scratch_mib: int = 4096,
        warm_pool: int = 0,
        egress: Sequence[str] = (),
        image: str | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider and the Pod Identity agent).
        :param controller: the agent-sandbox controller whose CRDs the template and pool need.
        :param isolation: the cluster's ``SandboxIsolation`` (enforced NetworkPolicies, the admission policy):
            without it the tenant's default-deny policies would be enforced by nothing.
        :param tenancy: what all tenants share (runtime class and its overhead, model gateway, image).
        :param name: tenant name; the namespace is ``sandbox-<name>``.
        :param max_sandboxes: sandboxes at once, warm ones included. Default: 10.
        :param cpu_millicores: CPU of one sandbox. Default: 1000.
        :param memory_mib: memory of one sandbox. Default: 2048.
        :param scratch_mib: size of each scratch emptyDir. Default: 4096.
        :param warm_pool: started, unclaimed sandboxes kept ready. Default: 0.
        :param egress: extra ``CIDR:port`` destinations. Default: none.
        :param image: the tenant's sandbox image. Default: the tenancy's.
        """
        super().__init__(scope, construct_id)
        args = Args("SandboxTenant")
        args.implements("cluster", cluster, eks.ICluster)
        args.instance("controller", controller, AgentSandboxController, "an AgentSandboxController construct")
        args.instance("tenancy", tenancy, TenancySpec)
        args.instance(
            "isolation",
            isolation,
            SandboxIsolation,
            "a SandboxIsolation construct (it enforces the NetworkPolicies and installs the admission policy)",
        )
        if isolation.cluster is not cluster:
            raise args.error("isolation", isolation, "a SandboxIsolation of the cluster given as cluster")
        if tenancy.runtime_class_name != isolation.runtime_class_name:
            raise args.error(
                "tenancy",
                tenancy,
                f"runtime_class_name {isolation.runtime_class_name!r}, the class the isolation's admission "
                "policy requires",
            )
        self.spec = TenantSpec(
            name=name,
            max_sandboxes=max_sandboxes,
            cpu_millicores=cpu_millicores,
            memory_mib=memory_mib,
            scratch_mib=scratch_mib,
            warm_pool=warm_pool,
            egress=egress,
            image=image,
            owner=args.owner,
        )
        """The checked :class:`~inference_tiers.k8s.sandbox_tenancy.TenantSpec` the tenant's manifests are
        rendered from."""
        self.namespace = self.spec.namespace
        """The tenant's namespace name, ``sandbox-<name>``."""
        other = isolation.tenant_namespaces.setdefault(self.namespace, self.node.path)
        if other != self.node.path:
            raise args.error(
                "name",
                name,
                f"a tenant name no other SandboxTenant of this cluster has ({other} has {name!r})",
            )
        ref = as_cluster_ref(cluster)
        self.namespace_manifest = eks.KubernetesManifest(
            self, "Namespace", cluster=ref, manifest=[namespace(self.spec)]
        )
        """The ``KubernetesManifest`` of the tenant namespace (Pod Security ``restricted`` enforced)."""
        self.manifest = eks.KubernetesManifest(
            self, "Objects", cluster=ref, manifest=tenant_manifests(self.spec, tenancy)
        )
        """The ``KubernetesManifest`` of everything in the namespace: quota, limit range, NetworkPolicies,
        service account, sandbox template and warm pool."""
        self.manifest.node.add_dependency(self.namespace_manifest)
        self.manifest.node.add_dependency(controller.chart)
        # The first sandbox must meet the admission policy and enforced NetworkPolicies.
        self.manifest.node.add_dependency(isolation.admission_policy, isolation.vpc_cni)
        self.identity = PodIdentityRole(
            self,
            "Identity",
            cluster=ref,
            namespace=self.namespace,
            service_account=SANDBOX_SERVICE_ACCOUNT,
            description=f"Sandboxes of tenant {self.spec.name}: no permissions unless granted",
        )
        """The :class:`PodIdentityRole` of the sandboxes' service account (``sandbox`` in
        :attr:`namespace`)."""
        self.role = self.identity.role
        """The sandboxes' role (``identity.role``), with no permissions: grant it what the tenant's sandboxes
        may call."""
        # The association must exist before the first sandbox pod, or that pod starts without credentials.
        self.manifest.node.add_dependency(self.identity.association)
