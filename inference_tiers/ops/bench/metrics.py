"""From per-request records to the figures of one load level, whichever engine measured them.

Definitions (those of aiperf's metrics reference, so an aiperf run and a native one read the same):

- TTFT: request start to the first non-empty token, reasoning included; time to first answer token (``ttfa_ms``,
  aiperf's TTFO): to the first token of the answer; reasoning tokens count as output tokens and in ITL; e2e: request start to the last byte;
- tokens: the server's usage when it reports it, else the model's tokenizer (``--tokenizer``) counting the text,
  for every engine; a target records its unit and targets counted in different units are never ranked together;
- inter-token latency of a request: ``(e2e - TTFT) / (output tokens - 1)``;
- p50/p90/p99: linear interpolation between the closest ranks (numpy's default), over successful requests;
- output tokens/s and requests/s: over the level's wall time (first request start to last request end);
- goodput: successful requests whose own TTFT, ITL and e2e are all within the SLO, per second (DistServe's
  definition, the one aiperf's ``--goodput`` uses); good tokens are their output tokens;
- cost: the target's cost over the level's wall time (instances: USD/h x count; per-token prices: the tokens
  sent and received) per 1M output tokens, and per 1M good tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from inference_tiers.ops.bench.workload import Slo

USAGE, TOKENIZER = "usage", "tokenizer"


@dataclass(frozen=True)
class Record:
    """One request: when it started and ended (seconds, any common clock), its TTFT, and its token counts, which
    are the server's usage (``token_unit`` "usage") or the tokenizer's count of the text ("tokenizer")."""

    start_s: float
    end_s: float
    ttft_ms: float | None
    input_tokens: int
    output_tokens: int
    error: str | None = None
    token_unit: str = USAGE
    # How a failed request failed: throttled, 4xx, 5xx, stream_error, timeout or error (anything else).
    error_kind: str | None = None
    # Time to the first answer token (TTFT counts the first token, reasoning included): aiperf's TTFO.
    ttfa_ms: float | None = None

    @property
    def e2e_ms(self) -> float:
        return (self.end_s - self.start_s) * 1000

    @property
    def itl_ms(self) -> float:
        if self.ttft_ms is None or self.output_tokens < 2:
            return 0.0
        return (self.e2e_ms - self.ttft_ms) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Pricing:
    """How a target is paid for: instances by the hour, or tokens (USD per 1M input and output tokens)."""

    basis: str
    usd_per_hour: float | None = None
    usd_per_1m_input: float | None = None
    usd_per_1m_output: float | None = None

    def cost(self, seconds: float, input_tokens: int, output_tokens: int) -> float:
        if self.usd_per_hour is not None:
            return self.usd_per_hour * seconds / 3600
        return (
            (self.usd_per_1m_input or 0.0) * input_tokens + (self.usd_per_1m_output or 0.0) * output_tokens
        ) / 1e6


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's default method)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _stats(values: list[float]) -> dict[str, float | None]:
    return {f"p{q}": round(percentile(values, q), 3) if values else None for q in (50, 90, 99)}


def error_kind_of_status(status: int) -> str:
    """The kind of an HTTP error status: throttled (429), 4xx or 5xx."""
    return "throttled" if status == 429 else "5xx" if status >= 500 else "4xx"


def level_figures(level: float, records: list[Record], slo: Slo, pricing: Pricing | None) -> dict[str, Any]:
    """The figures of one load level (the keys are the JSON report's and the table's)."""
    if not records:
        raise ValueError(f"load level {level:g}: the engine returned no request records")
    ok = [r for r in records if r.error is None and r.ttft_ms is not None]
    good = [r for r in ok if slo.met_by(r.ttft_ms or 0.0, r.itl_ms, r.e2e_ms)]
    wall = max(r.end_s for r in records) - min(r.start_s for r in records)
    output_tokens = sum(r.output_tokens for r in ok)
    good_tokens = sum(r.output_tokens for r in good)
    ttft, itl, e2e = (
        _stats([r.ttft_ms or 0.0 for r in ok]),
        # 0- and 1-token responses have no inter-token gap: left out, as aiperf leaves them out.
        _stats([r.itl_ms for r in ok if r.output_tokens > 1]),
        _stats([r.e2e_ms for r in ok]),
    )
    figures: dict[str, Any] = {
        "level": level,
        "requests": len(records),
        "errors": len(records) - len(ok),
        "errors_by_kind": dict(
            sorted(Counter(r.error_kind or "error" for r in records if r not in ok).items())
        ),
        "error_rate": round((len(records) - len(ok)) / len(records), 4),
        "wall_s": round(wall, 3),
        "ttft_ms": ttft,
        "itl_ms": itl,
        "ttfa_ms": _stats([r.ttfa_ms for r in ok if r.ttfa_ms is not None]),
        "e2e_ms": e2e,
        "output_tokens_per_s": round(output_tokens / wall, 3) if wall else None,
        "requests_per_s": round(len(ok) / wall, 3) if wall else None,
        "good_requests": len(good),
        "goodput_requests_per_s": round(len(good) / wall, 3) if wall else None,
        "good_tokens": good_tokens,
        "output_tokens": output_tokens,
        "token_unit": "+".join(sorted({r.token_unit for r in ok})) or None,
        # A level with any failed request does not meet the SLO, whatever its percentiles.
        "meets_slo": len(ok) == len(records)
        and slo.met_by(ttft["p90"] or 0.0, itl["p90"] or 0.0, e2e["p90"] or 0.0),
        "usd": None,
        "usd_per_1m_output_tokens": None,
        "usd_per_1m_good_tokens": None,
    }
    if pricing is not None:
        usd = pricing.cost(wall, sum(r.input_tokens for r in ok), output_tokens)
        figures["usd"] = round(usd, 6)
        figures["usd_per_1m_output_tokens"] = round(usd / output_tokens * 1e6, 4) if output_tokens else None
        figures["usd_per_1m_good_tokens"] = round(usd / good_tokens * 1e6, 4) if good_tokens else None
    return figures
