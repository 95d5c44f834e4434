"""The disaggregated tier with LoRA adapters in ``disaggregated.inference_gateway``: one synth for the module.

Checked on the tier's own template: both pools' pods get the adapters (flags, init container, ServiceAccount),
the Pod Identity association exists before the workload, the init image is a preflight image need, and
cdk-nag and cfn-lint stay clean with LoRA on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_tiers.config import parse_settings
from inference_tiers.k8s.inference_gateway_lora import LORA_INIT_IMAGE
from inference_tiers.stacks.disaggregated import TIER
from tests.harness import (
    CLEAN_GATES,
    TierBuild,
    build_tier,
    cdk_json_context,
    gate_findings,
)
from tests.hyperpod.support import resolve_join

STACK = "InferenceTiers-Disaggregated"
SETTING = {
    "pools": {
        "prefill": {"min_replicas": 1, "max_replicas": 1},
        "decode": {"min_replicas": 1, "max_replicas": 1},
    },
    "lora_adapters": {"sql-lora": "s3://adapters-bucket/tenants/sql-lora"},
    "max_lora_rank": 32,
}


@pytest.fixture(scope="module")
def build() -> TierBuild:
    return build_tier("disaggregated", **{"disaggregated.inference_gateway": SETTING})


@pytest.fixture(scope="module")
def template(build: TierBuild) -> dict[str, Any]:
    return build.templates()[STACK]


def workload(template: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    (logical_id, resource), = [
        (k, r) for k, r in template["Resources"].items()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and k.startswith("ServingWorkload")
    ]  # fmt: skip
    return logical_id, json.loads(resolve_join(resource["Properties"]["Manifest"]))


def test_both_pools_serve_the_adapter_from_the_setting(template: dict[str, Any]) -> None:
    _, manifests = workload(template)
    pods = {
        m["metadata"]["name"]: m["spec"]["template"]["spec"] for m in manifests if m["kind"] == "Deployment"
    }
    for role in ("prefill", "decode"):
        pod = pods[f"vllm-pd-{role}"]
        args = pod["containers"][0]["args"]
        assert args[args.index("--lora-modules") + 1] == "sql-lora=/adapters/sql-lora"
        assert args[args.index("--max-lora-rank") + 1] == "32"
        (init,) = pod["initContainers"]
        assert '"s3://adapters-bucket/tenants/sql-lora/"' in init["command"][2]
        assert init["env"] == [{"name": "AWS_REGION", "value": "token"}]  # the stack's Region
        assert pod["serviceAccountName"] == "vllm-pd-vllm-lora"


def test_the_association_precedes_the_workload(template: dict[str, Any]) -> None:
    logical_id, _ = workload(template)
    (association,) = [
        k for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation" and r["Properties"]["ServiceAccount"] == "vllm-pd-vllm-lora"
    ]  # fmt: skip
    assert association in template["Resources"][logical_id]["DependsOn"]


def test_preflight_checks_the_init_image() -> None:
    context = {**cdk_json_context(), "disaggregated.inference_gateway": SETTING}
    images = parse_settings(TIER.spec, context).account_requirements().images
    assert LORA_INIT_IMAGE in {need.reference for need in images}
    plain = parse_settings(TIER.spec, cdk_json_context()).account_requirements().images
    assert LORA_INIT_IMAGE not in {need.reference for need in plain}


def test_cdk_nag_cfn_lint_and_checkov_pass_with_lora_on(build: TierBuild) -> None:
    assert gate_findings(build) == CLEAN_GATES
