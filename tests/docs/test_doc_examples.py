"""Every example in README.md and docs/ runs as written, and every import the docs tell a user to write works.

A doc example that no longer runs is a user's first error; these tests find the blocks themselves, so a new doc
page or a new example is covered without registering it.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest

from tests.harness import PROJECT_ROOT
from tests.hyperpod.support import write_minimal_chart

DOCS = sorted([PROJECT_ROOT / "README.md", *(PROJECT_ROOT / "docs").glob("*.md")])
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
# `from inference_tiers.x import a, b as c` or a parenthesised name list, anywhere in a doc (prose included,
# where the names may start on the next line).
_NAME = r"\w+(?: as \w+)?"
_IMPORT = re.compile(rf"from (inference_tiers[\w.]*) import\s+(\([^)]*\)|{_NAME}(?:,\s*{_NAME})*)")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    source: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(PROJECT_ROOT)}:{self.line}"


def _python_blocks() -> list[Block]:
    blocks = []
    for doc in DOCS:
        text = doc.read_text()
        for match in _PYTHON_BLOCK.finditer(text):
            blocks.append(Block(doc, text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


def _documented_imports() -> list[tuple[str, str, str]]:
    imports = set()
    for doc in DOCS:
        for module, names in _IMPORT.findall(doc.read_text()):
            for item in names.strip("()").split(","):
                if item.strip():
                    imports.add((str(doc.relative_to(PROJECT_ROOT)), module, item.split()[0]))
    return sorted(imports)


# What a doc says to produce before its examples run, made here in the example's working directory: the
# HyperPod dependency chart comes from fetch-dependency-chart.sh, which needs helm and internet access.
PREREQUISITES = {
    "docs/hyperpod.md": lambda cwd: write_minimal_chart(cwd / "build" / "hyperpod-dependency-chart"),
}

BLOCKS = _python_blocks()
IMPORTS = _documented_imports()


def test_the_docs_have_examples_and_imports_to_check() -> None:
    """Guards the extraction itself: a changed fence style must not silently leave nothing to run."""
    assert len(BLOCKS) >= len(DOCS) - 1, [b.id for b in BLOCKS]
    assert any(name == "Guardrail" for _, _, name in IMPORTS), IMPORTS


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_python_example_runs_as_written(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # an example that writes files (cdk.out, a chart folder) writes them here
    prepare = PREREQUISITES.get(str(block.doc.relative_to(PROJECT_ROOT)))
    if prepare is not None:
        prepare(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    exec(compile(block.source, block.id, "exec"), namespace)
    apps = [value for value in namespace.values() if isinstance(value, cdk.App)]
    for app in apps:  # an example that builds an app without synthesizing it must still synthesize
        assert app.synth().stacks, f"{block.id}: the example's app has no stacks"


@pytest.mark.parametrize(("doc", "module", "name"), IMPORTS, ids=lambda v: str(v))
def test_documented_import_works(doc: str, module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{doc}: `from {module} import {name}` fails"
