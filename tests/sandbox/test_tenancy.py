"""Tenancy: namespace, quota, limits, NetworkPolicies, SandboxTemplate, warm pool, claims, admission policy.

Rendered without CDK and validated against Kubernetes 1.35 (kubernetes-validate) and the vendored agent-sandbox
v0.5.6 CRDs, then read back from the synthesized stack.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from inference_tiers.constructs.sandbox.controller import MISSING_CHART_PLACEHOLDER, _check_chart_directory
from inference_tiers.k8s import litellm_chart
from inference_tiers.k8s import sandbox_tenancy as tenancy_k8s
from inference_tiers.k8s.sandbox_nodes import SandboxNodesSpec, kata_overhead, runtime_class
from inference_tiers.k8s.sandbox_tenancy import TENANT_LABEL, TenancySpec, TenantSpec
from inference_tiers.validation import Args, ArgumentError
from tests.harness import TierBuild
from tests.sandbox.helpers import (
    by_kind,
    helm_charts,
    manifests,
    missing_values_keys,
    validate_custom_resource,
)

TENANCY = TenancySpec(
    runtime_class_name="kata-qemu-runtime-rs",
    overhead_cpu_millicores=250,
    overhead_memory_mib=320,
    model_gateway_url="https://gateway.internal.example.com",
    model_gateway_cidrs=("10.60.0.0/24", "10.60.1.0/24"),
)
TENANTS = {
    "default": TenantSpec(name="team-a"),
    "warm-egress": TenantSpec(
        name="research",
        max_sandboxes=50,
        warm_pool=5,
        cpu_millicores=4000,
        memory_mib=8192,
        egress=("10.20.0.0/16:5432", "192.0.2.10/32:443"),
        image="ghcr.io/example/agent:1.2.3",
    ),
}
CORE_KINDS = {"Namespace", "ResourceQuota", "LimitRange", "NetworkPolicy", "ServiceAccount"}


def all_objects(tenant: TenantSpec, tenancy: TenancySpec = TENANCY) -> list[dict[str, Any]]:
    return [tenancy_k8s.namespace(tenant), *tenancy_k8s.tenant_manifests(tenant, tenancy)]


@pytest.mark.parametrize("name", TENANTS)
def test_every_tenant_object_validates(name: str) -> None:
    objects = all_objects(TENANTS[name])
    assert {m["kind"] for m in objects} == CORE_KINDS | {"SandboxTemplate", "SandboxWarmPool"}
    for manifest in objects:
        if manifest["kind"] in CORE_KINDS:
            assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35", manifest["kind"]
        else:
            validate_custom_resource(manifest)


@pytest.mark.parametrize("name", TENANTS)
def test_the_sandbox_pod_is_a_valid_kubernetes_1_35_pod(name: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sandbox", "namespace": TENANTS[name].namespace},
        "spec": tenancy_k8s.sandbox_pod_spec(TENANTS[name], TENANCY),
    }
    assert kubernetes_validate.validate(pod, "1.35", strict=True) == "1.35"


def test_admission_policy_and_claim_validate() -> None:
    for manifest in tenancy_k8s.admission_policy("kata-qemu-runtime-rs"):
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35"
    validate_custom_resource(tenancy_k8s.sandbox_claim(TENANTS["default"], "2026-12-03T18:00:00Z"))


def test_sandbox_pods_cannot_run_without_kata_with_a_token_or_with_privilege_escalation() -> None:
    spec = tenancy_k8s.sandbox_pod_spec(TENANTS["default"], TENANCY)
    assert spec["runtimeClassName"] == "kata-qemu-runtime-rs"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] == container["resources"]["limits"]
    assert not any(spec[key] for key in ("hostNetwork", "hostPID", "hostIPC"))
    service_account = tenancy_k8s.service_account(TENANTS["default"])
    assert service_account["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == service_account["metadata"]["name"]


def test_sandbox_pods_can_only_land_on_kata_nodes() -> None:
    """Placement comes from the RuntimeClass alone: the pod adds no selector or toleration that could widen it."""
    spec = tenancy_k8s.sandbox_pod_spec(TENANTS["default"], TENANCY)
    assert "nodeSelector" not in spec and "tolerations" not in spec and "affinity" not in spec
    assert "nodeName" not in spec
    scheduling = runtime_class(SandboxNodesSpec())["scheduling"]
    assert scheduling["nodeSelector"] == {
        "inference-tiers/node-pool": "sandbox",
        "katacontainers.io/kata-runtime": "true",
    }


def test_admission_policy_names_the_conditions_and_binds_to_tenant_namespaces() -> None:
    policy, binding = tenancy_k8s.admission_policy("kata-clh-runtime-rs")
    expressions = [v["expression"] for v in policy["spec"]["validations"]]
    assert "object.spec.runtimeClassName == 'kata-clh-runtime-rs'" in expressions[0]
    assert "automountServiceAccountToken" in expressions[1]
    assert "allowPrivilegeEscalation" in expressions[2] and "initContainers" in expressions[2]
    assert "shutdownTime" in expressions[3] and "'Retain'" in expressions[3]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "inference-tiers/sandbox-tenant", "operator": "Exists"}
    ]
    assert tenancy_k8s.namespace(TENANTS["default"])["metadata"]["labels"]["inference-tiers/sandbox-tenant"]


def test_tenant_namespace_enforces_pod_security_restricted() -> None:
    labels = tenancy_k8s.namespace(TENANTS["default"])["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.35"


def _policies(tenant: TenantSpec, tenancy: TenancySpec = TENANCY) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p["spec"] for p in tenancy_k8s.network_policies(tenant, tenancy)}


@pytest.mark.parametrize("name", TENANTS)
def test_every_tenant_namespace_has_default_deny_underneath(name: str) -> None:
    policies = _policies(TENANTS[name])
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    allowed = [
        block["ipBlock"]
        for spec in policies.values()
        for rule in spec.get("egress", [])
        for block in rule["to"]
        if "ipBlock" in block
    ]
    for block in allowed:
        network = ipaddress.IPv4Network(block["cidr"])
        assert network.prefixlen >= 16, block  # nothing close to 0.0.0.0/0
        assert ipaddress.IPv4Address("169.254.169.254") not in network
    for spec in policies.values():
        for rule in spec.get("egress", []):
            assert rule.get("ports"), "every egress rule names its ports"


def test_egress_is_dns_the_gateway_the_allow_list_and_pod_identity() -> None:
    policies = _policies(TENANTS["warm-egress"])
    dns = policies["allow-dns"]["egress"][0]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert {p["port"] for p in dns["ports"]} == {53}
    egress = [
        (b["ipBlock"]["cidr"], r["ports"][0]["port"])
        for r in policies["allow-egress"]["egress"]
        for b in r["to"]
    ]
    assert egress == [
        ("169.254.170.23/32", 80),
        ("10.60.0.0/24", 443),
        ("10.60.1.0/24", 443),
        ("10.20.0.0/16", 5432),
        ("192.0.2.10/32", 443),
    ]
    ingress = policies["allow-clients"]["ingress"]
    assert ingress == [
        {"from": [{"namespaceSelector": {"matchLabels": {"inference-tiers/sandbox-client": "research"}}}]}
    ]


def test_without_a_gateway_only_dns_and_pod_identity_leave_the_namespace() -> None:
    tenancy = TenancySpec(
        runtime_class_name="kata-qemu-runtime-rs", overhead_cpu_millicores=250, overhead_memory_mib=320
    )
    egress = _policies(TENANTS["default"], tenancy)["allow-egress"]["egress"]
    assert egress == [
        {"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}], "ports": [{"protocol": "TCP", "port": 80}]}
    ]
    env = tenancy_k8s.sandbox_pod_spec(TENANTS["default"], tenancy)["containers"][0]["env"]
    assert [e["name"] for e in env] == ["HOME"]


@pytest.mark.parametrize(
    ("egress", "accepted"),
    [
        ("169.254.0.0/16:80", "does not contain the instance metadata service"),
        ("0.0.0.0/0:443", "does not contain the instance metadata service"),
        ("10.0.0.1/16:443", "CIDR:port"),
        ("10.0.0.0/16", "CIDR:port"),
        ("10.0.0.0/16:0", "CIDR:port"),
        ("example.com:443", "CIDR:port"),
    ],
)
def test_egress_allow_list_refuses_metadata_and_malformed_entries(egress: str, accepted: str) -> None:
    with pytest.raises(ArgumentError, match=rf"TenantSpec: parameter 'egress\[0\]' got .*{accepted}"):
        TenantSpec(name="t", egress=[egress])


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"name": "Team_A"}, "name", "a DNS label of at most 30"),
        ({"name": "t", "warm_pool": 11}, "warm_pool", "from 0 to 10"),
        ({"name": "t", "cpu_millicores": 100}, "cpu_millicores", "from 250 to 64000"),
        ({"name": "t", "image": "python:latest"}, "image", "pinned tag"),
        ({"name": "t", "egress": ["10.0.0.0/8:1", "10.0.0.0/8:1"]}, r"egress\[1\]", "each item at most once"),
    ],
)
def test_tenant_spec_refuses_bad_values(kwargs: dict[str, Any], param: str, accepted: str) -> None:
    with pytest.raises(ArgumentError, match=rf"TenantSpec: parameter '{param}' got .*{accepted}"):
        TenantSpec(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        (
            {"model_gateway_url": "gateway:4000", "model_gateway_cidrs": ["10.0.0.0/24"]},
            "model_gateway_url",
            "an http",
        ),
        (
            {"model_gateway_url": "https://g.example/v1", "model_gateway_cidrs": ["10.0.0.0/24"]},
            "model_gateway_url",
            "without path",
        ),
        ({"model_gateway_url": "https://g.example"}, "model_gateway_cidrs", "a list of 1 to 16"),
        ({"model_gateway_cidrs": ["10.0.0.0/24"]}, "model_gateway_cidrs", "empty without model_gateway_url"),
        (
            {"model_gateway_url": "http://g:80", "model_gateway_cidrs": ["169.254.169.0/24"]},
            r"model_gateway_cidrs\[0\]",
            "metadata",
        ),
    ],
)
def test_tenancy_spec_refuses_bad_gateway_settings(kwargs: dict[str, Any], param: str, accepted: str) -> None:
    base = {
        "runtime_class_name": "kata-qemu-runtime-rs",
        "overhead_cpu_millicores": 250,
        "overhead_memory_mib": 320,
    }
    with pytest.raises(ArgumentError, match=rf"TenancySpec: parameter '{param}' got .*{accepted}"):
        TenancySpec(**base, **kwargs)


def test_gateway_port_comes_from_the_url() -> None:
    base = {
        "runtime_class_name": "kata-qemu-runtime-rs",
        "overhead_cpu_millicores": 0,
        "overhead_memory_mib": 0,
    }
    assert (
        TenancySpec(
            **base, model_gateway_url="http://10.0.1.5:4000", model_gateway_cidrs=["10.0.1.5/32"]
        ).gateway_port
        == 4000
    )
    assert (
        TenancySpec(
            **base, model_gateway_url="http://gw.internal", model_gateway_cidrs=["10.0.1.0/24"]
        ).gateway_port
        == 80
    )


def test_quota_counts_the_kata_overhead_of_every_sandbox() -> None:
    tenant = TENANTS["warm-egress"]
    cpu, memory = kata_overhead("qemu-runtime-rs")
    hard = tenancy_k8s.resource_quota(tenant, TENANCY)["spec"]["hard"]
    assert hard["pods"] == "50" == hard["count/sandboxclaims.extensions.agents.x-k8s.io"]
    assert hard["limits.cpu"] == f"{50 * (4000 + cpu)}m" == hard["requests.cpu"]
    assert hard["limits.memory"] == f"{50 * (8192 + memory)}Mi"
    assert (
        hard["services.loadbalancers"] == hard["services.nodeports"] == hard["persistentvolumeclaims"] == "0"
    )
    limits = tenancy_k8s.limit_range(tenant)["spec"]["limits"][0]
    assert limits["max"] == limits["default"] == {"cpu": "4000m", "memory": "8192Mi"}


@pytest.mark.parametrize("shim", ["qemu", "", None])
def test_kata_overhead_of_an_unknown_shim_names_the_parameter_and_the_shims(shim: Any) -> None:
    with pytest.raises(ArgumentError) as raised:
        kata_overhead(shim)
    assert (raised.value.owner, raised.value.param, raised.value.value) == ("kata_overhead", "shim", shim)
    assert "'qemu-runtime-rs'" in raised.value.accepted and "'clh-runtime-rs'" in raised.value.accepted


def test_template_keeps_its_pods_unmanaged_by_the_controllers_network_policy_and_undisrupted() -> None:
    template = tenancy_k8s.sandbox_template(TENANTS["default"], TENANCY)["spec"]
    # The controller's managed policy blocks 10/8, 172.16/12, 169.254/16: no CoreDNS, gateway or Pod Identity.
    assert template["networkPolicyManagement"] == "Unmanaged"
    assert template["envVarsInjectionPolicy"] == "Disallowed"
    assert template["podTemplate"]["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    pool = tenancy_k8s.warm_pool(TENANTS["warm-egress"])["spec"]
    assert pool == {
        "replicas": 5,
        "sandboxTemplateRef": {"name": "sandbox"},
        "updateStrategy": {"type": "OnReplenish"},
    }


def test_claim_command_creates_a_valid_claim_with_a_shutdown_time(tmp_path: Path) -> None:
    command = tenancy_k8s.claim_command(TENANTS["default"], 90)
    # Run it with kubectl replaced by cat: the shell must produce a claim that validates.
    fake = tmp_path / "kubectl"
    fake.write_text("#!/bin/sh\ncat\n")
    fake.chmod(0o755)
    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
    )
    claim = json.loads(result.stdout)
    validate_custom_resource(claim)
    lifecycle = claim["spec"]["lifecycle"]
    assert lifecycle["shutdownPolicy"] == "Delete" and lifecycle["shutdownTime"].endswith("Z")
    assert claim["metadata"]["namespace"] == "sandbox-team-a"


def test_controller_values_are_keys_of_the_v0_5_6_chart() -> None:
    values = tenancy_k8s.controller_values({"inference-tiers/node-pool": "system"})
    # The two security contexts default to null: the chart renders whatever object is given.
    free_form = ("podSecurityContext", "containerSecurityContext")
    assert missing_values_keys(values, "agent-sandbox/helm/values.yaml", free_form=free_form) == []
    assert missing_values_keys({"controller": {"extension": True}}, "agent-sandbox/helm/values.yaml") == [
        "controller.extension"
    ]
    assert values["image"]["tag"] == "v0.5.6" and values["controller"]["extensions"] is True


def test_controller_chart_directory_must_hold_the_fetched_chart(tmp_path: Path) -> None:
    args = Args("AgentSandboxController")
    with pytest.raises(ArgumentError, match=r"parameter 'chart_directory' .*agent-sandbox chart"):
        _check_chart_directory(args, tmp_path)
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: agent-sandbox\nversion: 0.1.0\n")
    with pytest.raises(ArgumentError, match=r"with its crds/ folder"):
        _check_chart_directory(args, tmp_path)
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "sandboxes.yaml").write_text("kind: CustomResourceDefinition\n")
    with pytest.raises(ArgumentError, match=r"with writable-tmp.patch applied"):
        _check_chart_directory(args, tmp_path)


# --- what the stack applies ----------------------------------------------------------------------------------


def test_stack_creates_every_configured_tenant(template: Template, request: pytest.FixtureRequest) -> None:
    applied = manifests(template)
    namespaces = {
        m["metadata"]["name"]
        for m in by_kind(applied, "Namespace")
        if TENANT_LABEL in m["metadata"].get("labels", {})
    }
    assert namespaces == {"sandbox-team-a", "sandbox-team-b"}
    expected = TenantSpec(name="team-a", max_sandboxes=20, warm_pool=2)
    assert by_kind(applied, "SandboxWarmPool")[0]["spec"]["replicas"] == 2
    (template_object,) = [
        m for m in by_kind(applied, "SandboxTemplate") if m["metadata"]["namespace"] == "sandbox-team-a"
    ]
    # On the platform the sandboxes call the cluster's own gateway with their tenant's key.
    platform = request.node.callspec.id == "platform"
    defaults = TenancySpec(
        runtime_class_name="kata-qemu-runtime-rs",
        overhead_cpu_millicores=250,
        overhead_memory_mib=320,
        platform_gateway=litellm_chart.gateway_endpoint() if platform else None,
    )
    assert template_object == tenancy_k8s.sandbox_template(expected, defaults)
    for manifest in applied:
        if manifest["kind"] in CORE_KINDS:
            assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35"
        elif manifest["apiVersion"].startswith(("extensions.agents", "agents")):
            validate_custom_resource(manifest)
    assert len(by_kind(applied, "ValidatingAdmissionPolicy")) == 1


def test_each_tenant_has_a_pod_identity_role_with_no_permissions(template: Template) -> None:
    associations = [
        a["Properties"]
        for a in template.find_resources("AWS::EKS::PodIdentityAssociation").values()
        if a["Properties"]["Namespace"].startswith("sandbox-")
    ]
    assert sorted(a["Namespace"] for a in associations) == ["sandbox-team-a", "sandbox-team-b"]
    resources = template.to_json()["Resources"]
    for association in associations:
        assert association["ServiceAccount"] == "sandbox"
        role_id = association["RoleArn"]["Fn::GetAtt"][0]
        role = resources[role_id]["Properties"]
        assert "ManagedPolicyArns" not in role and "Policies" not in role
        assert not [
            p
            for p in resources.values()
            if p["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in p["Properties"]["Roles"]
        ]
        statement = role["AssumeRolePolicyDocument"]["Statement"][0]
        assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}


def test_vpc_cni_enforces_network_policies(template: Template) -> None:
    addons = [a["Properties"] for a in template.find_resources("AWS::EKS::Addon").values()]
    (vpc_cni,) = [a for a in addons if a["AddonName"] == "vpc-cni"]
    assert json.loads(vpc_cni["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


def test_controller_is_installed_from_the_placeholder_until_fetched(template: Template) -> None:
    chart = helm_charts(template)["agent-sandbox"]
    assert chart["Namespace"] == "agent-sandbox-system" and chart["CreateNamespace"] is True
    assert chart["Values"] == tenancy_k8s.controller_values({"inference-tiers/node-pool": "system"})
    assert "ChartAssetURL" in chart
    assert (MISSING_CHART_PLACEHOLDER / "templates" / "fail.yaml").read_text().startswith('{{- fail "')


def test_an_unfetched_controller_chart_warns_at_synth_and_stops_the_deploy(
    tier_build: Callable[[str], TierBuild], template: Template
) -> None:
    (stack,) = tier_build("agent-sandbox").stacks
    (warning,) = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("agent-sandbox controller chart was not fetched")
    )
    assert warning.id == "/InferenceTiers-AgentSandbox/SandboxController"
    assert "fetch-agent-sandbox-chart.sh" in warning.entry.data
    rules = template.to_json()["Rules"]
    (assertion,) = next(
        rule for name, rule in rules.items() if name.startswith("SandboxControllerChartFetched")
    )["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": ["not-packaged", "packaged"]}
    assert "fetch-agent-sandbox-chart.sh" in assertion["AssertDescription"]


def test_outputs_give_the_claim_command_and_the_namespaces(template: Template) -> None:
    outputs = template.to_json()["Outputs"]
    assert outputs["SandboxClaimExample"]["Value"] == tenancy_k8s.claim_command(TenantSpec(name="team-a"), 60)
    assert outputs["TenantNamespaces"]["Value"] == "sandbox-team-a,sandbox-team-b"


def test_charts_that_wait_for_pods_come_after_the_core_nodes(template: Template) -> None:
    resources = template.to_json()["Resources"]
    (nodegroup,) = [k for k, v in resources.items() if v["Type"] == "AWS::EKS::Nodegroup"]
    charts = {
        v["Properties"]["Release"]: v
        for v in resources.values()
        if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    for release in ("karpenter", "agent-sandbox"):
        assert nodegroup in charts[release]["DependsOn"], release


@pytest.mark.parametrize(
    ("tier", "stack_name", "keys"),
    [
        ("agent-sandbox", "InferenceTiers-AgentSandbox", ["agent-sandbox.controller_chart_dir"]),
        (
            "platform",
            "InferenceTiers-Platform",
            ["platform.controller_chart_dir", "platform.litellm_chart_dir"],
        ),
    ],
)
def test_an_unfetched_chart_s_warning_names_the_tier_s_own_key(
    tier_build: Callable[[str], TierBuild], tier: str, stack_name: str, keys: list[str]
) -> None:
    (stack,) = tier_build(tier).stacks
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("was not fetched"))
    texts = " ".join(str(w.entry.data) for w in warnings)
    for key in keys:
        assert f"-c {key}=<directory>" in texts
    other = "platform" if tier == "agent-sandbox" else "agent-sandbox"
    assert f"-c {other}." not in texts
