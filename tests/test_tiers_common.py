"""Checks every tier must pass: cdk-nag, cfn-lint, stack naming, retained logs, and a reviewed snapshot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from inference_tiers.app_factory import TIERS
from inference_tiers.constructs.common.nag import add_nag_checks
from inference_tiers.nag import InferenceChecks
from inference_tiers.ops.smoke import STACK_NAMES as SMOKE_DEFAULT_STACKS
from tests.harness import TierBuild, build_tier, cfn_lint_errors, mask_asset_hashes, nag_findings

ALL_TIERS = sorted(TIERS)


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_no_unacknowledged_nag_findings(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    assert nag_findings(tier_build(tier).app, AwsSolutionsChecks()) == []


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_no_unacknowledged_inference_findings(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    """The library's own pack (docs/nag-rules.md), which add_nag_checks runs beside AwsSolutionsChecks."""
    assert nag_findings(tier_build(tier).app, InferenceChecks()) == []


def test_add_nag_checks_registers_both_packs(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    role = iam.Role(
        cdk.Stack(app, "Checked"), "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
    )
    role.add_to_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel", "s3:*"], resources=["*"]))
    add_nag_checks(app)
    with pytest.raises(RuntimeError) as failure:
        app.synth()
    assert "'inference-tiers::InferenceTiers-BR3[Action::bedrock:InvokeModel]'" in str(failure.value)
    assert "AwsSolutions-IAM5[Action::s3:*]" in str(failure.value)


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_cfn_lint_reports_no_errors(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    for name, template in tier_build(tier).templates().items():
        assert cfn_lint_errors(template) == [], name


# The stack names the `inference-tiers smoke` command and the README rely on (one stack per tier).
STACK_NAMES = {
    "bedrock": ["InferenceTiers-Bedrock"],
    "sagemaker": ["InferenceTiers-SageMaker"],
    "hyperpod": ["InferenceTiers-HyperPod"],
    "disaggregated": ["InferenceTiers-Disaggregated"],
    "gateway": ["InferenceTiers-Gateway"],
    "agent-sandbox": ["InferenceTiers-AgentSandbox"],
    "observability": ["InferenceTiers-Observability"],
    "platform": ["InferenceTiers-Platform"],
}


def test_every_registered_tier_has_an_agreed_stack_name_and_smoke_defaults_to_it() -> None:
    assert sorted(STACK_NAMES) == ALL_TIERS
    assert {tier: names[0] for tier, names in STACK_NAMES.items()} == SMOKE_DEFAULT_STACKS


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_stacks_are_named_for_the_tier(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    assert [s.stack_name for s in tier_build(tier).stacks] == STACK_NAMES[tier]


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_log_groups_and_buckets_are_retained(tier: str, tier_build: Callable[[str], TierBuild]) -> None:
    for name, template in tier_build(tier).templates().items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] in ("AWS::Logs::LogGroup", "AWS::S3::Bucket", "AWS::KMS::Key"):
                assert resource.get("DeletionPolicy") == "Retain", f"{name}/{logical_id} is not retained"


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_snapshot(tier: str, snapshot_json: Any) -> None:
    """A build of its own: what `cdk synth` writes. cdk-nag's validate_scope on a shared build can drop a
    DependsOn from a later synthesis of it (seen on the platform: two chart assets' grants on the kubectl role),
    which would make the snapshot depend on the order the tests run in."""
    assert mask_asset_hashes(build_tier(tier).templates()) == snapshot_json
