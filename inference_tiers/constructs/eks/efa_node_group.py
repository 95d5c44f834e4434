"""An EKS managed node group of EFA GPU instances (p5 family) with every EFA device attached.

The launch template is an L1 ``CfnLaunchTemplate`` because the L2 cannot express capacity reservations or
Capacity Block market options. Layout of the network interfaces (EC2 "maximize network bandwidth" guidance):
network card 0 carries the primary ENA ``interface`` at device index 0 and an ``efa-only`` interface at device
index 1; every other card carries one ``efa-only`` interface at device index 0. ``efa-only`` interfaces take no
IP addresses, so 32 of them do not exhaust the subnet through the VPC CNI.

Rules this construct encodes, each of which otherwise fails only at deploy time:

- Custom security groups in a launch template stop EKS from adding the cluster security group, so every
  interface carries the cluster security group *and* the EFA security group.
- The EFA security group allows all traffic from and to itself (ingress and egress): EFA's OS bypass needs both.
- No ``SubnetId`` in the launch template (EKS rejects it) and no instance types on the node group (the instance
  type is in the launch template, which also avoids CDK's AMI/architecture check that does not know p5).
- No ``ImageId``: the node group's ``AL2023_x86_64_NVIDIA`` AMI type lets EKS pick the accelerated AMI and merge
  its own bootstrap with our MIME multi-part ``nodeadm`` user data (NVMe RAID0 for kubelet and containerd).
- Capacity Blocks need ``MarketType=capacity-block`` in the launch template *and* ``CAPACITY_BLOCK`` on the node
  group, a reservation id, and no placement group (Capacity Block instances are already co-located).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, get_args

from aws_cdk import Fn
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from inference_tiers.constructs.eks.cluster import as_cluster_ref, create_node_role
from inference_tiers.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType
from inference_tiers.k8s.disaggregated import is_label_map
from inference_tiers.validation import Args, is_token

CapacityMode = Literal["on-demand", "capacity-reservation", "capacity-block"]
CAPACITY_MODES: tuple[str, ...] = get_args(CapacityMode)

GPU_TAINT = eks.TaintSpec(key="nvidia.com/gpu", value="true", effect=eks.TaintEffect.NO_SCHEDULE)
GPU_TOLERATION: Mapping[str, str] = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
"""The toleration every pod (and device-plugin DaemonSet) needs to run on these nodes."""

EFA_NODE_POOL = "gpu-efa"
"""Value of the ``inference-tiers/node-pool`` label on these nodes."""

_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{8}([0-9a-f]{9})?")
_PLACEMENT_GROUP_NAME = re.compile(r"[\w.:/=+@ -]{1,255}")

# NodeConfig part merged by nodeadm with the one EKS generates: stripe the instance-store NVMe drives into one
# RAID0 array and put kubelet and containerd (images, emptyDir volumes) on it.
_NODEADM_RAID0 = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0

--//--
"""


def efa_network_interfaces(
    count: int, security_group_ids: list[str]
) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """``count`` EFA devices in the current layout: card 0 = ENA + efa-only, cards 1..count-1 = efa-only."""
    interface = ec2.CfnLaunchTemplate.NetworkInterfaceProperty

    def nic(card: int, device: int, kind: str) -> ec2.CfnLaunchTemplate.NetworkInterfaceProperty:
        return interface(
            network_card_index=card,
            device_index=device,
            interface_type=kind,
            groups=security_group_ids,
            delete_on_termination=True,
        )

    return [nic(0, 0, "interface"), nic(0, 1, "efa-only")] + [
        nic(card, 0, "efa-only") for card in range(1, count)
    ]


_ARGS = Args("EfaNodeGroup")


def _error(prop: str, value: object, accepted: str) -> ValueError:
    return _ARGS.error(prop, value, accepted)


class EfaNodeGroup(Construct):
    """GPU nodes with all their EFA devices, in one subnet, tainted ``nvidia.com/gpu=true:NoSchedule``.

    Attributes: ``instance`` (the instance facts), ``efa_interfaces``, ``security_group`` (the EFA group;
    also ``connections``), ``placement_group`` (``CfnPlacementGroup`` or None), ``launch_template``
    (``CfnLaunchTemplate``), ``node_role``, ``nodegroup`` (``aws_eks_v2.Nodegroup``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        subnet: ec2.ISubnet,
        instance_type: str = "p5.48xlarge",
        node_count: int = 2,
        capacity_mode: CapacityMode = "on-demand",
        capacity_reservation_id: str | None = None,
        placement_group: bool | None = None,
        placement_group_name: str | None = None,
        efa_interfaces: int | None = None,
        node_role: iam.IRole | None = None,
        root_volume_gib: int = 200,
        imds_hop_limit: int = 1,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (its cluster security group goes on every interface).
        :param subnet: the one subnet (one AZ) of the nodes; with a reservation, a subnet in its AZ.
        :param instance_type: an EFA GPU instance type from ``inference_tiers.instance_types``.
            Default: p5.48xlarge.
        :param node_count: nodes to run (desired = max; min is 0 so a Capacity Block can scale down).
            Default: 2.
        :param capacity_mode: ``on-demand``, ``capacity-reservation`` (targeted ODCR) or ``capacity-block``
            (Capacity Blocks for ML). Default: on-demand.
        :param capacity_reservation_id: the ``cr-...`` id; required for capacity-reservation and
            capacity-block, rejected for on-demand.
        :param placement_group: create a cluster placement group. Default: True for on-demand, False otherwise
            (a targeted ODCR decides placement; Capacity Blocks are co-located already and reject one).
        :param placement_group_name: launch into this existing cluster placement group instead (the one your
            ODCR was created in). Default: none.
        :param efa_interfaces: EFA devices to attach (1 to what the instance has). Default: all of them.
        :param node_role: node IAM role. Default: a new role with the EKS worker, CNI and ECR read policies.
        :param root_volume_gib: encrypted gp3 root volume size (50-16384). Default: 200; images and emptyDir
            volumes live on the NVMe RAID0 array instead.
        :param imds_hop_limit: IMDSv2 (required) response hop limit, 1 or 2. Default: 1, so pods cannot read the
            node role's credentials; they get AWS access through EKS Pod Identity, and the host-network
            DaemonSets that need IMDS (VPC CNI, EFA device plugin) are one hop away. Use 2 only for pods that
            must call IMDS themselves.
        :param labels: extra Kubernetes node labels. Default: none.
        """
        args = _ARGS
        # A managed node group needs no kubectl provider: any ICluster construct will do.
        args.implements("cluster", cluster, eks.ICluster)
        args.implements("subnet", subnet, ec2.ISubnet)
        if placement_group is not None:
            args.boolean("placement_group", placement_group)
        if placement_group_name is not None:
            args.text("placement_group_name", placement_group_name)
        if capacity_reservation_id is not None:
            args.text("capacity_reservation_id", capacity_reservation_id)
        if efa_interfaces is not None:
            args.integer("efa_interfaces", efa_interfaces, minimum=1)
        if node_role is not None:
            args.implements("node_role", node_role, iam.IRole)
        super().__init__(scope, construct_id)
        self.instance = _validate_instance_type(instance_type)
        """The facts of ``instance_type`` (GPUs, GPU memory, vCPUs, memory, EFA devices), e.g. to size the
        pods that run on these nodes."""
        self.efa_interfaces = _validate_efa_interfaces(efa_interfaces, self.instance)
        """EFA devices attached to each node: ``efa_interfaces``, or all that the instance type has. A pod on
        these nodes may request up to this many ``vpc.amazonaws.com/efa``."""
        create_placement_group = _validate_capacity(
            capacity_mode, capacity_reservation_id, placement_group, placement_group_name
        )
        _validate_range("node_count", node_count, 1, 64)
        _validate_range("root_volume_gib", root_volume_gib, 50, 16384)
        _validate_range("imds_hop_limit", imds_hop_limit, 1, 2)
        if labels is not None and not is_label_map(labels):
            raise _error("labels", labels, "a map of Kubernetes label keys to label values (strings)")

        self.security_group = ec2.SecurityGroup(
            self,
            "EfaSecurityGroup",
            vpc=cluster.vpc,
            description="EFA OS-bypass traffic between the GPU nodes: all traffic to and from itself",
            # The cluster security group on the same interfaces already allows all egress; this group only adds
            # the self rules EFA needs, and CDK would silently drop a self egress rule on an allow-all group.
            allow_all_outbound=False,
        )
        """The EFA security group, which allows all traffic to and from itself; every node interface carries
        it and the cluster security group. The security group to allow further ingress on (or use
        :attr:`connections`)."""
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "EFA self ingress")
        self.security_group.add_egress_rule(self.security_group, ec2.Port.all_traffic(), "EFA self egress")
        self.connections = self.security_group.connections
        """The connections of :attr:`security_group`, e.g. ``nodes.connections.allow_from(peer, port)``."""

        self.placement_group: ec2.CfnPlacementGroup | None = None
        """The cluster placement group this construct creates for the nodes, or None when it creates none (a
        capacity reservation or Capacity Block, ``placement_group=False``, or an existing
        ``placement_group_name``)."""
        if create_placement_group:
            self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster")
        group_name = self.placement_group.ref if self.placement_group else placement_group_name

        data = ec2.CfnLaunchTemplate.LaunchTemplateDataProperty
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=data(
                instance_type=self.instance.name,
                network_interfaces=efa_network_interfaces(
                    self.efa_interfaces,
                    [cluster.cluster_security_group_id, self.security_group.security_group_id],
                ),
                placement=ec2.CfnLaunchTemplate.PlacementProperty(group_name=group_name)
                if group_name
                else None,
                capacity_reservation_specification=(
                    ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                        capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                            capacity_reservation_id=capacity_reservation_id
                        )
                    )
                    if capacity_reservation_id
                    else None
                ),
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
                    if capacity_mode == "capacity-block"
                    else None
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name="/dev/xvda",
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=root_volume_gib,
                            volume_type="gp3",
                            encrypted=True,
                            delete_on_termination=True,
                        ),
                    )
                ],
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required",
                    http_endpoint="enabled",
                    http_put_response_hop_limit=imds_hop_limit,
                ),
                user_data=Fn.base64(_NODEADM_RAID0),
            ),
        )
        """The L1 launch template the nodes start from: instance type, EFA interfaces, placement, capacity
        reservation or Capacity Block, IMDSv2, the encrypted gp3 root volume and the NVMe RAID0 user data."""

        # cfn-lint checks InstanceType against every linted region's offerings, and EFA GPU types exist only in
        # some regions. The stack is region-agnostic; `inference-tiers preflight` checks the offering in the
        # target region before deploying.
        self.launch_template.cfn_options.metadata = {"cfn-lint": {"config": {"ignore_checks": ["E3628"]}}}

        self.node_role: iam.IRole = node_role or create_node_role(self, "NodeRole")
        """The nodes' IAM role: the ``node_role`` passed in, or a new role with the EKS worker, CNI and ECR
        read-only policies. Pods get their AWS access through EKS Pod Identity, not through this role."""
        self.nodegroup = eks.Nodegroup(
            self,
            "Nodegroup",
            cluster=as_cluster_ref(cluster),
            node_role=self.node_role,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
            capacity_type=(
                eks.CapacityType.CAPACITY_BLOCK
                if capacity_mode == "capacity-block"
                else eks.CapacityType.ON_DEMAND
            ),
            subnets=ec2.SubnetSelection(subnets=[subnet]),
            min_size=0,
            desired_size=node_count,
            max_size=node_count,
            labels={
                "inference-tiers/node-pool": EFA_NODE_POOL,
                "vpc.amazonaws.com/efa.present": "true",
                "nvidia.com/gpu.present": "true",
                **(labels or {}),
            },
            taints=[GPU_TAINT],
            # Replace nodes whose GPUs or kubelet go unhealthy instead of leaving them in the pool.
            enable_node_auto_repair=True,
        )
        """The EKS managed node group (``aws_eks_v2.Nodegroup``), tainted ``nvidia.com/gpu=true:NoSchedule``:
        make workloads that must run on these nodes depend on it."""


def _validate_instance_type(name: str) -> GpuInstanceType:
    facts = GPU_INSTANCE_TYPES.get(name) if isinstance(name, str) else None
    efa_types = ", ".join(n for n, t in GPU_INSTANCE_TYPES.items() if t.supports_efa)
    if facts is None or not facts.supports_efa:
        raise _error("instance_type", name, f"a GPU instance type with EFA: {efa_types}")
    return facts


def _validate_efa_interfaces(requested: int | None, instance: GpuInstanceType) -> int:
    if requested is None:
        return instance.efa_interfaces
    if not 1 <= requested <= instance.efa_interfaces:
        raise _error(
            "efa_interfaces",
            requested,
            f"1 to {instance.efa_interfaces} ({instance.name} has {instance.efa_interfaces} EFA devices)",
        )
    return requested


def _validate_range(prop: str, value: int, minimum: int, maximum: int) -> None:
    _ARGS.integer(prop, value, minimum=minimum, maximum=maximum, allow_token=True)


def _validate_capacity(
    mode: str, reservation_id: str | None, placement_group: bool | None, placement_group_name: str | None
) -> bool:
    """Check the capacity props together; returns whether to create a placement group."""
    if not isinstance(mode, str) or mode not in CAPACITY_MODES:
        raise _error("capacity_mode", mode, "one of " + ", ".join(CAPACITY_MODES))
    if mode == "on-demand" and reservation_id is not None:
        raise _error(
            "capacity_reservation_id",
            reservation_id,
            "no reservation id with capacity_mode on-demand (use capacity-reservation or capacity-block)",
        )
    if mode != "on-demand" and reservation_id is None:
        raise _error("capacity_reservation_id", None, f"a reservation id (cr-...) with capacity_mode {mode}")
    if (
        reservation_id is not None
        and not is_token(reservation_id)
        and not _RESERVATION_ID.fullmatch(reservation_id)
    ):
        raise _error("capacity_reservation_id", reservation_id, "cr- followed by 8 or 17 hexadecimal digits")
    if mode == "capacity-block" and (placement_group or placement_group_name is not None):
        raise _error(
            "placement_group" if placement_group else "placement_group_name",
            placement_group if placement_group else placement_group_name,
            "no placement group with capacity_mode capacity-block (Capacity Block instances are already "
            "co-located in an UltraCluster)",
        )
    if placement_group_name is not None:
        if placement_group:
            raise _error(
                "placement_group", True, "False or unset when placement_group_name names an existing group"
            )
        if not is_token(placement_group_name) and not _PLACEMENT_GROUP_NAME.fullmatch(placement_group_name):
            raise _error(
                "placement_group_name", placement_group_name, "a placement group name (1-255 characters)"
            )
        return False
    return placement_group if placement_group is not None else mode == "on-demand"
