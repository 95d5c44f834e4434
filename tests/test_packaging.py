"""Publishable as it stands: the sdist and wheel build (python -m build) and pass twine check, the wheel carries
the tier defaults and declares ranges, not pins; constraints.txt pins a release inside every range; the version
has one source and a CHANGELOG entry; the GitHub workflows pass zizmor, which fails an unpinned action."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import inference_tiers
from inference_tiers.config import tier_defaults
from tests.harness import PROJECT_ROOT

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
# Reviewed SHAs: 40 hex digits, the tag in a comment (zizmor's unpinned-uses audit fails anything else).
SHA_PIN = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")
# zizmor's wheel installs a binary beside the interpreter, not a module.
ZIZMOR = str(Path(sys.executable).with_name("zizmor"))


def _run(*argv: str, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel built from a copy of the checkout (the build's own files stay out of the checkout)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, source / name)
    shutil.copytree(
        PROJECT_ROOT / "inference_tiers",
        source / "inference_tiers",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    out = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "build", "--outdir", str(out), str(source))
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    files = sorted(p.name for p in dist.iterdir())
    version = inference_tiers.__version__
    assert files == [f"inference_tiers-{version}-py3-none-any.whl", f"inference_tiers-{version}.tar.gz"]
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", *(str(p) for p in dist.iterdir()))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_wheel_ships_the_defaults_and_declares_ranges(dist: Path) -> None:
    version = inference_tiers.__version__
    with zipfile.ZipFile(dist / f"inference_tiers-{version}-py3-none-any.whl") as wheel:
        assert json.loads(wheel.read("inference_tiers/defaults.json")) == tier_defaults()
        assert "inference_tiers/py.typed" in wheel.namelist()
        metadata = wheel.read(f"inference_tiers-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in metadata
    runtime = [
        Requirement(line.removeprefix("Requires-Dist: "))
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    ]
    assert {canonicalize_name(r.name) for r in runtime} >= {"aws-cdk-lib", "cdk-nag", "constructs"}
    for requirement in runtime:
        operators = sorted(spec.operator for spec in requirement.specifier)
        assert operators == ["<", ">="], f"{requirement}: a floor and the next major, not a pin"


def test_constraints_pin_a_release_inside_every_declared_range() -> None:
    pins = {}
    for line in (PROJECT_ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    for line in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"constraints.txt pins no release of {requirement.name}"
        assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {line}"


def test_the_version_has_one_source_and_a_changelog_section() -> None:
    assert "version" not in PYPROJECT["project"] and PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "inference_tiers.__version__"}
    changelog = (PROJECT_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"\n## [{inference_tiers.__version__}]" in changelog
    assert "\n## [Unreleased]\n" in changelog


def test_release_publishes_with_trusted_publishing_only() -> None:
    release = yaml.safe_load((WORKFLOWS / "release.yml").read_text(encoding="utf-8"))
    publish = release["jobs"]["publish"]
    assert release["permissions"] == {} and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (step,) = [s for s in publish["steps"] if s["uses"].startswith("pypa/gh-action-pypi-publish@")]
    assert SHA_PIN.fullmatch(step["uses"]) and "with" not in step  # no password: OIDC only


def test_ci_workflow_runs_the_ci_script() -> None:
    ci = yaml.safe_load((WORKFLOWS / "ci.yml").read_text(encoding="utf-8"))
    (job,) = ci["jobs"].values()
    assert job["steps"][-1] == {"run": "bash .ci/run"}
    for step in (s for job in ci["jobs"].values() for s in job["steps"] if "uses" in s):
        assert SHA_PIN.fullmatch(step["uses"]), step


def test_zizmor_passes_the_workflows_and_fails_an_unpinned_action(tmp_path: Path) -> None:
    lint = _run(ZIZMOR, "--offline", "--persona", "pedantic", str(WORKFLOWS))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    unpinned = tmp_path / ".github" / "workflows"
    unpinned.mkdir(parents=True)
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    (unpinned / "ci.yml").write_text(re.sub(r"actions/checkout@\S+ # \S+", "actions/checkout@v7", text))
    lint = _run(ZIZMOR, "--offline", str(unpinned))
    assert lint.returncode != 0 and "unpinned-uses" in lint.stdout + lint.stderr
