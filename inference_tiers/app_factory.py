"""build_app(app, config): the single code path that ``app.py`` and the tests use to create the tiers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Aspects, Stack, Tags
from constructs import Construct

from inference_tiers.config import AppConfig, parse_config, tier_defaults
from inference_tiers.constructs.common.checkov import FrameworkFunctionSkips
from inference_tiers.stacks import (
    agent_sandbox,
    bedrock,
    disaggregated,
    gateway,
    hyperpod,
    observability,
    sagemaker,
)
from inference_tiers.tier import Tier

# Every tier this build provides, in TIER_ORDER (each tier module defines TIER).
TIERS: Mapping[str, Tier] = {
    tier.spec.name: tier
    for tier in (
        bedrock.TIER,
        sagemaker.TIER,
        hyperpod.TIER,
        disaggregated.TIER,
        gateway.TIER,
        agent_sandbox.TIER,
        observability.TIER,
    )
}


def parse_app_config(context: Mapping[str, Any]) -> AppConfig:
    """Parse and validate the CDK context (``app.node.get_all_context()``) for the tiers this build has.

    Keys the context does not set take the package's defaults (:func:`~inference_tiers.config.tier_defaults`)."""
    specs = [tier.spec for tier in TIERS.values()]
    known = {key for spec in specs for key in spec.context_keys()}
    defaults = {key: value for key, value in tier_defaults().items() if key in known}
    return parse_config({**defaults, **context}, specs)


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
