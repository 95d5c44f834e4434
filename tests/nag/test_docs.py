"""docs/nag-rules.md lists every rule of the pack with its level and the AWS page it follows, and no others."""

from __future__ import annotations

import re

from inference_tiers.nag import RULES
from tests.harness import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "nag-rules.md"
_ROW = re.compile(r"^\| `(InferenceTiers-[A-Z]+\d+)` \| (error|warning) \|(.*)$", re.MULTILINE)
LEVELS = {"ERROR": "error", "WARN": "warning"}


def test_the_rule_table_matches_the_pack() -> None:
    rows = {rule_id: (level, rest) for rule_id, level, rest in _ROW.findall(PAGE.read_text())}
    assert list(rows) == [r.id for r in RULES]
    for rule in RULES:
        level, rest = rows[rule.id]
        assert level == LEVELS[rule.level.value], rule.id
        assert f"]({rule.documentation})" in rest, rule.id


def test_the_readme_links_the_page() -> None:
    assert "(docs/nag-rules.md)" in (PROJECT_ROOT / "README.md").read_text()
