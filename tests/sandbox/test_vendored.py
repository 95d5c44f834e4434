"""The vendored upstream files are byte-identical to the releases SOURCE.md names (git blob ids match)."""

from __future__ import annotations

import hashlib
import re

from tests.sandbox.helpers import DATA

_ROW = re.compile(r"^\| `(?P<file>[^`]+)` \|.*\| `(?P<blob>[0-9a-f]{40})` \|$", re.MULTILINE)


def _git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def test_every_vendored_file_is_listed_with_its_upstream_blob_id() -> None:
    listed = {m["file"]: m["blob"] for m in _ROW.finditer((DATA / "SOURCE.md").read_text())}
    present = {str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCE.md"}
    assert set(listed) == present
    for name, blob in listed.items():
        assert _git_blob_id((DATA / name).read_bytes()) == blob, name
