"""InferenceTiers-Platform as synthesized: stages that only add, and a core node group that survives a node or AZ."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from inference_tiers.config import ConfigError, InstanceNeed
from inference_tiers.constructs.eks.cluster import SYSTEM_NODE_LABEL
from inference_tiers.k8s import grafana_chart, litellm_chart
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS
from inference_tiers.stacks.platform import STACK_NAME, STAGES
from tests.harness import CLEAN_GATES, TierBuild, build_tier, gate_findings, make_app, mask_asset_hashes
from tests.iam_policy import listed
from tests.ops.helpers import tier_requirements
from tests.sandbox.helpers import DATA, helm_charts


def stage_template(stage: str) -> dict[str, Any]:
    build = build_tier("platform", **{"platform.stage": stage})
    template: dict[str, Any] = mask_asset_hashes(build.templates()[STACK_NAME])
    return template


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    return {stage: stage_template(stage) for stage in STAGES}


def _split_policy(resource: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """An IAM policy resource without its statements, and its statements."""
    properties = resource.get("Properties", {})
    document = properties.get("PolicyDocument", {})
    rest = {**resource, "Properties": {**properties, "PolicyDocument": {**document, "Statement": None}}}
    return rest, list(document.get("Statement", []))


def _kept(below: Any, above: Any) -> bool:
    """``above`` keeps ``below``: equal, or (an IAM policy) the same policy with statements added. A higher stage
    may grant a shared role more (the kubectl provider reads the chart assets a stage adds): an in-place update
    that takes nothing away."""
    if not isinstance(below, dict) or not isinstance(above, dict) or below.get("Type") != "AWS::IAM::Policy":
        return bool(below == above)
    (below_rest, below_statements), (above_rest, above_statements) = (
        _split_policy(below),
        _split_policy(above),
    )
    return below_rest == above_rest and all(statement in above_statements for statement in below_statements)


def changes_below(lower: dict[str, Any], higher: dict[str, Any]) -> dict[str, list[str]]:
    """What the higher stage's template removes or alters of the lower one's resources and outputs."""
    found: dict[str, list[str]] = {}
    for section in ("Resources", "Outputs", "Conditions", "Rules"):
        below, above = lower.get(section, {}), higher.get(section, {})
        altered = [
            name for name, value in below.items() if name not in above or not _kept(value, above[name])
        ]
        if altered:
            found[section] = altered
    return found


@pytest.mark.parametrize(("lower", "higher"), list(zip(STAGES, STAGES[1:], strict=False)))
def test_climbing_a_stage_only_adds(lower: str, higher: str, templates: dict[str, dict[str, Any]]) -> None:
    """Every resource and output of a stage is in the next one with the same logical id and properties (an
    update from one stage to the next replaces nothing), and the next stage adds something."""
    assert changes_below(templates[lower], templates[higher]) == {}
    assert set(templates[higher]["Resources"]) > set(templates[lower]["Resources"])


def test_the_climb_check_sees_a_changed_property_and_a_removed_grant(
    templates: dict[str, dict[str, Any]],
) -> None:
    lower = templates["gateway"]
    resources = lower["Resources"]
    name = next(n for n, r in resources.items() if r["Type"] == "AWS::EKS::Nodegroup")
    policy = next(n for n, r in resources.items() if r["Type"] == "AWS::IAM::Policy")
    document = resources[policy]["Properties"]["PolicyDocument"]
    altered = {
        **resources,
        name: {**resources[name], "Properties": {**resources[name]["Properties"], "Labels": {}}},
        policy: {
            **resources[policy],
            "Properties": {
                **resources[policy]["Properties"],
                "PolicyDocument": {**document, "Statement": []},
            },
        },
    }
    assert sorted(changes_below(lower, {**lower, "Resources": altered})["Resources"]) == sorted(
        [name, policy]
    )


def test_default_stage_is_tenants_with_the_sandboxes(tier_build: Callable[[str], TierBuild]) -> None:
    charts = helm_charts(tier_build("platform").template(STACK_NAME))
    assert {"karpenter", "kata-deploy", "agent-sandbox"} <= set(charts)


def test_stage_gateway_has_no_karpenter_and_no_sandboxes() -> None:
    charts = helm_charts(build_tier("platform", **{"platform.stage": "gateway"}).template(STACK_NAME))
    assert not {"karpenter", "kata-deploy", "agent-sandbox"} & set(charts)


def core_node_group(template: dict[str, Any]) -> dict[str, Any]:
    groups = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"]
    assert len(groups) == 1
    properties: dict[str, Any] = groups[0]["Properties"]
    return properties


@pytest.mark.parametrize("stage", STAGES)
def test_core_node_group_is_on_demand_labelled_untainted_and_spread_over_two_azs(
    stage: str, templates: dict[str, dict[str, Any]]
) -> None:
    """platform-cluster.md §7 trap 7: a single node or AZ strands a Karpenter replica and EBS-backed pods."""
    template = templates[stage]
    group = core_node_group(template)
    assert group["CapacityType"] == "ON_DEMAND"
    assert group["Labels"] == {**CORE_NODE_LABELS, SYSTEM_NODE_LABEL: "system"}
    assert "Taints" not in group
    assert group["ScalingConfig"]["MinSize"] >= 2
    assert group["InstanceTypes"] == ["m7i.xlarge"]
    subnets = [template["Resources"][ref["Ref"]]["Properties"] for ref in group["Subnets"]]
    zones = {str(subnet["AvailabilityZone"]) for subnet in subnets}
    assert len(zones) == 2, zones


def test_core_settings_reach_the_node_group() -> None:
    build = build_tier(
        "platform",
        **{
            "platform.stage": "gateway",
            "platform.core_instance_type": "c7i.2xlarge",
            "platform.core_nodes": 3,
        },
    )
    group = core_node_group(build.templates()[STACK_NAME])
    assert group["InstanceTypes"] == ["c7i.2xlarge"]
    assert group["ScalingConfig"] == {"MinSize": 3, "DesiredSize": 3, "MaxSize": 3}


def test_karpenter_runs_on_core_nodes_only_and_fits_them(tier_build: Callable[[str], TierBuild]) -> None:
    """Karpenter manages only the Kata (and GPU) pools and runs on the core nodes. Its chart's defaults (the
    vendored aws/karpenter-provider-aws release-v1.14.1 charts/karpenter/values.yaml, lines 49 and 90-107: two
    replicas, a required node affinity ``karpenter.sh/nodepool DoesNotExist``, a required anti-affinity per
    hostname and a zone spread with DoNotSchedule), which our values leave in place, need as many core nodes as
    replicas over two AZs (platform-cluster.md §7 trap 7)."""
    chart = yaml.safe_load((DATA / "karpenter" / "chart" / "values.yaml").read_text(encoding="utf-8"))
    template = tier_build("platform").template(STACK_NAME)
    values = {**chart, **helm_charts(template)["karpenter"]["Values"]}
    group = core_node_group(template.to_json())
    selector = {k: v for k, v in values["nodeSelector"].items() if k != "kubernetes.io/os"}
    assert selector and selector.items() <= group["Labels"].items()
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}
    ]
    anti = values["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [{"topologyKey": "kubernetes.io/hostname"}]
    assert group["ScalingConfig"]["MinSize"] >= values["replicas"] == 2
    assert [c["topologyKey"] for c in values["topologySpreadConstraints"]] == ["topology.kubernetes.io/zone"]


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        (
            "platform.pool.max_gpus",
            '{"model_id": "a/b", "served_model_name": "p", "max_gpus": 2}',
            "at least",
        ),
        ("platform.pool.model_id", '{"served_model_name": "p"}', "this entry is required"),
        ("platform.pool.gpu", '{"model_id": "a/b", "served_model_name": "p", "gpu": 1}', "a known key"),
        ("platform.stage", "everything", "one of gateway, tenants, pool"),
        ("platform.core_nodes", "1", "an integer from 2 to 10"),
        ("platform.core_instance_type", "g6.xlarge", "an x86 m/c/r instance type"),
        ("platform.vpc_cidr", "10.0.0.0/20", "an IPv4 CIDR block from /16 to /16"),
        ("platform.gateway_replicas", "1", "an integer from 2 to 100"),
        ("platform.tenant_models", '{"team-a": {"models": ["nova-lite"]}}', "one entry per tenant"),
        (
            "platform.tenant_models.team-b.models",
            '{"team-a": {"models": ["nova-lite"]}, "team-b": {"models": ["qwen3-8b"]}}',
            r"model names the gateway serves.*not \['qwen3-8b'\]",
        ),
        (
            "platform.tenant_models.team-a.rpm_limit",
            '{"team-a": {"models": ["nova-lite"], "rpm_limit": 0}, "team-b": {"models": ["nova-lite"]}}',
            "",
        ),
        ("platform.guardrail_arn", "arn:aws:bedrock:us-east-1:1:guardrail/abc", "a guardrail ARN"),
        ("platform.fallbacks.nova-lite", '{"nova-lite": ["llama"]}', "model names among"),
        ("platform.certificate_arn", "not-an-arn", "an ACM certificate ARN"),
    ],
)
def test_bad_values_name_the_key(key: str, value: Any, accepted: str) -> None:
    # A nested key's value is given at its top-level setting (platform.tenant_models, platform.fallbacks).
    top = ".".join(key.split(".")[:2])
    with pytest.raises(ConfigError, match=rf"context key '{re.escape(key)}': got .*expected .*{accepted}"):
        make_app(tier="platform", **{top: value})


def test_the_gateway_s_ceiling_is_at_least_its_floor() -> None:
    with pytest.raises(
        ConfigError, match=r"'platform.gateway_max_replicas': got 3.*at least platform.gateway_replicas \(4\)"
    ):
        make_app(tier="platform", **{"platform.gateway_replicas": "4", "platform.gateway_max_replicas": "3"})


def test_stages_climb_in_the_documented_order() -> None:
    assert STAGES == ("gateway", "tenants", "pool")


@pytest.mark.parametrize(("stage", "sandbox_images"), [("gateway", False), ("tenants", True)])
def test_preflight_needs_the_core_nodes_and_from_stage_tenants_the_sandbox_images(
    stage: str, sandbox_images: bool
) -> None:
    needs = tier_requirements("platform", f"platform.stage={stage}", "platform.core_nodes=3")
    assert needs.instances == (InstanceNeed("ec2", "m7i.xlarge", 3),)
    assert any(need.set_by == "platform.sandbox_image" for need in needs.images) == sandbox_images


def _resource_ids(template: dict[str, Any], path_part: str) -> list[str]:
    return [k for k, r in template["Resources"].items() if path_part in k]


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_the_gateway_its_observability_and_kube_state_metrics(
    stage: str, templates: dict[str, dict[str, Any]]
) -> None:
    template = templates[stage]
    charts = {
        r["Properties"]["Release"]: r
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    assert {litellm_chart.RELEASE, grafana_chart.RELEASE, litellm_chart.SECRETS_STORE_RELEASE} <= set(charts)
    assert [r for r in template["Resources"].values() if r["Type"] == "AWS::APS::Scraper"]
    core = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup")
    # Each chart waits for pods only the core nodes run.
    for release in (litellm_chart.RELEASE, grafana_chart.RELEASE, litellm_chart.SECRETS_STORE_RELEASE):
        assert core in charts[release]["DependsOn"], release
    assert _resource_ids(template, "ExportersKubeStateMetrics")


def test_stage_tenants_gives_each_tenant_a_key_after_the_gateway_and_its_namespace(
    templates: dict[str, dict[str, Any]],
) -> None:
    resources = templates["tenants"]["Resources"]
    (provisioner,) = _resource_ids(templates["tenants"], "TenantKeysProvisioner")
    (gateway_chart,) = (
        k
        for k, r in resources.items()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == litellm_chart.RELEASE
    )
    assert gateway_chart in resources[provisioner]["DependsOn"]
    for tenant in ("teama", "teamb"):
        (keys,) = _resource_ids(templates["tenants"], f"TenantKeysTenant{tenant}")
        (namespace,) = _resource_ids(templates["tenants"], f"Tenant{tenant}Namespace")
        (objects,) = _resource_ids(templates["tenants"], f"Tenant{tenant}Objects")
        assert namespace in resources[keys]["DependsOn"]
        assert keys in resources[objects]["DependsOn"]
    assert not _resource_ids(templates["gateway"], "TenantKeys")


@pytest.mark.parametrize("stage", ["gateway", "pool"])
def test_every_stage_passes_every_gate(stage: str) -> None:
    """Both nag packs, cfn-lint and checkov on the stages besides the default one (tests/test_tiers_common.py
    runs them on ``tenants``; the CLI synth with validation on is tests/test_cli_synth.py, ``platform@<stage>``)."""
    assert gate_findings(build_tier("platform", **{"platform.stage": stage})) == CLEAN_GATES


def test_stage_pool_adds_the_pool_to_litellm_after_the_gateway_and_its_inference_gateway(
    templates: dict[str, dict[str, Any]],
) -> None:
    resources = templates["pool"]["Resources"]
    (registration,) = _resource_ids(templates["pool"], "PoolRegistration")
    (objects,) = _resource_ids(templates["pool"], "PoolInferenceGatewayObjects")
    (gateway_chart,) = (
        k
        for k, r in resources.items()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == litellm_chart.RELEASE
    )
    assert {gateway_chart, objects} <= set(resources[registration]["DependsOn"])
    (nodes,) = _resource_ids(templates["pool"], "PoolNodes")
    karpenter = next(
        k
        for k, r in resources.items()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == "karpenter"
    )
    assert karpenter in resources[nodes]["DependsOn"]
    assert not [k for k in templates["tenants"]["Resources"] if k.startswith("Pool")]
    # In-cluster only: no NLB to wait for, and LiteLLM is given the gateway Service's cluster DNS name.
    assert not [k for k in resources if k.startswith("Pool") and "LoadBalancer" in k]
    assert "inference-gateway-istio.inference-pool.svc.cluster.local:80/v1" in json.dumps(
        resources[registration]
    )


def test_the_gateway_keeps_models_in_its_database_from_the_first_stage() -> None:
    # What lets the pool be added without touching the gateway's deployed configuration.
    charts = helm_charts(build_tier("platform", **{"platform.stage": "gateway"}).template(STACK_NAME))
    proxy = charts[litellm_chart.RELEASE]["Values"]["gateway"]["config"]["proxy_config"]
    assert proxy["general_settings"]["store_model_in_db"] is True


def test_preflight_of_stage_pool_needs_gpu_quota_and_the_vllm_image() -> None:
    needs = tier_requirements("platform", "platform.stage=pool")
    assert InstanceNeed("ec2", "g6e.xlarge", 8) in needs.instances
    assert any(need.reference.startswith("vllm/vllm-openai:") for need in needs.images)


def test_tenants_may_name_the_pool_from_stage_pool_on() -> None:
    models = '{"team-a": {"models": ["pool-qwen3-8b"]}, "team-b": {"models": ["nova-lite"]}}'
    make_app(tier="platform", **{"platform.stage": "pool", "platform.tenant_models": models})
    with pytest.raises(ConfigError, match="platform.tenant_models.team-a.models"):
        make_app(tier="platform", **{"platform.stage": "tenants", "platform.tenant_models": models})


def test_the_pool_s_name_is_not_another_model_s() -> None:
    pool = '{"model_id": "a/b", "served_model_name": "nova-lite"}'
    with pytest.raises(
        ConfigError, match=r"'platform.pool': got \['nova-lite'\].*no other model of the gateway"
    ):
        make_app(tier="platform", **{"platform.stage": "pool", "platform.pool": pool})


def test_stage_pool_with_lora_adapters_reads_only_their_folders_and_passes_every_gate() -> None:
    pool = (
        '{"model_id": "Qwen/Qwen3-8B", "served_model_name": "pool-qwen3-8b", '
        '"lora_adapters": {"sql-lora": "s3://adapters-bucket/sql-lora/"}}'
    )
    build = build_tier("platform", **{"platform.stage": "pool", "platform.pool": pool})
    assert gate_findings(build) == CLEAN_GATES
    resources = build.template(STACK_NAME).to_json()["Resources"]
    statements = [
        statement
        for name, resource in resources.items()
        if name.startswith("PoolAdapterReader") and resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {tuple(listed(s["Action"])) for s in statements} == {("s3:ListBucket",), ("s3:GetObject",)}
    listing = next(s for s in statements if listed(s["Action"]) == ["s3:ListBucket"])
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["sql-lora/*"]}}


@pytest.mark.parametrize("tier", ["gateway", "platform"])
@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("fallbacks", '{"nova-lite": ["qwen3-8b"]}', "fallbacks.nova-lite"),
        ("requests_per_minute", '{"qwen3-8b": 60}', "requests_per_minute"),
    ],
)
def test_router_settings_may_not_name_a_sagemaker_model_that_is_not_served(
    tier: str, key: str, value: str, named: str
) -> None:
    """Without an endpoint (and without the sagemaker tier beside it) the SageMaker model is not served: a
    fallback or limit naming it is the user's mistake, refused by key (not a construct's ArgumentError)."""
    with pytest.raises(ConfigError, match=rf"'{tier}.{named}'.*model names the gateway serves"):
        make_app(tier=tier, **{f"{tier}.{key}": value, f"{tier}.allow_unguarded_fallbacks": "true"})
