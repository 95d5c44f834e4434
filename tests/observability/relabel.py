"""Prometheus's ``keep``/``drop`` relabel semantics, enough to ask which discovered targets a scrape job keeps:
source label values joined by ``;`` (the default separator), a missing label reads as "", and the regex must match
the whole string (Prometheus anchors it)."""

from __future__ import annotations

import re
from typing import Any


def kept(relabel_configs: list[dict[str, Any]], target: dict[str, str]) -> bool:
    for rule in relabel_configs:
        action = rule.get("action", "replace")
        if action not in ("keep", "drop"):
            continue
        value = rule.get("separator", ";").join(target.get(name, "") for name in rule["source_labels"])
        matched = re.fullmatch(rule.get("regex", "(.*)"), value) is not None
        if matched != (action == "keep"):
            return False
    return True
