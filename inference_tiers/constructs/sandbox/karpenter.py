"""The Karpenter controller (pinned Helm chart) with a least-privilege IAM role through EKS Pod Identity.

The policy follows what the Karpenter v1 controller calls, narrowed to this cluster: it may launch instances
and launch templates only when it tags them with this cluster's name and a NodePool, tag and terminate only
instances and templates carrying those tags, pass only the sandbox node role to EC2, and read the regional
EC2 catalogue and instance health, the public AMI parameters and prices. The instance profile comes from the
stack, so Karpenter may create, tag or delete none: it only lists and reads profiles, which its EC2NodeClass
finalizer and instance-profile garbage collector do even then (they look for the profiles it would have made).
``tests/sandbox/test_karpenter_policy.py`` compares the policy with upstream's reference policy of the pinned
release, action by action and condition by condition.

An SQS queue (KMS CMK, TLS only) receives the EC2 and AWS Health events Karpenter acts on before an instance
goes away (scheduled maintenance, state changes, capacity-reservation interruptions, and Spot warnings and
rebalance recommendations should Spot ever be allowed): Karpenter then cordons and drains the node and launches
its replacement first.

The construct also owns the identity of the nodes it launches: their role (the three policies every EKS node
needs), the instance profile, the ``EC2_LINUX`` access entry that lets them join, and the KMS key of their root
volumes.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.eks.cluster import SYSTEM_NODE_LABEL, as_cluster_ref, create_node_role
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.k8s.sandbox_nodes import (
    KARPENTER_CHART,
    KARPENTER_MINIMUM,
    KARPENTER_NAMESPACE,
    KARPENTER_SERVICE_ACCOUNT,
    KARPENTER_VERSION,
    check_version,
    karpenter_values,
)
from inference_tiers.validation import Args

_CLUSTER_TAG = "eks:eks-cluster-name"
# The events Karpenter's interruption controller handles: the five rules of its CloudFormation reference template
# (aws/karpenter-provider-aws v1.14.1, website/content/en/docs/getting-started/getting-started-with-karpenter/
# cloudformation.yaml:410-464).
_INTERRUPTION_EVENTS = (
    ("ScheduledChange", "aws.health", "AWS Health Event"),
    ("SpotInterruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("Rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("InstanceStateChange", "aws.ec2", "EC2 Instance State-change Notification"),
    # Harmless while the NodePool is on-demand only, and needed as soon as it may use capacity reservations.
    ("CapacityReservationInterruption", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
)
_NODEPOOL_TAG = "karpenter.sh/nodepool"


class Karpenter(Construct):
    """Installs the Karpenter controller into ``kube-system`` on the core nodes, and its nodes' identity.

    Attributes: ``chart`` (``HelmChart``; make NodePools and EC2NodeClasses depend on it: the chart installs
    their CRDs), ``identity`` (``PodIdentityRole``), ``role`` (the controller's ``iam.Role``), ``node_role``,
    ``instance_profile`` (``CfnInstanceProfile``; its name goes into EC2NodeClasses), ``node_access``
    (``AccessEntry``), ``volume_key`` (``kms.Key``), ``interruption_queue`` (``sqs.Queue``),
    ``interruption_rules`` (``events.Rule`` by event kind), ``version``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        version: str = KARPENTER_VERSION,
        node_selector: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider and the Pod Identity agent).
        :param version: Karpenter chart and controller release, 1.13.0 or later. Default: 1.14.1.
        :param node_selector: where the controller runs. Default: the core nodes
            (``inference-tiers/node-pool=system``).
        """
        super().__init__(scope, construct_id)
        args = Args("Karpenter")
        args.implements("cluster", cluster, eks.ICluster)
        self.version = check_version(args, "version", version, KARPENTER_MINIMUM)
        """The Karpenter chart and controller release installed (``X.Y.Z``)."""
        selector = args.mapping(
            "node_selector",
            {SYSTEM_NODE_LABEL: "system"} if node_selector is None else node_selector,
            lambda name, value: args.text(name, value, max_length=63, allow_token=False),
            key_pattern=r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9._-]{1,63}",
        )

        self.node_role = create_node_role(self, "NodeRole")
        """The role of the nodes Karpenter launches (the three AWS-managed policies every EKS node needs): the
        only role the controller may pass to EC2."""
        self.instance_profile = iam.CfnInstanceProfile(
            self, "InstanceProfile", roles=[self.node_role.role_name]
        )
        """The ``CfnInstanceProfile`` holding :attr:`node_role`; its name (``ref``) goes into
        EC2NodeClasses."""
        self.node_access = eks.AccessEntry(
            self,
            "NodeAccess",
            cluster=as_cluster_ref(cluster),
            principal=self.node_role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )
        """The ``EC2_LINUX`` access entry that lets nodes with :attr:`node_role` join the cluster: make
        NodePools depend on it."""
        self.volume_key = retained_key(
            self, "VolumeKey", "Root volumes of the Karpenter-launched sandbox nodes"
        )
        """The retained KMS key of the nodes' root volumes: EC2NodeClasses name its ARN, and the controller
        may use it only through EC2."""

        queue, rules = self._interruption_queue()
        self.interruption_queue = queue
        """The KMS-encrypted SQS queue Karpenter reads interruption events from (5-minute retention); the
        controller may consume its messages."""
        self.interruption_rules = rules
        """The EventBridge rules that send interruption events to :attr:`interruption_queue`, by name:
        ``ScheduledChange``, ``SpotInterruption``, ``Rebalance``, ``InstanceStateChange`` and
        ``CapacityReservationInterruption``."""

        self.identity = PodIdentityRole(
            self,
            "Identity",
            cluster=as_cluster_ref(cluster),
            namespace=KARPENTER_NAMESPACE,
            service_account=KARPENTER_SERVICE_ACCOUNT,
            description="Karpenter controller: launches and terminates the agent-sandbox Kata nodes",
        )
        """The :class:`PodIdentityRole` of the controller's service account (``kube-system/karpenter``)."""
        self.role = self.identity.role
        """The controller's role (``identity.role``), holding the least-privilege Karpenter policy and the
        right to consume the interruption queue."""
        for statement in _controller_statements(cluster, self.node_role, self.volume_key):
            self.role.add_to_policy(statement)
        self.interruption_queue.grant_consume_messages(self.role)
        self._acknowledge_wildcards()

        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=as_cluster_ref(cluster),
            chart=KARPENTER_CHART,
            version=self.version,
            release="karpenter",
            namespace=KARPENTER_NAMESPACE,
            values=karpenter_values(
                cluster_name=cluster.cluster_name,
                node_selector=selector,
                interruption_queue=self.interruption_queue.queue_name,
                version=self.version,
            ),
            wait=True,
            timeout=Duration.minutes(10),
        )
        """The Karpenter ``HelmChart`` (in ``kube-system``): make NodePools and EC2NodeClasses depend on it,
        since it installs their CRDs."""
        # The controller's credentials come from the association; without the agent it crash-loops.
        self.chart.node.add_dependency(self.identity.association)
        self.chart.node.add_dependency(cluster.eks_pod_identity_agent)

    def _interruption_queue(self) -> tuple[sqs.Queue, dict[str, events.Rule]]:
        key = retained_key(
            self, "InterruptionKey", "Karpenter interruption queue of the agent-sandbox cluster"
        )
        queue = sqs.Queue(
            self,
            "InterruptionQueue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            # An event is worth acting on for minutes only (Karpenter's own template keeps them 300 s).
            retention_period=Duration.minutes(5),
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "Karpenter deletes every interruption event it reads; an event it cannot act on within 5 minutes is "
            "about an instance that is already gone, so a dead-letter queue would only collect stale events",
        )
        rules = {}
        for name, source, detail_type in _INTERRUPTION_EVENTS:
            rule = events.Rule(
                self,
                f"{name}Rule",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type]),
            )
            # The target lets events.amazonaws.com of this account send to the queue and use its key
            # (aws-cdk-lib 2.275.0 aws-events-targets/lib/sqs.js, SqsQueue.bind: queue.grantSendMessages).
            rule.add_target(targets.SqsQueue(queue))
            rules[name] = rule
        return queue, rules

    def _acknowledge_wildcards(self) -> None:
        reasons = {
            "Resource::*": (
                "EC2 Describe*, iam:ListInstanceProfiles and pricing:GetProducts support no resource-level "
                "permissions; the Describe statement is limited to this stack's Region"
            ),
            "Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*": (
                "read-only GetInstanceProfile: the EC2NodeClass finalizer looks up profiles by names it derives, "
                "which are not this stack's; it may create, change or delete none"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:*/*": (
                "RunInstances/CreateFleet/CreateLaunchTemplate/CreateTags create instances, volumes, network "
                "interfaces, fleets and launch templates whose ARNs do not exist yet, allowed only with request "
                "tags naming this cluster and a NodePool; TerminateInstances/DeleteLaunchTemplate/CreateTags "
                "on existing ones only when they carry those tags"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:launch-template/*": (
                "launch with the launch templates Karpenter made, only those tagged with this cluster and a NodePool"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::image/*": (
                "any public or shared AMI in the Region: Karpenter resolves the AL2023 EKS AMI from its alias"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:subnet/*": (
                "launch into subnets of this account in this Region; the EC2NodeClass names the private ones"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:security-group/*": (
                "launch with security groups of this account; the EC2NodeClass names the cluster security group"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:snapshot/*": (
                "the AMI's root snapshot is owned by the AMI publisher's account"
            ),
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:capacity-reservation/*": (
                "Karpenter may launch into this account's open capacity reservations in this Region"
            ),
            "Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*": (
                "the public SSM parameters that publish EKS AMI ids (amiSelectorTerms alias al2023@...)"
            ),
            "Action::kms:ReEncrypt*": (
                "EC2 re-encrypts the AMI snapshot into the node volume key when it creates the root volume"
            ),
            "Action::kms:GenerateDataKey*": (
                "EC2 generates the node volumes' data keys; allowed only through EC2 (kms:ViaService)"
            ),
        }
        for finding, reason in reasons.items():
            acknowledge(self.role, f"AwsSolutions-IAM5[{finding}]", reason)


def _controller_statements(
    cluster: eks.Cluster, node_role: iam.IRole, volume_key: kms.IKey
) -> list[iam.PolicyStatement]:
    partition, region, account = Aws.PARTITION, Aws.REGION, Aws.ACCOUNT_ID
    ec2 = f"arn:{partition}:ec2:{region}"
    name = cluster.cluster_name
    tagged_request = {
        "StringEquals": {f"aws:RequestTag/{_CLUSTER_TAG}": name},
        "StringLike": {f"aws:RequestTag/{_NODEPOOL_TAG}": "*"},
    }
    tagged_resource = {
        "StringEquals": {f"aws:ResourceTag/{_CLUSTER_TAG}": name},
        "StringLike": {f"aws:ResourceTag/{_NODEPOOL_TAG}": "*"},
    }
    launch = ["ec2:RunInstances", "ec2:CreateFleet"]
    return [
        iam.PolicyStatement(
            sid="LaunchFromImagesSubnetsAndSecurityGroups",
            actions=launch,
            resources=[
                f"{ec2}::image/*",
                f"{ec2}:*:snapshot/*",
                f"{ec2}:{account}:subnet/*",
                f"{ec2}:{account}:security-group/*",
                f"{ec2}:{account}:capacity-reservation/*",
            ],
        ),
        iam.PolicyStatement(
            sid="LaunchWithOwnLaunchTemplates",
            actions=launch,
            resources=[f"{ec2}:{account}:launch-template/*"],
            conditions=tagged_resource,
        ),
        iam.PolicyStatement(
            sid="CreateTaggedInstances",
            actions=[*launch, "ec2:CreateLaunchTemplate"],
            resources=[f"{ec2}:{account}:*/*"],
            conditions=tagged_request,
        ),
        iam.PolicyStatement(
            sid="TagOnCreate",
            actions=["ec2:CreateTags"],
            resources=[f"{ec2}:{account}:*/*"],
            conditions={
                **tagged_request,
                "StringEquals": {
                    **tagged_request["StringEquals"],
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
            },
        ),
        iam.PolicyStatement(
            sid="TagOwnInstances",
            actions=["ec2:CreateTags"],
            resources=[f"{ec2}:{account}:*/*"],
            conditions={
                **tagged_resource,
                # As upstream: the registration tags may not move the instance to another cluster.
                "StringEqualsIfExists": {f"aws:RequestTag/{_CLUSTER_TAG}": name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": [_CLUSTER_TAG, "karpenter.sh/nodeclaim", "Name"]
                },
            },
        ),
        iam.PolicyStatement(
            sid="DeleteOwnInstancesAndTemplates",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=[f"{ec2}:{account}:*/*"],
            conditions=tagged_resource,
        ),
        iam.PolicyStatement(
            sid="ReadRegionalCatalogue",
            actions=[
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                # The instance-status controller's health and scheduled-event polling (v1.14.1
                # pkg/controllers/interruption/instancestatus_controller.go:95-100 turns itself off without it).
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": region}},
        ),
        iam.PolicyStatement(
            sid="ReadAmiParameters",
            actions=["ssm:GetParameter"],
            resources=[f"arn:{partition}:ssm:{region}::parameter/aws/service/*"],
        ),
        iam.PolicyStatement(sid="ReadPrices", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="PassNodeRole",
            actions=["iam:PassRole"],
            resources=[node_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="DescribeCluster", actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn]
        ),
        # Karpenter v1.14.1 reads the profile the EC2NodeClass names, and on deletion its finalizer lists the
        # profiles it would have made and looks up the legacy one by name (pkg/controllers/nodeclass/
        # controller.go:175-211, pkg/providers/instanceprofile/instanceprofile.go:188-230); a denied call there
        # keeps the finalizer, so the EC2NodeClass is never deleted. Upstream's reference policy grants both.
        iam.PolicyStatement(
            sid="ListInstanceProfiles", actions=["iam:ListInstanceProfiles"], resources=["*"]
        ),
        iam.PolicyStatement(
            sid="ReadInstanceProfiles",
            actions=["iam:GetInstanceProfile"],
            resources=[f"arn:{partition}:iam::{account}:instance-profile/*"],
        ),
        iam.PolicyStatement(
            sid="EncryptNodeVolumes",
            actions=[
                "kms:CreateGrant",
                "kms:Decrypt",
                "kms:DescribeKey",
                "kms:GenerateDataKey*",
                "kms:ReEncrypt*",
            ],
            resources=[volume_key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"ec2.{region}.amazonaws.com"}},
        ),
    ]
