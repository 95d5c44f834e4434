"""fetch-dependency-chart.sh, run against stand-ins for git and helm: pinned commit, output the stack accepts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from inference_tiers.constructs.hyperpod.dependencies import FETCH_SCRIPT, check_chart_directory

COMMIT = "011ca927123e02b35a399935bbb3ab1905fe33c7"

# git stand-in: logs its arguments; "checkout" materializes the chart at the fetched revision.
FAKE_GIT = """#!/bin/bash
echo "git $*" >> "$CALLS"
if [ "$1" = "-C" ] && [ "$3" = "checkout" ]; then
  mkdir -p "$2/helm_chart/HyperPodHelmChart"
  printf 'apiVersion: v2\\nname: hyperpod-helm-chart\\nversion: 0.1.0\\ndependencies:\\n- name: nvidia-device-plugin\\n  version: 0.16.1\\n  repository: https://nvidia.github.io/k8s-device-plugin\\n' > "$2/helm_chart/HyperPodHelmChart/Chart.yaml"
fi
"""
# helm stand-in: "dependency build DIR" packages the dependency like helm does.
FAKE_HELM = """#!/bin/bash
echo "helm $*" >> "$CALLS"
mkdir -p "$3/charts" && : > "$3/charts/nvidia-device-plugin-0.16.1.tgz"
"""


@pytest.fixture
def fake_tools(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("git", FAKE_GIT), ("helm", FAKE_HELM)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls.log")}


def test_script_fetches_the_pinned_commit_and_packages_dependencies(
    tmp_path: Path, fake_tools: dict[str, str]
) -> None:
    dest = tmp_path / "out" / "chart"
    result = subprocess.run(
        ["bash", str(FETCH_SCRIPT), str(dest)], env=fake_tools, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert any(
        c.startswith("git -C") and c.endswith(f"fetch --quiet --depth 1 origin {COMMIT}") for c in calls
    )
    assert any("remote add origin https://github.com/aws/sagemaker-hyperpod-cli.git" in c for c in calls)
    assert f"helm dependency build {dest}" in calls
    check_chart_directory(dest)  # the stack accepts what the script produced
    assert f"-c hyperpod.dependency_chart_dir={dest}" in result.stdout


def test_script_stops_without_helm(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    (Path(fake_tools["PATH"].split(":")[0]) / "helm").unlink()
    env = {**fake_tools, "PATH": fake_tools["PATH"].split(":")[0] + ":/usr/bin:/bin"}
    if any(Path(p, "helm").exists() for p in ("/usr/bin", "/bin")):
        pytest.fail("a real helm on /usr/bin or /bin would hide the missing-tool check")
    result = subprocess.run(
        ["bash", str(FETCH_SCRIPT), str(tmp_path / "chart")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "error: helm is required" in result.stderr
