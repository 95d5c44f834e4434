"""Where the real Prometheus tools are: on PATH (apt-installed) or unpacked by tools/observability/setup.sh."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.harness import DATA_DIR, PROJECT_ROOT

_UNPACKED = PROJECT_ROOT / "tools" / "observability" / ".prometheus" / "usr" / "bin"
ALLOW_LISTS = {
    "vllm-v0.33.0": DATA_DIR / "disaggregated" / "vllm-metrics-v0.33.0.txt",
    "vllm-v0.10.1": DATA_DIR / "hyperpod" / "vllm-metrics-v0.10.1.txt",
    "litellm": DATA_DIR / "observability" / "litellm-metrics.txt",
    "dcgm": DATA_DIR / "observability" / "dcgm-exporter-metrics.txt",
    "efa": DATA_DIR / "observability" / "efa-node-exporter-metrics.txt",
    "vllm-router": DATA_DIR / "observability" / "vllm-router-metrics.txt",
    "prometheus": DATA_DIR / "observability" / "prometheus-metrics.txt",
}


def binary(name: str) -> Path:
    """The path of ``promtool``, ``prometheus`` or ``amtool``; fails (never skips) when it is not installed."""
    unpacked = _UNPACKED / name
    if unpacked.is_file():
        return unpacked
    found = shutil.which(name)
    assert found, f"{name} is not installed: run `bash tools/observability/setup.sh` (make test-tools does)"
    return Path(found)


def run(
    name: str, *args: str | Path, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary(name)), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        timeout=60,
        check=False,
    )


# The vLLM release each tier deploys: hyperpod's default image serves v0.10.1, the disaggregated image builds on
# vllm/vllm-openai:v0.33.0.
VLLM_LIST_OF_TIER = {"hyperpod": "vllm-v0.10.1", "disaggregated": "vllm-v0.33.0"}


def allowed_names_for(tier: str) -> frozenset[str]:
    """Every list's names except the vLLM releases ``tier`` does not deploy."""
    others = set(VLLM_LIST_OF_TIER.values()) - {VLLM_LIST_OF_TIER[tier]}
    return allowed_names(*(key for key in ALLOW_LISTS if key not in others))


def allowed_names(*lists: str) -> frozenset[str]:
    """Series names of the named allow-lists (comment lines start with #)."""
    names: set[str] = set()
    for key in lists or tuple(ALLOW_LISTS):
        lines = ALLOW_LISTS[key].read_text().splitlines()
        names.update(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return frozenset(names)
