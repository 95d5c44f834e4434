"""What makes the sandbox tenants' isolation real on a cluster: enforced NetworkPolicies and the admission policy.

A tenant's default-deny NetworkPolicies are accepted by any API server and enforced only by a network policy
agent: on EKS, the VPC CNI's, which is off unless the add-on's configuration turns it on. The admission policy
(see :func:`inference_tiers.k8s.sandbox_tenancy.admission_policy`) is cluster-wide, so it is installed once per
cluster, here, and not by each tenant. ``SandboxTenant`` requires this construct.
"""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import EksCluster, as_cluster_ref
from inference_tiers.k8s.sandbox_tenancy import admission_policy
from inference_tiers.validation import Args


class SandboxIsolation(Construct):
    """Turns on, once per cluster, what every ``SandboxTenant`` relies on:

    - the VPC CNI network policy agent (``enableNetworkPolicy`` on the ``EksCluster``'s managed vpc-cni add-on),
      in standard mode: strict mode denies every pod that no policy selects, cluster-wide (CoreDNS included);
    - the ValidatingAdmissionPolicy that keeps every pod in a tenant namespace on the Kata runtime class, without
      an API token or privilege escalation, and every SandboxClaim with a shutdown time.

    Attributes: ``cluster`` (the ``aws_eks_v2.Cluster``), ``runtime_class_name``, ``vpc_cni`` (the add-on's
    ``CfnAddon``), ``admission_policy`` (``KubernetesManifest``), ``tenant_namespaces``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, eks_cluster: EksCluster, runtime_class_name: str
    ) -> None:
        """
        :param eks_cluster: the ``EksCluster`` (its managed vpc-cni add-on runs the network policy agent).
        :param runtime_class_name: the Kata RuntimeClass every tenant pod must use
            (``KataSandboxNodes.runtime_class_name``).
        """
        super().__init__(scope, construct_id)
        args = Args("SandboxIsolation")
        args.instance(
            "eks_cluster",
            eks_cluster,
            EksCluster,
            "an EksCluster construct (a cluster whose managed vpc-cni add-on this construct configures)",
        )
        self.runtime_class_name = args.text(
            "runtime_class_name",
            runtime_class_name,
            pattern=r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?",
            description="a RuntimeClass name such as kata-qemu-runtime-rs",
            allow_token=False,
        )
        """The Kata RuntimeClass the admission policy requires of every pod in a tenant namespace."""
        self.cluster = eks_cluster.cluster
        """The ``aws_eks_v2.Cluster`` of ``eks_cluster``; every ``SandboxTenant`` using this isolation must be
        on it."""
        self.vpc_cni = eks_cluster.enable_network_policy()
        """The ``CfnAddon`` of the cluster's managed vpc-cni add-on, configured with ``enableNetworkPolicy``:
        make objects that rely on enforced NetworkPolicies depend on it."""
        # "Default": the manifest's logical id stays that of the stack-level "TenantAdmissionPolicy" of earlier
        # releases when the tier's stack names this construct so; a new id would apply the policy again, then
        # delete it with the old resource.
        self.admission_policy = eks.KubernetesManifest(
            self,
            "Default",
            cluster=as_cluster_ref(self.cluster),
            manifest=admission_policy(self.runtime_class_name),
        )
        """The ``KubernetesManifest`` of the ValidatingAdmissionPolicy and its binding: make tenant objects
        depend on it, so that the first sandbox already has to meet it."""
        self.tenant_namespaces: dict[str, str] = {}
        """The namespace of every ``SandboxTenant`` using this isolation, to the tenant's construct path: a
        second tenant of the same name would apply, then on its deletion delete, the first one's namespace."""
