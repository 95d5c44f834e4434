"""Tier: what app_factory needs from a tier module (its own module so tier modules and app_factory don't cycle)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from constructs import Construct

from inference_tiers.config import TierSpec


@dataclass(frozen=True)
class Tier:
    """A tier: its configuration spec and the function that adds its stacks to an app."""

    spec: TierSpec
    build: Callable[[Construct, Any], Sequence[Stack]]
