"""``make docs``: the API reference of ``inference_tiers.constructs`` (pdoc, reStructuredText docstrings) into the
folder given, after checking that every public class and function, every public method and property, and every
constructor parameter (``:param name:``, or ````name```` in a list, in the class or ``__init__`` docstring) is
documented.

Usage: python tools/build_docs.py OUTPUT_DIR
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pdoc  # noqa: E402
import pdoc.doc  # noqa: E402
import pdoc.render  # noqa: E402

# Imported here, before pdoc loads it: pdoc replaces subprocess.Popen while it imports a module, and
# aws-cdk-lib's jsii runtime starts its Node.js process at import.
import inference_tiers.constructs  # noqa: E402

MODULE = "inference_tiers.constructs"
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
            if isinstance(member, pdoc.doc.Class):
                init_doc = inspect.getdoc(member.obj.__dict__.get("__init__")) or ""
                for name in _parameters(member):
                    if (
                        f":param {name}:" not in member.docstring + init_doc
                        and f"``{name}``" not in member.docstring + init_doc
                    ):
                        missing.append(
                            f"{member.fullname}: parameter {name} is not described (':param {name}:')"
                        )
                walk(member)

    walk(module)
    return missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    missing = undocumented(pdoc.doc.Module.from_name(MODULE))
    if missing:
        print(f"{MODULE}: {len(missing)} public names without a description:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in missing), file=sys.stderr)
        return 1
    pdoc.render.configure(docformat="restructuredtext")
    pdoc.pdoc(MODULE, output_directory=Path(argv[1]))
    print(f"API reference: {Path(argv[1]) / 'inference_tiers' / 'constructs.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
