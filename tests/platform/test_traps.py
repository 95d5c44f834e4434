"""Traps of platform-cluster.md §7 not guarded elsewhere (docs/platform.md "Traps" maps every trap to its test).

Trap 4 (legacy chart defaults) and trap 6 (consolidation evicting a live sandbox VM), read from what the platform
tier applies and from the vendored LiteLLM chart at the pinned commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Template

from inference_tiers.k8s import litellm_chart
from inference_tiers.k8s import sandbox_nodes as nodes
from inference_tiers.stacks.platform import STACK_NAME
from tests.harness import TierBuild
from tests.platform.test_gateway_chart import values
from tests.sandbox.helpers import DATA, by_kind, manifests

CHART = DATA.parent / "platform" / "litellm-chart"


@pytest.fixture(scope="module")
def applied(tier_build: Callable[[str], TierBuild]) -> list[dict[str, Any]]:
    template: Template = tier_build("platform").template(STACK_NAME)
    return manifests(template)


def test_trap_6_consolidation_never_takes_a_node_with_a_live_sandbox(applied: list[dict[str, Any]]) -> None:
    """Karpenter v1.14 ``concepts/disruption.md``: ``WhenEmpty`` consolidates only nodes without workload pods;
    ``karpenter.sh/do-not-disrupt`` keeps a node out of voluntary disruption, and ``terminationGracePeriod``
    bounds how long an expired node waits for its sandboxes. Spot would reclaim a VM whatever the annotation."""
    (pool,) = (
        p for p in by_kind(applied, "NodePool") if p["metadata"]["name"] == nodes.SandboxNodesSpec().name
    )
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    node = pool["spec"]["template"]["spec"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]} in node[
        "requirements"
    ]
    assert node["terminationGracePeriod"] and node["expireAfter"]
    templates = by_kind(applied, "SandboxTemplate")
    assert templates
    for template in templates:
        annotations = template["spec"]["podTemplate"]["metadata"]["annotations"]
        assert annotations["karpenter.sh/do-not-disrupt"] == "true"


def test_trap_4_no_legacy_chart_defaults() -> None:
    """The componentized chart at ``litellm_chart.CHART_COMMIT`` (Chart.yaml: one dependency, ``lens``, and no
    Bitnami PostgreSQL or Redis) with the image tag left to ``appVersion`` (values.yaml ``image.tag: ""``,
    ``pullPolicy: IfNotPresent``), the database and Valkey external, and migrations as the chart's Helm hook
    (values.yaml ``migrationJob.enabled``/``hooks.helm.enabled``, both left on)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == litellm_chart.CHART_APP_VERSION
    assert [d["name"] for d in chart.get("dependencies", [])] == ["lens"]
    defaults = yaml.safe_load((CHART / "values-keys.yaml").read_text())
    assert (defaults["image"]["tag"], defaults["image"]["pullPolicy"]) == ("", "IfNotPresent")
    assert defaults["migrationJob"]["enabled"] and defaults["migrationJob"]["hooks"]["helm"]["enabled"]
    rendered = values()
    assert "image" not in rendered
    assert "enabled" not in rendered["migrationJob"] and "hooks" not in rendered["migrationJob"]
    assert rendered["database"]["writer"]["host"] and rendered["redis"]["host"]
    assert not {"postgresql", "bitnami"} & set(rendered)
