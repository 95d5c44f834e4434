"""Test harness: one app per tier per session, built through the same build_app that app.py uses.

The environment is set before anything imports aws_cdk: the jsii kernel inherits it when it starts, and
CDK_VALIDATION=false skips aws-cdk-lib's built-in CloudFormation validation plugin (5-13 s per process; the
tests run cfn-lint instead).
"""

from __future__ import annotations

import os

os.environ.setdefault("CDK_VALIDATION", "false")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from syrupy.extensions.json import JSONSnapshotExtension  # noqa: E402

from tests.harness import TierBuild, build_tier  # noqa: E402


@pytest.fixture(scope="session")
def tier_build() -> Callable[[str], TierBuild]:
    """``tier_build("bedrock")``: the default-configured app for that tier, built once per session."""
    cache: dict[str, TierBuild] = {}

    def get(tier: str) -> TierBuild:
        if tier not in cache:
            cache[tier] = build_tier(tier)
        return cache[tier]

    return get


@pytest.fixture
def snapshot_json(snapshot: Any) -> Any:
    return snapshot.use_extension(JSONSnapshotExtension)
