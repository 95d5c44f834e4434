"""Every tier, and every tier combination the docs name, through the real CLI (`npx cdk synth`) with aws-cdk-lib's
CloudFormation validation on and both nag packs (app.py adds them): any error fails the test.

The other tests build in-process with CDK_VALIDATION=false (conftest.py) for speed and run cfn-lint; this one
catches what only aws-cdk-lib's validation sees (E1029 on the gateway's ADOT sidecar was such a finding). The
synths run as subprocesses, two at a time (the suite's 2-core budget), each into its own folder under the
module's temp folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from inference_tiers.app_factory import TIERS
from inference_tiers.config import ALL_TIERS, TIER_KEY, parse_tier_selection, tier_defaults
from inference_tiers.stacks.platform import STAGES
from tests.harness import PROJECT_ROOT

PARALLEL_SYNTHS = 2
# `tier=` followed by a selection, as the docs write it in a `-c tier=...` (a name list, or "all")
_DOCUMENTED = re.compile(rf"\b{TIER_KEY}=([a-z][a-z,-]*[a-z])")


def _pages() -> list[Path]:
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def documented_combinations() -> list[str]:
    """The selections of more than one tier that README.md and docs/*.md name, in order of first mention."""
    found = (m.group(1) for page in _pages() for m in _DOCUMENTED.finditer(page.read_text(encoding="utf-8")))
    return list(dict.fromkeys(s for s in found if "," in s or s == ALL_TIERS))


# The context of each synth, by id: every tier and documented selection, and the platform tier in each stage it
# builds besides its default one (``platform@gateway``).
CONTEXTS: dict[str, dict[str, str]] = {
    **{selection: {TIER_KEY: selection} for selection in [*TIERS, *documented_combinations()]},
    **{
        f"platform@{stage}": {TIER_KEY: "platform", "platform.stage": stage}
        for stage in STAGES
        if stage != tier_defaults()["platform.stage"]
    },
}
SELECTIONS = list(CONTEXTS)


def _synth(selection: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``selection``'s synth into ``root/selection``. PATH: cdk.json's `python3 app.py` is this venv's python;
    CDK_VALIDATION unset: aws-cdk-lib validates. TMPDIR: ``root/tmp``, which must stay empty (the jsii kernel's
    folders are removed when it exits). The CLI turns on Node's compile cache, by default in
    $TMPDIR/node-compile-cache: it goes to ``root`` instead."""
    env = {k: v for k, v in os.environ.items() if k != "CDK_VALIDATION"}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "NODE_COMPILE_CACHE": str(root / "node-compile-cache"),
        "TMPDIR": str(root / "tmp"),
    }
    command = [
        "npx",
        "--no-install",
        "cdk",
        "synth",
        "--quiet",
        "--no-notices",
        "--output",
        str(root / selection),
    ]
    return subprocess.run(
        [*command, *(arg for key, value in CONTEXTS[selection].items() for arg in ("-c", f"{key}={value}"))],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def synths(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """The CLI synth of every selection this session runs (all of them, or those ``-k`` keeps), once for the
    module; checks that none left anything outside its output folder (in its TMPDIR, or new files in the
    checkout; other test workers share the session's TMPDIR and write __pycache__, so those are not compared)."""
    wanted = [
        item.callspec.params["selection"]
        for item in request.session.items
        if item.module is sys.modules[__name__] and hasattr(item, "callspec")
    ]
    root = tmp_path_factory.mktemp("cli-synth")
    (root / "tmp").mkdir()
    before = _untracked()
    with ThreadPoolExecutor(PARALLEL_SYNTHS) as pool:
        results = dict(zip(wanted, pool.map(lambda s: _synth(s, root), wanted), strict=True))
    yield results
    assert not list((root / "tmp").iterdir()), "a CLI synth left files in its TMPDIR"
    assert _untracked() == before, "a CLI synth left files in the checkout"


def _untracked() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("selection", SELECTIONS, ids=[s.replace(",", "_") for s in SELECTIONS])
def test_cli_synth_passes_validation_and_both_nag_packs(
    selection: str, synths: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    result = synths[selection]
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert result.returncode == 0 and not errors, f"cdk synth {CONTEXTS[selection]}:\n{result.stderr[-6000:]}"
    # the app's jsii kernel ran on a maintained Node (jsii prints this banner on an end-of-life one)
    assert "end-of-life" not in result.stderr


def test_the_jsii_kernel_and_the_cli_start_the_pinned_node_lts() -> None:
    """jsii's kernel starts ``JSII_NODE`` or else ``node`` from PATH (jsii 1.142.0, python runtime
    _kernel/providers/process.py, ``environ.get("JSII_NODE", "node")``), as npx and the CDK CLI (``#!/usr/bin/env
    node``) do: conftest.py puts the ``node`` package.json pins first on PATH."""
    pinned = json.loads((PROJECT_ROOT / "package.json").read_text())["devDependencies"]["node"]
    node = shutil.which(os.environ.get("JSII_NODE", "node"))
    assert node is not None and Path(node).parent == PROJECT_ROOT / "node_modules" / ".bin", node
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.strip() == f"v{pinned}"


def test_every_selection_the_docs_name_is_synthesized_and_valid() -> None:
    """Each ``-c tier=...`` the docs write, however written, is one the test above synthesizes and one app.py
    accepts (a typo in the docs fails here, not in a reader's deploy)."""
    named = {
        value.rstrip(".,;:")
        for page in _pages()
        for value in re.findall(rf"-c {TIER_KEY}=([^\s`'\")]*)", page.read_text(encoding="utf-8"))
    } - {""}
    assert {ALL_TIERS, "gateway,observability"} <= named  # what docs/observability.md and README.md name
    assert named <= set(SELECTIONS), sorted(named - set(SELECTIONS))
    for selection in named:
        parse_tier_selection(selection, list(TIERS))
