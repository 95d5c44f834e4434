"""Fixtures shared by the sandbox tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aws_cdk.assertions import Template

from tests.harness import TierBuild


# The platform tier's stage tenants builds the same sandbox nodes and tenants as agent-sandbox
# (platform-cluster.md §7 traps 2 and 6): the stack-level sandbox tests read both.
@pytest.fixture(
    scope="module",
    params=[("agent-sandbox", "InferenceTiers-AgentSandbox"), ("platform", "InferenceTiers-Platform")],
    ids=["agent-sandbox", "platform"],
)
def template(request: pytest.FixtureRequest, tier_build: Callable[[str], TierBuild]) -> Template:
    tier, stack = request.param
    return tier_build(tier).template(stack)
