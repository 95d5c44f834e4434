"""A GPU-ready Amazon EKS cluster on ``aws_eks_v2``: managed node groups (not Auto Mode), Kubernetes 1.35.

What it creates, and why each default is what it is:

- ``aws_eks_v2.Cluster`` with ``default_capacity_type=NODEGROUP`` and no default capacity: ``aws_eks_v2``
  defaults to EKS Auto Mode, which cannot attach ``efa-only`` interfaces through a custom launch template.
- A kubectl/Helm provider (Lambda with the ``KubectlV35Layer``, matching Kubernetes 1.35): ``add_helm_chart`` and
  ``add_manifest`` do nothing useful without it. With a private endpoint it runs in the VPC's private subnets.
- API authentication mode (access entries only); admin access for the principals you name. The cluster creator
  (the CloudFormation execution role) gets no standing admin entry.
- Private API endpoint by default: reach it from the VPC, a VPN or a bastion. ``public_endpoint_cidrs`` opens a
  public endpoint to named networks only.
- All five control-plane log types, and envelope encryption of Kubernetes secrets with a customer-managed,
  rotated, retained KMS key.
- EKS-managed add-ons with pinned versions: vpc-cni (>= 1.18.5 is needed for ``efa-only`` interfaces),
  kube-proxy, coredns, eks-pod-identity-agent (workload IAM goes through EKS Pod Identity, not node roles).
- A small on-demand AL2023 x86 system node group (untainted, label ``inference-tiers/node-pool=system``) for
  cluster services such as coredns, routers and controllers, with IMDSv2 required at hop limit 1 and an
  encrypted root volume.
- A VPC (two AZs, private subnets behind NAT, flow logs) when none is passed in.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from aws_cdk import Annotations, Aws, CfnElement, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct, IConstruct

from inference_tiers.config import Parser, ipv4_cidr, items, optional, setting, text
from inference_tiers.constructs.common.encryption import allow_log_encryption, retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.k8s.inference_gateway import LABEL_KEY, LABEL_VALUE
from inference_tiers.validation import Args, is_token

T = TypeVar("T")

KUBERNETES_VERSION = "1.35"
"""The Kubernetes version of every cluster this construct creates; the kubectl layer must match it."""

_ADDON_VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+")
# Access entries take IAM role or user ARNs (not STS assumed-role session ARNs).
PRINCIPAL_ARN_PATTERN = r"arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+"
_INSTANCE_TYPE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9-]+")
_VPC_CNI_MINIMUM = (1, 18, 5)

MIN_PUBLIC_ENDPOINT_PREFIX = 8
"""The widest network a public API endpoint may admit: /0 is the internet, and nothing wider than a /8 (one
organisation's largest allocation) names "your networks"."""
PUBLIC_CIDR_DESCRIPTION = (
    f"an IPv4 CIDR block from /{MIN_PUBLIC_ENDPOINT_PREFIX} to /32 naming your own networks, such as "
    "203.0.113.0/24 (0.0.0.0/0 and anything wider than /8 would open the Kubernetes API to the internet)"
)
PUBLIC_ENDPOINT_CIDRS: Parser = items(
    ipv4_cidr(MIN_PUBLIC_ENDPOINT_PREFIX, 32, description=PUBLIC_CIDR_DESCRIPTION), max_items=40
)
"""The ``<tier>.public_endpoint_cidrs`` context key of every EKS tier: the rule EksCluster applies, at parse time."""


def admin_principal_arn_setting() -> Any:
    """The ``<tier>.admin_principal_arn`` setting of every EKS tier's settings class (a dataclass field)."""
    return setting(
        optional(text(PRINCIPAL_ARN_PATTERN, description="an IAM role or user ARN")),
        "IAM role/user ARN given cluster-admin access to the EKS cluster; null: none",
    )


def public_endpoint_cidrs_setting() -> Any:
    """The ``<tier>.public_endpoint_cidrs`` setting of every EKS tier's settings class (a dataclass field)."""
    return setting(
        PUBLIC_ENDPOINT_CIDRS,
        "CIDRs allowed to reach a public EKS API endpoint (kubectl from outside the VPC); empty: private "
        "endpoint only",
    )


@dataclass(frozen=True)
class AddonVersions:
    """EKS-managed add-on versions (``aws eks describe-addon-versions --kubernetes-version 1.35``).

    :param vpc_cni: the ``vpc-cni`` build, e.g. ``v1.20.4-eksbuild.1``.
    :param kube_proxy: the ``kube-proxy`` build.
    :param coredns: the ``coredns`` build.
    :param pod_identity_agent: the ``eks-pod-identity-agent`` build.
    """

    vpc_cni: str
    """The ``vpc-cni`` add-on build, such as ``v1.21.1-eksbuild.3``: v1.18.5 or later, the first release that
    handles ``efa-only`` interfaces."""
    kube_proxy: str
    """The ``kube-proxy`` add-on build, such as ``v1.35.0-eksbuild.2``."""
    coredns: str
    """The ``coredns`` add-on build, such as ``v1.13.2-eksbuild.1``."""
    pod_identity_agent: str
    """The ``eks-pod-identity-agent`` add-on build, such as ``v1.3.10-eksbuild.3``."""

    def by_name(self) -> dict[str, str]:
        """EKS add-on name to version, as the cluster installs them (and preflight checks them)."""
        return {
            "vpc-cni": self.vpc_cni,
            "kube-proxy": self.kube_proxy,
            "coredns": self.coredns,
            "eks-pod-identity-agent": self.pod_identity_agent,
        }

    def __post_init__(self) -> None:
        args = Args("AddonVersions")
        for name, value in vars(self).items():
            args.text(
                name,
                value,
                pattern=_ADDON_VERSION.pattern,
                description="an EKS add-on version like v1.21.1-eksbuild.3 (aws eks describe-addon-versions)",
                allow_token=False,
            )
        major, minor, patch = (int(part) for part in self.vpc_cni[1:].split("-")[0].split("."))
        if (major, minor, patch) < _VPC_CNI_MINIMUM:
            raise args.error(
                "vpc_cni",
                self.vpc_cni,
                "v1.18.5 or later (earlier VPC CNI releases cannot handle efa-only network interfaces)",
            )


# Pinned so that a redeploy never upgrades cluster networking silently. These are the add-on builds published
# for Kubernetes 1.35 (vpc-cni >= 1.18.5 supports efa-only interfaces); bump them together with the version.
DEFAULT_ADDON_VERSIONS = AddonVersions(
    vpc_cni="v1.21.1-eksbuild.3",
    kube_proxy="v1.35.0-eksbuild.2",
    coredns="v1.13.2-eksbuild.1",
    pod_identity_agent="v1.3.10-eksbuild.3",
)


ALL_CONTROL_PLANE_LOGS = (
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
)

DEFAULT_SYSTEM_NODE_INSTANCE_TYPE = "m7i.xlarge"
DEFAULT_SYSTEM_NODE_COUNT = 2
"""The system node group a cluster gets by default (a tier's account requirements list it)."""

SYSTEM_NODE_LABEL = "inference-tiers/node-pool"
"""Node label whose value is ``system`` on the system node group; select it for cluster services."""


def _check_cidr(args: Args, name: str, value: object) -> str:
    """A public-endpoint CIDR: an IPv4 network no wider than /8 (a deploy-time token passes unparsed)."""
    cidr = args.text(name, value, description=PUBLIC_CIDR_DESCRIPTION)
    if is_token(cidr):
        return cidr
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        raise args.error(name, cidr, PUBLIC_CIDR_DESCRIPTION) from None
    if network.prefixlen < MIN_PUBLIC_ENDPOINT_PREFIX:
        raise args.error(name, cidr, PUBLIC_CIDR_DESCRIPTION)
    return cidr


def _instance_type(args: Args, name: str, value: object) -> str:
    accepted = "an x86_64 instance type such as m7i.xlarge (the system node group runs the AL2023 x86_64 AMI)"
    checked = args.text(name, value, pattern=_INSTANCE_TYPE.pattern, description=accepted, allow_token=False)
    if ec2.InstanceType(checked).architecture != ec2.InstanceArchitecture.X86_64:
        raise args.error(name, checked, accepted)
    return checked


def _log_key(scope: Construct) -> kms.Key:
    key = retained_key(
        scope, "LogKey", "Encrypts the log groups of the inference EKS cluster's kubectl provider and VPC"
    )
    # The provider functions' log groups are named /aws/lambda/<generated function name>.
    allow_log_encryption(key, scope, "/aws/lambda/*")
    return key


def create_node_role(scope: Construct, construct_id: str) -> iam.Role:
    """An EC2 node role with the three AWS-managed policies every EKS managed node group needs."""
    role = iam.Role(scope, construct_id, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    for name in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"):
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(name))
    acknowledge(
        role,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSWorkerNodePolicy]",
        "EKS requires AmazonEKSWorkerNodePolicy on managed node group roles to register and run nodes",
    )
    acknowledge(
        role,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKS_CNI_Policy]",
        "the VPC CNI on the nodes needs AmazonEKS_CNI_Policy to attach ENIs and assign pod IP addresses",
    )
    acknowledge(
        role,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly]",
        "nodes pull the EKS add-on and device-plugin images from ECR with this read-only managed policy",
    )
    return role


# /18 private subnets: the VPC CNI gives every pod a VPC address, and p5 nodes with warm ENIs take hundreds.
EKS_PRIVATE_CIDR_MASK = 18
# One NAT gateway per AZ: the system node group spans both AZs and must keep pulling images if one AZ fails.
EKS_NAT_GATEWAYS = 2


class EksCluster(Construct):
    """A GPU-ready EKS 1.35 cluster with managed node groups, pinned add-ons and a kubectl/Helm provider.

    Attributes: ``cluster`` (``aws_eks_v2.Cluster``), ``vpc``, ``secrets_key``, ``node_role`` (shared by the
    system node group; reuse it for other node groups), ``system_nodegroup``, ``addons`` (add-on name to
    ``eks.Addon``), ``kubectl_provider`` and ``kubectl_role`` (the provider Lambda's role, which has a
    cluster-admin access entry), ``cluster_name``, ``cluster_security_group_id``, ``kubernetes_version``,
    ``kubeconfig_command``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc | None = None,
        control_plane_subnets: ec2.SubnetSelection | None = None,
        system_node_subnets: ec2.SubnetSelection | None = None,
        public_endpoint_cidrs: Sequence[str] = (),
        admin_principal_arns: Sequence[str] = (),
        secrets_key: kms.IKey | None = None,
        log_key: kms.IKey | None = None,
        control_plane_logs: Sequence[eks.ClusterLoggingTypes] = ALL_CONTROL_PLANE_LOGS,
        addon_versions: AddonVersions = DEFAULT_ADDON_VERSIONS,
        system_node_instance_type: str = DEFAULT_SYSTEM_NODE_INSTANCE_TYPE,
        system_node_count: int = DEFAULT_SYSTEM_NODE_COUNT,
        system_node_labels: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param vpc: the VPC. Default: a new two-AZ VPC with private subnets behind NAT and flow logs.
        :param control_plane_subnets: where the control-plane ENIs (and a private kubectl provider) go; at least
            two AZs. Default: the VPC's private subnets with egress.
        :param system_node_subnets: subnets of the system node group. Default: the VPC's private subnets.
        :param public_endpoint_cidrs: IPv4 CIDRs (/8 to /32, at most 40) allowed to reach a public API server
            endpoint, in addition to the private endpoint; 0.0.0.0/0 is refused. Default: none, so the endpoint
            is private only (reach it from the VPC, a VPN or a bastion).
        :param admin_principal_arns: IAM role/user ARNs that get the ``AmazonEKSClusterAdminPolicy`` access
            entry (cluster scope). Default: none; only the kubectl provider role is admin.
        :param secrets_key: KMS key for envelope encryption of Kubernetes secrets. Default: a new rotated key,
            retained on stack deletion.
        :param log_key: KMS key of the log groups this construct creates (the kubectl provider's, and the flow
            logs of the VPC it creates when ``vpc`` is not given). Default: a new rotated key, retained on stack
            deletion. The construct lets CloudWatch Logs of this account and Region use a key it creates; an
            imported key's policy must already allow that (``allow_log_encryption``).
        :param control_plane_logs: control-plane log types sent to CloudWatch Logs. Default: all five.
        :param addon_versions: pinned EKS add-on versions. Default: ``DEFAULT_ADDON_VERSIONS``.
        :param system_node_instance_type: x86 instance type of the system node group. Default: m7i.xlarge.
        :param system_node_count: nodes in the system node group (1-10). Default: 2 (coredns spreads over two).
        :param system_node_labels: Kubernetes labels of the system nodes beside ``inference-tiers/node-pool=system``
            (e.g. the platform tier's ``node-role=core``). Default: none.
        """
        args = Args("EksCluster")
        if vpc is not None:
            args.implements("vpc", vpc, ec2.IVpc)
        for name, selection in (
            ("control_plane_subnets", control_plane_subnets),
            ("system_node_subnets", system_node_subnets),
        ):
            if selection is not None:
                args.instance(name, selection, ec2.SubnetSelection, "an aws_ec2.SubnetSelection")
        cidrs = args.sequence(
            "public_endpoint_cidrs",
            public_endpoint_cidrs,
            lambda name, v: _check_cidr(args, name, v),
            max_items=40,
            unique=True,
        )
        admins = args.sequence(
            "admin_principal_arns",
            admin_principal_arns,
            lambda name, v: args.text(
                name,
                v,
                pattern=PRINCIPAL_ARN_PATTERN,
                description="an IAM role or user ARN such as arn:aws:iam::123456789012:role/Admin",
            ),
            unique=True,
        )
        extra_labels = args.mapping(
            "system_node_labels",
            system_node_labels or {},
            lambda n, v: args.text(n, v, pattern=LABEL_VALUE.pattern, allow_token=False),
            key_pattern=f"(?!{re.escape(SYSTEM_NODE_LABEL)}$){LABEL_KEY.pattern}",
            max_items=10,
        )
        for name, key in (("secrets_key", secrets_key), ("log_key", log_key)):
            if key is not None:
                args.implements(name, key, kms.IKey)
        log_types = args.sequence(
            "control_plane_logs",
            control_plane_logs,
            lambda name, v: args.choice(name, v, eks.ClusterLoggingTypes),
            unique=True,
        )
        args.instance("addon_versions", addon_versions, AddonVersions, "an AddonVersions")
        _instance_type(args, "system_node_instance_type", system_node_instance_type)
        args.integer("system_node_count", system_node_count, minimum=1, maximum=10, allow_token=True)
        super().__init__(scope, construct_id)

        self.kubernetes_version = KUBERNETES_VERSION
        """The cluster's Kubernetes version, ``KUBERNETES_VERSION`` (``1.35``): check add-on and chart
        versions against it."""
        self.log_key: kms.IKey = log_key or _log_key(self)
        """The KMS key of the log groups this construct creates (the kubectl provider's and, when it creates
        the VPC, the flow logs): the ``log_key`` passed in, or a new rotated key retained on stack
        deletion."""
        self.vpc: ec2.IVpc = (
            vpc
            if vpc is not None
            else create_private_vpc(
                self,
                "Vpc",
                flow_log_key=self.log_key,
                private_cidr_mask=EKS_PRIVATE_CIDR_MASK,
                nat_gateways=EKS_NAT_GATEWAYS,
            )
        )
        """The cluster's VPC: the ``vpc`` passed in, or the new two-AZ VPC with private subnets behind NAT and
        flow logs. Put further node groups and load balancers in its private subnets."""
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)

        self.secrets_key: kms.IKey = secrets_key or retained_key(
            self, "SecretsKey", "Envelope encryption of Kubernetes secrets in the inference EKS cluster"
        )
        """The KMS key that envelope-encrypts Kubernetes secrets: the ``secrets_key`` passed in, or a new
        rotated key retained on stack deletion."""

        self.cluster = eks.Cluster(
            self,
            "Cluster",
            version=eks.KubernetesVersion.of(KUBERNETES_VERSION),
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            vpc=self.vpc,
            vpc_subnets=[control_plane_subnets or private],
            endpoint_access=(
                eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*cidrs)
                if cidrs
                else eks.EndpointAccess.PRIVATE
            ),
            cluster_logging=list(log_types),
            secrets_encryption_key=self.secrets_key,
            # The CloudFormation execution role needs no standing admin access; the kubectl provider role and
            # admin_principal_arns get explicit access entries instead.
            bootstrap_cluster_creator_admin_permissions=False,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=KubectlV35Layer(self, "KubectlLayer"),
            ),
        )
        """The ``aws_eks_v2.Cluster``, with its kubectl provider: pass it to node groups, Helm charts and
        manifests (the other constructs of this package take it as ``cluster``)."""
        self.cluster_name = self.cluster.cluster_name
        """The EKS cluster's name (a deploy-time token), for add-ons, policies and commands that name the
        cluster."""
        self.kubeconfig_command = (
            f"aws eks update-kubeconfig --region {Aws.REGION} --name {self.cluster_name}"
        )
        """The command that points kubectl at this cluster (a deploy-time string, e.g. for a stack output)."""
        self.cluster_security_group_id = self.cluster.cluster_security_group_id
        """The id of the cluster security group EKS creates (a deploy-time token), which the control-plane
        interfaces and the managed nodes carry; put it on other resources that must reach the cluster, such as
        EFA interfaces or HyperPod nodes."""
        provider = self.cluster.kubectl_provider
        assert provider is not None  # kubectl_provider_options is always passed above
        self.kubectl_provider: eks.IKubectlProvider = provider
        """The kubectl/Helm provider (a Lambda with the ``KubectlV35Layer``) that applies this cluster's
        manifests and Helm charts."""
        self.kubectl_role: iam.IRole | None = getattr(provider, "role", None)
        """The execution role of the kubectl provider's handler, which has a cluster-admin access entry: the
        role to grant further permissions to when a chart or manifest source needs them. Typed optional
        because ``IKubectlProvider.role`` is; the provider this construct creates always has one."""
        self._encrypt_provider_logs()
        for index, arn in enumerate(admins):
            self.cluster.grant_cluster_admin(f"Admin{index}", arn)
        if not admins:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:eksNoAdminPrincipal",
                "no admin_principal_arns: only the kubectl provider can use the Kubernetes API of this cluster; "
                "pass your operator role's ARN to run kubectl",
            )

        self.addons = self._add_addons(addon_versions)
        """The EKS-managed add-ons by add-on name (``vpc-cni``, ``kube-proxy``, ``coredns``,
        ``eks-pod-identity-agent``): make resources that need cluster networking or EKS Pod Identity depend on
        them."""

        self.node_role = create_node_role(self, "NodeRole")
        """The IAM role of the system node group, with the EKS worker, CNI and ECR read-only policies: reuse
        it for other managed node groups (such as ``EfaNodeGroup(node_role=...)``)."""
        system_template = ec2.LaunchTemplate(
            self,
            "SystemLaunchTemplate",
            require_imdsv2=True,
            # Hop limit 1: pods cannot reach the node's instance role; they get AWS credentials from Pod Identity.
            http_put_response_hop_limit=1,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        50, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3
                    ),
                )
            ],
        )
        self.system_nodegroup = eks.Nodegroup(
            self,
            "SystemNodes",
            cluster=as_cluster_ref(self.cluster),
            node_role=self.node_role,
            instance_types=[ec2.InstanceType(system_node_instance_type)],
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            capacity_type=eks.CapacityType.ON_DEMAND,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=system_template.launch_template_id or "",
                version=system_template.latest_version_number,
            ),
            subnets=system_node_subnets or private,
            min_size=system_node_count,
            desired_size=system_node_count,
            max_size=system_node_count,
            labels={**extra_labels, SYSTEM_NODE_LABEL: "system"},
            enable_node_auto_repair=True,
        )
        """The on-demand system node group (label ``inference-tiers/node-pool=system``): make charts and
        manifests whose pods run on the system nodes depend on it, so that they install once the nodes
        exist."""
        # coredns is a Deployment: without nodes the add-on would sit DEGRADED; create it once nodes exist.
        self.addons["coredns"].node.add_dependency(self.system_nodegroup)
        self._acknowledge_provider_findings()
        if cidrs:
            acknowledge(
                self.cluster,
                "AwsSolutions-EKS1",
                "the public endpoint was requested explicitly and only admits the CIDRs in public_endpoint_cidrs: "
                + ", ".join("a deploy-time value" if is_token(c) else c for c in cidrs),
            )

    def enable_network_policy(self) -> eks.CfnAddon:
        """Turn on the VPC CNI's network policy agent (``enableNetworkPolicy`` on the managed vpc-cni add-on, the
        add-on's only configuration), without which NetworkPolicies are accepted but not enforced; calling it
        again changes nothing. Returns the add-on's ``CfnAddon``: make objects that rely on enforced
        NetworkPolicies depend on it."""
        vpc_cni = self.addons["vpc-cni"].node.default_child
        assert isinstance(vpc_cni, eks.CfnAddon)
        vpc_cni.configuration_values = json.dumps({"enableNetworkPolicy": "true"})
        return vpc_cni

    def _encrypt_provider_logs(self) -> None:
        """Encrypt the log groups aws_eks_v2 gives the kubectl provider's functions (it has no option for a key).

        They exist in the template only with the ``@aws-cdk/aws-lambda:useCdkManagedLogGroup`` feature flag
        (this project's cdk.json sets it); without it Lambda creates them itself at first invocation.
        """
        for group in self.kubectl_provider.node.find_all():
            if isinstance(group, logs.CfnLogGroup):
                group.kms_key_id = self.log_key.key_arn

    def _add_addons(self, versions: AddonVersions) -> dict[str, eks.Addon]:
        addons: dict[str, eks.Addon] = {}
        pinned = versions.by_name()
        for name in ("vpc-cni", "kube-proxy", "coredns"):
            addon = eks.Addon(
                self,
                f"Addon-{name}",
                cluster=as_cluster_ref(self.cluster),
                addon_name=name,
                addon_version=pinned[name],
            )
            # EKS bootstraps self-managed copies of these three at cluster creation; the managed add-on
            # takes them over instead of failing on the existing DaemonSet/Deployment.
            _cfn_child(addon, eks.CfnAddon).resolve_conflicts = "OVERWRITE"
            addons[name] = addon
        # The cluster creates this add-on itself when a service account uses Pod Identity; using its getter
        # keeps one add-on, and the override pins its version.
        agent = self.cluster.eks_pod_identity_agent
        assert isinstance(agent, eks.Addon)
        _cfn_child(agent, eks.CfnAddon).addon_version = pinned["eks-pod-identity-agent"]
        addons["eks-pod-identity-agent"] = agent
        return addons

    def _acknowledge_provider_findings(self) -> None:
        """Findings on resources aws-cdk creates for the cluster; each is by design of aws_eks_v2."""
        stack = Stack.of(self)
        acknowledge(
            self.cluster.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
            "EKS requires AmazonEKSClusterPolicy on the cluster service role to manage the control plane",
        )
        provider = self.kubectl_provider
        handler = provider.node.find_child("Handler")
        handler_id = stack.get_logical_id(_cfn_child(handler, CfnElement))
        has_ecr_public = stack.get_logical_id(_cfn_child(handler.node.find_child("HasEcrPublic"), CfnElement))
        ecr_public_policy = (
            '{"Fn::If":["' + has_ecr_public + '",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
            '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}'
        )
        managed_policy_reasons = {
            "service-role/AWSLambdaBasicExecutionRole": (
                "the aws-cdk kubectl provider Lambdas use the basic execution role only to write their logs"
            ),
            "service-role/AWSLambdaVPCAccessExecutionRole": (
                "the kubectl provider runs in the private subnets to reach the private endpoint and needs ENIs"
            ),
            "AmazonEC2ContainerRegistryReadOnly": (
                "the kubectl provider pulls Helm charts stored as OCI artifacts in ECR with read-only access"
            ),
        }
        for policy, reason in managed_policy_reasons.items():
            acknowledge(
                provider, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]", reason
            )
        acknowledge(
            provider,
            f"AwsSolutions-IAM4[Policy::{ecr_public_policy}]",
            "in the aws partition the kubectl provider pulls public OCI Helm charts with ECR Public read-only access",
        )
        acknowledge(
            provider,
            f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
            "the provider framework may invoke any version of its own kubectl handler function, and only that one",
        )
        acknowledge(
            handler,
            "AwsSolutions-L1",
            "aws_eks_v2 chooses the kubectl handler runtime itself (python3.13 in aws-cdk-lib 2.275) with no override",
        )


def kubectl_cluster(args: Args, param: str, value: object) -> eks.ICluster:
    """An ``ICluster`` (a construct, not a name or ARN) with a kubectl provider, which manifests and charts need."""
    cluster = cast(eks.ICluster, args.implements(param, value, eks.ICluster))
    if cluster.kubectl_provider is None:
        raise args.error(
            param,
            cluster,
            "a cluster created with kubectl_provider_options (a kubectl layer such as KubectlV35Layer), "
            "such as EksCluster(...).cluster",
        )
    return cluster


def as_cluster_ref(cluster: eks.Cluster) -> eks.ICluster:
    """``cluster`` typed as ``ICluster``: jsii's generated protocol wrongly lists ``kubectl_provider_options``."""
    return cast(eks.ICluster, cluster)


def _cfn_child(construct: IConstruct, kind: type[T]) -> T:
    child = construct if isinstance(construct, kind) else construct.node.default_child
    assert isinstance(child, kind), f"{construct.node.path} has no {kind.__name__}"
    return child
