"""Tenant model access: its settings and context parser, the provisioner's and tenants' manifests, the sandbox
template's key, and the TenantModelKeys construct."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aws_cdk as cdk
import kubernetes_validate
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.config import ConfigError
from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.platform.tenant_keys import TenantModelKeys
from inference_tiers.k8s import sandbox_tenancy as tenancy_k8s
from inference_tiers.k8s.platform_names import TENANT_KEY_FIELD, TENANT_KEY_SECRET
from inference_tiers.k8s.sandbox_tenancy import TenancySpec
from inference_tiers.k8s.tenant_keys import (
    JOB_DEADLINE_SECONDS,
    PROVISIONER_NAME,
    TenantModelAccess,
    model_registration_objects,
    parse_model_access,
    provisioner_objects,
    tenant_key_objects,
)
from inference_tiers.nag import InferenceChecks
from tests.harness import cdk_json_context, nag_findings
from tests.misuse import assert_refused
from tests.platform.tenant_keys_data import ACCESS, GATEWAY, TEAM_A, TEAM_B, TENANCY, TENANTS
from tests.sandbox.helpers import validate_custom_resource
from tests.sandbox.test_admission import refusals

VPC = "10.0.0.0/16"


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"models": []}, "models", "1 to 64 items"),
        ({"models": "nova-lite"}, "models", "a string is not a list"),
        ({"models": ["nova lite"]}, "models[0]", "a LiteLLM model name"),
        ({"models": ["a", "a"]}, "models[1]", "at most once"),
        ({"max_budget_usd": 0}, "max_budget_usd", "greater than 0"),
        ({"max_budget_usd": "50"}, "max_budget_usd", "a number"),
        ({"budget_duration": "30 days"}, "budget_duration", "1h, 7d, 30d or 1mo"),
        ({"budget_duration": "0d"}, "budget_duration", "LiteLLM duration"),
        ({"rpm_limit": 0}, "rpm_limit", "from 1 to"),
        ({"tpm_limit": 1.5}, "tpm_limit", "an integer"),
        ({"max_parallel_requests": -1}, "max_parallel_requests", "from 1 to"),
        ({"key_rotation": -1}, "key_rotation", "from 0 to"),
    ],
)
def test_model_access_refuses_bad_values(kwargs: dict[str, Any], param: str, accepted: str) -> None:
    assert_refused(
        lambda: TenantModelAccess(**{"models": ["nova-lite"], **kwargs}), "TenantModelAccess", param, accepted
    )


def test_parser_reads_a_context_object_or_its_json_text() -> None:
    raw = {
        "models": ["nova-lite"],
        "max_budget_usd": 20,
        "budget_duration": "7d",
        "rpm_limit": 30,
        "key_rotation": 2,
    }
    parsed = parse_model_access("platform.tenants.team-a", raw)
    assert parsed == TenantModelAccess(
        models=("nova-lite",),
        max_budget_usd=20,
        budget_duration="7d",
        rpm_limit=30,
        key_rotation=2,
        owner="platform.tenants.team-a",
    )
    assert parse_model_access("k", json.dumps(raw)).models == ("nova-lite",)


@pytest.mark.parametrize(
    ("raw", "key", "accepted"),
    [
        ({"models": ["m"], "rpm": 5}, "k.rpm", "an entry among models, max_budget_usd"),
        ({"models": ["m"], "rpm_limit": "5"}, "k.rpm_limit", "an integer"),
        ({"models": []}, "k.models", "1 to 64 items"),
        ({"max_budget_usd": 5}, "k.models", "required"),
        (["m"], "k", "a JSON object"),
        ("{not json", "k", "a JSON object"),
    ],
)
def test_parser_names_the_context_entry_the_value_and_what_is_accepted(
    raw: Any, key: str, accepted: str
) -> None:
    with pytest.raises(ConfigError, match=rf"context key '{key}': got .*expected .*{accepted}"):
        parse_model_access("k", raw)


def test_team_carries_budget_and_limits_and_the_key_the_models() -> None:
    tenant = json.loads(config_map()["data"]["spec.json"])["tenants"][0]
    assert tenant["team"] == {
        "team_id": "sandbox-team-a",
        "team_alias": "sandbox-team-a",
        "models": ["nova-lite", "claude-haiku"],
        "max_budget": 50.0,
        "budget_duration": "30d",
        "tpm_limit": 100_000,
        "rpm_limit": 60,
        "metadata": {"namespace": "sandbox-team-a", "managed_by": "inference-tiers"},
    }
    assert tenant["key"]["key_alias"] == "sandbox-team-a/sandboxes"
    assert (
        tenant["key"]["team_id"] == "sandbox-team-a" and tenant["key"]["models"] == tenant["team"]["models"]
    )
    no_budget = json.loads(config_map()["data"]["spec.json"])["tenants"][1]
    assert no_budget["team"]["budget_duration"] is None and no_budget["key"]["max_parallel_requests"] == 4


def objects(tenants: Any = TENANTS, image: str = "ghcr.io/berriai/litellm:v1.104.0") -> list[dict[str, Any]]:
    return provisioner_objects(GATEWAY, tenants, image=image, vpc_cidr=VPC)


def of_kind(kind: str, tenants: Any = TENANTS) -> dict[str, Any]:
    return next(o for o in objects(tenants) if o["kind"] == kind)


def config_map() -> dict[str, Any]:
    return of_kind("ConfigMap")


def test_every_object_is_valid_kubernetes_1_35() -> None:
    for manifest in [
        *objects(),
        *tenant_key_objects(TEAM_A, GATEWAY),
        *model_registration_objects(GATEWAY, [], image="x/y:1"),
    ]:
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35", manifest["kind"]


def test_the_provisioner_may_only_read_and_write_the_key_secret_of_each_tenant() -> None:
    secret, role, binding = tenant_key_objects(TEAM_A, GATEWAY)
    assert (secret["metadata"]["namespace"], secret["metadata"]["name"]) == (
        TEAM_A.namespace,
        TENANT_KEY_SECRET,
    )
    assert "data" not in secret  # the key is written in the cluster only
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [TENANT_KEY_SECRET],
            "verbs": ["get", "update", "patch"],
        }
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": PROVISIONER_NAME, "namespace": GATEWAY.namespace}
    ]
    job = of_kind("Job")["spec"]["template"]["spec"]
    assert job["serviceAccountName"] == PROVISIONER_NAME
    assert of_kind("ServiceAccount")["metadata"] == {
        **of_kind("ServiceAccount")["metadata"],
        "name": PROVISIONER_NAME,
    }


def test_the_master_key_reaches_the_job_by_reference_only_in_the_gateway_namespace() -> None:
    for manifest in objects():
        if manifest["kind"] != "NetworkPolicy":
            assert manifest["metadata"]["namespace"] == GATEWAY.namespace
    container = of_kind("Job")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["LITELLM_MASTER_KEY"] == {
        "name": "LITELLM_MASTER_KEY",
        "valueFrom": {"secretKeyRef": {"name": GATEWAY.master_key_secret, "key": GATEWAY.master_key_field}},
    }
    assert env["LITELLM_URL"]["value"] == GATEWAY.base_url
    assert all("value" in e or e["name"] == "LITELLM_MASTER_KEY" for e in container["env"])
    assert "args" not in container and container["command"][0] == "python3"


def test_the_job_finishes_inside_the_kubectl_handlers_15_minutes_and_runs_restricted() -> None:
    job = of_kind("Job")
    assert job["spec"]["activeDeadlineSeconds"] == JOB_DEADLINE_SECONDS <= 12 * 60
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert int(env["READY_DEADLINE_SECONDS"]) < JOB_DEADLINE_SECONDS
    pod = job["spec"]["template"]["spec"]
    context = pod["containers"][0]["securityContext"]
    assert (
        context["runAsNonRoot"]
        and not context["allowPrivilegeEscalation"]
        and context["readOnlyRootFilesystem"]
    )
    assert pod["nodeSelector"] == {"node-role": "core"}


def test_a_changed_setting_or_script_renames_the_job_and_the_same_spec_does_not() -> None:
    name = of_kind("Job")["metadata"]["name"]
    assert of_kind("Job")["metadata"]["name"] == name
    assert of_kind("ConfigMap")["metadata"]["name"] == name
    changed = ((TEAM_A, dataclasses.replace(ACCESS, rpm_limit=61)), TENANTS[1])
    assert of_kind("Job", changed)["metadata"]["name"] != name
    assert of_kind("Job", TENANTS[:1])["metadata"]["name"] != name
    other_image = next(o for o in objects(image="ghcr.io/berriai/litellm:v1.104.1") if o["kind"] == "Job")
    assert other_image["metadata"]["name"] != name


# -- the sandbox template ------------------------------------------------------------------------------------


def test_sandboxes_get_the_gateway_url_and_their_tenants_key_by_reference() -> None:
    container = tenancy_k8s.sandbox_pod_spec(TEAM_A, TENANCY)["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    # openai 2.54.0 (LiteLLM 1.104.0's dependency, in the tool venv), openai/_client.py:252-254: OPENAI_BASE_URL,
    # default "https://api.openai.com/v1", to which the SDK appends "/chat/completions"; LiteLLM 1.104.0 serves
    # "/v1/chat/completions" (litellm/proxy/proxy_server.py:11653).
    assert env["OPENAI_BASE_URL"]["value"] == "http://litellm-gateway.litellm.svc.cluster.local:4000/v1"
    assert env["OPENAI_API_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": TENANT_KEY_SECRET, "key": TENANT_KEY_FIELD}
    }
    assert "MODEL_GATEWAY_URL" not in env


def test_the_template_with_the_key_fits_the_crd_the_pod_schema_and_the_admission_policy() -> None:
    validate_custom_resource(tenancy_k8s.sandbox_template(TEAM_A, TENANCY))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sandbox-1", "namespace": TEAM_A.namespace},
        "spec": tenancy_k8s.sandbox_pod_spec(TEAM_A, TENANCY),
    }
    assert kubernetes_validate.validate(pod, "1.35", strict=True) == "1.35"
    assert refusals(pod, "Pod") == []


def test_one_gateway_at_a_time() -> None:
    assert_refused(
        lambda: TenancySpec(
            runtime_class_name="kata-qemu-runtime-rs",
            overhead_cpu_millicores=0,
            overhead_memory_mib=0,
            model_gateway_url="https://gw.example.com",
            model_gateway_cidrs=("10.0.0.0/24",),
            platform_gateway=GATEWAY,
        ),
        "TenancySpec",
        "platform_gateway",
        "None when model_gateway_url is set",
    )


# -- the construct -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = cdk.App(
        outdir=str(tmp_path_factory.mktemp("cdk.out")),
        context={**cdk_json_context(), "aws:cdk:bundling-stacks": []},
    )
    stack = cdk.Stack(app, "Keys")
    eks = EksCluster(stack, "Eks", admin_principal_arns=["arn:aws:iam::123456789012:role/Admin"])
    keys = TenantModelKeys(stack, "Keys", cluster=eks.cluster, gateway=GATEWAY, tenants=TENANTS)
    return {"stack": stack, "eks": eks, "keys": keys, "template": Template.from_stack(stack)}


def test_the_construct_applies_the_tenants_objects_before_the_provisioner(stack: dict[str, Any]) -> None:
    keys: TenantModelKeys = stack["keys"]
    assert set(keys.tenant_manifests) == {TEAM_A.namespace, TEAM_B.namespace}
    dependencies = {d.node.path for d in keys.provisioner.node.dependencies}
    assert dependencies >= {m.node.path for m in keys.tenant_manifests.values()}
    manifests = [
        json.dumps(r["Properties"]["Manifest"])
        for r in stack["template"].find_resources("Custom::AWSCDK-EKS-KubernetesResource").values()
    ]
    assert sum('"kind": "Job"' in m or '\\"kind\\":\\"Job\\"' in m for m in manifests) == 1
    # The proxy pods' NetworkPolicy is PlatformGateway's (one owner): only the provisioner's own policy here.
    assert sum("NetworkPolicy" in m for m in manifests) == 1
    assert not any("litellm-proxy" in m for m in manifests)
    assert not any("sk-" in m for m in manifests)


_counter = iter(range(1000))


@pytest.mark.parametrize(
    ("kwargs", "param", "match"),
    [
        ({"tenants": []}, "tenants", "1 to 500 items"),
        ({"tenants": [TEAM_A]}, "tenants[0]", r"\(TenantSpec, TenantModelAccess\) pair"),
        ({"tenants": [(TEAM_A, {"models": ["m"]})]}, "tenants[0][1]", "TenantModelAccess"),
        ({"tenants": [TENANTS[0], TENANTS[0]]}, "tenants (namespaces)[1]", "at most once"),
        ({"gateway": "litellm"}, "gateway", "GatewayEndpoint"),
        ({"image": "ghcr.io/berriai/litellm"}, "image", "pinned image"),
    ],
)
def test_the_construct_refuses_misuse(
    stack: dict[str, Any], kwargs: dict[str, Any], param: str, match: str
) -> None:
    props = {"cluster": stack["eks"].cluster, "gateway": GATEWAY, "tenants": TENANTS, **kwargs}
    assert_refused(
        lambda: TenantModelKeys(stack["stack"], f"K{next(_counter)}", **props),
        "TenantModelKeys",
        param,
        match,
    )


def test_the_construct_is_nag_clean(stack: dict[str, Any]) -> None:
    assert nag_findings(stack["keys"], AwsSolutionsChecks()) == []
    assert nag_findings(stack["keys"], InferenceChecks()) == []
