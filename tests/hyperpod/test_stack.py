"""The default InferenceTiers-HyperPod template: creation order, naming rules, network, cluster and outputs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.constructs.hyperpod.cluster import LIFECYCLE_SCRIPTS
from inference_tiers.stacks.hyperpod import HyperPodSettings
from tests.harness import TierBuild, build_tier, make_app, nag_findings
from tests.hyperpod.support import (
    depends_on,
    logical_ids,
    manifest_documents,
    only,
    resolve_join,
    validate_inference_endpoint_config,
    write_minimal_chart,
)

PREREQUISITE_ADDONS = ("aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "metrics-server", "cert-manager")


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> Mapping[str, Any]:
    return tier_build("hyperpod").template().to_json()


def _resource(template: Mapping[str, Any], logical_id: str) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][logical_id]
    return resource


def _hyperpod(template: Mapping[str, Any]) -> str:
    return only(logical_ids(template, "AWS::SageMaker::Cluster"))


def _addon(template: Mapping[str, Any], name: str) -> str:
    return only(logical_ids(template, "AWS::EKS::Addon", AddonName=name))


def _direct_depends_on(template: Mapping[str, Any], logical_id: str) -> set[str]:
    return set(_resource(template, logical_id).get("DependsOn", []))


# ---- creation order ------------------------------------------------------------------------------------


def test_dependency_chart_is_installed_before_the_hyperpod_cluster(template: Mapping[str, Any]) -> None:
    chart = only(logical_ids(template, "Custom::AWSCDK-EKS-HelmChart"))
    hyperpod = _hyperpod(template)
    assert chart in _direct_depends_on(template, hyperpod)
    assert hyperpod not in depends_on(template, chart)
    assert _resource(template, chart)["Properties"]["Namespace"] == "kube-system"


def test_hyperpod_cluster_waits_for_the_role_policy_and_the_lifecycle_upload(
    template: Mapping[str, Any],
) -> None:
    hyperpod = _hyperpod(template)
    direct = _direct_depends_on(template, hyperpod)
    role_arn = _resource(template, hyperpod)["Properties"]["InstanceGroups"][0]["ExecutionRole"]
    role = role_arn["Fn::GetAtt"][0]
    role_policies = [
        logical_id
        for logical_id in logical_ids(template, "AWS::IAM::Policy")
        if {"Ref": role} in _resource(template, logical_id)["Properties"]["Roles"]
    ]
    assert role_policies and set(role_policies) <= direct
    upload = only(logical_ids(template, "Custom::CDKBucketDeployment"))
    assert upload in direct
    # and the core add-ons (vpc-cni first of all) and the HyperPod subnet's route
    assert _addon(template, "vpc-cni") in direct
    assert (
        only(
            logical_ids(
                template,
                "AWS::EC2::Route",
                DestinationCidrBlock="0.0.0.0/0",
                RouteTableId={"Ref": _hyperpod_route_table(template)},
            )
        )
        in direct
    )


def _hyperpod_route_table(template: Mapping[str, Any]) -> str:
    subnet = _hyperpod_subnet(template)
    association = only(
        logical_ids(template, "AWS::EC2::SubnetRouteTableAssociation", SubnetId={"Ref": subnet})
    )
    route_table: str = _resource(template, association)["Properties"]["RouteTableId"]["Ref"]
    return route_table


def _hyperpod_subnet(template: Mapping[str, Any]) -> str:
    subnets: list[str] = _resource(template, _hyperpod(template))["Properties"]["VpcConfig"]["Subnets"]
    return only([s["Ref"] for s in subnets])  # type: ignore[index]


def test_node_barrier_follows_the_cluster_and_precedes_everything_on_the_nodes(
    template: Mapping[str, Any],
) -> None:
    barrier = only(logical_ids(template, "Custom::HyperPodNodesReady"))
    assert _hyperpod(template) in _direct_depends_on(template, barrier)
    properties = _resource(template, barrier)["Properties"]
    assert properties["ClusterArn"] == {"Fn::GetAtt": [_hyperpod(template), "ClusterArn"]}
    assert properties["InstanceGroups"] == {"inference": "2"}
    for name in (
        *PREREQUISITE_ADDONS,
        "amazon-sagemaker-hyperpod-inference",
        "amazon-sagemaker-hyperpod-observability",
    ):
        assert barrier in _direct_depends_on(template, _addon(template, name)), name


def test_prerequisite_addons_precede_the_inference_addon(template: Mapping[str, Any]) -> None:
    inference = _addon(template, "amazon-sagemaker-hyperpod-inference")
    direct = _direct_depends_on(template, inference)
    for name in PREREQUISITE_ADDONS:
        assert _addon(template, name) in direct, name


def test_model_manifest_follows_the_inference_addon(template: Mapping[str, Any]) -> None:
    manifest = only(logical_ids(template, "Custom::AWSCDK-EKS-KubernetesResource"))
    assert _addon(template, "amazon-sagemaker-hyperpod-inference") in _direct_depends_on(template, manifest)


# ---- the model --------------------------------------------------------------------------------------------


def test_model_manifest_validates_against_the_crd(template: Mapping[str, Any]) -> None:
    """The default tier meets the default add-on build v1.0.0-eksbuild.1, whose CRD is operator 3.0's: no
    spec.worker.requestLimits (first in chart 2.1.0), which kubectl's strict validation would reject."""
    (document,) = manifest_documents(template)
    (addon,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon"
        and r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"
    ]
    assert addon["AddonVersion"] == "v1.0.0-eksbuild.1"
    validate_inference_endpoint_config(document, addon["AddonVersion"])
    spec = document["spec"]
    assert spec["instanceType"] == "ml.g5.48xlarge"
    assert spec["endpointName"] == "llama-3-1-8b-instruct"
    args = spec["worker"]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "8"  # all GPUs of a g5.48xlarge
    assert spec["autoScalingSpec"]["maxReplicaCount"] == 2


# ---- naming rules of the inference operator ------------------------------------------------------------------


def test_operator_role_name_and_trust(template: Mapping[str, Any]) -> None:
    config = _addon_config(template, "amazon-sagemaker-hyperpod-inference")
    role = config["executionRoleArn"].removeprefix("${").removesuffix(".Arn}")
    properties = _resource(template, role)["Properties"]
    assert properties["RoleName"].startswith("SageMakerHyperPodInference")
    assert len(properties["RoleName"]) <= 64
    trust = json.dumps(properties["AssumeRolePolicyDocument"])
    assert "sts:AssumeRoleWithWebIdentity" in trust and "sagemaker.amazonaws.com" in trust
    managed = json.dumps(properties["ManagedPolicyArns"])
    assert "AmazonSageMakerHyperPodInferenceAccess" in managed
    subject = _cfn_json_values(template, role)
    assert "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-controller-manager" in subject


def _cfn_json_values(template: Mapping[str, Any], role: str) -> str:
    """The IRSA condition values of ``role`` (rendered through CfnJson custom resources)."""
    trust = _resource(template, role)["Properties"]["AssumeRolePolicyDocument"]
    condition = trust["Statement"][0]["Condition"]["StringEquals"]
    cfn_json = condition["Fn::GetAtt"][0]
    return json.dumps(_resource(template, cfn_json)["Properties"]["Value"])


def test_tls_bucket_name(template: Mapping[str, Any]) -> None:
    config = _addon_config(template, "amazon-sagemaker-hyperpod-inference")
    bucket = config["tlsCertificateS3Bucket"].removeprefix("${").removesuffix("}")
    name = resolve_join(_resource(template, bucket)["Properties"]["BucketName"], placeholder="")
    assert name.startswith("hyperpod-tls-")
    # with a 12-digit account and the longest region names the name stays within S3's 63 characters
    rendered = resolve_join(_resource(template, bucket)["Properties"]["BucketName"], placeholder="x" * 14)
    assert len(rendered) <= 63 and rendered == rendered.lower()
    assert _resource(template, bucket)["DeletionPolicy"] == "Retain"


def test_inference_addon_configuration(template: Mapping[str, Any]) -> None:
    config = _addon_config(template, "amazon-sagemaker-hyperpod-inference")
    assert config["hyperpodClusterArn"] == "${" + _hyperpod(template) + ".ClusterArn}"
    alb_role = config["alb"]["serviceAccount"]["roleArn"].removeprefix("${").removesuffix(".Arn}")
    keda_role = config["keda"]["auth"]["aws"]["irsa"]["roleArn"].removeprefix("${").removesuffix(".Arn}")
    assert config["alb"]["enabled"] is True and config["keda"]["enabled"] is True
    assert "hyperpod-inference-system:aws-load-balancer-controller" in _cfn_json_values(template, alb_role)
    assert "hyperpod-inference-system:keda-operator" in _cfn_json_values(template, keda_role)
    for name, role_subject in (
        ("aws-mountpoint-s3-csi-driver", "kube-system:s3-csi-driver-sa"),
        ("aws-fsx-csi-driver", "kube-system:fsx-csi-controller-sa"),
    ):
        role = _resource(template, _addon(template, name))["Properties"]["ServiceAccountRoleArn"][
            "Fn::GetAtt"
        ][0]
        assert role_subject in _cfn_json_values(template, role)
    cert_manager = _addon_config(template, "cert-manager")
    toleration = {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    for component in (cert_manager, cert_manager["webhook"], cert_manager["cainjector"]):
        assert toleration in component["tolerations"]


def _addon_config(template: Mapping[str, Any], name: str) -> dict[str, Any]:
    """An add-on's configurationValues; references appear as ``${LogicalId}`` / ``${LogicalId.Attribute}``."""
    raw = _resource(template, _addon(template, name))["Properties"]["ConfigurationValues"]
    if not isinstance(raw, str):
        separator, parts = raw["Fn::Join"]
        raw = separator.join(p if isinstance(p, str) else _token(p) for p in parts)
    result: dict[str, Any] = json.loads(raw)
    return result


def _token(reference: dict[str, Any]) -> str:
    if "Ref" in reference:
        return "${" + str(reference["Ref"]) + "}"
    logical_id, attribute = reference["Fn::GetAtt"]
    return "${" + f"{logical_id}.{attribute}" + "}"


# ---- network and EKS ----------------------------------------------------------------------------------------


def test_security_group_allows_all_traffic_within_itself(template: Mapping[str, Any]) -> None:
    group_ids = _resource(template, _hyperpod(template))["Properties"]["VpcConfig"]["SecurityGroupIds"]
    efa_group = group_ids[0]["Fn::GetAtt"][0]
    ingress = only(logical_ids(template, "AWS::EC2::SecurityGroupIngress"))
    assert _resource(template, ingress)["Properties"] == {
        "Description": "EFA and node-to-node traffic within the group",
        "GroupId": {"Fn::GetAtt": [efa_group, "GroupId"]},
        "IpProtocol": "-1",
        "SourceSecurityGroupId": {"Fn::GetAtt": [efa_group, "GroupId"]},
    }
    egress = only(logical_ids(template, "AWS::EC2::SecurityGroupEgress"))
    assert _resource(template, egress)["Properties"]["IpProtocol"] == "-1"
    assert _resource(template, egress)["Properties"]["GroupId"] == {"Fn::GetAtt": [efa_group, "GroupId"]}
    assert _resource(template, egress)["Properties"]["DestinationSecurityGroupId"] == {
        "Fn::GetAtt": [efa_group, "GroupId"]
    }
    # internet egress through NAT stays (image pulls), and the EKS cluster security group is attached too
    assert _resource(template, efa_group)["Properties"]["SecurityGroupEgress"][0]["CidrIp"] == "0.0.0.0/0"
    eks = only(logical_ids(template, "AWS::EKS::Cluster"))
    assert {"Fn::GetAtt": [eks, "ClusterSecurityGroupId"]} in group_ids


def test_hyperpod_subnet_in_secondary_cidr_by_az_id(template: Mapping[str, Any]) -> None:
    subnet = _hyperpod_subnet(template)
    properties = _resource(template, subnet)["Properties"]
    assert properties["AvailabilityZoneId"] == "usw2-az2" and "AvailabilityZone" not in properties
    assert properties["CidrBlock"] == "10.1.0.0/16"
    cidr = only(logical_ids(template, "AWS::EC2::VPCCidrBlock", CidrBlock="10.1.0.0/16"))
    assert cidr in _direct_depends_on(template, subnet)
    assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in properties["Tags"]
    endpoint = only(logical_ids(template, "AWS::EC2::VPCEndpoint", VpcEndpointType="Gateway"))
    assert "s3" in json.dumps(_resource(template, endpoint)["Properties"]["ServiceName"])
    assert {"Ref": _hyperpod_route_table(template)} in _resource(template, endpoint)["Properties"][
        "RouteTableIds"
    ]


def test_public_endpoint_is_opt_in() -> None:
    build = build_tier("hyperpod", **{"hyperpod.public_endpoint_cidrs": "203.0.113.0/24"})
    template = build.template().to_json()
    vpc_config = _resource(template, only(logical_ids(template, "AWS::EKS::Cluster")))["Properties"][
        "ResourcesVpcConfig"
    ]
    assert vpc_config["EndpointPublicAccess"] is True and vpc_config["PublicAccessCidrs"] == [
        "203.0.113.0/24"
    ]


def test_eks_control_plane_meets_hyperpod_requirements(template: Mapping[str, Any]) -> None:
    eks = only(logical_ids(template, "AWS::EKS::Cluster"))
    properties = _resource(template, eks)["Properties"]
    assert properties["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    assert properties["Version"] == "1.35"
    assert properties["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    version = _resource(template, _addon(template, "vpc-cni"))["Properties"]["AddonVersion"]
    assert tuple(int(p) for p in version[1:].split("-")[0].split(".")) >= (1, 18, 3)
    assert logical_ids(template, "AWS::IAM::OIDCProvider")
    hyperpod = _resource(template, _hyperpod(template))["Properties"]
    assert hyperpod["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks, "Arn"]}}}


def test_hyperpod_cluster_properties(template: Mapping[str, Any]) -> None:
    properties = _resource(template, _hyperpod(template))["Properties"]
    assert properties["NodeRecovery"] == "Automatic"
    (group,) = properties["InstanceGroups"]
    assert group["InstanceGroupName"] == "inference"
    assert group["InstanceType"] == "ml.g5.48xlarge"
    assert group["InstanceCount"] == 2
    assert group["ThreadsPerCore"] == 1
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert group["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert resolve_join(group["LifeCycleConfig"]["SourceS3Uri"], "bucket") == "s3://bucket/lifecycle"
    assert "TrainingPlanArn" not in group and "KubernetesConfig" not in group


def test_lifecycle_upload_carries_both_scripts(template: Mapping[str, Any]) -> None:
    upload = _resource(template, only(logical_ids(template, "Custom::CDKBucketDeployment")))["Properties"]
    assert upload["DestinationBucketKeyPrefix"] == "lifecycle/"
    assert {p.name for p in LIFECYCLE_SCRIPTS.iterdir()} == {"on_create.sh", "on_create_main.sh"}
    assert "on_create_main.sh" in (LIFECYCLE_SCRIPTS / "on_create.sh").read_text()
    bucket = only(
        [
            b
            for b in logical_ids(template, "AWS::S3::Bucket")
            if "KMSMasterKeyID"
            in json.dumps(_resource(template, b)["Properties"].get("BucketEncryption", {}))
            and b.startswith("HyperPod")
        ]
    )
    assert upload["DestinationBucketName"] == {"Ref": bucket}


def test_execution_role_is_least_privilege(template: Mapping[str, Any]) -> None:
    hyperpod = _resource(template, _hyperpod(template))["Properties"]
    role = hyperpod["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    managed = json.dumps(_resource(template, role)["Properties"]["ManagedPolicyArns"])
    assert "AmazonSageMakerClusterInstanceRolePolicy" in managed and "FullAccess" not in managed
    statements = [
        s
        for p in logical_ids(template, "AWS::IAM::Policy")
        if {"Ref": role} in _resource(template, p)["Properties"]["Roles"]
        for s in _resource(template, p)["Properties"]["PolicyDocument"]["Statement"]
    ]
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not any(a.endswith(":*") or a == "*" for a in actions), statement
        if statement["Resource"] == "*":
            assert all(a.startswith("ec2:Describe") or a == "ecr:GetAuthorizationToken" for a in actions), (
                statement
            )


_CHANGES_OWN_RESOURCES_ONLY = {
    "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:ModifyLoadBalancerAttributes",
    "elasticloadbalancing:ModifyTargetGroup",
    "elasticloadbalancing:SetSecurityGroups",
    "ec2:DeleteSecurityGroup",
}


def test_load_balancer_controller_changes_only_what_it_tagged(template: Mapping[str, Any]) -> None:
    config = _addon_config(template, "amazon-sagemaker-hyperpod-inference")
    role = config["alb"]["serviceAccount"]["roleArn"].removeprefix("${").removesuffix(".Arn}")
    statements = [
        s
        for p in logical_ids(template, "AWS::IAM::Policy")
        if {"Ref": role} in _resource(template, p)["Properties"]["Roles"]
        for s in _resource(template, p)["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_sid = {s["Sid"]: s for s in statements}
    owned = {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}
    granted_unconditionally = set()
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not any(a.endswith(":*") or a == "*" for a in actions), statement
        if "Condition" not in statement:
            granted_unconditionally.update(actions)
        elif set(actions) & _CHANGES_OWN_RESOURCES_ONLY:
            assert statement["Condition"] == owned, statement
    assert _CHANGES_OWN_RESOURCES_ONLY.isdisjoint(granted_unconditionally)
    # Tags: the ownership tag is set at creation only and can never be added to or removed from other resources.
    assert not {"elasticloadbalancing:AddTags", "ec2:CreateTags", "ec2:DeleteTags"} & {
        a
        for s in statements
        if "Condition" not in s and "loadbalancer/*" in json.dumps(s["Resource"])
        for a in s["Action"]
    }
    assert by_sid["CreateTaggedTargetGroups"]["Condition"] == {
        "Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}
    }
    assert by_sid["CreateTaggedInternalLoadBalancers"]["Condition"]["Null"] == {
        "aws:RequestTag/elbv2.k8s.aws/cluster": "false"
    }
    assert by_sid["TagSecurityGroupsAtCreation"]["Condition"]["StringEquals"] == {
        "ec2:CreateAction": "CreateSecurityGroup"
    }
    for sid in ("RetagOwnLoadBalancers", "RetagOwnSecurityGroups"):
        assert by_sid[sid]["Condition"] == {
            "Null": {
                "aws:RequestTag/elbv2.k8s.aws/cluster": "true",
                "aws:ResourceTag/elbv2.k8s.aws/cluster": "false",
            }
        }


# ---- outputs, chart packaging, settings -------------------------------------------------------------------


def test_outputs(template: Mapping[str, Any]) -> None:
    assert set(template["Outputs"]) == {
        "HyperPodClusterArn",
        "EksClusterName",
        "SageMakerEndpointName",
        "InvokeUrl",
        "KubeconfigCommand",
        "DashboardUrl",
    }
    assert template["Outputs"]["HyperPodClusterArn"]["Value"] == {
        "Fn::GetAtt": [_hyperpod(template), "ClusterArn"]
    }
    assert template["Outputs"]["SageMakerEndpointName"]["Value"] == "llama-3-1-8b-instruct"
    invoke = resolve_join(template["Outputs"]["InvokeUrl"]["Value"], "x")
    assert invoke == "https://runtime.sagemaker.x.x/endpoints/llama-3-1-8b-instruct/invocations"
    dashboard = resolve_join(template["Outputs"]["DashboardUrl"]["Value"], "r")
    assert dashboard == "https://r/cloudwatch/home?region=r#dashboards/dashboard/r"


def test_missing_chart_blocks_deployment_but_not_synth(template: Mapping[str, Any]) -> None:
    # The dependency chart construct adds the rule itself (every app that uses it gets it).
    ((assertion,),) = [
        rule["Assertions"]
        for name, rule in template["Rules"].items()
        if name.startswith("DependencyChartChartPackaged")
    ]
    assert assertion["Assert"] == {"Fn::Equals": ["not-packaged", "packaged"]}
    assert "fetch-dependency-chart.sh" in assertion["AssertDescription"]


def test_packaged_chart_is_installed_from_its_directory(tmp_path: Path) -> None:
    chart = write_minimal_chart(tmp_path / "chart")
    build = build_tier("hyperpod", **{"hyperpod.dependency_chart_dir": str(chart)})
    template = build.template().to_json()
    assert not [name for name in template.get("Rules", {}) if "ChartPackaged" in name]
    helm = _resource(template, only(logical_ids(template, "Custom::AWSCDK-EKS-HelmChart")))["Properties"]
    assert "ChartAssetURL" in helm and helm["Release"] == "hyperpod-dependencies"
    assert helm.get("Wait") in (None, False)  # nodes arrive after the chart: never wait for its pods


def test_prometheus_fsx_variant_without_registration() -> None:
    build = build_tier(
        "hyperpod",
        **{
            "hyperpod.model_source": "fsx",
            "hyperpod.fsx_file_system_id": "fs-0123456789abcdef0",
            "hyperpod.endpoint_name": "",
            "hyperpod.scaling_metric": "prometheus",
            # Prometheus scaling on the workspace URL: the first build whose CRD accepts it (4b76719).
            "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
            "hyperpod.instance_type": "ml.p5.48xlarge",
            "hyperpod.instance_count": 1,
        },
    )
    template = build.template().to_json()
    (document,) = manifest_documents(template)
    assert document["spec"]["autoScalingSpec"]["prometheusTrigger"]["query"].startswith(
        "sum(model_concurrent"
    )
    document["spec"]["autoScalingSpec"]["prometheusTrigger"]["serverAddress"] = (
        "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-12345678"
    )
    validate_inference_endpoint_config(document)
    assert document["spec"]["modelSourceConfig"]["fsxStorage"]["fileSystemId"] == "fs-0123456789abcdef0"
    assert "endpointName" not in document["spec"]
    assert "SageMakerEndpointName" not in template["Outputs"]
    assert "kubectl get ingress" in template["Outputs"]["InvokeUrl"]["Value"]
    assert not logical_ids(template, "AWS::S3::Bucket", BucketName="model")  # no model bucket for FSx
    keda_policy = json.dumps(template)
    assert "aps:QueryMetrics" in keda_policy


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hyperpod.tensor_parallel_size": 16}, r"hyperpod.tensor_parallel_size"),
        (
            {"hyperpod.instance_type": "ml.g6e.12xlarge", "hyperpod.tensor_parallel_size": 8},
            r"'hyperpod.tensor_parallel_size': got 8; expected at most 4, the GPUs of one ml.g6e.12xlarge",
        ),
        (
            {"hyperpod.instance_type_priority": ["ml.g5.48xlarge", "ml.p5.48xlarge"]},
            r"hyperpod.instance_type_priority.*ml.p5.48xlarge is not in any instance group",
        ),
        ({"hyperpod.model_source": "fsx"}, r"hyperpod.fsx_file_system_id.*when model_source is fsx"),
        ({"hyperpod.endpoint_name": ""}, r"hyperpod.scaling_metric.*prometheus when endpoint_name is null"),
        (
            {
                "hyperpod.scaling_metric": "prometheus",
                "hyperpod.observability": False,
                "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
            },
            r"hyperpod.scaling_metric.*cloudwatch when observability is false",
        ),
        ({"hyperpod.min_replicas": 3}, r"hyperpod.min_replicas.*at most max_replicas"),
        ({"hyperpod.availability_zone_id": "us-west-2a"}, r"hyperpod.availability_zone_id"),
        (
            {"hyperpod.public_endpoint_cidrs": "10.0.0.300/8"},
            r"'hyperpod.public_endpoint_cidrs\[0\]': got '10.0.0.300/8'; expected an IPv4 CIDR block",
        ),
        # The internet, or nearly: a public API endpoint must name the operator's own networks.
        (
            {"hyperpod.public_endpoint_cidrs": "0.0.0.0/0"},
            r"'hyperpod.public_endpoint_cidrs\[0\]': got '0.0.0.0/0'; expected an IPv4 CIDR block from /8 to "
            r"/32 naming your own networks.*internet",
        ),
        (
            {"hyperpod.public_endpoint_cidrs": ["203.0.113.0/24", "10.0.0.0/7"]},
            r"'hyperpod.public_endpoint_cidrs\[1\]': got '10.0.0.0/7'; expected .* from /8 to /32",
        ),
        # Larger than the largest VPC AWS allows, and too small for two public /24 and two private /20.
        (
            {"hyperpod.vpc_cidr": "10.0.0.0/8"},
            r"'hyperpod.vpc_cidr': got '10.0.0.0/8'; expected .* /16 to /18",
        ),
        (
            {"hyperpod.vpc_cidr": "10.192.0.0/19"},
            r"'hyperpod.vpc_cidr': got '10.192.0.0/19'; expected .* /16 to /18",
        ),
        ({"hyperpod.vpc_cidr": "10.192.0.1/16"}, r"'hyperpod.vpc_cidr': got '10.192.0.1/16'"),
        # A mistyped instance type is named with the closest of the GPU types the tier can size.
        (
            {"hyperpod.instance_type": "ml.g5.48xlarg"},
            r"'hyperpod.instance_type': got 'ml.g5.48xlarg'; expected .*\(closest: ml.g5.48xlarge",
        ),
        (
            {"hyperpod.instance_type_priority": ["ml.g5.48xlarge", "ml.g5.48xl"]},
            r"'hyperpod.instance_type_priority\[1\]': got 'ml.g5.48xl'; expected .*\(closest: ml.g5.48xlarge",
        ),
        ({"hyperpod.hyperpod_subnet_cidr": "10.1.0.0/29"}, r"'hyperpod.hyperpod_subnet_cidr'.* /16 to /28"),
        (
            {"hyperpod.vllm_image": "vllm/vllm-openai:latest"},
            r"'hyperpod.vllm_image'.*pinned tag \(not latest\)",
        ),
        ({"hyperpod.vllm_image": "vllm/vllm-openai"}, r"'hyperpod.vllm_image': got 'vllm/vllm-openai'"),
        ({"hyperpod.model_bucket_name": "my..weights"}, r"'hyperpod.model_bucket_name': got 'my..weights'"),
        (
            {"hyperpod.model_bucket_name": "my-.weights"},
            r"'hyperpod.model_bucket_name'.*no '..', '.-' or '-.'",
        ),
        ({"hyperpod.model_bucket_name": "192.168.5.4"}, r"'hyperpod.model_bucket_name'.*not an IP address"),
        ({"hyperpod.instance_type": "ml.t3.medium"}, r"hyperpod.instance_type"),
        (
            {"hyperpod.dependency_chart_dir": "/nonexistent/chart"},
            r"HyperPodDependencyChart: parameter 'chart_directory' got .*expected a directory with Chart.yaml",
        ),
        (
            {
                "hyperpod.hyperpod_subnet_cidr": "10.1.0.0/24",
                "hyperpod.instance_type": "ml.p5.48xlarge",
                "hyperpod.instance_count": 4,
            },
            r"hyperpod_subnet_cidr' got '10.1.0.0/24'; expected a block with at least 324 usable .*this one has 251",
        ),
    ],
)
def test_invalid_settings_fail_at_synth(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_app(tier="hyperpod", **overrides)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        make_app(tier="hyperpod", **{"hyperpod.tensor_parallel_size": 16})
    assert info.value.key == "hyperpod.tensor_parallel_size"


def test_account_requirements(tier_build: Callable[[str], TierBuild]) -> None:
    (stack,) = tier_build("hyperpod").stacks
    settings = stack.settings  # type: ignore[attr-defined]
    assert isinstance(settings, HyperPodSettings)
    requirements = settings.account_requirements()
    assert [(n.service, n.instance_type, n.count) for n in requirements.instances] == [
        ("sagemaker-hyperpod", "ml.g5.48xlarge", 2),
        ("ec2", "m7i.xlarge", 2),
    ]
    assert requirements.kubernetes_version == "1.35"
    assert requirements.availability_zone_ids == ("usw2-az2",)
    assert requirements.capacity_reservation_ids == ()


def test_account_requirements_include_the_training_plan() -> None:
    plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/p5-inference"
    (stack,) = build_tier("hyperpod", **{"hyperpod.training_plan_arn": plan}).stacks
    settings = stack.settings  # type: ignore[attr-defined]
    assert isinstance(settings, HyperPodSettings)
    assert settings.account_requirements().capacity_reservation_ids == (plan,)


def test_grafana_imported_bucket_variant_is_clean() -> None:
    from cdk_nag import AwsSolutionsChecks

    from tests.harness import cfn_lint_errors

    build = build_tier(
        "hyperpod",
        **{
            "hyperpod.model_bucket_name": "my-weights",
            "hyperpod.grafana": True,
            "hyperpod.scaling_metric": "prometheus",
            "hyperpod.operator_addon_version": "v2.0.0-eksbuild.2",
            "hyperpod.endpoint_name": "",
        },
    )
    assert nag_findings(build.app, AwsSolutionsChecks()) == []
    template = build.template().to_json()
    assert cfn_lint_errors(dict(template)) == []
    workspace = only(logical_ids(template, "AWS::Grafana::Workspace"))
    assert _resource(template, workspace)["Properties"]["AuthenticationProviders"] == ["AWS_SSO"]
    assert "amgWorkspace" in _addon_config(template, "amazon-sagemaker-hyperpod-observability")
    grafana_role = _resource(template, workspace)["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    unscoped = [
        statement["Action"]
        for policy in logical_ids(template, "AWS::IAM::Policy")
        if {"Ref": grafana_role} in _resource(template, policy)["Properties"]["Roles"]
        for statement in _resource(template, policy)["Properties"]["PolicyDocument"]["Statement"]
        if statement["Resource"] == "*"
    ]
    assert unscoped == ["aps:ListWorkspaces"]  # the one call without resource-level permissions
    (document,) = manifest_documents(template)
    assert document["spec"]["modelSourceConfig"]["s3Storage"]["bucketName"] == "my-weights"
    s3_csi = json.dumps(
        [
            _resource(template, p)["Properties"]
            for p in logical_ids(template, "AWS::IAM::Policy")
            if "S3Csi" in p
        ]
    )
    assert ":s3:::my-weights/*" in s3_csi and "kms:Decrypt" not in s3_csi
