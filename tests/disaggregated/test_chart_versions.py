"""The device-plugin chart versions the cluster installs exist upstream: each pinned version is the one in the
chart's Chart.yaml at a published commit or tag (vendored in tests/data/disaggregated/charts with SOURCE.md). A
version the chart repository does not publish fails the deploy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inference_tiers.constructs.eks.device_plugins import (
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
)

CHARTS = Path(__file__).parents[1] / "data" / "disaggregated" / "charts"


@pytest.mark.parametrize(
    ("chart_file", "name", "pinned"),
    [
        (
            "aws-efa-k8s-device-plugin-Chart.yaml",
            "aws-efa-k8s-device-plugin",
            EFA_DEVICE_PLUGIN_CHART_VERSION,
        ),
        (
            "nvidia-device-plugin-v0.19.3-Chart.yaml",
            "nvidia-device-plugin",
            NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        ),
    ],
)
def test_the_pinned_chart_version_is_a_published_one(chart_file: str, name: str, pinned: str) -> None:
    chart = yaml.safe_load((CHARTS / chart_file).read_text())
    assert (chart["name"], str(chart["version"])) == (name, pinned)
