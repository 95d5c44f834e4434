"""build_app(app, config): the single code path that ``app.py`` and the tests use to create the tiers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack, Tags
from constructs import Construct

from inference_tiers.config import AppConfig, TierSpec, parse_config


@dataclass(frozen=True)
class Tier:
    """A tier: its configuration spec and the function that adds its stacks to an app."""

    spec: TierSpec
    build: Callable[[Construct, Any], Sequence[Stack]]


def _available_tiers() -> dict[str, Tier]:
    # Each tier module defines TIER; add a tier here, in TIER_ORDER, when its stack lands.
    from inference_tiers.stacks import hyperpod

    tiers: tuple[Tier, ...] = (hyperpod.TIER,)
    return {tier.spec.name: tier for tier in tiers}


TIERS: Mapping[str, Tier] = _available_tiers()


def parse_app_config(context: Mapping[str, Any]) -> AppConfig:
    """Parse and validate the CDK context (``app.node.get_all_context()``) for the tiers this build has."""
    return parse_config(context, [tier.spec for tier in TIERS.values()])


def build_app(app: Construct, config: AppConfig) -> list[Stack]:
    """Add the stacks of every selected tier to ``app`` and tag them; returns the stacks in build order."""
    stacks: list[Stack] = []
    for name in config.tiers:
        for stack in TIERS[name].build(app, config.settings[name]):
            Tags.of(stack).add("inference-tiers:tier", name)
            stacks.append(stack)
    return stacks
