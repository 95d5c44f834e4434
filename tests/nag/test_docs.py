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


def test_every_acknowledgment_in_the_code_is_in_the_page_and_no_other() -> None:
    """The page's table of this project's acknowledgments names exactly the findings the code acknowledges."""
    finding = re.compile(r'"(InferenceTiers-[A-Z]+\d+(?:\[[^"\]]+\])?)"')
    in_code = {
        match
        for source in (PROJECT_ROOT / "inference_tiers").rglob("*.py")
        if "nag" not in source.relative_to(PROJECT_ROOT / "inference_tiers").parts[:1]
        for match in finding.findall(source.read_text())
    }
    section = (
        PAGE.read_text().split("## Where this project's tiers acknowledge a rule", 1)[1].split("\n## ", 1)[0]
    )
    in_page = set(re.findall(r"^\| `(InferenceTiers-[^`]+)` \|", section, re.MULTILINE))
    assert in_code == in_page
