"""Every example in README.md and docs/ runs as written, every import the docs tell a user to write works, and
every ``inference-tiers`` command line they give parses with the CLI's own argument parser.

A doc example that no longer runs is a user's first error; these tests find the blocks themselves, so a new doc
page or a new example is covered without registering it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest

from inference_tiers.ops.cli import build_parser
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

# A command line: in a code span, or a line of a fenced block (after an optional `$ ` prompt and environment
# assignments; a trailing backslash continues it). Ends at a pipe or a comment.
_SPAN_COMMAND = re.compile(r"`(inference-tiers [^`]*)`")
_BLOCK = re.compile(r"^```[\w-]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_BLOCK_COMMAND = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(inference-tiers .*)$", re.MULTILINE)


def _documented_commands() -> list[tuple[str, str]]:
    """(doc:line, arguments) of every command line the docs give with options; an elided one (`...`) is
    prose, not a command to run."""
    commands = []
    for doc in DOCS:
        text = doc.read_text()
        found = [(m.start(), m.group(1)) for m in _SPAN_COMMAND.finditer(text)]
        for block in _BLOCK.finditer(text):
            body = block.group(1).replace("\\\n", " ")
            found += [(block.start(1), m.group(1)) for m in _BLOCK_COMMAND.finditer(body)]
        for at, line in found:
            line = re.split(r"\s[|#]|\s>", line)[0].strip()
            if " -" not in line or "..." in line:
                continue
            place = f"{doc.relative_to(PROJECT_ROOT)}:{text.count(chr(10), 0, at) + 1}"
            commands.append((place, line.removeprefix("inference-tiers ")))
    return sorted(set(commands))


BLOCKS = _python_blocks()
IMPORTS = _documented_imports()
COMMANDS = _documented_commands()


def test_the_docs_have_examples_and_imports_to_check() -> None:
    """Guards the extraction itself: a changed fence style must not silently leave nothing to run."""
    assert len(BLOCKS) >= len(DOCS) - 1, [b.id for b in BLOCKS]
    assert any(name == "Guardrail" for _, _, name in IMPORTS), IMPORTS
    assert any(place.startswith("docs/hyperpod.md") for place, _ in COMMANDS), COMMANDS


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
        assembly = app.synth()
        assert assembly.stacks, f"{block.id}: the example's app has no stacks"
        # A context lookup (an env-specific stack's Availability Zones, a Vpc.from_lookup) makes `cdk synth` ask
        # the account: offline, without credentials, it fails. The CLI looks up exactly what the assembly lists
        # as missing: the "missing" list of the assembly's manifest.json (cloud-assembly-schema).
        manifest = json.loads((Path(assembly.directory) / "manifest.json").read_text())
        missing = [entry["key"] for entry in manifest.get("missing", [])]
        assert missing == [], f"{block.id}: `cdk synth` would need AWS credentials to look up {missing}"


@pytest.mark.parametrize(("doc", "module", "name"), IMPORTS, ids=lambda v: str(v))
def test_documented_import_works(doc: str, module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{doc}: `from {module} import {name}` fails"


@pytest.mark.parametrize(("place", "arguments"), COMMANDS, ids=lambda v: str(v))
def test_documented_command_line_parses(place: str, arguments: str) -> None:
    """The CLI's parser accepts the command as documented (placeholders such as <region> stand for a value)."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(shlex.split(re.sub(r"<[^>]+>", "x", arguments)))
        except SystemExit as error:
            assert error.code == 0, f"{place}: `inference-tiers {arguments}`: {errors.getvalue().strip()}"
