"""Network for a SageMaker HyperPod cluster orchestrated by EKS.

HyperPod puts every instance of a group in the Availability Zone of its subnet, gives each instance one ENI
with many secondary IPs (81 per ml.p5.48xlarge in EKS mode) and never lets the subnet change afterwards.
So the HyperPod subnet lives in a secondary VPC CIDR block (large, independent of the EKS subnets) and is
placed by Availability Zone *ID* (the same physical zone in every account, where the capacity was reserved).
"""

from __future__ import annotations

import ipaddress

import jsii
from aws_cdk import CfnTag, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.network import create_private_vpc
from inference_tiers.instance_types import find_gpu_instance_type
from inference_tiers.validation import Args, is_token

# The tags the AWS Load Balancer Controller (bundled in the inference add-on) discovers subnets by, for internal
# and for internet-facing load balancers (aws-load-balancer-controller v2.13.2, pkg/networking/subnet_resolver.go
# lines 22-23). The second is on no subnet (see the class docstring).
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
_AWS_RESERVED_IPS_PER_SUBNET = 5


def hyperpod_ips_per_instance(instance_type: str) -> int:
    """IP addresses one HyperPod instance can take in EKS mode.

    The HyperPod prerequisites page: "each P5 instance can create 81 IP addresses (50 from the primary card
    plus one from each of the remaining 31 cards)"; the same rule is applied to every type, with one card for
    types without multiple network cards.
    """
    facts = find_gpu_instance_type(instance_type)
    network_cards = max(1, facts.efa_interfaces) if facts else 1
    return 50 + network_cards - 1


@jsii.implements(ec2.IConnectable)
class HyperPodNetwork(Construct):
    """VPC, HyperPod subnet, S3 gateway endpoint, internal load-balancer subnet tags and the EFA security group.

    Creates a VPC (public and private subnets in two AZs for the EKS control plane and internal load balancers,
    one NAT gateway, flow logs), adds ``hyperpod_subnet_cidr`` as a secondary CIDR block and one private subnet in
    ``availability_zone_id`` routed through the NAT gateway, an S3 gateway endpoint on every private route table
    (lifecycle scripts, model weights and the operator's CA certificate come from S3), and a security group that
    allows all traffic to and from itself (EFA requires the self-referencing egress rule).

    Only the private subnets carry a load-balancer role tag (``kubernetes.io/role/internal-elb``); the public
    ones (NAT gateways) carry none, not even the one ``aws_eks.Cluster`` adds, so the load-balancer controller's
    subnet discovery for an internet-facing scheme finds no tagged subnet. Its fallback (discovery by a route to
    an internet gateway, on by default) would still pick the public subnets, so the guarantee that no
    internet-facing load balancer is built lies in the controller's IAM role (``lb_controller_policy``), which
    may create internal load balancers only.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        availability_zone_id: str,
        vpc_cidr: str = "10.192.0.0/16",
        hyperpod_subnet_cidr: str = "10.1.0.0/16",
        required_ip_addresses: int = 0,
        nat_gateways: int = 1,
        flow_log_key: kms.IKey | None = None,
    ) -> None:
        """
        :param availability_zone_id: AZ ID of the HyperPod subnet (e.g. ``usw2-az2``): where the capacity is.
        :param vpc_cidr: primary CIDR of the VPC (EKS and load-balancer subnets). Default 10.192.0.0/16.
        :param hyperpod_subnet_cidr: secondary CIDR block, used whole as the HyperPod subnet. Default 10.1.0.0/16.
        :param required_ip_addresses: IPs the HyperPod instances need (see :func:`hyperpod_ips_per_instance`);
            the subnet must offer at least that many. Default 0 (no check).
        :param nat_gateways: NAT gateways (internet egress for image pulls). Default 1.
        :param flow_log_key: KMS key of the VPC flow-log group (its policy gets the CloudWatch Logs grant).
            Default: a new rotated key, retained on stack deletion.
        """
        args = Args("HyperPodNetwork")
        az_text = (
            "an Availability Zone ID such as usw2-az2 or use1-az4 (describe-availability-zones shows ZoneId)"
        )
        args.text("availability_zone_id", availability_zone_id, description=az_text)
        if not is_token(availability_zone_id) and not _is_az_id(availability_zone_id):
            raise args.error("availability_zone_id", availability_zone_id, az_text)
        primary = _cidr(args, "vpc_cidr", vpc_cidr, 16, 18)
        network = _cidr(args, "hyperpod_subnet_cidr", hyperpod_subnet_cidr, 16, 28)
        required = args.integer("required_ip_addresses", required_ip_addresses, minimum=0)
        args.integer("nat_gateways", nat_gateways, minimum=1, maximum=2)
        if flow_log_key is not None:
            args.implements("flow_log_key", flow_log_key, kms.IKey)
        if network.overlaps(primary):
            raise args.error(
                "hyperpod_subnet_cidr", hyperpod_subnet_cidr, f"a block outside the VPC CIDR {vpc_cidr}"
            )
        usable = network.num_addresses - _AWS_RESERVED_IPS_PER_SUBNET
        if usable < required:
            raise args.error(
                "hyperpod_subnet_cidr",
                hyperpod_subnet_cidr,
                f"a block with at least {required} usable addresses for the instance groups (81 per "
                f"ml.p5.48xlarge in EKS mode; this one has {usable}), such as 10.1.0.0/16",
            )
        super().__init__(scope, construct_id)

        nat = ec2.NatProvider.gateway()
        # The S3 gateway endpoint is added below, once the HyperPod subnet's route table exists.
        self.vpc = create_private_vpc(
            self,
            "Vpc",
            cidr=vpc_cidr,
            nat_gateways=nat_gateways,
            nat_gateway_provider=nat,
            s3_gateway_endpoint=False,
            flow_log_key=flow_log_key
            or retained_key(self, "FlowLogKey", "Encrypts the flow logs of the HyperPod VPC"),
        )
        """The VPC: public and private subnets in two AZs (EKS control plane, internal load balancers, NAT)
        and the HyperPod subnet's secondary CIDR block. The HyperPod subnet is not among its
        ``private_subnets``: use :attr:`hyperpod_subnet`."""

        cidr_block = ec2.CfnVPCCidrBlock(
            self, "HyperPodCidr", vpc_id=self.vpc.vpc_id, cidr_block=hyperpod_subnet_cidr
        )
        self.hyperpod_subnet_resource = ec2.CfnSubnet(
            self,
            "HyperPodSubnet",
            vpc_id=self.vpc.vpc_id,
            cidr_block=hyperpod_subnet_cidr,
            availability_zone_id=availability_zone_id,
            map_public_ip_on_launch=False,
            tags=[CfnTag(key=INTERNAL_ELB_TAG, value="1"), CfnTag(key="Name", value="hyperpod-private")],
        )
        """The L1 ``CfnSubnet`` of the HyperPod subnet: all of ``hyperpod_subnet_cidr``, in
        ``availability_zone_id``, tagged for internal load balancers."""
        self.hyperpod_subnet_resource.node.add_dependency(cidr_block)
        route_table = ec2.CfnRouteTable(self, "HyperPodRouteTable", vpc_id=self.vpc.vpc_id)
        ec2.CfnSubnetRouteTableAssociation(
            self,
            "HyperPodRouteTableAssociation",
            subnet_id=self.hyperpod_subnet_resource.ref,
            route_table_id=route_table.ref,
        )
        ec2.CfnRoute(
            self,
            "HyperPodDefaultRoute",
            route_table_id=route_table.ref,
            destination_cidr_block="0.0.0.0/0",
            nat_gateway_id=nat.configured_gateways[0].gateway_id,
        )
        self.hyperpod_subnet = ec2.Subnet.from_subnet_attributes(
            self,
            "HyperPodSubnetRef",
            subnet_id=self.hyperpod_subnet_resource.ref,
            route_table_id=route_table.ref,
            ipv4_cidr_block=hyperpod_subnet_cidr,
        )
        """The HyperPod subnet as an ``ISubnet`` (routed through the NAT gateway): the subnet to pass to
        ``HyperPodCluster(subnets=...)``."""

        self.s3_endpoint = self.vpc.add_gateway_endpoint(
            "S3",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                ec2.SubnetSelection(subnets=[self.hyperpod_subnet]),
            ],
        )
        """The S3 gateway endpoint on the private route tables and the HyperPod subnet's (lifecycle scripts,
        model weights and the operator's CA certificate)."""
        for subnet in self.vpc.private_subnets:
            _tag_subnet(subnet, INTERNAL_ELB_TAG)
        for subnet in self.vpc.public_subnets:
            # aws-eks's Cluster tags every public subnet of its VPC with it; a removal outranks that tag.
            Tags.of(subnet).remove(PUBLIC_ELB_TAG)

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=self.vpc,
            description="HyperPod nodes and EKS control plane: all traffic within the group (EFA)",
            allow_all_outbound=True,
        )
        """The security group of the HyperPod nodes and EKS control plane, which allows all traffic within
        itself (EFA): pass it to ``HyperPodCluster(security_groups=...)``, and allow further ingress on it or
        on :attr:`connections`."""
        self.security_group.add_ingress_rule(
            self.security_group, ec2.Port.all_traffic(), "EFA and node-to-node traffic within the group"
        )
        # The L2 silently drops a self egress rule when allow_all_outbound is set; EFA health checks need it.
        self.self_egress = ec2.CfnSecurityGroupEgress(
            self,
            "SelfEgress",
            group_id=self.security_group.security_group_id,
            ip_protocol="-1",
            destination_security_group_id=self.security_group.security_group_id,
            description="EFA traffic to the group itself",
        )
        """The egress rule from :attr:`security_group` to itself that EFA needs, an L1 rule because the L2
        drops it on a group that allows all outbound traffic."""

    @property
    def connections(self) -> ec2.Connections:
        """The HyperPod nodes' security group, e.g. ``network.connections.allow_from(peer, port)``."""
        return self.security_group.connections


def _tag_subnet(subnet: ec2.ISubnet, key: str) -> None:
    resource = subnet.node.default_child
    assert isinstance(resource, ec2.CfnSubnet)
    resource.tags.set_tag(key, "1")


def _is_az_id(value: str) -> bool:
    prefix, _, zone = value.partition("-az")
    return bool(prefix) and prefix.isalnum() and prefix[-1].isdigit() and zone.isdigit()


def _cidr(args: Args, name: str, value: object, shortest: int, longest: int) -> ipaddress.IPv4Network:
    accepted = f"an IPv4 CIDR block from /{shortest} to /{longest} (no host bits) such as 10.1.0.0/16"
    text = args.text(name, value, description=accepted, allow_token=False)
    try:
        network = ipaddress.IPv4Network(text)
    except ValueError:
        raise args.error(name, text, accepted) from None
    if not shortest <= network.prefixlen <= longest:
        raise args.error(name, text, accepted)
    return network
