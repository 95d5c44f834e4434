"""The promotion rule: each condition alone rejects the candidate, and a rejection says why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_tiers.ops.evaluate.decision import PromotionRule, decide
from inference_tiers.validation import ArgumentError

RULE = PromotionRule(max_score_drop=0.02, max_usd_per_1m_good_tokens=5.0)


def _level(level: float, meets_slo: bool, usd_good: float | None) -> dict[str, Any]:
    # The fields bench's report writes per level (inference_tiers/ops/bench/report.py, render_table).
    return {"level": level, "meets_slo": meets_slo, "usd_per_1m_good_tokens": usd_good}


def _bench(*levels: dict[str, Any]) -> dict[str, Any]:
    return {"name": "candidate", "levels": list(levels)}


GOOD = _bench(_level(1, True, 6.0), _level(8, True, 4.0))


def test_candidate_within_every_bound_is_promoted() -> None:
    decision = decide(RULE, candidate_score=0.80, incumbent_score=0.81, candidate_bench=GOOD)
    assert decision.promote
    assert all(r.startswith("ok: ") for r in decision.reasons)
    assert decision.evidence["candidate"]["usd_per_1m_good_tokens"] == 4.0
    assert json.loads(json.dumps(decision.evidence))["decision"] == "promote"


@pytest.mark.parametrize(
    ("candidate_score", "bench", "failed"),
    [
        (0.78, GOOD, "judge score"),
        (0.81, _bench(_level(1, True, 4.0), _level(8, False, 3.0)), "SLO missed"),
        (0.81, _bench(_level(1, True, 6.0), _level(8, True, 5.5)), "$/1M good tokens 5.50"),
        (0.81, _bench(_level(1, False, 1.0)), "$/1M good tokens -"),
    ],
    ids=["score-drop", "slo-missed", "too-costly", "no-level-within-slo"],
)
def test_each_failed_condition_rejects(candidate_score: float, bench: dict[str, Any], failed: str) -> None:
    decision = decide(RULE, candidate_score=candidate_score, incumbent_score=0.81, candidate_bench=bench)
    assert not decision.promote
    assert decision.evidence["decision"] == "reject"
    assert any(r.startswith(f"FAILED: {failed}") for r in decision.reasons)


@pytest.mark.parametrize(
    ("make", "param"),
    [
        (lambda: PromotionRule(max_score_drop=-0.1, max_usd_per_1m_good_tokens=1.0), "max_score_drop"),
        (
            lambda: PromotionRule(max_score_drop=0.1, max_usd_per_1m_good_tokens=float("nan")),
            "max_usd_per_1m_good_tokens",
        ),
        (
            lambda: decide(RULE, candidate_score=None, incumbent_score=0.8, candidate_bench=GOOD),
            "candidate_score",
        ),  # type: ignore[arg-type]
        (
            lambda: decide(RULE, candidate_score=0.8, incumbent_score=0.8, candidate_bench=_bench()),
            "bench target",
        ),
    ],
)
def test_bad_input_names_the_parameter(make: Any, param: str) -> None:
    with pytest.raises(ArgumentError, match=f"'{param}'"):
        make()
