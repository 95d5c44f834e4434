"""Prices from dated price tables shipped with the package, or from a file the user passes.

Instances: ``assets/ops/prices-us-east-1.json`` (USD per hour), and a ``--prices`` file of the same shape:
``{"as_of": "...", "region": "...", "source": "...", "prices": {"p5.48xlarge": 55.04, ...}}``.
Bedrock: ``assets/ops/bedrock-prices-us-east-1.json`` (USD per 1M tokens), the same keys with
``"prices": {"<model id>": {"input": 0.33, "output": 2.75}}``. Each carries its date, Region and source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_tiers import ASSETS_DIR
from inference_tiers.instance_types import SAGEMAKER_PREFIX

DEFAULT_PRICE_FILE = ASSETS_DIR / "ops" / "prices-us-east-1.json"
BEDROCK_PRICE_FILE = ASSETS_DIR / "ops" / "bedrock-prices-us-east-1.json"


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


@dataclass(frozen=True)
class TokenPriceTable:
    as_of: str
    region: str
    source: str
    prices: dict[str, tuple[float, float]]

    def per_1m_tokens(self, model_id: str) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for a model id, or for its ``us.`` cross-Region profile when the
        table is a US Region's: Bedrock bills a geographic profile at the price of the Region called."""
        if self.region.startswith("us-"):
            model_id = model_id.removeprefix("us.")
        return self.prices.get(model_id)


_SHAPE = (
    '{"as_of": "YYYY-MM-DD", "region": "...", "source": "...", "prices": {"<instance type>": <USD/hour>}}'
)
_TOKEN_SHAPE = (
    '{"as_of": "YYYY-MM-DD", "region": "...", "source": "...", '
    '"prices": {"<model id>": {"input": <USD/1M tokens>, "output": <USD/1M tokens>}}}'
)


def _read_table(path: Path, shape: str) -> dict[str, Any]:
    """The file's JSON object, once it has a ``prices`` object and a non-empty as_of, region and source."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PriceTableError(f"price file {path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise PriceTableError(f"price file {path}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("prices"), dict):
        raise PriceTableError(f"price file {path}: expected {shape}")
    for key in ("as_of", "region", "source"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise PriceTableError(f"price file {path}: missing {key!r}; expected {shape}")
    return raw


def _positive(path: Path, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PriceTableError(
            f"price file {path}: price of {name!r} is {value!r}; expected a positive number"
        )
    return float(value)


def load_price_table(path: Path | None = None) -> PriceTable:
    path = path or DEFAULT_PRICE_FILE
    raw = _read_table(path, _SHAPE)
    prices = {name: _positive(path, name, value) for name, value in raw["prices"].items()}
    return PriceTable(as_of=raw["as_of"], region=raw["region"], source=raw["source"], prices=prices)


def load_token_price_table(path: Path | None = None) -> TokenPriceTable:
    path = path or BEDROCK_PRICE_FILE
    raw = _read_table(path, _TOKEN_SHAPE)
    prices: dict[str, tuple[float, float]] = {}
    for name, value in raw["prices"].items():
        if not isinstance(value, dict) or set(value) != {"input", "output"}:
            raise PriceTableError(
                f"price file {path}: price of {name!r} is {value!r}; expected {_TOKEN_SHAPE}"
            )
        prices[name] = (
            _positive(path, f"{name} input", value["input"]),
            _positive(path, f"{name} output", value["output"]),
        )
    return TokenPriceTable(as_of=raw["as_of"], region=raw["region"], source=raw["source"], prices=prices)
