"""Hourly prices from a dated price table shipped with the package, or from a file the user passes.

The table (``assets/ops/prices-us-east-1.json``) carries its date, Region and source. A price file has the
same shape: ``{"as_of": "...", "region": "...", "source": "...", "prices": {"p5.48xlarge": 55.04, ...}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_tiers import ASSETS_DIR
from inference_tiers.instance_types import SAGEMAKER_PREFIX

DEFAULT_PRICE_FILE = ASSETS_DIR / "ops" / "prices-us-east-1.json"


class PriceTableError(ValueError):
    """A price file that cannot be used: names the file, the problem and the expected shape."""


@dataclass(frozen=True)
class PriceTable:
    as_of: str
    region: str
    source: str
    prices: dict[str, float]

    def hourly(self, instance_type: str) -> tuple[float, str] | None:
        """(USD per hour, basis) for ``instance_type``; an ``ml.`` name falls back to its EC2 price."""
        if instance_type in self.prices:
            return self.prices[instance_type], f"{self.region} {self.as_of}"
        ec2_name = instance_type.removeprefix(SAGEMAKER_PREFIX)
        if ec2_name != instance_type and ec2_name in self.prices:
            return self.prices[
                ec2_name
            ], f"EC2 price of {ec2_name} ({self.region} {self.as_of}); SageMaker costs more"
        return None


_SHAPE = (
    '{"as_of": "YYYY-MM-DD", "region": "...", "source": "...", "prices": {"<instance type>": <USD/hour>}}'
)


def load_price_table(path: Path | None = None) -> PriceTable:
    path = path or DEFAULT_PRICE_FILE
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PriceTableError(f"price file {path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise PriceTableError(f"price file {path}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("prices"), dict):
        raise PriceTableError(f"price file {path}: expected {_SHAPE}")
    prices: dict[str, float] = {}
    for name, value in raw["prices"].items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise PriceTableError(
                f"price file {path}: price of {name!r} is {value!r}; expected a positive number"
            )
        prices[name] = float(value)
    for key in ("as_of", "region", "source"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise PriceTableError(f"price file {path}: missing {key!r}; expected {_SHAPE}")
    return PriceTable(as_of=raw["as_of"], region=raw["region"], source=raw["source"], prices=prices)
