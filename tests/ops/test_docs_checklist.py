"""A tier doc's "What a first deploy needs" marks as checked exactly what preflight checks for the tier."""

from __future__ import annotations

import re

import pytest

from inference_tiers.ops import preflight
from tests.harness import PROJECT_ROOT
from tests.ops.helpers import tier_requirements
from tests.ops.test_tiers import DeniedClients

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-week"
# Per tier: the context that makes preflight run every check it has, and each check, by the start of its name,
# with the checklist item it backs.
TIERS = {
    "sagemaker": (
        (
            f"sagemaker.capacity_reservation_arn={PLAN}",
            'sagemaker.instance_types=["ml.p5.48xlarge"]',
            "sagemaker.create_endpoint=true",
        ),
        {
            "quota ml.": "Endpoint quota for every pool",
            "SageMaker quotas": "Endpoint quota for every pool",
            "training plan ": "The training plan",
            "image ": "The container image is in ECR",
            "model weights in S3": "The weights are in S3",
            "CDK bootstrap": "CDK bootstrap",
        },
    ),
    "disaggregated": (
        (),
        {
            "instance type offerings": "Instance types offered",
            "quota Running On-Demand P": "On-Demand P vCPU quota",
            "capacity reservations": "The reservation",
            "EKS Kubernetes": "EKS 1.35",
            "EKS add-on ": "EKS add-on versions",
            "image ": "The images",
            "CDK bootstrap": "CDK bootstrap",
        },
    ),
}
NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
_ITEM = re.compile(r"^- \[ \] \*\*(?P<title>[^*]+)\*\*(?P<text>.*?)(?=^- \[ \]|\Z)", re.MULTILINE | re.DOTALL)


def _checklist(tier: str) -> tuple[str, dict[str, bool]]:
    doc = (PROJECT_ROOT / "docs" / f"{tier}.md").read_text()
    section = doc.split("## What a first deploy needs", 1)[1].split("\n## ", 1)[0]
    # An item says it is checked as "(checked ...)" or "*(preflight: <check>)*".
    items = {
        m["title"]: any(mark in m["text"] for mark in ("(checked", "(preflight:"))
        for m in _ITEM.finditer(section)
    }
    return section, items


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")


@pytest.mark.parametrize("tier", TIERS)
def test_the_checked_items_are_what_preflight_checks(tier: str) -> None:
    context, item_of_check = TIERS[tier]
    req = tier_requirements(tier, *context)
    checks = {r.check for r in preflight.run_preflight(DeniedClients(), req, "123456789012")}
    backed = {item for check in checks for prefix, item in item_of_check.items() if check.startswith(prefix)}
    unlisted = [c for c in checks if not any(c.startswith(prefix) for prefix in item_of_check)]
    assert not unlisted, f"checks with no checklist item: {unlisted}"
    section, items = _checklist(tier)
    assert {title for title, checked in items.items() if checked} == backed
    # The sentence above the list counts them, and they come first.
    count = re.search(r"checks the first (\w+)", section)
    assert count is not None and count[1] == NUMBERS[len(backed)]
    assert all(list(items.values())[: len(backed)])
