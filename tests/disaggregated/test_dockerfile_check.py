"""The vLLM image's Dockerfile installs only Mooncake's pinned EFA wheel (after removing the default ones) and
keeps the EFA installer's libfabric first on LD_LIBRARY_PATH; the checker finds each way of getting that wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference_tiers.k8s.dockerfile_check import (
    EFA_INSTALLER_VERSION,
    MOONCAKE_VERSION,
    VLLM_DOCKERFILE,
    check,
    expand,
    instructions,
    main,
)
from tests.harness import PROJECT_ROOT

DOCKERFILE = VLLM_DOCKERFILE.read_text()
DOCS = (PROJECT_ROOT / "docs" / "disaggregated.md").read_text()
UNINSTALL = "RUN python3 -m pip uninstall -y mooncake-transfer-engine mooncake-transfer-engine-cuda13 || true \\\n && "
INSTALL = 'python3 -m pip install --no-cache-dir "mooncake-transfer-engine-efa-cuda13==${MOONCAKE_VERSION}"'
LD_PATH = "ENV LD_LIBRARY_PATH=/opt/amazon/efa/lib:${LD_LIBRARY_PATH} \\\n"


def mutate(old: str, new: str) -> str:
    assert DOCKERFILE.count(old) == 1, f"the Dockerfile no longer contains {old!r} exactly once"
    return DOCKERFILE.replace(old, new)


def test_the_packaged_dockerfile_passes_and_pins_what_the_checker_expects() -> None:
    assert check(DOCKERFILE) == []
    assert f"ARG MOONCAKE_VERSION={MOONCAKE_VERSION}\n" in DOCKERFILE
    assert f"ARG EFA_INSTALLER_VERSION={EFA_INSTALLER_VERSION}\n" in DOCKERFILE
    assert main([str(VLLM_DOCKERFILE)]) == 0


def test_the_docs_name_the_pinned_versions() -> None:
    images = next(line for line in DOCS.splitlines() if line.startswith("| vLLM (prefill, decode"))
    assert f"`aws-efa-installer` {EFA_INSTALLER_VERSION} " in images
    assert f"`mooncake-transfer-engine-efa-cuda13=={MOONCAKE_VERSION}`" in images


@pytest.mark.parametrize(
    ("mutated", "problem"),
    [
        pytest.param(
            mutate("mooncake-transfer-engine-efa-cuda13==", "mooncake-transfer-engine-cuda13=="),
            r"pip installs mooncake-transfer-engine-cuda13==0\.3\.13\.post1, which is not .*efa-cuda13",
            id="non-EFA wheel",
        ),
        pytest.param(
            mutate("mooncake-transfer-engine-efa-cuda13==", "mooncake-transfer-engine-efa=="),
            r"mooncake-transfer-engine-efa==.*which is not mooncake-transfer-engine-efa-cuda13",
            id="CUDA 12 EFA wheel on the CUDA 13 base",
        ),
        pytest.param(
            mutate(UNINSTALL, "RUN "),
            r"no pip uninstall of mooncake-transfer-engine, mooncake-transfer-engine-cuda13 before",
            id="missing uninstall",
        ),
        pytest.param(
            mutate(" mooncake-transfer-engine-cuda13 || true", " || true"),
            r"no pip uninstall of mooncake-transfer-engine-cuda13 before",
            id="uninstall misses the CUDA 13 default wheel",
        ),
        pytest.param(
            mutate(UNINSTALL + INSTALL, "RUN " + INSTALL + " \\\n && " + UNINSTALL.removeprefix("RUN ")[:-7]),
            r"no pip uninstall of .* before",
            id="uninstall after the install",
        ),
        pytest.param(
            mutate("==${MOONCAKE_VERSION}", ""),
            r"mooncake-transfer-engine-efa-cuda13 is not pinned to ==0\.3\.13\.post1",
            id="unpinned EFA wheel",
        ),
        pytest.param(
            mutate("ARG MOONCAKE_VERSION=0.3.13.post1", "ARG MOONCAKE_VERSION=0.3.11"),
            r"efa-cuda13==0\.3\.11 is not pinned to ==0\.3\.13\.post1",
            id="another EFA version",
        ),
        pytest.param(
            mutate(INSTALL, INSTALL + " mooncake-transfer-engine"),
            r"pip installs mooncake-transfer-engine, which is not",
            id="default wheel installed alongside",
        ),
        pytest.param(
            mutate(f"ARG EFA_INSTALLER_VERSION={EFA_INSTALLER_VERSION}", "ARG EFA_INSTALLER_VERSION=1.38.0"),
            r"ARG EFA_INSTALLER_VERSION is '1\.38\.0'; it must be '1\.50\.0'",
            id="older EFA installer",
        ),
        pytest.param(
            mutate(LD_PATH, "ENV "),
            r"no ENV LD_LIBRARY_PATH starting with /opt/amazon/efa/lib",
            id="missing LD_LIBRARY_PATH",
        ),
        pytest.param(
            mutate(LD_PATH, "ENV LD_LIBRARY_PATH=${LD_LIBRARY_PATH}:/opt/amazon/efa/lib \\\n"),
            r"LD_LIBRARY_PATH is ':/opt/amazon/efa/lib'; it must start with /opt/amazon/efa/lib",
            id="reordered LD_LIBRARY_PATH",
        ),
        pytest.param(
            DOCKERFILE + "ENV LD_LIBRARY_PATH=/usr/local/lib\n",
            r"LD_LIBRARY_PATH is '/usr/local/lib'",
            id="LD_LIBRARY_PATH replaced later",
        ),
        pytest.param(
            DOCKERFILE + "FROM vllm/vllm-openai:v0.33.0\n",
            r"no pip install of mooncake-transfer-engine-efa-cuda13==0\.3\.13\.post1",
            id="a final stage that does not build on the checked one",
        ),
    ],
)
def test_each_trap_is_reported(mutated: str, problem: str) -> None:
    problems = check(mutated)
    assert any(re.search(problem, p) for p in problems), problems


def test_equivalent_spellings_pass() -> None:
    legacy_env = mutate(LD_PATH, "ENV LD_LIBRARY_PATH /opt/amazon/efa/lib:/usr/local/nvidia/lib\nENV ")
    pip3 = mutate("python3 -m pip install --no-cache-dir", "pip3 install --no-cache-dir")
    staged = mutate("FROM vllm/vllm-openai:v0.33.0", "FROM vllm/vllm-openai:v0.33.0 AS efa") + "FROM efa\n"
    for text in (legacy_env, pip3, staged):
        assert check(text) == []


def test_the_cli_reports_problems_with_a_failing_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(mutate(LD_PATH, "ENV "))
    assert main([str(broken)]) == 1
    assert "no ENV LD_LIBRARY_PATH" in capsys.readouterr().out


def test_continuations_and_variable_forms_are_read_like_the_builder() -> None:
    parsed = list(instructions("# c\nRUN a \\\n  # inside\n  && b\nenv X=1\n"))
    assert [(i.line, i.keyword, i.arguments) for i in parsed] == [(2, "RUN", "a && b"), (5, "ENV", "X=1")]
    values = {"A": "x", "E": ""}
    assert [expand(v, values) for v in ("$A", "${A}", "${B:-d}", "${E:-d}", "${E-d}", "${A:+y}", "${B:+y}")] == [
        "x", "x", "d", "d", "", "y", "",
    ]  # fmt: skip
