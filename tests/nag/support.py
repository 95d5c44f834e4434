"""Helpers for the rule tests: a fresh app per test and the pack's findings as {finding id: [paths]}."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Stack
from constructs import IConstruct

from inference_tiers.nag import InferenceChecks


def new_stack(tmp_path: Path) -> Stack:
    return Stack(App(outdir=str(tmp_path / "cdk.out")), "Test")


def findings(scope: IConstruct, rule_id: str | None = None) -> dict[str, list[str]]:
    """The pack's unacknowledged findings under ``scope``, only ``rule_id``'s (plain or granular) if given."""
    report = InferenceChecks().validate_scope(scope)
    return {
        v.rule_name: sorted(str(r.construct_path) for r in v.violating_resources)
        for v in report.violations
        if rule_id is None or v.rule_name == rule_id or v.rule_name.startswith(f"{rule_id}[")
    }
