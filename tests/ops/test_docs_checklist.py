"""docs/sagemaker.md's "What a first deploy needs" marks as checked exactly what preflight checks for the tier."""

from __future__ import annotations

import re

import pytest

from inference_tiers.ops import preflight
from tests.harness import PROJECT_ROOT
from tests.ops.helpers import tier_requirements
from tests.ops.test_tiers import DeniedClients

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-week"
# Each check preflight runs for the sagemaker tier, by the start of its name, and the checklist item it backs.
ITEM_OF_CHECK = {
    "quota ml.": "Endpoint quota for every pool",
    "SageMaker quotas": "Endpoint quota for every pool",
    "training plan ": "The training plan",
    "image ": "The container image is in ECR",
    "CDK bootstrap": "CDK bootstrap",
}
_ITEM = re.compile(r"^- \[ \] \*\*(?P<title>[^*]+)\*\*(?P<text>.*?)(?=^- \[ \]|\Z)", re.MULTILINE | re.DOTALL)


def _checklist() -> tuple[str, dict[str, bool]]:
    doc = (PROJECT_ROOT / "docs" / "sagemaker.md").read_text()
    section = doc.split("## What a first deploy needs", 1)[1].split("\n## ", 1)[0]
    items = {m["title"]: "(checked" in m["text"] for m in _ITEM.finditer(section)}
    return section, items


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")


def test_the_checked_items_are_what_preflight_checks() -> None:
    req = tier_requirements(
        "sagemaker",
        f"sagemaker.capacity_reservation_arn={PLAN}",
        'sagemaker.instance_types=["ml.p5.48xlarge"]',
    )
    checks = {r.check for r in preflight.run_preflight(DeniedClients(), req, "123456789012")}
    backed = {item for check in checks for prefix, item in ITEM_OF_CHECK.items() if check.startswith(prefix)}
    unlisted = [c for c in checks if not any(c.startswith(prefix) for prefix in ITEM_OF_CHECK)]
    assert not unlisted, f"checks with no checklist item: {unlisted}"
    section, items = _checklist()
    assert {title for title, checked in items.items() if checked} == backed
    # The sentence above the list counts them, and they come first.
    count = re.search(r"checks the first (\w+)", section)
    assert count is not None and count[1] == {3: "three", 4: "four", 5: "five"}[len(backed)]
    assert all(list(items.values())[: len(backed)])
