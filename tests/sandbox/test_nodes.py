"""Kata sandbox capacity: Karpenter EC2NodeClass/NodePool, kata-deploy values and the Kata RuntimeClass.

Rendered without CDK and validated against the vendored CRDs and chart values of the pinned releases, then read
back from the synthesized stack to show that the stack applies exactly what was validated.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from aws_cdk.assertions import Template

from inference_tiers.k8s import sandbox_nodes as nodes
from inference_tiers.k8s.sandbox_nodes import SandboxNodesSpec
from inference_tiers.validation import ArgumentError
from tests.sandbox.helpers import (
    DATA,
    TOKEN,
    by_kind,
    helm_charts,
    karpenter_role_id,
    manifests,
    missing_values_keys,
    policy_statements,
    validate_custom_resource,
)

INFRA: dict[str, Any] = {
    "instance_profile": "InferenceTiers-AgentSandbox-KarpenterInstanceProfile-AbC123",
    "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
    "security_group_ids": ["sg-0123456789abcdef0"],
    "volume_kms_key_id": "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555",
    "tags": {"inference-tiers:tier": "agent-sandbox"},
}
SPECS = {
    "nested": SandboxNodesSpec(),
    "metal": SandboxNodesSpec(node_mode="metal", kata_shim="clh-runtime-rs", max_vcpus=2000),
    "nested-flex": SandboxNodesSpec(instance_families=["c8i-flex", "m8id"], consolidate_after_minutes=2),
}


@pytest.mark.parametrize("name", SPECS)
def test_node_class_and_pool_validate_against_the_karpenter_1_14_1_crds(name: str) -> None:
    spec = SPECS[name]
    validate_custom_resource(nodes.ec2_node_class(spec, **INFRA))
    validate_custom_resource(nodes.node_pool(spec))


def test_the_crd_check_can_fail() -> None:
    pool = nodes.node_pool(SandboxNodesSpec())
    pool["spec"]["disruption"]["consolidationPolicy"] = "WhenUnderutilized"
    with pytest.raises(jsonschema.ValidationError, match="WhenUnderutilized"):
        validate_custom_resource(pool)
    pool = nodes.node_pool(SandboxNodesSpec())
    pool["spec"]["template"]["spec"]["taint"] = []  # misspelled: the API server would drop it silently
    with pytest.raises(jsonschema.ValidationError, match="taint"):
        validate_custom_resource(pool)


@pytest.mark.parametrize("name", SPECS)
def test_runtime_class_validates_against_kubernetes_1_35(name: str) -> None:
    assert kubernetes_validate.validate(nodes.runtime_class(SPECS[name]), "1.35", strict=True) == "1.35"


def test_nested_mode_nodes_have_nested_virtualization_on_supported_families_only() -> None:
    spec = SandboxNodesSpec()
    node_class = nodes.ec2_node_class(spec, **INFRA)
    assert node_class["spec"]["cpuOptions"] == {"nestedVirtualization": "enabled"}
    families = _requirement(nodes.node_pool(spec), "karpenter.k8s.aws/instance-family")
    assert families == {"operator": "In", "values": ["c8i", "m8i", "r8i"]}
    assert set(families["values"]) <= set(nodes.NESTED_VIRTUALIZATION_FAMILIES)
    for family in nodes.NESTED_VIRTUALIZATION_FAMILIES:
        assert re.fullmatch(r"[cmr]8i(-flex|d)?", family), family


def test_metal_mode_selects_bare_metal_sizes_only() -> None:
    spec = SandboxNodesSpec(node_mode="metal")
    assert "cpuOptions" not in nodes.ec2_node_class(spec, **INFRA)["spec"]
    # Metal instances have an empty hypervisor label (virtual ones say nitro); instance-size In [metal] would
    # miss metal-24xl/metal-48xl.
    assert _requirement(nodes.node_pool(spec), "karpenter.k8s.aws/instance-hypervisor") == {
        "operator": "NotIn",
        "values": ["nitro"],
    }
    assert "karpenter.k8s.aws/instance-size" not in {r["key"] for r in _requirements(nodes.node_pool(spec))}


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"instance_families": ["m7i"]}, "instance_families[0]", "one of 'c8i'"),
        ({"node_mode": "metal", "instance_families": ["c8i-flex"]}, "instance_families[0]", "one of 'c6i'"),
        ({"instance_families": []}, "instance_families", "a list of 1 to 9 items"),
        ({"instance_families": "c8i"}, "instance_families", "a string is not a list"),
        ({"node_mode": "virtual"}, "node_mode", "one of 'nested', 'metal'"),
        ({"kata_shim": "fc"}, "kata_shim", "one of 'qemu-runtime-rs', 'clh-runtime-rs'"),
        ({"consolidate_after_minutes": 1}, "consolidate_after_minutes", "from 2 to 1440"),
        ({"ami_alias": "al2023@latest "}, "ami_alias", "al2023@latest or a pinned"),
        ({"ami_alias": "bottlerocket@latest"}, "ami_alias", "al2023@latest or a pinned"),
        ({"max_vcpus": True}, "max_vcpus", "an integer"),
    ],
)
def test_node_spec_refuses_what_would_give_nodes_without_kvm_or_kata(
    kwargs: dict[str, Any], param: str, accepted: str
) -> None:
    with pytest.raises(
        ArgumentError, match=rf"SandboxNodesSpec: parameter '{re.escape(param)}' .*{accepted}"
    ):
        SandboxNodesSpec(**kwargs)


def test_sandbox_nodes_are_tainted_and_only_the_kata_runtime_class_tolerates_them() -> None:
    spec = SandboxNodesSpec()
    pool_spec = nodes.node_pool(spec)["spec"]["template"]["spec"]
    assert pool_spec["taints"] == [
        {"key": "inference-tiers/sandbox", "value": "kata", "effect": "NoSchedule"}
    ]
    assert pool_spec["startupTaints"] == [{"key": "katacontainers.io/kata-runtime", "effect": "NoSchedule"}]
    runtime = nodes.runtime_class(spec)
    assert runtime["handler"] == "kata-qemu-runtime-rs" == runtime["metadata"]["name"]
    assert runtime["scheduling"]["tolerations"] == [
        {"key": "inference-tiers/sandbox", "operator": "Equal", "value": "kata", "effect": "NoSchedule"}
    ]
    # The node selector is satisfied by sandbox nodes (labels declared on the NodePool) and by no core node.
    labels = nodes.node_pool(spec)["spec"]["template"]["metadata"]["labels"]
    assert runtime["scheduling"]["nodeSelector"].items() <= labels.items()
    assert runtime["scheduling"]["nodeSelector"]["inference-tiers/node-pool"] != "system"


def _overheads() -> dict[str, dict[str, str]]:
    """The per-shim overhead table of kata-deploy 4.1.0's templates/runtimeclasses.yaml."""
    text = (DATA / "kata" / "templates" / "runtimeclasses.yaml").read_text()
    rows = re.findall(r'"([a-z0-9-]+)" \(dict "memory" "([0-9]+Mi)" "cpu" "([0-9.]+m?)"\)', text)
    return {shim: {"memory": memory, "cpu": cpu} for shim, memory, cpu in rows}


@pytest.mark.parametrize("shim", nodes.KATA_SHIMS)
def test_runtime_class_overhead_is_the_kata_4_1_0_chart_table(shim: str) -> None:
    table = _overheads()
    assert len(table) > 10
    assert nodes.KATA_OVERHEAD[shim] == table[shim]
    runtime = nodes.runtime_class(SandboxNodesSpec(kata_shim=shim))  # type: ignore[arg-type]
    assert runtime["overhead"]["podFixed"] == table[shim]


@pytest.mark.parametrize("name", SPECS)
def test_kata_deploy_values_are_keys_of_the_4_1_0_chart(name: str) -> None:
    values = nodes.kata_deploy_values(SPECS[name])
    assert missing_values_keys(values, "kata/values.yaml") == []
    chart = yaml.safe_load((DATA / "kata" / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == nodes.KATA_VERSION == values["image"]["tag"]


def test_kata_deploy_installs_one_shim_on_sandbox_nodes_and_lifts_the_startup_taint() -> None:
    values = nodes.kata_deploy_values(SandboxNodesSpec(kata_shim="clh-runtime-rs"))
    assert values["shims"] == {"disableAll": True, "clh-runtime-rs": {"enabled": True}}
    assert values["nodeSelector"] == {"inference-tiers/node-pool": "sandbox"}
    assert values["startupTaints"] == ["katacontainers.io/kata-runtime:NoSchedule"]
    tolerated = {(t["key"], t["effect"]) for t in values["tolerations"]}
    assert {
        ("inference-tiers/sandbox", "NoSchedule"),
        ("katacontainers.io/kata-runtime", "NoSchedule"),
    } <= tolerated
    assert values["runtimeClasses"] == {"enabled": False}
    assert values["deploymentMode"] == "daemonset"


def test_the_values_check_can_fail() -> None:
    assert missing_values_keys({"shims": {"qemu-runtime-rs": {"enable": True}}}, "kata/values.yaml") == [
        "shims.qemu-runtime-rs.enable"
    ]


def test_karpenter_values_are_keys_of_the_chart_and_pin_the_release_image_by_digest() -> None:
    """The pinned tag and digest are the ones the release commit writes into the published chart (AS-01).

    Evidence: aws/karpenter-provider-aws c88abbbad ("Stable Release updates Release v1.14.1"),
    charts/karpenter/values.yaml:122-131 (controller.image) and Chart.yaml:5-6, vendored in
    tests/data/sandbox/karpenter/chart (SOURCE.md).
    """
    values = nodes.karpenter_values(cluster_name="c", node_selector={"inference-tiers/node-pool": "system"})
    assert missing_values_keys(values, "karpenter/chart/values.yaml", free_form=("nodeSelector",)) == []
    chart = yaml.safe_load((DATA / "karpenter" / "chart" / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == nodes.KARPENTER_VERSION
    released = yaml.safe_load((DATA / "karpenter" / "chart" / "values.yaml").read_text())["controller"][
        "image"
    ]
    assert values["controller"]["image"] == {"tag": released["tag"], "digest": released["digest"]}
    assert nodes.version_tuple(nodes.KARPENTER_VERSION) >= nodes.KARPENTER_MINIMUM == (1, 13, 0)


# --- what the stack applies ----------------------------------------------------------------------------------


def test_stack_applies_the_validated_node_class_pool_and_runtime_class(template: Template) -> None:
    applied = manifests(template)
    spec = SandboxNodesSpec()
    # The nodes carry their own tier's tag, as every resource of the stack does (app_factory's Tags.of).
    (tier,) = {
        tag["Value"]
        for resource in template.to_json()["Resources"].values()
        for tag in resource.get("Properties", {}).get("Tags", [])
        if isinstance(tag, dict) and tag.get("Key") == "inference-tiers:tier"
    }
    token_infra = {
        "instance_profile": TOKEN,
        "subnet_ids": [TOKEN, TOKEN],
        "security_group_ids": [TOKEN],
        "volume_kms_key_id": TOKEN,
        "tags": {"inference-tiers:tier": tier},
    }
    assert by_kind(applied, "EC2NodeClass") == [nodes.ec2_node_class(spec, **token_infra)]
    assert by_kind(applied, "NodePool") == [nodes.node_pool(spec)]
    assert by_kind(applied, "RuntimeClass") == [nodes.runtime_class(spec)]


def test_stack_installs_pinned_karpenter_and_kata_deploy_charts(template: Template) -> None:
    charts = helm_charts(template)
    karpenter, kata = charts["karpenter"], charts["kata-deploy"]
    assert (karpenter["Chart"], karpenter["Version"]) == (nodes.KARPENTER_CHART, "1.14.1")
    assert karpenter["Namespace"] == "kube-system"
    assert karpenter["Values"]["settings"]["clusterName"] == TOKEN
    assert karpenter["Values"]["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "inference-tiers/node-pool": "system",
    }
    assert (kata["Chart"], kata["Version"]) == (nodes.KATA_CHART, "4.1.0")
    assert kata["Values"] == nodes.kata_deploy_values(SandboxNodesSpec())


def test_karpenter_role_is_pod_identity_only_and_scoped_to_tagged_resources(template: Template) -> None:
    associations = template.find_resources("AWS::EKS::PodIdentityAssociation")
    karpenter = [a for a in associations.values() if a["Properties"]["ServiceAccount"] == "karpenter"]
    assert len(karpenter) == 1 and karpenter[0]["Properties"]["Namespace"] == "kube-system"
    role_id = karpenter[0]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    trust = template.to_json()["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {"aws:SourceArn": trust[0]["Condition"]["ArnLike"]["aws:SourceArn"]},
            },
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    statements = policy_statements(template, role_id)
    for sid in ("CreateTaggedInstances", "TagOnCreate", "DeleteOwnInstancesAndTemplates", "TagOwnInstances"):
        conditions = statements[sid]["Condition"]
        tag_conditions = {**conditions.get("StringEquals", {}), **conditions.get("StringLike", {})}
        assert any(key.endswith("/eks:eks-cluster-name") for key in tag_conditions), sid
        assert any(key.endswith("/karpenter.sh/nodepool") for key in tag_conditions), sid
    assert statements["PassNodeRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}
    }
    assert not any("iam:CreateInstanceProfile" in str(s["Action"]) for s in statements.values())
    assert statements["ReadInstanceProfiles"]["Action"] == "iam:GetInstanceProfile"


def test_interruption_events_reach_an_encrypted_queue_only_karpenter_reads(template: Template) -> None:
    resources = template.to_json()["Resources"]
    (queue_id,) = [k for k, v in resources.items() if v["Type"] == "AWS::SQS::Queue"]
    queue = resources[queue_id]["Properties"]
    assert "KmsMasterKeyId" in queue and queue["MessageRetentionPeriod"] == 300
    rules = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::Events::Rule"]
    assert sorted(r["EventPattern"]["detail-type"][0] for r in rules) == [
        "AWS Health Event",
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Spot Instance Interruption Warning",
    ]
    assert all(r["Targets"][0]["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]} for r in rules)
    (queue_policy,) = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::SQS::QueuePolicy"]
    denies = [s for s in queue_policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert denies and denies[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    karpenter = helm_charts(template)["karpenter"]["Values"]
    assert karpenter["settings"]["interruptionQueue"] == TOKEN
    sqs_statements = [
        s
        for s in policy_statements(template, karpenter_role_id(template)).values()
        if "sqs:ReceiveMessage" in s["Action"]
    ]
    assert [s["Resource"] for s in sqs_statements] == [{"Fn::GetAtt": [queue_id, "Arn"]}]


def test_sandbox_nodes_join_with_their_own_role_and_encrypted_volumes(template: Template) -> None:
    entries = [
        e["Properties"]
        for e in template.find_resources("AWS::EKS::AccessEntry").values()
        if e["Properties"].get("Type") == "EC2_LINUX"
    ]
    # EC2_LINUX entries take no access policies: EKS maps them to the system:nodes group.
    assert len(entries) == 1 and entries[0].get("AccessPolicies", []) == []
    assert entries[0]["PrincipalArn"]["Fn::GetAtt"][0].startswith("KarpenterNodeRole")
    node_class = by_kind(manifests(template), "EC2NodeClass")[0]["spec"]
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert node_class["blockDeviceMappings"][0]["ebs"]["encrypted"] is True


def _requirements(pool: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pool["spec"]["template"]["spec"]["requirements"])


def _requirement(pool: dict[str, Any], key: str) -> dict[str, Any]:
    (found,) = [r for r in _requirements(pool) if r["key"] == key]
    return {k: v for k, v in found.items() if k != "key"}
