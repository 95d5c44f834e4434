"""The Deep Learning Containers registry account the library pulls from, per Region, is the one AWS publishes
(aws/deep-learning-containers docs/reference/region_availability.md, vendored in tests/data/sagemaker with its
SOURCE.md): a wrong account fails the deploy in that Region (the image cannot be pulled)."""

from __future__ import annotations

import re
from pathlib import Path

from inference_tiers.constructs.sagemaker.engines import DLC_REGISTRY_ACCOUNTS

TABLE = (Path(__file__).parents[1] / "data" / "sagemaker" / "dlc-region-accounts.md").read_text()
PUBLISHED = dict(
    re.findall(r"^\| [^|]+ \| ([a-z]{2}(?:-[a-z]+)+-[0-9]) \| ([0-9]{12}) \|$", TABLE, re.MULTILINE)
)


def test_every_region_the_library_knows_has_the_published_registry_account() -> None:
    assert len(PUBLISHED) > 30 and PUBLISHED["us-east-1"] == "763104351884"
    wrong = {
        region: (account, PUBLISHED.get(region))
        for region, account in DLC_REGISTRY_ACCOUNTS.items()
        if PUBLISHED.get(region) != account
    }
    assert wrong == {}
