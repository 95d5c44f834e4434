"""The values the construct gives the pinned Istio and KEDA charts name keys those charts really read."""

from __future__ import annotations

from typing import Any

import yaml

from inference_tiers.constructs.eks.inference_gateway import (
    ISTIOD_VALUES,
    KEDA_OPERATOR_SERVICE_ACCOUNT,
    KEDA_VALUES,
)
from tests.inference_gateway.support import DATA


def _paths(values: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every leaf key path of a values mapping (a mapping that is itself a value counts as a leaf)."""
    if not isinstance(values, dict) or not values:
        return {prefix}
    return {path for key, value in values.items() for path in _paths(value, (*prefix, key))}


def _has(defaults: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(defaults, dict) or key not in defaults:
            return False
        defaults = defaults[key]
    return True


def test_istiod_values_are_keys_of_the_pinned_chart() -> None:
    # The 1.30 chart keeps its defaults under _internal_defaults_do_not_set and merges user values onto them.
    chart = yaml.safe_load((DATA / "istio" / "istiod-values.yaml").read_text())[
        "_internal_defaults_do_not_set"
    ]
    for path in _paths(ISTIOD_VALUES):
        assert _has(chart, path[:1]), path  # env is a free-form map: its own keys are the flags
    assert "pilot" not in chart  # the IstioOperator spelling pilot.env would be ignored by this chart


def test_the_inference_extension_flag_exists_in_the_pinned_istiod() -> None:
    flags = (DATA / "istio" / "pilot-features-experimental.txt").read_text()
    assert 'env.Register("ENABLE_GATEWAY_API_INFERENCE_EXTENSION", false' in flags
    assert set(ISTIOD_VALUES["env"]) == {"ENABLE_GATEWAY_API_INFERENCE_EXTENSION"}  # type: ignore[arg-type]


def test_keda_values_are_keys_of_the_pinned_chart_and_the_service_account_matches() -> None:
    chart = yaml.safe_load((DATA / "keda" / "chart-values.yaml").read_text())
    for path in _paths(KEDA_VALUES):
        assert _has(chart, path), path
    # The Pod Identity association names the operator's service account as the chart creates it.
    assert chart["serviceAccount"]["operator"]["name"] == KEDA_OPERATOR_SERVICE_ACCOUNT


def test_every_trigger_metadata_key_is_read_by_the_pinned_keda_scaler() -> None:
    from tests.inference_gateway.test_manifests import every_manifest

    known: dict[str, set[str]] = {}
    for line in (DATA / "keda" / "scaler-metadata-v2.20.2.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            scaler, key = line.split()
            known.setdefault(scaler, set()).add(key)
    triggers = [t for m in every_manifest() if m["kind"] == "ScaledObject" for t in m["spec"]["triggers"]]
    assert {t["type"] for t in triggers} == {"prometheus", "aws-cloudwatch"}
    for trigger in triggers:
        unknown = set(trigger["metadata"]) - known[trigger["type"]]
        assert not unknown, (trigger["type"], unknown)
