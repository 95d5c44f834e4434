"""Tier ``disaggregated``, infrastructure: EKS, the EFA GPU node group, device plugins, settings and outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from cdk_nag import AwsSolutionsChecks

from inference_tiers.config import ConfigError, InstanceNeed
from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.eks.device_plugins import GpuDevicePlugins
from inference_tiers.constructs.eks.efa_node_group import EfaNodeGroup
from inference_tiers.stacks.disaggregated import DisaggregatedSettings
from tests.harness import TierBuild, build_tier, cdk_json_context, cfn_lint_errors, nag_findings

RESERVATION = "cr-0123456789abcdef0"
AZS = '["us-east-1a", "us-east-1b"]'


def _resources(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _one(template: dict[str, Any], kind: str, name_part: str = "") -> tuple[str, dict[str, Any]]:
    found = [(n, r) for n, r in _resources(template, kind).items() if name_part in n]
    assert len(found) == 1, [n for n, _ in found]
    return found[0]


def _template(build: TierBuild) -> dict[str, Any]:
    templates = build.templates()
    return templates["InferenceTiers-Disaggregated"]


@pytest.fixture(scope="module")
def default(tier_build: Callable[[str], TierBuild]) -> dict[str, Any]:
    return _template(tier_build("disaggregated"))


@pytest.fixture(scope="module")
def capacity_block() -> dict[str, Any]:
    return _template(
        build_tier(
            "disaggregated",
            **{
                "disaggregated.capacity_mode": "capacity-block",
                "disaggregated.capacity_reservation_id": RESERVATION,
                "disaggregated.availability_zones": AZS,
            },
        )
    )


def _gpu_launch_template(template: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = _one(template, "AWS::EC2::LaunchTemplate", "GpuNodes")[1]["Properties"][
        "LaunchTemplateData"
    ]
    return data


def _gpu_nodegroup(template: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = _one(template, "AWS::EKS::Nodegroup", "GpuNodes")[1]["Properties"]
    return props


def _check_efa_layout(template: dict[str, Any], devices: int) -> None:
    """Card 0: ENA at device 0 + efa-only at device 1; cards 1..devices-1: efa-only at device 0."""
    interfaces = _gpu_launch_template(template)["NetworkInterfaces"]
    efa_sg, _ = _one(template, "AWS::EC2::SecurityGroup", "GpuNodes")
    cluster, _ = _one(template, "AWS::EKS::Cluster")
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces]
    expected = [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, devices)]
    assert layout == expected
    assert sum(1 for i in interfaces if i["InterfaceType"] == "efa-only") == devices
    assert len({i["NetworkCardIndex"] for i in interfaces}) == devices
    for interface in interfaces:
        assert interface["Groups"] == [
            {"Fn::GetAtt": [cluster, "ClusterSecurityGroupId"]},
            {"Fn::GetAtt": [efa_sg, "GroupId"]},
        ]
        assert interface["DeleteOnTermination"] is True
        assert "SubnetId" not in interface


def test_p5_launch_template_attaches_all_32_efa_devices(default: dict[str, Any]) -> None:
    data = _gpu_launch_template(default)
    _check_efa_layout(default, 32)
    assert len(data["NetworkInterfaces"]) == 33  # 32 EFA devices plus the primary ENA interface
    assert "SecurityGroupIds" not in data


def test_p5en_launch_template_attaches_its_16_efa_devices() -> None:
    template = _template(build_tier("disaggregated", **{"disaggregated.instance_type": "p5en.48xlarge"}))
    assert _gpu_launch_template(template)["InstanceType"] == "p5en.48xlarge"
    _check_efa_layout(template, 16)


def test_launch_template_pins_instance_type_placement_imdsv2_encrypted_root_and_raid0(
    default: dict[str, Any],
) -> None:
    data = _gpu_launch_template(default)
    placement_group, pg = _one(default, "AWS::EC2::PlacementGroup")
    assert pg["Properties"]["Strategy"] == "cluster"
    assert data["Placement"] == {"GroupName": {"Ref": placement_group}}
    assert data["InstanceType"] == "p5.48xlarge"
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"
    assert root["Ebs"]["Encrypted"] is True
    assert "ImageId" not in data  # the node group's AMI type picks the AL2023 NVIDIA AMI
    assert "InstanceMarketOptions" not in data
    assert "CapacityReservationSpecification" not in data
    user_data = data["UserData"]["Fn::Base64"]
    assert user_data.startswith("MIME-Version: 1.0\nContent-Type: multipart/mixed;")
    assert "Content-Type: application/node.eks.aws" in user_data
    node_config = user_data.split("---\n", 1)[1].split("\n--//--")[0]
    assert "kind: NodeConfig" in node_config
    assert "localStorage:\n      strategy: RAID0" in node_config


def test_gpu_node_group_uses_the_launch_template_al2023_nvidia_and_one_subnet(
    default: dict[str, Any],
) -> None:
    props = _gpu_nodegroup(default)
    launch_template, _ = _one(default, "AWS::EC2::LaunchTemplate", "GpuNodes")
    assert props["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert props["CapacityType"] == "ON_DEMAND"
    assert "InstanceTypes" not in props  # the instance type lives in the launch template
    assert "DiskSize" not in props
    assert props["LaunchTemplate"]["Id"] == {"Ref": launch_template}
    assert props["Subnets"] == [{"Ref": "VpcPrivateSubnet1Subnet536B997A"}]
    assert props["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 2, "MaxSize": 2}  # 1 prefill + 1 decode
    assert props["Taints"] == [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]
    assert props["Labels"]["vpc.amazonaws.com/efa.present"] == "true"
    assert props["Labels"]["nvidia.com/gpu.present"] == "true"


def test_efa_security_group_allows_all_traffic_to_and_from_itself(default: dict[str, Any]) -> None:
    efa_sg, _ = _one(default, "AWS::EC2::SecurityGroup", "GpuNodes")
    own_id = {"Fn::GetAtt": [efa_sg, "GroupId"]}
    _, ingress = _one(default, "AWS::EC2::SecurityGroupIngress", "GpuNodes")
    _, egress = _one(default, "AWS::EC2::SecurityGroupEgress", "GpuNodes")
    assert ingress["Properties"]["GroupId"] == own_id
    assert ingress["Properties"]["SourceSecurityGroupId"] == own_id
    assert ingress["Properties"]["IpProtocol"] == "-1"
    assert egress["Properties"]["GroupId"] == own_id
    assert egress["Properties"]["DestinationSecurityGroupId"] == own_id
    assert egress["Properties"]["IpProtocol"] == "-1"


def test_capacity_block_sets_market_type_and_node_group_capacity_type_together(
    capacity_block: dict[str, Any],
) -> None:
    data = _gpu_launch_template(capacity_block)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}
    }
    assert "Placement" not in data
    assert _resources(capacity_block, "AWS::EC2::PlacementGroup") == {}
    props = _gpu_nodegroup(capacity_block)
    assert props["CapacityType"] == "CAPACITY_BLOCK"
    (subnet_ref,) = props["Subnets"]
    subnet = capacity_block["Resources"][subnet_ref["Ref"]]
    assert subnet["Properties"]["AvailabilityZone"] == "us-east-1a"


def test_capacity_reservation_targets_the_odcr_on_demand_without_a_new_placement_group() -> None:
    template = _template(
        build_tier(
            "disaggregated",
            **{
                "disaggregated.capacity_mode": "capacity-reservation",
                "disaggregated.capacity_reservation_id": RESERVATION,
                "disaggregated.availability_zones": AZS,
            },
        )
    )
    data = _gpu_launch_template(template)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}
    }
    assert "InstanceMarketOptions" not in data
    assert _gpu_nodegroup(template)["CapacityType"] == "ON_DEMAND"
    assert _resources(template, "AWS::EC2::PlacementGroup") == {}


def test_non_default_variant_passes_nag_and_cfn_lint() -> None:
    build = build_tier(
        "disaggregated",
        **{
            "disaggregated.instance_type": "p5en.48xlarge",
            "disaggregated.capacity_mode": "capacity-block",
            "disaggregated.capacity_reservation_id": RESERVATION,
            "disaggregated.availability_zones": AZS,
            "disaggregated.public_endpoint_cidrs": "203.0.113.0/24",
            "disaggregated.admin_principal_arn": "arn:aws:iam::123456789012:role/Operators",
        },
    )
    assert nag_findings(build.app, AwsSolutionsChecks()) == []
    assert cfn_lint_errors(_template(build)) == []
    entries = _resources(_template(build), "AWS::EKS::AccessEntry")
    assert "arn:aws:iam::123456789012:role/Operators" in [
        e["Properties"]["PrincipalArn"] for e in entries.values()
    ]


def _helm_chart(template: dict[str, Any], chart: str) -> dict[str, Any]:
    charts: list[dict[str, Any]] = [
        r["Properties"]
        for r in _resources(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"]["Chart"] == chart
    ]
    assert len(charts) == 1, chart
    return charts[0]


def test_device_plugins_are_pinned_and_tolerate_the_gpu_taint(default: dict[str, Any]) -> None:
    efa = _helm_chart(default, "aws-efa-k8s-device-plugin")
    nvidia = _helm_chart(default, "nvidia-device-plugin")
    assert (efa["Repository"], efa["Version"]) == ("https://aws.github.io/eks-charts", "v0.5.30")
    assert (nvidia["Repository"], nvidia["Version"]) == (
        "https://nvidia.github.io/k8s-device-plugin",
        "0.19.3",
    )
    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert gpu_taint in json.loads(efa["Values"])["tolerations"]
    assert gpu_taint in json.loads(nvidia["Values"])["tolerations"]
    # The toleration matches the taint the node group sets.
    (taint,) = _gpu_nodegroup(default)["Taints"]
    assert (taint["Key"], taint["Effect"]) == (gpu_taint["key"], "NO_SCHEDULE")


def test_serving_manifests_wait_for_both_device_plugin_charts(default: dict[str, Any]) -> None:
    # The pods request nvidia.com/gpu and vpc.amazonaws.com/efa, which only the two device plugins advertise.
    charts = {
        r["Properties"]["Chart"]: name
        for name, r in _resources(default, "Custom::AWSCDK-EKS-HelmChart").items()
        if name.startswith("DevicePlugins")
    }
    assert set(charts) == {"aws-efa-k8s-device-plugin", "nvidia-device-plugin"}
    serving = {
        name: r
        for name, r in _resources(default, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if name.startswith("Serving")
    }
    assert sorted(n.removeprefix("Serving").rstrip("0123456789ABCDEF") for n in serving) == [
        "Namespace",
        "Workload",
    ]
    for name, resource in serving.items():
        assert set(charts.values()) <= set(resource.get("DependsOn", [])), name


def test_outputs_are_exactly_the_cross_team_contract(default: dict[str, Any]) -> None:
    outputs = default["Outputs"]
    assert set(outputs) == {"RouterEndpoint", "EksClusterName", "KubeconfigCommand", "DashboardUrl"}
    router = json.dumps(outputs["RouterEndpoint"]["Value"])
    assert "http://" in router and "RouterLoadBalancer" in router
    assert "#dashboards/dashboard/" in json.dumps(outputs["DashboardUrl"]["Value"])
    cluster, _ = _one(default, "AWS::EKS::Cluster")
    assert outputs["EksClusterName"]["Value"] == {"Ref": cluster}
    command = outputs["KubeconfigCommand"]["Value"]["Fn::Join"][1]
    assert command == [
        "aws eks update-kubeconfig --region ",
        {"Ref": "AWS::Region"},
        " --name ",
        {"Ref": cluster},
    ]


def _settings(**overrides: Any) -> DisaggregatedSettings:
    from inference_tiers.app_factory import TIERS
    from inference_tiers.config import parse_settings

    context = {**cdk_json_context(), **{f"disaggregated.{k}": v for k, v in overrides.items()}}
    settings = parse_settings(TIERS["disaggregated"].spec, context)
    assert isinstance(settings, DisaggregatedSettings)
    return settings


def test_default_settings_and_account_requirements() -> None:
    settings = _settings()
    assert settings.model_id == "meta-llama/Llama-3.3-70B-Instruct"
    assert settings.tensor_parallel == 8
    requirements = settings.account_requirements()
    assert requirements.instances == (
        InstanceNeed("ec2", "p5.48xlarge", 2),
        InstanceNeed("ec2", "m7i.xlarge", 2),
    )
    assert requirements.kubernetes_version == "1.35"
    assert requirements.capacity_reservation_ids == ()
    block = _settings(
        capacity_mode="capacity-block",
        capacity_reservation_id=RESERVATION,
        availability_zones=AZS,
        prefill_nodes="2",
        decode_nodes="3",
        tensor_parallel_size="4",
    )
    assert block.account_requirements().capacity_reservation_ids == (RESERVATION,)
    assert block.account_requirements().instances[0] == InstanceNeed("ec2", "p5.48xlarge", 5)
    assert block.tensor_parallel == 4


@pytest.mark.parametrize(
    ("overrides", "key", "message"),
    [
        ({"instance_type": "g6.xlarge"}, "instance_type", r"one of .*p5\.48xlarge"),
        ({"tensor_parallel_size": "16"}, "tensor_parallel_size", r"at most 8, the GPUs of one p5\.48xlarge"),
        ({"tensor_parallel_size": "3"}, "tensor_parallel_size", r"a divisor of 8"),
        (
            {"capacity_mode": "capacity-block", "availability_zones": AZS},
            "capacity_reservation_id",
            r"reservation id .*capacity_mode is capacity-block",
        ),
        ({"capacity_reservation_id": RESERVATION}, "capacity_reservation_id", r"null when .*on-demand"),
        (
            {"capacity_mode": "capacity-reservation", "capacity_reservation_id": RESERVATION},
            "availability_zones",
            r"the reservation's AZ first",
        ),
        ({"capacity_reservation_id": "cr-xyz"}, "capacity_reservation_id", r"capacity reservation id"),
        ({"availability_zones": '["us-east-1a", "us-east-1a"]'}, "availability_zones", r"two different"),
        ({"availability_zones": '["us-east-1a"]'}, "availability_zones", r"2 to 2 items"),
        (
            {"availability_zones": '["us-east-1a", "us-west-2a"]'},
            "availability_zones",
            r"two different AZ names of the same region",
        ),
        ({"public_endpoint_cidrs": "10.0.0.1/8"}, "public_endpoint_cidrs[0]", r"IPv4 CIDR"),
        ({"public_endpoint_cidrs": "0.0.0.0/0"}, "public_endpoint_cidrs[0]", r"from /8 to /32.*internet"),
        ({"admin_principal_arn": "Admin"}, "admin_principal_arn", r"IAM role or user ARN"),
        ({"prefill_nodes": "0"}, "prefill_nodes", r"integer from 1 to 32"),
        ({"image_uri": "vllm-latest"}, "image_uri", r"a container image with a pinned tag"),
        ({"image_uri": "public.ecr.aws/x/vllm:latest"}, "image_uri", r"pinned tag \(not latest\)"),
        ({"router_image_uri": "localhost:5000/router"}, "router_image_uri", r"pinned tag .* or an @sha256"),
        ({"max_model_len": "100"}, "max_model_len", r"integer from 1024"),
        # Llama 3.3 70B Instruct's config.json: max_position_embeddings 131072.
        (
            {"max_model_len": "131073"},
            "max_model_len",
            r"got 131073; expected at most 131072, the maximum context of meta-llama/Llama-3.3-70B-Instruct",
        ),
    ],
)
def test_invalid_settings_name_key_value_and_what_is_accepted(
    overrides: dict[str, Any], key: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        _settings(**overrides)
    assert error.value.key == f"disaggregated.{key}"


@pytest.fixture(scope="module")
def cluster_stack() -> tuple[cdk.Stack, EksCluster]:
    app = cdk.App(context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Constructs")
    return stack, EksCluster(stack, "Eks")


_counter = iter(range(1000))


def _node_group(cluster_stack: tuple[cdk.Stack, EksCluster], **kwargs: Any) -> EfaNodeGroup:
    stack, eks_cluster = cluster_stack
    subnet: ec2.ISubnet = eks_cluster.vpc.private_subnets[0]
    return EfaNodeGroup(stack, f"Gpu{next(_counter)}", cluster=eks_cluster.cluster, subnet=subnet, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"instance_type": "g6.2xlarge"},
            r"instance_type' got 'g6.2xlarge'; expected a GPU instance type with EFA",
        ),
        ({"instance_type": "p5.48xlarge", "efa_interfaces": 33}, r"efa_interfaces' got 33; expected 1 to 32"),
        (
            {"instance_type": "p5en.48xlarge", "efa_interfaces": 17},
            r"efa_interfaces' got 17; expected 1 to 16",
        ),
        (
            {"capacity_mode": "capacity-block"},
            r"capacity_reservation_id' got None; expected a reservation id",
        ),
        (
            {
                "capacity_mode": "capacity-block",
                "capacity_reservation_id": RESERVATION,
                "placement_group": True,
            },
            r"placement_group' got True; expected no placement group with capacity_mode capacity-block",
        ),
        (
            {
                "capacity_mode": "capacity-block",
                "capacity_reservation_id": RESERVATION,
                "placement_group_name": "my-pg",
            },
            r"placement_group_name' got 'my-pg'; expected no placement group",
        ),
        (
            {"capacity_reservation_id": RESERVATION},
            r"capacity_reservation_id' got .*no reservation id with .*on-demand",
        ),
        (
            {"capacity_mode": "capacity-reservation", "capacity_reservation_id": "cr-1"},
            r"capacity_reservation_id' got 'cr-1'; expected cr- followed by 8 or 17",
        ),
        ({"capacity_mode": "spot"}, r"capacity_mode' got 'spot'; expected one of on-demand"),
        (
            {"placement_group": True, "placement_group_name": "pg"},
            r"placement_group' got True; expected False",
        ),
        ({"node_count": 0}, r"node_count' got 0; expected an integer from 1 to 64"),
        ({"imds_hop_limit": 3}, r"imds_hop_limit' got 3; expected an integer from 1 to 2"),
        ({"root_volume_gib": 10}, r"root_volume_gib' got 10; expected an integer from 50"),
        (
            {"labels": {"bad key!": "x"}},
            r"labels' got \{'bad key!': 'x'\}; expected a map of Kubernetes label",
        ),
        ({"labels": {"team": "not valid/value"}}, r"labels' got .*; expected a map of Kubernetes label"),
        ({"labels": {"replicas": 2}}, r"labels' got \{'replicas': 2\}; expected .*label values \(strings\)"),
    ],
)
def test_invalid_efa_node_group_props_are_rejected(
    cluster_stack: tuple[cdk.Stack, EksCluster], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _node_group(cluster_stack, **kwargs)


def test_existing_placement_group_and_fewer_efa_devices(cluster_stack: tuple[cdk.Stack, EksCluster]) -> None:
    group = _node_group(
        cluster_stack,
        capacity_mode="capacity-reservation",
        capacity_reservation_id=RESERVATION,
        placement_group_name="odcr-pg",
        efa_interfaces=4,
        node_count=1,
    )
    assert group.placement_group is None
    stack = cdk.Stack.of(group)
    data = stack.resolve(group.launch_template.launch_template_data)
    assert data["placement"] == {"groupName": "odcr-pg"}
    assert [i["networkCardIndex"] for i in data["networkInterfaces"]] == [0, 0, 1, 2, 3]


def test_extra_node_labels_join_the_managed_ones(cluster_stack: tuple[cdk.Stack, EksCluster]) -> None:
    group = _node_group(cluster_stack, labels={"example.com/team": "inference", "tier": "p5_a-1.x"})
    resource = group.nodegroup.node.default_child
    assert isinstance(resource, eks.CfnNodegroup)
    labels = cdk.Stack.of(group).resolve(resource.labels)
    assert labels == {
        "inference-tiers/node-pool": "gpu-efa",
        "vpc.amazonaws.com/efa.present": "true",
        "nvidia.com/gpu.present": "true",
        "example.com/team": "inference",
        "tier": "p5_a-1.x",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nvidia_chart_version": "0.19.2"}, r"nvidia_chart_version' got '0.19.2'; .*0.19.3 or later"),
        ({"nvidia_chart_version": "latest"}, r"nvidia_chart_version' got 'latest'"),
        ({"efa_chart_version": "v0.5"}, r"efa_chart_version' got 'v0.5'"),
        (
            {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exist"}]},
            r"tolerations\[0\]' got .*'Exist'",
        ),
        (
            {"tolerations": [{"key": "gpu", "effect": "NoScheduled"}]},
            r"tolerations\[0\]' got .*effect one of",
        ),
        (
            {"tolerations": [{"key": 1}]},
            r"tolerations\[0\]' got \{'key': 1\}; expected a Kubernetes toleration",
        ),
        ({"tolerations": [{"keys": "gpu"}]}, r"tolerations\[0\]' got \{'keys': 'gpu'\}"),
    ],
)
def test_device_plugin_versions_are_exact_nvidia_at_least_0_19_3_and_tolerations_valid(
    cluster_stack: tuple[cdk.Stack, EksCluster], kwargs: dict[str, Any], message: str
) -> None:
    stack, eks_cluster = cluster_stack
    with pytest.raises(ValueError, match=message):
        GpuDevicePlugins(stack, f"Plugins{next(_counter)}", cluster=eks_cluster.cluster, **kwargs)
