"""Property: any string for any known context key either builds and synthesizes the app or raises ValueError.

A value must never get past validation and come back from jsii as a JavaScript error. Every example that
parses is built through build_app *and* synthesized, so synth-time validation is covered too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference_tiers.app_factory import TIERS, build_app, parse_app_config
from inference_tiers.config import TIER_KEY
from tests.harness import cdk_json_context, configured_app

KEYS = [(tier_name, key) for tier_name, tier in TIERS.items() for key in tier.spec.context_keys()]


def _as_cli_string(default: Any) -> str:
    """A cdk.json default as ``-c key=value`` would pass it: always a string."""
    return default if isinstance(default, str) else json.dumps(default)


# Values at the edges of the parsers (empty, zero, negative, large, other JSON types, a too-long name).
EDGE_VALUES = ["", "0", "-1", "65536", "true", "null", "[]", "{}", "all", "x" * 300]


def _near_misses(default: Any) -> st.SearchStrategy[str]:
    """Strings close to the default (so many examples parse and reach the constructs), plus edge cases."""
    as_text = _as_cli_string(default)
    return st.one_of(
        st.just(as_text),
        st.builds(lambda head, tail: head + as_text + tail, st.text(max_size=3), st.text(max_size=3)),
        st.sampled_from(EDGE_VALUES),
        st.text(max_size=40),
    )


# Building is a function of the parsed configuration alone, so strings that parse to settings already built
# (every key's own default, "8" and " 8", ...) share that outcome: each distinct configuration is built and
# synthesized once per run, which keeps the fuzz affordable as tiers and keys grow.
_OUTCOME_BY_CONFIG: dict[str, bool] = {}


def _built_or_value_error(context: dict[str, Any]) -> bool:
    """True when the app built and synthesized, False on a ValueError; anything else fails the test."""
    app = configured_app(**context)
    try:
        config = parse_app_config(app.node.get_all_context())
    except ValueError:
        return False  # ConfigError: a clear synth-time error, as required
    key = repr(config)
    if key not in _OUTCOME_BY_CONFIG:
        try:
            build_app(app, config)
            app.synth()
            _OUTCOME_BY_CONFIG[key] = True
        except ValueError:
            _OUTCOME_BY_CONFIG[key] = False  # a construct's own ValueError, equally clear
    return _OUTCOME_BY_CONFIG[key]


@pytest.mark.parametrize(("tier", "key"), KEYS, ids=[key for _, key in KEYS])
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_string_for_a_setting_builds_or_raises_value_error(
    tier: str, key: str, data: st.DataObject
) -> None:
    default = cdk_json_context()[key]
    value = data.draw(_near_misses(default), label=key)
    built = _built_or_value_error({TIER_KEY: tier, key: value})
    # The default typed as `-c key=value` must synthesize: without this, a tier that rejected everything
    # (or a harness that never reached synth) would pass. Hypothesis draws the first one_of branch first.
    if value == _as_cli_string(default):
        assert built, f"the default of {key}, passed as the string {value!r}, did not build"


@pytest.mark.parametrize(("tier", "key"), KEYS, ids=[key for _, key in KEYS])
def test_every_edge_value_for_a_setting_builds_or_raises_value_error(tier: str, key: str) -> None:
    # Every key, every edge value: the property test above samples them only as its seed happens to
    # (65536 ms and a 300-character path once crashed synth and were found only after a seed change).
    for value in EDGE_VALUES:
        _built_or_value_error({TIER_KEY: tier, key: value})


@settings(max_examples=25, deadline=None, derandomize=True)
@given(value=st.one_of(st.text(max_size=30), st.sampled_from([",".join(TIERS), "all", " all", "all,"])))
def test_any_string_for_tier_builds_or_raises_value_error(value: str) -> None:
    built = _built_or_value_error({TIER_KEY: value})
    if value.strip() in (",".join(TIERS), "all"):
        assert built, f"tier={value!r} did not build"
