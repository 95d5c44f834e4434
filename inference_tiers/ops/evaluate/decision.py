"""The promotion rule: a candidate checkpoint replaces the incumbent only if every condition holds.

Inputs are the judge's mean score per model (from the evaluation jobs) and each model's entry in bench's
``results.json`` (``targets[]``, see :mod:`inference_tiers.ops.bench.report`). The decision carries its reasons
and an evidence record (plain JSON) so the choice can be audited later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inference_tiers.validation import ArgumentError

_OWNER = "PromotionRule"


@dataclass(frozen=True)
class PromotionRule:
    """The user's rule.

    ``max_score_drop``: how far the candidate's judge score may fall below the incumbent's (same 0-1 scale).
    ``max_usd_per_1m_good_tokens``: the highest cost per 1M output tokens of requests within the SLO.
    """

    max_score_drop: float
    max_usd_per_1m_good_tokens: float

    def __post_init__(self) -> None:
        for param in ("max_score_drop", "max_usd_per_1m_good_tokens"):
            value = getattr(self, param)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ArgumentError(_OWNER, param, value, "a finite number >= 0")


@dataclass(frozen=True)
class Decision:
    """Promote or reject, with one reason per condition checked."""

    promote: bool
    reasons: tuple[str, ...]
    evidence: dict[str, Any]


def _slo_and_cost(target: dict[str, Any]) -> tuple[bool, float | None]:
    """SLO met at every measured level; the cost is the cheapest $/1M good tokens among levels within the SLO."""
    levels = target.get("levels") or []
    if not levels:
        raise ArgumentError(_OWNER, "bench target", target.get("name"), "a bench target with measured levels")
    costs = [
        f["usd_per_1m_good_tokens"]
        for f in levels
        if f["meets_slo"] and f["usd_per_1m_good_tokens"] is not None
    ]
    return all(f["meets_slo"] for f in levels), min(costs, default=None)


def decide(
    rule: PromotionRule,
    candidate_score: float,
    incumbent_score: float,
    candidate_bench: dict[str, Any],
) -> Decision:
    """Evaluate ``rule`` on the candidate's judge score (against the incumbent's) and its bench results."""
    for param, value in (("candidate_score", candidate_score), ("incumbent_score", incumbent_score)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ArgumentError(_OWNER, param, value, "a finite judge score")
    drop = incumbent_score - candidate_score
    slo_met, cost = _slo_and_cost(candidate_bench)
    checks = [
        (
            drop <= rule.max_score_drop,
            f"judge score {candidate_score:.4f} vs incumbent {incumbent_score:.4f}: drop {drop:.4f} "
            f"(allowed {rule.max_score_drop:.4f})",
        ),
        (slo_met, "SLO met at every load level" if slo_met else "SLO missed at some load level"),
        (
            cost is not None and cost <= rule.max_usd_per_1m_good_tokens,
            f"$/1M good tokens {'-' if cost is None else f'{cost:.2f}'} "
            f"(allowed {rule.max_usd_per_1m_good_tokens:.2f})",
        ),
    ]
    reasons = tuple(("ok: " if ok else "FAILED: ") + text for ok, text in checks)
    promote = all(ok for ok, _ in checks)
    evidence = {
        "decision": "promote" if promote else "reject",
        "rule": {
            "max_score_drop": rule.max_score_drop,
            "max_usd_per_1m_good_tokens": rule.max_usd_per_1m_good_tokens,
        },
        "candidate": {
            "name": candidate_bench.get("name"),
            "judge_score": candidate_score,
            "slo_met": slo_met,
            "usd_per_1m_good_tokens": cost,
        },
        "incumbent": {"judge_score": incumbent_score},
        "reasons": list(reasons),
    }
    return Decision(promote, reasons, evidence)
