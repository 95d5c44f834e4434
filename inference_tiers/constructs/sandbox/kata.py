"""Kata sandbox capacity: Karpenter EC2NodeClass + NodePool, the kata-deploy chart, the Kata RuntimeClass.

What each manifest says and why is in :mod:`inference_tiers.k8s.sandbox_nodes`, which renders them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref
from inference_tiers.constructs.sandbox.karpenter import Karpenter
from inference_tiers.k8s.sandbox_nodes import (
    KATA_CHART,
    KATA_NAMESPACE,
    KATA_VERSION,
    KataShim,
    NodeMode,
    SandboxNodesSpec,
    ec2_node_class,
    kata_deploy_values,
    node_pool,
    runtime_class,
)
from inference_tiers.validation import Args


class KataSandboxNodes(Construct):
    """Sandbox nodes with ``/dev/kvm`` (nested virtualization or metal), Kata installed, tainted for sandboxes.

    Attributes: ``spec`` (``SandboxNodesSpec``), ``runtime_class_name`` (what sandbox pods set as
    ``runtimeClassName``), ``node_manifest`` (EC2NodeClass + NodePool), ``kata_chart``, ``runtime_class_manifest``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        karpenter: Karpenter,
        subnets: Sequence[ec2.ISubnet],
        node_mode: NodeMode = "nested",
        instance_families: Sequence[str] | None = None,
        kata_shim: KataShim = "qemu-runtime-rs",
        max_vcpus: int = 1000,
        max_memory_gib: int = 4000,
        consolidate_after_minutes: int = 10,
        expire_after_hours: int = 720,
        root_volume_gib: int = 200,
        ami_alias: str = "al2023@latest",
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider).
        :param karpenter: the Karpenter installation that provisions the nodes (its node identity is used).
        :param subnets: private subnets for the nodes (at least one).
        :param node_mode: ``nested`` (C8i/M8i/R8i with nested virtualization) or ``metal``. Default: nested.
        :param instance_families: Karpenter instance families. Default: c8i, m8i, r8i (nested); c7i, m7i, r7i
            (metal).
        :param kata_shim: ``qemu-runtime-rs`` (Kata 4.x default) or ``clh-runtime-rs``.
        :param max_vcpus: NodePool vCPU limit. Default: 1000.
        :param max_memory_gib: NodePool memory limit. Default: 4000.
        :param consolidate_after_minutes: empty-node lifetime before removal. Default: 10.
        :param expire_after_hours: node lifetime before replacement. Default: 720 (30 days).
        :param root_volume_gib: node root volume. Default: 200.
        :param ami_alias: ``al2023@latest`` or a pinned ``al2023@vYYYYMMDD``. Default: al2023@latest.
        :param tags: EC2 tags of the nodes (the EC2NodeClass's ``tags``; a change drifts every node, which
            Karpenter then replaces). Default: none.
        """
        super().__init__(scope, construct_id)
        args = Args("KataSandboxNodes")
        args.implements("cluster", cluster, eks.ICluster)
        args.instance("karpenter", karpenter, Karpenter)
        checked_subnets = args.sequence(
            "subnets",
            subnets,
            lambda name, value: args.implements(name, value, ec2.ISubnet),
            min_items=1,
            max_items=16,
        )
        self.spec = SandboxNodesSpec(
            node_mode=node_mode,
            instance_families=instance_families,
            kata_shim=kata_shim,
            max_vcpus=max_vcpus,
            max_memory_gib=max_memory_gib,
            consolidate_after_minutes=consolidate_after_minutes,
            expire_after_hours=expire_after_hours,
            root_volume_gib=root_volume_gib,
            ami_alias=ami_alias,
            owner=args.owner,
        )
        """The checked :class:`~inference_tiers.k8s.sandbox_nodes.SandboxNodesSpec` the manifests are rendered
        from."""
        self.runtime_class_name = self.spec.runtime_class_name
        """The RuntimeClass sandbox pods set as ``runtimeClassName`` (``kata-<shim>``): pass it to
        ``SandboxIsolation`` and the tenancy."""
        node_tags = args.mapping(
            "tags", tags or {}, lambda n, v: args.text(n, v, max_length=256, allow_token=False), max_items=40
        )
        ref = as_cluster_ref(cluster)

        instance_profile = karpenter.instance_profile.ref  # Ref of an instance profile is its name
        self.node_manifest = eks.KubernetesManifest(
            self,
            "NodePool",
            cluster=ref,
            manifest=[
                ec2_node_class(
                    self.spec,
                    instance_profile=instance_profile,
                    subnet_ids=[subnet.subnet_id for subnet in checked_subnets],
                    security_group_ids=[cluster.cluster_security_group_id],
                    volume_kms_key_id=karpenter.volume_key.key_arn,
                    tags=node_tags,
                ),
                node_pool(self.spec),
            ],
        )
        """The ``KubernetesManifest`` of the EC2NodeClass and NodePool that Karpenter launches the sandbox
        nodes from."""
        # The chart installs the NodePool and EC2NodeClass CRDs; the nodes need their access entry to join.
        self.node_manifest.node.add_dependency(karpenter.chart)
        self.node_manifest.node.add_dependency(karpenter.node_access)

        self.kata_chart = eks.HelmChart(
            self,
            "KataDeploy",
            cluster=ref,
            chart=KATA_CHART,
            version=KATA_VERSION,
            release="kata-deploy",
            namespace=KATA_NAMESPACE,
            values=kata_deploy_values(self.spec),
            # A DaemonSet on sandbox nodes only: ready with zero pods until Karpenter launches the first node.
            wait=True,
            timeout=Duration.minutes(10),
        )
        """The kata-deploy ``HelmChart`` (in ``kube-system``) that installs Kata on the sandbox nodes."""
        self.runtime_class_manifest = eks.KubernetesManifest(
            self, "RuntimeClass", cluster=ref, manifest=[runtime_class(self.spec)]
        )
        """The ``KubernetesManifest`` of the Kata RuntimeClass named :attr:`runtime_class_name`."""
