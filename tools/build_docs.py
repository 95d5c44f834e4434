"""``make docs``: the API reference of ``inference_tiers.constructs`` and the other modules in ``MODULES`` (pdoc, reStructuredText docstrings) into the
folder given, after checking that every public class and function, every public method, property and attribute
(a dataclass field, or an attribute a constructor sets: its docstring is the string right after it), and every
constructor parameter (``:param name:``, or ````name```` in a list, in the class or ``__init__`` docstring) is
documented. An enum's members are documented by the enum's own docstring; an attribute that ``__init__`` sets
where pdoc cannot see it (in a branch, or by unpacking) is reported too.

Usage: python tools/build_docs.py OUTPUT_DIR
"""

from __future__ import annotations

import ast
import enum
import inspect
import sys
import textwrap
from pathlib import Path

import pdoc  # noqa: E402
import pdoc.doc  # noqa: E402
import pdoc.render  # noqa: E402

# Imported here, before pdoc loads it: pdoc replaces subprocess.Popen while it imports a module, and
# aws-cdk-lib's jsii runtime starts its Node.js process at import.
import inference_tiers.constructs  # noqa: E402

MODULE = "inference_tiers.constructs"
# The modules the reference documents (tests/docs: every name a doc example imports is in one of them).
MODULES = (
    MODULE,
    "inference_tiers.constructs.hyperpod.dependencies",
    "inference_tiers.nag.pack",
    # The names the platform's constructs agree on (CORE_NODE_LABELS, GATEWAY_NAMESPACE, ...).
    "inference_tiers.k8s.platform_names",
)
# The package re-exports its names on first use (PEP 562) and pdoc reads the module's namespace: resolve them all.
for _name in inference_tiers.constructs.__all__:
    getattr(inference_tiers.constructs, _name)
# Constructor parameters every construct shares (documented once, by aws-cdk's Construct) or that are not named.
_UNNAMED = {"self", "scope", "construct_id", "id", "args", "kwargs"}


def _parameters(cls: pdoc.doc.Class) -> list[str]:
    init = cls.obj.__dict__.get("__init__")
    if init is None:
        return []
    return [name for name in inspect.signature(init).parameters if name not in _UNNAMED]


def undocumented(module: pdoc.doc.Module) -> list[str]:
    """What the reference would show without a description: the public names of ``module`` (and of the classes
    in it) that have no docstring, and constructor parameters their docstrings do not name."""
    missing: list[str] = []

    def walk(namespace: pdoc.doc.Namespace[object]) -> None:
        for member in namespace.members.values():
            if member.name.startswith("_") or not member.taken_from[0].startswith(
                module.modulename.split(".")[0]
            ):
                continue
            if isinstance(member, (pdoc.doc.Class, pdoc.doc.Function)) and not member.docstring.strip():
                missing.append(f"{member.fullname}: no docstring")
            if (
                isinstance(member, pdoc.doc.Variable)
                and not member.docstring.strip()
                and not _is_enum(namespace)
                and not _is_described_field(namespace, member.name)
            ):
                missing.append(f"{member.fullname}: no docstring")
            if isinstance(member, pdoc.doc.Class):
                for name in _parameters(member):
                    if not _describes(member, name) and not _has_field_docstring(member, name):
                        missing.append(
                            f"{member.fullname}: parameter {name} is not described (':param {name}:')"
                        )
                missing.extend(
                    f"{member.fullname}.{name}: set in __init__ where the reference cannot see it (in a branch or "
                    "by unpacking): assign it on its own line with a docstring"
                    for name in sorted(_attributes_set_in_init(member))
                    if not name.startswith("_") and name not in member.members
                )
                walk(member)

    walk(module)
    return missing


def _describes(cls: pdoc.doc.Class, name: str) -> bool:
    """Whether the class or ``__init__`` docstring describes ``name`` (``:param name:`` or ````name````)."""
    text = cls.docstring + (inspect.getdoc(cls.obj.__dict__.get("__init__")) or "")
    return f":param {name}:" in text or f"``{name}``" in text


def _has_field_docstring(cls: pdoc.doc.Class, name: str) -> bool:
    field = cls.members.get(name)
    return name in getattr(cls.obj, "__dataclass_fields__", {}) and bool(field and field.docstring.strip())


def _is_described_field(namespace: pdoc.doc.Namespace[object], name: str) -> bool:
    """A dataclass field is its constructor parameter: the class docstring's description of one documents the
    other (and :func:`_has_field_docstring` the other way round), so neither is written twice."""
    return (
        isinstance(namespace, pdoc.doc.Class)
        and name in getattr(namespace.obj, "__dataclass_fields__", {})
        and _describes(namespace, name)
    )


def _is_enum(namespace: pdoc.doc.Namespace[object]) -> bool:
    return isinstance(namespace.obj, type) and issubclass(namespace.obj, enum.Enum)


def _attributes_set_in_init(cls: pdoc.doc.Class) -> set[str]:
    """Every ``self.<name>`` that the class's own ``__init__`` assigns, wherever in it (pdoc documents only those
    assigned at its top level, one per statement)."""
    init = cls.obj.__dict__.get("__init__")
    if not inspect.isfunction(init) or init.__code__.co_filename.startswith("<"):
        return set()  # none, or generated (a dataclass's fields are documented where they are declared)
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    missing = [line for module in MODULES for line in undocumented(pdoc.doc.Module.from_name(module))]
    if missing:
        print(f"{len(missing)} public names without a description:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in missing), file=sys.stderr)
        return 1
    pdoc.render.configure(docformat="restructuredtext")
    pdoc.pdoc(*MODULES, output_directory=Path(argv[1]))
    print(f"API reference: {Path(argv[1]) / 'inference_tiers' / 'constructs.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
