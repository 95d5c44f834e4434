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

from inference_tiers.app_factory import TIERS
from inference_tiers.config import TIER_KEY
from tests.harness import cdk_json_context, make_app

KEYS = [(tier_name, key) for tier_name, tier in TIERS.items() for key in tier.spec.context_keys()]


def _near_misses(default: Any) -> st.SearchStrategy[str]:
    """Strings close to the default (so many examples parse and reach the constructs), plus edge cases."""
    as_text = default if isinstance(default, str) else json.dumps(default)
    return st.one_of(
        st.just(as_text),
        st.builds(lambda head, tail: head + as_text + tail, st.text(max_size=3), st.text(max_size=3)),
        st.sampled_from(["", "0", "-1", "65536", "true", "null", "[]", "{}", "all", "x" * 300]),
        st.text(max_size=40),
    )


def _assert_built_or_value_error(context: dict[str, Any]) -> None:
    try:
        app, _ = make_app(**context)
        app.synth()
    except ValueError:
        return  # ConfigError or a construct's own ValueError: a clear synth-time error, as required


@pytest.mark.parametrize(("tier", "key"), KEYS, ids=[key for _, key in KEYS])
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_string_for_a_setting_builds_or_raises_value_error(
    tier: str, key: str, data: st.DataObject
) -> None:
    value = data.draw(_near_misses(cdk_json_context()[key]), label=key)
    _assert_built_or_value_error({TIER_KEY: tier, key: value})


@settings(max_examples=25, deadline=None, derandomize=True)
@given(value=st.one_of(st.text(max_size=30), st.sampled_from([",".join(TIERS), "all", " all", "all,"])))
def test_any_string_for_tier_builds_or_raises_value_error(value: str) -> None:
    _assert_built_or_value_error({TIER_KEY: value})
