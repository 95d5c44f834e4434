"""Every tier page documents every setting of its tier in a table, and names no setting the tier lacks.

The settings are the keys of ``inference_tiers/defaults.json`` (``<tier>.<setting>``, the file every context key
is read against); a tier page's table rows name them in backticks, short (``stage``) or full (``platform.stage``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = json.loads((ROOT / "inference_tiers" / "defaults.json").read_text())
TIERS = sorted({key.split(".", 1)[0] for key in DEFAULTS})


def settings_of(tier: str) -> set[str]:
    return {key.split(".", 1)[1] for key in DEFAULTS if key.startswith(tier + ".")}


def table_names(tier: str, page: str) -> set[str]:
    """The backticked names in the first cell of the page's table rows, without the ``<tier>.`` prefix."""
    names: set[str] = set()
    for line in page.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first_cell):
            names.add(name.removeprefix(tier + "."))
    return names


@pytest.mark.parametrize("tier", TIERS)
def test_the_tier_page_has_a_row_for_every_setting(tier: str) -> None:
    page = (ROOT / "docs" / f"{tier}.md").read_text()
    missing = settings_of(tier) - table_names(tier, page)
    assert not missing, f"docs/{tier}.md has no table row for {sorted(missing)}"


@pytest.mark.parametrize("tier", TIERS)
def test_the_settings_table_names_no_setting_the_tier_lacks(tier: str) -> None:
    page = (ROOT / "docs" / f"{tier}.md").read_text()
    heading = re.search(
        r"^## [^\n]*(?:keys|[Ss]ettings|Configuration)[^\n]*\n(.*?)(?=^## |\Z)", page, re.M | re.S
    )
    assert heading, (
        f"docs/{tier}.md has no settings section (a heading naming keys, Settings or Configuration)"
    )
    names = table_names(tier, heading.group(1))
    unknown = {n for n in names if re.fullmatch(r"[a-z][a-z0-9_]*", n)} - settings_of(tier)
    assert not unknown, (
        f"docs/{tier}.md's settings table names {sorted(unknown)}, which are not {tier} settings"
    )
