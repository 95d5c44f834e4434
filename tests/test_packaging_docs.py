"""The API reference (tools/build_docs.py, make docs): every public name of inference_tiers.constructs, its
attributes included, is described, the check catches one that is not, the build renders the constructs, and every
tier page links to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pdoc.doc
import pytest

import inference_tiers.constructs
from inference_tiers.config import TIER_ORDER
from tests.harness import PROJECT_ROOT
from tools import build_docs

UNDOCUMENTED_MODULE = '''
"""A module whose class forgot things."""

import dataclasses
import enum


class Finish(enum.Enum):
    """How a widget is painted: the paint shop's own names."""

    MATT = "MATT"
    GLOSS = "GLOSS"


class Widget:
    """A widget.

    :param size: how big.
    """

    def __init__(self, *, size: int, colour: str) -> None:
        self.size = size
        """How big, in millimetres."""
        self.finish = Finish.MATT
        if size > 10:
            self.large = True

    def paint(self) -> None:
        pass


@dataclasses.dataclass
class Part:
    """A part: a field is its constructor parameter, described once, in either place.

    :param weight: in grams.
    """

    weight: int
    length: int
    """In millimetres."""
    colour: str


def helper() -> None:
    pass
'''


def test_every_public_name_of_the_constructs_is_described() -> None:
    module = pdoc.doc.Module.from_name(build_docs.MODULE)
    # Every re-exported name is in the reference as the class or function it is, lazily imported or not (pdoc
    # keeps a name it cannot resolve as an undocumented variable, which the check below would not see).
    kinds = {name: type(module.members.get(name)).__name__ for name in inference_tiers.constructs.__all__}
    assert {name: kind for name, kind in kinds.items() if kind not in ("Class", "Function")} == {}
    assert [
        line
        for name in build_docs.MODULES
        for line in build_docs.undocumented(pdoc.doc.Module.from_name(name))
    ] == []


def test_the_check_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "widgets_undocumented.py").write_text(UNDOCUMENTED_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        missing = build_docs.undocumented(pdoc.doc.Module.from_name("widgets_undocumented"))
    finally:
        sys.modules.pop("widgets_undocumented", None)
    assert missing == [
        "widgets_undocumented.Widget: parameter colour is not described (':param colour:')",
        "widgets_undocumented.Widget.large: set in __init__ where the reference cannot see it (in a branch or "
        "by unpacking): assign it on its own line with a docstring",
        "widgets_undocumented.Widget.finish: no docstring",
        "widgets_undocumented.Widget.paint: no docstring",
        "widgets_undocumented.Part: parameter colour is not described (':param colour:')",
        "widgets_undocumented.Part.colour: no docstring",
        "widgets_undocumented.helper: no docstring",
    ]


def test_the_reference_renders_the_constructs(tmp_path: Path) -> None:
    assert build_docs.main(["build_docs.py", str(tmp_path)]) == 0
    page = (tmp_path / "inference_tiers" / "constructs.html").read_text(encoding="utf-8")
    for name in ("LiteLLMGateway", "ObservabilityHub", "SageMakerLlmEndpoint", "KataSandboxNodes"):
        assert f'id="{name}"' in page


@pytest.mark.parametrize("page", [*TIER_ORDER, "inference-gateway"])
def test_each_tier_page_links_the_reference(page: str) -> None:
    doc = (PROJECT_ROOT / "docs" / f"{page}.md").read_text(encoding="utf-8")
    assert "(api/inference_tiers/constructs.html" in doc and "make docs" in doc
