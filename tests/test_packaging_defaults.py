"""The tier defaults ship in the package (inference_tiers/defaults.json): one source for app.py, the tests and
``inference-tiers preflight``, which therefore works from any directory, not only this checkout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_tiers.app_factory import TIERS, parse_app_config
from inference_tiers.config import TIER_ORDER, is_cdk_owned_key, tier_defaults
from inference_tiers.ops import cli
from tests.harness import PROJECT_ROOT

SETTING_KEYS = {key for tier in TIERS.values() for key in tier.spec.context_keys()}


def test_the_package_has_a_default_for_every_tier_setting_and_nothing_else() -> None:
    defaults = tier_defaults()
    assert sorted(SETTING_KEYS - defaults.keys()) == [], "settings without a default in defaults.json"
    assert sorted(defaults.keys() - SETTING_KEYS) == [], "defaults.json keys no tier declares"


def test_cdk_json_keeps_only_the_app_config() -> None:
    # A tier setting in cdk.json would be a second default to keep in step (a merge would bring one back here).
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    assert sorted(k for k in context if k in SETTING_KEYS) == []
    assert sorted(k for k in context if not is_cdk_owned_key(k)) == ["tier"]


def test_the_defaults_alone_configure_every_tier() -> None:
    config = parse_app_config({"tier": "all"})
    assert config.tiers == TIER_ORDER
    assert config.settings["bedrock"].model_id == tier_defaults()["bedrock.model_id"]


def test_the_context_overrides_a_default() -> None:
    config = parse_app_config({"tier": "sagemaker", "sagemaker.max_capacity": "5"})
    assert config.settings["sagemaker"].max_capacity == 5
    assert tier_defaults()["sagemaker.max_capacity"] != 5


@pytest.mark.parametrize("tier", ["bedrock", "disaggregated"])
def test_preflight_configuration_loads_outside_any_checkout(
    tier: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's own app directory has no cdk.json with the tier settings (here: none at all).
    monkeypatch.chdir(tmp_path)
    outside = cli.tier_requirements(cli.load_context(None, [], tier), tier)
    inside = cli.tier_requirements(cli.load_context(PROJECT_ROOT / "cdk.json", [], tier), tier)
    assert outside == inside
    assert outside.instances or outside.bedrock_model_id


def test_an_explicit_cdk_json_must_exist(tmp_path: Path) -> None:
    with pytest.raises(cli.UsageError, match="missing.json: not found"):
        cli.load_context(tmp_path / "missing.json", [], "bedrock")
