"""The metric allow-lists match the versions the project pins, and each names its source."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from inference_tiers import ASSETS_DIR
from tests.harness import PROJECT_ROOT
from tests.observability.tools import ALLOW_LISTS, VLLM_LIST_OF_TIER, allowed_names


def test_every_allow_list_starts_with_its_source() -> None:
    for key, path in ALLOW_LISTS.items():
        header = [line for line in path.read_text().splitlines() if line.startswith("# ")]
        assert any("Source: " in line for line in header), f"{key}: {path} names no source"
        assert allowed_names(key), f"{key}: {path} lists no metric"


def test_litellm_list_is_of_the_release_the_gateway_pins() -> None:
    pinned = re.search(
        r"^litellm==([0-9.]+)", (PROJECT_ROOT / "tools/gateway/requirements.txt").read_text(), re.M
    )
    assert pinned, "tools/gateway/requirements.txt pins no litellm release"
    assert f"LiteLLM {pinned.group(1)} exports" in ALLOW_LISTS["litellm"].read_text().splitlines()[0]


def test_router_list_is_what_the_pinned_router_exports_now() -> None:
    """Runs the real vllm-router of the dev extra on loopback (tools/observability/router_metric_names.py)."""
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "tools/observability/router_metric_names.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout == ALLOW_LISTS["vllm-router"].read_text()


def test_lists_hold_only_prometheus_metric_names() -> None:
    for key in ALLOW_LISTS:
        for name in allowed_names(key):
            assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name), f"{key}: {name!r}"


def test_each_tiers_vllm_list_is_of_the_release_it_deploys() -> None:
    defaults = json.loads((PROJECT_ROOT / "inference_tiers/defaults.json").read_text())
    dockerfile = (ASSETS_DIR / "disaggregated/vllm/Dockerfile").read_text()
    base = re.search(r"^FROM vllm/vllm-openai:(v[0-9.]+)$", dockerfile, re.M)
    assert base, "the disaggregated Dockerfile builds on no vllm/vllm-openai release"
    releases = {"hyperpod": defaults["hyperpod.vllm_image"].split(":")[1], "disaggregated": base.group(1)}
    for tier, release in releases.items():
        header = ALLOW_LISTS[VLLM_LIST_OF_TIER[tier]].read_text().splitlines()[0]
        assert f"vLLM {release}" in header, f"{tier} deploys vLLM {release}; its list says: {header}"
