"""Every name a documented example imports from this library (and so every class it constructs or function it
calls from it) is in the API reference (tools/build_docs.py), where its parameters are described."""

from __future__ import annotations

import ast

import pdoc.doc

from tests.docs.test_doc_examples import BLOCKS
from tools import build_docs


def example_imports() -> dict[str, str]:
    """Name -> the example (doc:line) that imports it from ``inference_tiers``; an example can only construct or
    call a name of the library after importing it (an alias is followed back to the imported name)."""
    names: dict[str, str] = {}
    for block in BLOCKS:
        for node in ast.walk(ast.parse(block.source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("inference_tiers"):
                names.update((alias.name, block.id) for alias in node.names)
    return names


def reference_names() -> set[str]:
    return {name for module in build_docs.MODULES for name in pdoc.doc.Module.from_name(module).members}


def test_every_name_an_example_imports_is_in_the_reference() -> None:
    imported = example_imports()
    assert {"Guardrail", "ModelPool", "TenancySpec"} <= imported.keys()  # the extraction found the examples
    documented = reference_names()
    assert {name: place for name, place in imported.items() if name not in documented} == {}
