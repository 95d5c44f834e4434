"""Test harness: one app per tier per session, built through the same build_app that app.py uses.

The environment is set before anything imports aws_cdk: the jsii kernel inherits it when it starts, and
CDK_VALIDATION=false skips aws-cdk-lib's built-in CloudFormation validation plugin (5-13 s per process; the
tests run cfn-lint instead, and tests/test_cli_synth.py synthesizes every tier with it on).
"""

from __future__ import annotations

import os
import shutil
import tempfile

os.environ.setdefault("CDK_VALIDATION", "false")
# The jsii kernel, npx and the CDK CLI start `node` from PATH: the Node LTS package.json pins, as in the Makefile
# (pytest-xdist workers inherit the controller's PATH, which already starts with it).
NODE_BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "node_modules", ".bin")
if not os.environ["PATH"].startswith(NODE_BIN + os.pathsep):
    os.environ["PATH"] = NODE_BIN + os.pathsep + os.environ["PATH"]

# One session folder holds every temporary file of the run: each cdk.App without an outdir makes a cdk.out*
# folder (with a copy of the kubectl layer) in the temp dir, so the suite points TMPDIR (which the jsii kernel
# inherits) at a folder of its own and removes it when the session ends. pytest-xdist workers inherit the
# variable from the controller and share the folder; only the process that made it removes it.
_SESSION_TMP_VAR = "INFERENCE_TIERS_TEST_TMPDIR"
_OWNS_SESSION_TMP = _SESSION_TMP_VAR not in os.environ
if _OWNS_SESSION_TMP:
    os.environ[_SESSION_TMP_VAR] = tempfile.mkdtemp(prefix="inference-tiers-tests-")
os.environ["TMPDIR"] = os.environ[_SESSION_TMP_VAR]
tempfile.tempdir = os.environ[_SESSION_TMP_VAR]

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from syrupy.extensions.json import JSONSnapshotExtension  # noqa: E402

from tests.harness import TierBuild, build_tier  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    if _OWNS_SESSION_TMP and config.option.basetemp is None:
        config.option.basetemp = os.path.join(os.environ[_SESSION_TMP_VAR], "pytest")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWNS_SESSION_TMP:
        shutil.rmtree(os.environ[_SESSION_TMP_VAR], ignore_errors=True)


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
