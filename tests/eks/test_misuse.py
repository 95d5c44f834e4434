"""Every misuse of the EKS and HyperPod building blocks is an ArgumentError (a ValueError) naming the construct,
the parameter, the value received and what is accepted: never a TypeError, AttributeError or jsii error; and
deploy-time tokens are accepted where a deploy-time value makes sense, reaching the template unparsed."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template

from inference_tiers.constructs.eks.cluster import AddonVersions, EksCluster
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.efa_node_group import EfaNodeGroup
from inference_tiers.constructs.hyperpod.cluster import HyperPodInstanceGroup, HyperPodTaint
from inference_tiers.constructs.hyperpod.network import HyperPodNetwork
from tests.harness import cdk_json_context
from tests.misuse import assert_junk_refused_by_name_or_accepted, assert_refused

_ids = itertools.count()
ADMIN = "arn:aws:iam::123456789012:role/PlatformAdmin"
RESERVATION = "cr-0123456789abcdef0"


class Env:
    """One stack with one EksCluster; every case builds its construct under a fresh id."""

    def __init__(self, outdir: Path) -> None:
        app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
        self.stack = cdk.Stack(app, "Misuse")
        self.eks = EksCluster(self.stack, "Eks", admin_principal_arns=[ADMIN])
        self.cluster = self.eks.cluster
        self.bare_cluster = eks.Cluster(self.stack, "Bare", version=eks.KubernetesVersion.V1_35)
        self.subnet = self.eks.vpc.private_subnets[0]

    def build(self, kind: type, **props: Any) -> Any:
        base: dict[str, Any] = {
            EksCluster: {},
            EfaNodeGroup: {"cluster": self.cluster, "subnet": self.subnet},
            GpuDevicePlugins: {"cluster": self.cluster},
            HyperPodNetwork: {"availability_zone_id": "use1-az4"},
        }[kind]
        return kind(self.stack, f"{kind.__name__}{next(_ids)}", **{**base, **props})


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(tmp_path_factory.mktemp("cdk.out"))


# (construct, overrides from the env, parameter named, what the message says)
CASES: list[tuple[type, Callable[[Env], dict[str, Any]], str, str]] = [
    (EksCluster, lambda e: {"vpc": "vpc-123"}, "vpc", r"an IVpc \(a construct, not a string\)"),
    (
        EksCluster,
        lambda e: {"public_endpoint_cidrs": "203.0.113.0/24"},
        "public_endpoint_cidrs",
        "not a list",
    ),
    (EksCluster, lambda e: {"public_endpoint_cidrs": ["0.0.0.0/0"]}, "public_endpoint_cidrs[0]", "/8 to /32"),
    (
        EksCluster,
        lambda e: {"public_endpoint_cidrs": ["10.0.0.1/8"]},
        "public_endpoint_cidrs[0]",
        "IPv4 CIDR",
    ),
    (EksCluster, lambda e: {"admin_principal_arns": ["not-an-arn"]}, "admin_principal_arns[0]", "IAM role"),
    (
        EksCluster,
        lambda e: {"admin_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Admin/session"]},
        "admin_principal_arns[0]",
        r"IAM role or user ARN",
    ),
    (EksCluster, lambda e: {"secrets_key": "alias/eks"}, "secrets_key", r"an IKey"),
    (EksCluster, lambda e: {"log_key": e.cluster}, "log_key", r"an IKey"),
    (EksCluster, lambda e: {"control_plane_logs": ["api"]}, "control_plane_logs[0]", r"ClusterLoggingTypes"),
    (EksCluster, lambda e: {"addon_versions": {"vpc_cni": "x"}}, "addon_versions", r"an AddonVersions"),
    (EksCluster, lambda e: {"system_node_count": 0}, "system_node_count", r"an integer from 1 to 10"),
    (
        EksCluster,
        lambda e: {"system_node_count": True},
        "system_node_count",
        r"got True; expected an integer",
    ),
    (EksCluster, lambda e: {"system_node_count": 2.5}, "system_node_count", r"got 2\.5"),
    # The pool label is the construct's own: every chart on the system nodes selects it.
    (
        EksCluster,
        lambda e: {"system_node_labels": {"inference-tiers/node-pool": "core"}},
        "system_node_labels key",
        r"got 'inference-tiers/node-pool'",
    ),
    (
        EksCluster,
        lambda e: {"system_node_labels": {"node-role": "a b"}},
        "system_node_labels['node-role']",
        "got",
    ),
    (EksCluster, lambda e: {"system_node_labels": ["node-role"]}, "system_node_labels", "a mapping"),
    (EksCluster, lambda e: {"system_node_instance_type": "c7g.large"}, "system_node_instance_type", "x86_64"),
    (
        EksCluster,
        lambda e: {"system_node_instance_type": "large"},
        "system_node_instance_type",
        r"got 'large'",
    ),
    (EfaNodeGroup, lambda e: {"cluster": "my-cluster"}, "cluster", r"not a string"),
    (EfaNodeGroup, lambda e: {"cluster": e.subnet}, "cluster", r"an ICluster"),
    (EfaNodeGroup, lambda e: {"subnet": "subnet-1"}, "subnet", r"an ISubnet"),
    (
        EfaNodeGroup,
        lambda e: {"instance_type": "g6.2xlarge"},
        "instance_type",
        r"a GPU instance type with EFA",
    ),
    (EfaNodeGroup, lambda e: {"efa_interfaces": 33}, "efa_interfaces", r"1 to 32"),
    (EfaNodeGroup, lambda e: {"node_count": "2"}, "node_count", r"got '2'; expected an integer"),
    (EfaNodeGroup, lambda e: {"capacity_mode": "spot"}, "capacity_mode", r"one of on-demand"),
    (EfaNodeGroup, lambda e: {"placement_group": "yes"}, "placement_group", r"True or False"),
    (EfaNodeGroup, lambda e: {"node_role": "arn:aws:iam::1:role/x"}, "node_role", r"an IRole"),
    (EfaNodeGroup, lambda e: {"labels": {"team": 1}}, "labels", r"label values \(strings\)"),
    (GpuDevicePlugins, lambda e: {"cluster": "arn:aws:eks:us-east-1:1:cluster/x"}, "cluster", "not a string"),
    (GpuDevicePlugins, lambda e: {"cluster": e.bare_cluster}, "cluster", r"kubectl_provider_options"),
    (GpuDevicePlugins, lambda e: {"tolerations": {"key": "gpu"}}, "tolerations", r"a list"),
    (GpuDevicePlugins, lambda e: {"tolerations": [{"key": 1}]}, "tolerations[0]", r"a Kubernetes toleration"),
    (GpuDevicePlugins, lambda e: {"efa_chart_version": 5}, "efa_chart_version", r"an exact chart version"),
    (GpuDevicePlugins, lambda e: {"nvidia_chart_version": "0.19.2"}, "nvidia_chart_version", r"0\.19\.3"),
    (HyperPodNetwork, lambda e: {"availability_zone_id": "us-east-1a"}, "availability_zone_id", "ZoneId"),
    (HyperPodNetwork, lambda e: {"availability_zone_id": 4}, "availability_zone_id", r"got 4"),
    (HyperPodNetwork, lambda e: {"vpc_cidr": "10.0.0.0/8"}, "vpc_cidr", r"from /16 to /18"),
    (
        HyperPodNetwork,
        lambda e: {"hyperpod_subnet_cidr": "10.1.0.0/33"},
        "hyperpod_subnet_cidr",
        r"IPv4 CIDR",
    ),
    (
        HyperPodNetwork,
        lambda e: {"hyperpod_subnet_cidr": "10.192.0.0/16"},
        "hyperpod_subnet_cidr",
        r"outside the VPC CIDR",
    ),
    (HyperPodNetwork, lambda e: {"required_ip_addresses": -1}, "required_ip_addresses", r"at least 0"),
    (HyperPodNetwork, lambda e: {"nat_gateways": 0}, "nat_gateways", r"from 1 to 2"),
    (HyperPodNetwork, lambda e: {"flow_log_key": "alias/logs"}, "flow_log_key", r"an IKey"),
]


@pytest.mark.parametrize(
    ("kind", "props", "param", "match"), CASES, ids=lambda c: getattr(c, "__name__", None)
)
def test_construct_misuse(
    env: Env, kind: type, props: Callable[[Env], dict[str, Any]], param: str, match: str
) -> None:
    assert_refused(lambda: env.build(kind, **props(env)), kind.__name__, param, match)


def test_every_construct_has_at_least_five_misuse_cases() -> None:
    counts = {kind: sum(1 for case in CASES if case[0] is kind) for kind in {c[0] for c in CASES}}
    assert all(count >= 5 for count in counts.values()), counts


GROUP = {"name": "g", "instance_type": "ml.g5.12xlarge", "instance_count": 1}
VERSIONS = {
    "vpc_cni": "v1.21.1-eksbuild.3",
    "kube_proxy": "v1.35.0-eksbuild.2",
    "coredns": "v1.13.2-eksbuild.1",
    "pod_identity_agent": "v1.3.10-eksbuild.3",
}
# (props class, base fields, overrides, parameter named, what the message says)
PROPS_CASES: list[tuple[type, dict[str, Any], dict[str, Any], str, str]] = [
    (AddonVersions, VERSIONS, {"vpc_cni": "1.21"}, "vpc_cni", r"an EKS add-on version"),
    (AddonVersions, VERSIONS, {"vpc_cni": "v1.18.3-eksbuild.3"}, "vpc_cni", r"v1\.18\.5 or later"),
    (AddonVersions, VERSIONS, {"coredns": None}, "coredns", r"got None"),
    (AddonVersions, VERSIONS, {"kube_proxy": cdk.Aws.REGION}, "kube_proxy", r"known at synth time"),
    (AddonVersions, VERSIONS, {"pod_identity_agent": 3}, "pod_identity_agent", r"got 3"),
    (HyperPodInstanceGroup, GROUP, {"name": "bad_name"}, "name", r"letters, digits and '-'"),
    (
        HyperPodInstanceGroup,
        GROUP,
        {"instance_type": "p5.48xlarge"},
        "instance_type",
        r"SageMaker.s ClusterInstanceType",
    ),
    (HyperPodInstanceGroup, GROUP, {"instance_count": "1"}, "instance_count", r"an integer from 0 to 256"),
    (HyperPodInstanceGroup, GROUP, {"threads_per_core": 3}, "threads_per_core", r"one of 1, 2"),
    (HyperPodInstanceGroup, GROUP, {"ebs_volume_gb": 0}, "ebs_volume_gb", r"from 1 to 16384"),
    (
        HyperPodInstanceGroup,
        GROUP,
        {"deep_health_checks": "InstanceStress"},
        "deep_health_checks",
        "not a list",
    ),
    (HyperPodInstanceGroup, GROUP, {"labels": ["team"]}, "labels", r"a mapping"),
    (HyperPodInstanceGroup, GROUP, {"taints": ("dedicated",)}, "taints[0]", r"a HyperPodTaint"),
    (HyperPodInstanceGroup, GROUP, {"training_plan_arn": "plan-1"}, "training_plan_arn", r"training-plan/"),
    (HyperPodTaint, {"key": "k", "value": "v"}, {"effect": "Evict"}, "effect", r"one of 'NoSchedule'"),
    (HyperPodTaint, {"key": "k", "value": "v"}, {"key": ""}, "key", r"a non-empty string"),
    (HyperPodTaint, {"key": "k", "value": "v"}, {"value": 1}, "value", r"got 1"),
    (HyperPodTaint, {"key": "k", "value": "v"}, {"value": "x" * 64}, "value", r"at most 63"),
    (HyperPodTaint, {"key": "k", "value": "v"}, {"key": None}, "key", r"got None"),
]


@pytest.mark.parametrize(("kind", "base", "overrides", "param", "match"), PROPS_CASES)
def test_props_misuse(
    kind: type, base: dict[str, Any], overrides: dict[str, Any], param: str, match: str
) -> None:
    assert_refused(lambda: kind(**{**base, **overrides}), kind.__name__, param, match)


PARAMS: dict[type, list[str]] = {
    EksCluster: [
        "vpc", "control_plane_subnets", "system_node_subnets", "public_endpoint_cidrs", "admin_principal_arns",
        "secrets_key", "log_key", "control_plane_logs", "addon_versions", "system_node_instance_type",
        "system_node_count", "system_node_labels",
    ],
    EfaNodeGroup: [
        "cluster", "subnet", "instance_type", "node_count", "capacity_mode", "capacity_reservation_id",
        "placement_group", "placement_group_name", "efa_interfaces", "node_role", "root_volume_gib",
        "imds_hop_limit", "labels",
    ],
    GpuDevicePlugins: ["cluster", "tolerations", "efa_chart_version", "nvidia_chart_version"],
    HyperPodNetwork: [
        "availability_zone_id", "vpc_cidr", "hyperpod_subnet_cidr", "required_ip_addresses", "nat_gateways",
        "flow_log_key",
    ],
}  # fmt: skip
SWEEP = [(kind, param) for kind, params in PARAMS.items() for param in params]


@pytest.mark.parametrize(("kind", "param"), SWEEP, ids=lambda c: getattr(c, "__name__", c))
def test_any_junk_for_a_parameter_is_an_argument_error_or_accepted(env: Env, kind: type, param: str) -> None:
    assert_junk_refused_by_name_or_accepted(lambda **kw: env.build(kind, **kw), kind.__name__, param)


@pytest.mark.parametrize(
    ("kind", "param"),
    [(HyperPodInstanceGroup, p) for p in ("name", "instance_type", "instance_count", "threads_per_core",
     "ebs_volume_gb", "deep_health_checks", "training_plan_arn", "labels", "taints")]
    + [(AddonVersions, p) for p in VERSIONS],
)  # fmt: skip
def test_any_junk_for_a_props_field_is_an_argument_error_or_accepted(kind: type, param: str) -> None:
    base = GROUP if kind is HyperPodInstanceGroup else VERSIONS
    assert_junk_refused_by_name_or_accepted(lambda **kw: kind(**{**base, **kw}), kind.__name__, param)


# ---- tokens ----------------------------------------------------------------------------------------------


def test_deploy_time_values_reach_the_template_unparsed(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Tokens")
    admin = cdk.CfnParameter(stack, "AdminArn").value_as_string
    office = cdk.CfnParameter(stack, "OfficeCidr").value_as_string
    nodes = cdk.CfnParameter(stack, "SystemNodes", type="Number").value_as_number
    cluster = EksCluster(
        stack, "Eks", admin_principal_arns=[admin], public_endpoint_cidrs=[office], system_node_count=nodes
    )
    reservation = cdk.CfnParameter(stack, "Reservation").value_as_string
    EfaNodeGroup(
        stack,
        "Gpu",
        cluster=cluster.cluster,
        subnet=cluster.vpc.private_subnets[0],
        capacity_mode="capacity-reservation",
        capacity_reservation_id=reservation,
        placement_group=False,
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {"ResourcesVpcConfig": Match.object_like({"PublicAccessCidrs": [{"Ref": "OfficeCidr"}]})},
    )
    template.has_resource_properties("AWS::EKS::AccessEntry", {"PrincipalArn": {"Ref": "AdminArn"}})
    template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "ScalingConfig": {
                "MinSize": {"Ref": "SystemNodes"},
                "DesiredSize": {"Ref": "SystemNodes"},
                "MaxSize": {"Ref": "SystemNodes"},
            }
        },
    )
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "CapacityReservationSpecification": {
                        "CapacityReservationTarget": {"CapacityReservationId": {"Ref": "Reservation"}}
                    }
                }
            )
        },
    )


def test_instance_group_counts_and_plans_may_be_deploy_time_values(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Tokens")
    count = cdk.CfnParameter(stack, "Count", type="Number").value_as_number
    plan = cdk.CfnParameter(stack, "Plan").value_as_string
    group = HyperPodInstanceGroup(
        name="g", instance_type="ml.p5.48xlarge", instance_count=count, training_plan_arn=plan
    )
    assert cdk.Token.is_unresolved(group.instance_count) and group.training_plan_arn is plan
    zone = cdk.CfnParameter(stack, "Zone").value_as_string
    network = HyperPodNetwork(stack, "Net", availability_zone_id=zone)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::EC2::Subnet", {"AvailabilityZoneId": {"Ref": "Zone"}})
    assert network.hyperpod_subnet is not None


def test_a_node_group_needs_no_kubectl_provider(env: Env) -> None:
    group = env.build(EfaNodeGroup, cluster=env.bare_cluster, subnet=env.bare_cluster.vpc.private_subnets[0])
    assert group.nodegroup is not None


def test_a_subnet_selection_is_required_not_a_list(env: Env) -> None:
    assert_refused(
        lambda: env.build(EksCluster, system_node_subnets=[env.subnet]),
        "EksCluster",
        "system_node_subnets",
        r"an aws_ec2\.SubnetSelection",
    )
    assert isinstance(ec2.SubnetSelection(subnets=[env.subnet]), ec2.SubnetSelection)
