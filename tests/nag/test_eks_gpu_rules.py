"""EKS1-EKS3, GPU1 and LOG1 on compliant and non-compliant construct trees (L1 resources: no kubectl layer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from inference_tiers.nag.rules.gpu_launch_template_imds import is_accelerated
from tests.nag.support import findings, new_stack

ALL_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def _cluster(
    stack: Any, vpc: dict[str, Any], logging: list[str] = ALL_LOGS, secrets_key: bool = True
) -> None:
    eks.CfnCluster(
        stack,
        "Cluster",
        role_arn="arn:aws:iam::111122223333:role/eks",
        resources_vpc_config=eks.CfnCluster.ResourcesVpcConfigProperty(subnet_ids=["subnet-1"], **vpc),
        logging=eks.CfnCluster.LoggingProperty(
            cluster_logging=eks.CfnCluster.ClusterLoggingProperty(
                enabled_types=[eks.CfnCluster.LoggingTypeConfigProperty(type=t) for t in logging]
            )
        ),
        encryption_config=[
            eks.CfnCluster.EncryptionConfigProperty(
                provider=eks.CfnCluster.ProviderProperty(key_arn=kms.Key(stack, "Key").key_arn),
                resources=["secrets"],
            )
        ]
        if secrets_key
        else None,
    )


# EKS1


def test_eks1_private_endpoint_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {"endpoint_public_access": False, "endpoint_private_access": True})
    assert findings(stack, "InferenceTiers-EKS1") == {}


def test_eks1_public_endpoint_restricted_to_listed_cidrs_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {"endpoint_public_access": True, "public_access_cidrs": ["203.0.113.0/24"]})
    assert findings(stack, "InferenceTiers-EKS1") == {}


def test_eks1_default_and_open_endpoints_fail(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {})
    assert findings(stack, "InferenceTiers-EKS1") == {"InferenceTiers-EKS1": ["Test/Cluster"]}
    other = new_stack(tmp_path / "open")
    _cluster(other, {"endpoint_public_access": True, "public_access_cidrs": ["10.0.0.0/8", "0.0.0.0/0"]})
    assert findings(other, "InferenceTiers-EKS1") == {"InferenceTiers-EKS1": ["Test/Cluster"]}


# EKS2


def test_eks2_secrets_encryption_passes_and_its_absence_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {"endpoint_public_access": False})
    assert findings(stack, "InferenceTiers-EKS2") == {}
    other = new_stack(tmp_path / "plain")
    _cluster(other, {"endpoint_public_access": False}, secrets_key=False)
    assert findings(other, "InferenceTiers-EKS2") == {"InferenceTiers-EKS2": ["Test/Cluster"]}


# EKS3


def test_eks3_all_control_plane_logs_pass(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {"endpoint_public_access": False})
    assert findings(stack, "InferenceTiers-EKS3") == {}


def test_eks3_each_missing_log_type_is_its_own_finding(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _cluster(stack, {"endpoint_public_access": False}, logging=["api", "authenticator", "scheduler"])
    assert findings(stack, "InferenceTiers-EKS3") == {
        "InferenceTiers-EKS3[LogType::audit]": ["Test/Cluster"],
        "InferenceTiers-EKS3[LogType::controllerManager]": ["Test/Cluster"],
    }


# GPU1


def _template(stack: Any, name: str, instance_type: str | None, **metadata: Any) -> ec2.CfnLaunchTemplate:
    return ec2.CfnLaunchTemplate(
        stack,
        name,
        launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
            instance_type=instance_type,
            metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(**metadata) if metadata else None,
        ),
    )


def test_gpu1_imdsv2_with_hop_limit_one_passes(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _template(stack, "Gpu", "p5.48xlarge", http_tokens="required", http_put_response_hop_limit=1)
    assert findings(stack, "InferenceTiers-GPU1") == {}


def test_gpu1_gpu_template_with_defaults_fails_for_tokens_and_hop_limit(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    _template(stack, "Gpu", "g6e.12xlarge")
    _template(stack, "Hops", "trn2.48xlarge", http_tokens="required", http_put_response_hop_limit=2)
    _template(stack, "Cpu", "m7i.xlarge")  # not a GPU node: not this rule's business
    assert findings(stack, "InferenceTiers-GPU1") == {
        "InferenceTiers-GPU1[HopLimit]": ["Test/Gpu", "Test/Hops"],
        "InferenceTiers-GPU1[HttpTokens]": ["Test/Gpu"],
    }


def test_gpu1_template_of_a_gpu_node_group_is_checked_without_an_instance_type(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    template = _template(stack, "Nodes", None, http_tokens="required")
    eks.CfnNodegroup(
        stack,
        "Group",
        cluster_name="c",
        node_role="arn:aws:iam::111122223333:role/node",
        subnets=["subnet-1"],
        ami_type="AL2023_x86_64_NVIDIA",
        launch_template=eks.CfnNodegroup.LaunchTemplateSpecificationProperty(id=template.ref),
    )
    assert findings(stack, "InferenceTiers-GPU1") == {"InferenceTiers-GPU1[HopLimit]": ["Test/Nodes"]}


# LOG1


def test_log1_log_group_with_a_key_passes_and_without_fails(tmp_path: Path) -> None:
    stack = new_stack(tmp_path)
    logs.LogGroup(stack, "Encrypted", encryption_key=kms.Key(stack, "Key"))
    logs.LogGroup(stack, "Plain")
    assert findings(stack, "InferenceTiers-LOG1") == {"InferenceTiers-LOG1": ["Test/Plain/Resource"]}


@pytest.mark.parametrize(
    ("instance_type", "accelerated"),
    [
        ("p5.48xlarge", True),
        ("p4de.24xlarge", True),
        ("g6e.12xlarge", True),
        ("g4dn.xlarge", True),
        ("gr6.4xlarge", True),
        ("trn2.48xlarge", True),
        ("inf2.xlarge", True),
        ("ml.g5.2xlarge", True),
        ("m7g.xlarge", False),
        ("c7gn.large", False),
        ("m7i.xlarge", False),
    ],
)
def test_gpu1_knows_the_accelerated_families(instance_type: str, accelerated: bool) -> None:
    assert is_accelerated(instance_type) is accelerated
