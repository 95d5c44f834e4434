"""docs/platform.md's Traps table: one row per trap (1-10), and every test a row names exists under that name."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def traps_table() -> list[list[str]]:
    section = (ROOT / "docs" / "platform.md").read_text().split("\n## Traps\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    return [[cell.strip(" |") for cell in row] for row in rows]


def named_tests(cell: str) -> list[tuple[str, str]]:
    """``path::name`` references; ``::name`` after a path means the same file."""
    found, path = [], ""
    for reference in re.findall(r"`([^`]*::[^`]*)`", cell):
        file, name = reference.split("::")
        path = file or path
        found.append((path, name.split("[")[0]))
    return found


def test_every_trap_has_a_row_that_names_a_test() -> None:
    rows = traps_table()
    assert [row[0] for row in rows] == [str(n) for n in range(1, 11)]
    assert all(named_tests(row[-1]) for row in rows)


def test_every_named_test_exists() -> None:
    missing = [
        f"{path}::{name}"
        for row in traps_table()
        for path, name in named_tests(row[-1])
        if not re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert missing == []
