"""One evaluation round, every call stubbed at the pinned botocore's shapes: a promoted candidate is shifted, a
rejected one never takes traffic, a failed judge job stops the round before any decision."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.stub import ANY

from inference_tiers.ops.evaluate.decision import Decision, PromotionRule
from inference_tiers.ops.evaluate.run import JudgePlan, evaluate_and_promote
from tests.ops.evaluate_stubs import get_job_response, job_arn, output_line, stub_output
from tests.ops.helpers import StubClients

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PLAN = JudgePlan(
    bucket="eval-bucket",
    prefix="runs/",
    run_id="r1",
    role_arn="arn:aws:iam::123456789012:role/judge",
    judge_model="anthropic.claude-3-5-sonnet-20240620-v1:0",
    kms_key=KEY,
    metric_names=("Builtin.Correctness",),
)
RULE = PromotionRule(max_score_drop=0.05, max_usd_per_1m_good_tokens=5.0)
BENCH = {"name": "candidate", "levels": [{"level": 1, "meets_slo": True, "usd_per_1m_good_tokens": 3.0}]}
ANSWERS = {
    role: [{"prompt": "2+2?", "response": "4", "reference": "4"}] for role in ("candidate", "incumbent")
}


def _encrypted_put(key: str) -> dict[str, Any]:
    return {
        "Bucket": "eval-bucket",
        "Key": key,
        "Body": ANY,
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": KEY,
    }


def _stub_job(clients: StubClients, role: str, statuses: list[str], score: float) -> None:
    bedrock, s3 = clients.stub("bedrock"), clients.stub("s3")
    arn = job_arn(role[:3])
    s3.add_response("put_object", {}, _encrypted_put(f"runs/r1/{role}.jsonl"))
    bedrock.add_response("create_evaluation_job", {"jobArn": arn}, ANY_REQUEST)
    for status in statuses:
        bedrock.add_response("get_evaluation_job", get_job_response(arn, status), {"jobIdentifier": arn})
    if statuses[-1] == "Completed":
        stub_output(
            s3,
            "eval-bucket",
            f"runs/r1/judge/r1-{role}/",
            ["x/models/m/a_output.jsonl"],
            [output_line({"Builtin.Correctness": score})],
        )


ANY_REQUEST = {
    "jobName": ANY,
    "roleArn": ANY,
    "applicationType": "ModelEvaluation",
    "evaluationConfig": ANY,
    "inferenceConfig": ANY,
    "outputDataConfig": ANY,
    "customerEncryptionKeyId": KEY,
}


def _round(
    clients: StubClients,
    promote: Callable[[], None],
    sleep: Callable[[float], None] = lambda _: None,
    plan: JudgePlan = PLAN,
) -> Decision:
    return evaluate_and_promote(
        clients.client("bedrock"),
        clients.client("s3"),
        plan,
        RULE,
        ANSWERS,
        BENCH,
        promote=promote,
        sleep=sleep,
    )


@pytest.mark.parametrize(("candidate_score", "promoted"), [(0.78, True), (0.70, False)])
def test_only_a_promoted_candidate_takes_traffic_and_the_evidence_is_kept(
    candidate_score: float, promoted: bool
) -> None:
    clients = StubClients()
    _stub_job(clients, "candidate", ["InProgress", "Completed"], candidate_score)
    _stub_job(clients, "incumbent", ["Completed"], 0.80)
    clients.stub("s3").add_response("put_object", {}, _encrypted_put("runs/r1/decision.json"))
    shifts: list[str] = []
    sleeps: list[float] = []
    decision = _round(clients, lambda: shifts.append("shift"), sleeps.append)
    clients.assert_done()
    assert decision.promote is promoted
    assert shifts == (["shift"] if promoted else [])
    assert sleeps == [60.0]
    assert decision.evidence["candidate"]["judge_score"] == candidate_score
    assert decision.evidence["incumbent"]["judge_score"] == 0.80


def test_a_failed_judge_job_stops_the_round_with_its_reason() -> None:
    clients = StubClients()
    arn = job_arn("can")
    clients.stub("s3").add_response("put_object", {}, _encrypted_put("runs/r1/candidate.jsonl"))
    clients.stub("bedrock").add_response("create_evaluation_job", {"jobArn": arn}, ANY_REQUEST)
    clients.stub("bedrock").add_response(
        "get_evaluation_job",
        get_job_response(arn, "Failed", ("judge model not enabled",)),
        {"jobIdentifier": arn},
    )
    shifts: list[str] = []
    with pytest.raises(RuntimeError, match="Failed: judge model not enabled"):
        _round(clients, lambda: shifts.append("shift"))
    clients.assert_done()
    assert shifts == []


def test_a_job_past_the_timeout_stops_the_round() -> None:
    clients = StubClients()
    plan = JudgePlan(**{**PLAN.__dict__, "poll_seconds": 10.0, "timeout_seconds": 10.0})
    arn = job_arn("can")
    clients.stub("s3").add_response("put_object", {}, _encrypted_put("runs/r1/candidate.jsonl"))
    clients.stub("bedrock").add_response("create_evaluation_job", {"jobArn": arn}, ANY_REQUEST)
    for _ in range(2):
        clients.stub("bedrock").add_response(
            "get_evaluation_job", get_job_response(arn, "InProgress"), {"jobIdentifier": arn}
        )
    with pytest.raises(TimeoutError, match="still InProgress after 10 s"):
        _round(clients, lambda: None, plan=plan)
    clients.assert_done()


def test_the_evidence_record_is_the_decisions_json() -> None:
    clients = StubClients()
    _stub_job(clients, "candidate", ["Completed"], 0.70)
    _stub_job(clients, "incumbent", ["Completed"], 0.80)
    written: list[bytes] = []
    clients.client("s3").meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: written.append(params["Body"])
    )
    clients.stub("s3").add_response("put_object", {}, _encrypted_put("runs/r1/decision.json"))
    decision = _round(clients, lambda: None)
    assert json.loads(written[-1]) == decision.evidence
    assert decision.evidence["decision"] == "reject"
