"""Helpers shared by the tests: build apps from cdk.json's defaults, find templates, lint, mask hashes."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from constructs import IConstruct

from inference_tiers.app_factory import build_app, parse_app_config
from inference_tiers.config import tier_defaults

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "tests" / "data"

# Never run Docker bundling in a test (bundling happens at construct time, so it must be on the App).
_NO_BUNDLING = {"aws:cdk:bundling-stacks": []}


def import_file(name: str, path: Path) -> ModuleType:
    """The Python file at ``path`` (a Lambda handler or a script an asset ships), imported afresh as ``name``.

    It is registered in ``sys.modules`` while it runs, as a normal import would be (dataclasses look their module
    up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"{path} is not a Python file"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@cache
def cdk_json_context() -> dict[str, Any]:
    """The project's default context: every tier's settings (the package's defaults) and cdk.json's context (the
    feature flags and the tier selection), exactly as `cdk synth` sees it."""
    context: dict[str, Any] = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    return {**tier_defaults(), **context}


def tier_settings(tier: str, **overrides: Any) -> Any:
    """``tier``'s parsed settings for cdk.json's context plus ``overrides`` (context keys), as build_app gets them."""
    return parse_app_config({**cdk_json_context(), "tier": tier, **overrides}).settings[tier]


def configured_app(**overrides: Any) -> cdk.App:
    """An empty app whose context is cdk.json's plus ``overrides`` (context keys)."""
    return cdk.App(context={**cdk_json_context(), **_NO_BUNDLING, **overrides})


def make_app(**overrides: Any) -> tuple[cdk.App, list[cdk.Stack]]:
    """An app configured from cdk.json plus ``overrides`` (context keys), built through build_app."""
    app = configured_app(**overrides)
    stacks = build_app(app, parse_app_config(app.node.get_all_context()))
    return app, stacks


@dataclass
class TierBuild:
    app: cdk.App
    stacks: list[cdk.Stack]

    def template(self, stack_name: str | None = None) -> Template:
        """The template of ``stack_name`` (or of the tier's only stack)."""
        matches = [s for s in self.stacks if stack_name in (None, s.stack_name)]
        assert len(matches) == 1, (
            f"expected one stack named {stack_name!r}, got {[s.stack_name for s in self.stacks]}"
        )
        return Template.from_stack(matches[0])

    def templates(self) -> dict[str, dict[str, Any]]:
        """Every stack's synthesized template (nested stacks included), keyed by stack name."""
        return {s.stack_name: Template.from_stack(s).to_json() for s in self.stacks}


def build_tier(tier: str, **overrides: Any) -> TierBuild:
    app, stacks = make_app(tier=tier, **overrides)
    return TierBuild(app, stacks)


_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def mask_asset_hashes(value: Any) -> Any:
    """Replace asset hashes (S3 keys, image tags, metadata) so snapshots survive unrelated asset edits."""
    if isinstance(value, dict):
        return {_ASSET_HASH.sub("<ASSET_HASH>", k): mask_asset_hashes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_asset_hashes(v) for v in value]
    if isinstance(value, str):
        return _ASSET_HASH.sub("<ASSET_HASH>", value)
    return value


def render_sub(value: dict[str, Any], resolve: Callable[[Any], str]) -> str:
    """What CloudFormation makes of ``{"Fn::Sub": [body, variables]}`` at deploy time: ``${Name}`` becomes
    ``resolve(variables[Name])`` and ``${!Text}`` the literal ``${Text}`` (CloudFormation Template Reference,
    Fn::Sub: "To write a dollar sign and curly braces (${}) literally, add an exclamation point (!) after the open
    curly brace, such as ${!Literal}. CloudFormation resolves this text as ${Literal}."). A ``${Name}`` missing
    from the map raises KeyError."""
    body, variables = value["Fn::Sub"]

    def substitute(match: re.Match[str]) -> str:
        literal, name = match.groups()
        return f"${{{name}}}" if literal else resolve(variables[name])

    return re.sub(r"\$\{(!?)([^}]*)\}", substitute, body)


def cfn_lint_errors(template: dict[str, Any]) -> list[str]:
    """cfn-lint's error-level findings (rule ids E*) on ``template``."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1", "us-west-2", "eu-west-1"]))
    return [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})"
        for m in matches
        if m.rule.id.startswith("E")
    ]


def nag_findings(scope: IConstruct, pack: Any) -> list[str]:
    """``pack``'s unacknowledged findings on ``scope`` (cdk-nag's AwsSolutionsChecks or the project's
    InferenceChecks), one ``rule: [construct paths]`` line each; empty when the scope is clean."""
    report = pack.validate_scope(scope)
    findings = [
        f"{v.rule_name}: {[r.construct_path for r in v.violating_resources]}" for v in report.violations
    ]
    assert report.success == (findings == []), "cdk-nag reported failure without a violation"
    return findings


# The two feature-flag sets a user's app may run under: aws-cdk's defaults (a bare App) and this project's cdk.json.
FLAG_SETS = ("aws-cdk defaults", "cdk.json")


def foreign_app_findings(compose: Callable[[cdk.App], Sequence[IConstruct]], flags: str) -> list[str]:
    """Both packs' unacknowledged findings on the library's constructs that ``compose`` adds to a user's app
    (and returns), under the feature flags ``flags`` names (one of ``FLAG_SETS``); the user's own resources are
    not the library's to judge."""
    from cdk_nag import AwsSolutionsChecks

    from inference_tiers.nag import InferenceChecks

    context = cdk_json_context() if flags == "cdk.json" else {}
    app = cdk.App(context={**context, **_NO_BUNDLING})
    return [
        finding
        for construct in compose(app)
        for pack in (AwsSolutionsChecks(), InferenceChecks())
        for finding in nag_findings(construct, pack)
    ]


def checkov_report(build: TierBuild) -> tuple[bool, str]:
    """The pinned checkov (tools/checkov, what `make checkov` runs on the default tiers) on every template of
    ``build``: (no failed check, parsing error or skip without a reason; the report lines)."""
    from tools.checkov import scan

    files = scan.templates(Path(build.app.synth().directory))
    assert files, "the build synthesized no template"
    lines, problems = scan.summarize(scan.run_checkov(files))
    return problems == 0, "\n".join(lines)


CLEAN_GATES: dict[str, list[str]] = {
    "AwsSolutionsChecks": [],
    "InferenceChecks": [],
    "cfn-lint": [],
    "checkov": [],
}


def gate_findings(build: TierBuild) -> dict[str, list[str]]:
    """What a deployable configuration must pass, by gate (``CLEAN_GATES`` when it does): both cdk-nag packs
    (what ``cdk synth`` runs), cfn-lint on every template, and checkov (what ``make checkov`` runs)."""
    from cdk_nag import AwsSolutionsChecks

    from inference_tiers.nag import InferenceChecks

    clean, report = checkov_report(build)
    return {
        "AwsSolutionsChecks": nag_findings(build.app, AwsSolutionsChecks()),
        "InferenceChecks": nag_findings(build.app, InferenceChecks()),
        "cfn-lint": [f"{name}: {e}" for name, t in build.templates().items() for e in cfn_lint_errors(t)],
        "checkov": [] if clean else report.splitlines(),
    }
