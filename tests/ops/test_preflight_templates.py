"""``preflight --templates``: a user's own app (its own L1 resources beside one of the library's constructs) is
synthesized, and the scan finds what its deploy needs from an account; the command runs from a directory
outside this checkout and checks each of them (every AWS call denied here, so each check says what it lacked)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.aws_ec2 import CfnLaunchTemplate

from inference_tiers.config import AccountRequirements, AddonPin, ImageNeed, InstanceNeed
from inference_tiers.constructs import ApplicationInferenceProfile, CrossRegionProfile, Geography
from inference_tiers.ops import cli
from inference_tiers.ops.templates import TemplateError, requirements_from_templates
from tests.ops.test_tiers import ACCOUNT, DeniedClients

NOVA = "amazon.nova-2-lite-v1:0"
CLAUDE = "anthropic.claude-sonnet-4-20250514-v1:0"
ECR = "111122223333.dkr.ecr.us-west-2.amazonaws.com"
VLLM = f"{ECR}/vllm:v0.11.0"
LMI = f"{ECR}/djl-inference:0.33.0-lmi15.0.0-cu128"
GATEWAY = f"{ECR}/litellm:v1.77.5"
ROLE = "arn:aws:iam::111122223333:role/user"
SUBNETS = ("subnet-0123456789abcdef0", "subnet-0fedcba9876543210")


def _user_app(outdir: Path) -> None:
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:bundling-stacks": []})
    serving = cdk.Stack(app, "UserServing")
    sagemaker.CfnModel(
        serving,
        "Model",
        execution_role_arn=ROLE,
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(image=LMI),
    )
    sagemaker.CfnEndpointConfig(
        serving,
        "EndpointConfig",
        production_variants=[
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="main", model_name="m", instance_type="ml.g6e.2xlarge", initial_instance_count=2
            )
        ],
    )
    cluster = eks.CfnCluster(
        serving,
        "Cluster",
        version="1.35",
        role_arn=ROLE,
        resources_vpc_config=eks.CfnCluster.ResourcesVpcConfigProperty(subnet_ids=[SUBNETS[0], SUBNETS[1]]),
    )
    eks.CfnAddon(
        serving, "Cni", cluster_name=cluster.ref, addon_name="vpc-cni", addon_version="v1.20.4-eksbuild.1"
    )
    eks.CfnNodegroup(
        serving,
        "GpuNodes",
        cluster_name=cluster.ref,
        node_role=ROLE,
        subnets=[SUBNETS[0]],
        instance_types=["g6e.12xlarge"],
        scaling_config=eks.CfnNodegroup.ScalingConfigProperty(desired_size=3, min_size=1, max_size=4),
    )
    template = CfnLaunchTemplate(
        serving,
        "P5Template",
        launch_template_data=CfnLaunchTemplate.LaunchTemplateDataProperty(instance_type="p5.48xlarge"),
    )
    eks.CfnNodegroup(
        serving,
        "P5Nodes",
        cluster_name=cluster.ref,
        node_role=ROLE,
        subnets=[SUBNETS[0]],
        launch_template=eks.CfnNodegroup.LaunchTemplateSpecificationProperty(id=template.ref),
        scaling_config=eks.CfnNodegroup.ScalingConfigProperty(min_size=2, max_size=2),
    )
    # What aws_eks_v2.KubernetesManifest writes (aws-cdk-lib 2.275.0 aws-eks-v2/lib/k8s-manifest.js:
    # RESOURCE_TYPE "Custom::AWSCDK-EKS-KubernetesResource", Manifest = stack.toJsonString(manifest)); a token in
    # it (the cluster name) makes it an Fn::Join.
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "vllm", "annotations": {"cluster": cluster.ref}},
        "spec": {
            "template": {"spec": {"initContainers": [{"image": VLLM}], "containers": [{"image": VLLM}]}}
        },
    }
    cdk.CfnResource(
        serving,
        "Manifest",
        type="Custom::AWSCDK-EKS-KubernetesResource",
        properties={"ServiceToken": ROLE, "Manifest": serving.to_json_string([deployment])},
    )

    # An Auto Scaling group as aws-cdk's L2 writes it: sizes as strings, the type from a launch template.
    cdk.CfnResource(
        serving,
        "Workers",
        type="AWS::AutoScaling::AutoScalingGroup",
        properties={
            "MinSize": "1",
            "MaxSize": "4",
            "DesiredCapacity": "2",
            "LaunchTemplate": {"LaunchTemplateId": template.ref, "Version": "1"},
        },
    )

    gateway = cdk.Stack(app, "UserGateway")
    task = ecs.FargateTaskDefinition(gateway, "Task")
    task.add_container("litellm", image=ecs.ContainerImage.from_registry(GATEWAY))
    us_nova = CrossRegionProfile(model_id=NOVA, geography=Geography.US)
    ApplicationInferenceProfile(gateway, "Profile", model_source=us_nova)
    role = iam.Role(gateway, "Caller", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["bedrock:InvokeModel"],
            resources=[
                us_nova.arn(gateway),
                gateway.format_arn(
                    service="bedrock", account="", resource="foundation-model", resource_name=CLAUDE
                ),
            ],
        )
    )
    app.synth()


@pytest.fixture(scope="module")
def cdk_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("user-app") / "cdk.out"
    _user_app(out)
    return out


def test_the_scan_finds_what_the_users_app_needs(cdk_out: Path) -> None:
    found = requirements_from_templates(cdk_out)
    assert found.templates == ("UserGateway.template.json", "UserServing.template.json")
    first, claude = found.requirements
    assert sorted(first.instances, key=str) == sorted(
        [
            InstanceNeed("sagemaker-endpoint", "ml.g6e.2xlarge", 2),
            InstanceNeed("ec2", "g6e.12xlarge", 3),
            InstanceNeed("ec2", "p5.48xlarge", 2),  # from the launch template, MinSize without DesiredSize
            InstanceNeed("ec2", "p5.48xlarge", 2),  # the Auto Scaling group's DesiredCapacity "2"
        ],
        key=str,
    )
    assert first.kubernetes_version == "1.35"
    assert first.eks_addons == (AddonPin("vpc-cni", "v1.20.4-eksbuild.1", "UserServing.template.json: Cni"),)
    assert sorted(image.reference for image in first.images) == sorted([LMI, VLLM, GATEWAY])
    assert ImageNeed(VLLM, "UserServing.template.json: Manifest") in first.images
    # The Nova model is reached through the US cross-Region profile; Claude directly.
    assert (first.bedrock_model_id, first.bedrock_inference_profile_id) == (NOVA, f"us.{NOVA}")
    assert claude == AccountRequirements(bedrock_model_id=CLAUDE)


def test_preflight_checks_the_templates_from_outside_the_checkout(
    cdk_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    clients = DeniedClients()
    monkeypatch.setattr(cli, "_session", lambda args: clients)
    monkeypatch.setattr(cli, "_account", lambda clients: ACCOUNT)
    code = cli.main(["preflight", "--templates", str(cdk_out), "--json"])
    output = json.loads(capsys.readouterr().out)
    assert code == cli.EXIT_OK  # every check could only warn: each AWS call was denied
    checks = {result["check"] for result in output["results"]}
    assert {
        f"Bedrock model {NOVA}",
        f"inference profile us.{NOVA}",
        f"Bedrock model {CLAUDE}",
        "EKS Kubernetes 1.35",
        "EKS add-on vpc-cni",
        f"image {VLLM}",
        "SageMaker quotas",
        "instance type offerings",
    } <= checks
    assert "ecr:DescribeImages" in clients.calls and "eks:DescribeAddonVersions" in clients.calls
    assert all(result["status"] == "warn" for result in output["results"]), output["results"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--templates", "{empty}"], "no *.template.json found; run cdk synth"),
        (["--templates", "{empty}/nothing"], "not a directory"),
        (["--templates", "{out}", "-c", "x=1"], "--cdk-json and -c do not apply"),
    ],
    ids=["no-templates", "missing-folder", "with-context"],
)
def test_unusable_templates_folder_is_a_usage_error(
    argv: list[str], message: str, cdk_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.format(empty=tmp_path, out=cdk_out) for a in argv]
    assert cli.main(["preflight", *args]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_tier_and_templates_exclude_each_other(cdk_out: Path) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["preflight", "--tier", "bedrock", "--templates", str(cdk_out)])
    with pytest.raises(TemplateError, match="cannot read as a JSON template"):
        broken = cdk_out.parent / "broken"
        broken.mkdir(exist_ok=True)
        (broken / "App.template.json").write_text("{", encoding="utf-8")
        requirements_from_templates(broken)
