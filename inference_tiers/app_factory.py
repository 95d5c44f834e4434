"""build_app(app, config): the single code path that ``app.py`` and the tests use to create the tiers."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from aws_cdk import Aspects, Stack, Tags
from constructs import Construct

from inference_tiers.config import (
    TIER_KEY,
    TIER_ORDER,
    AppConfig,
    parse_config,
    parse_tier_selection,
    tier_defaults,
)
from inference_tiers.constructs.common.checkov import FrameworkFunctionSkips
from inference_tiers.tier import Tier


class TierRegistry(Mapping[str, Tier]):
    """Every tier this build provides, in TIER_ORDER. A tier's module (``inference_tiers.stacks.<tier>``, which
    defines ``TIER``) is imported when the tier is looked up, so a synth of one tier loads only the constructs that
    tier uses."""

    def __getitem__(self, name: str) -> Tier:
        if name not in TIER_ORDER:
            raise KeyError(name)
        tier: Tier = importlib.import_module(f"inference_tiers.stacks.{name.replace('-', '_')}").TIER
        return tier

    def __iter__(self) -> Iterator[str]:
        return iter(TIER_ORDER)

    def __len__(self) -> int:
        return len(TIER_ORDER)


TIERS: Mapping[str, Tier] = TierRegistry()


def parse_app_config(context: Mapping[str, Any]) -> AppConfig:
    """Parse and validate the CDK context (``app.node.get_all_context()``) for the tiers this build has.

    Keys the context does not set take the package's defaults (:func:`~inference_tiers.config.tier_defaults`), which
    also name every tier's keys: a key of a tier that is not selected is checked against them without importing
    that tier."""
    defaults = tier_defaults()
    selected = parse_tier_selection(context.get(TIER_KEY), list(TIERS))
    return parse_config({**defaults, **context}, [TIERS[name].spec for name in selected], defaults.keys())


def build_app(app: Construct, config: AppConfig) -> list[Stack]:
    """Add the stacks of every selected tier to ``app`` and tag them; returns the stacks in build order.

    The functions aws-cdk generates in any of them get their checkov skips, each with its reason, at synth."""
    Aspects.of(app).add(FrameworkFunctionSkips())
    stacks: list[Stack] = []
    for name in config.tiers:
        for stack in TIERS[name].build(app, config.settings[name]):
            Tags.of(stack).add("inference-tiers:tier", name)
            stacks.append(stack)
    return stacks
