"""One evaluation round for a checkpoint: both models' answers judged by Bedrock, the rule applied, the evidence
kept in S3, and the traffic shift started only for a candidate the rule promotes.

Every object is written with SSE-KMS under the tier's key (``PutObject`` of the pinned botocore's s3 model:
``ServerSideEncryption``/``SSEKMSKeyId``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inference_tiers.ops.evaluate import judge
from inference_tiers.ops.evaluate.decision import Decision, PromotionRule, decide


@dataclass(frozen=True)
class JudgePlan:
    """Where and how the answers are judged: ``s3://bucket/prefix/run_id/`` holds datasets, job output and the
    evidence, encrypted with ``kms_key``; ``role_arn`` is the evaluation job's service role."""

    bucket: str
    prefix: str
    run_id: str
    role_arn: str
    judge_model: str
    kms_key: str
    metric_names: tuple[str, ...]
    custom_metrics: tuple[judge.CustomMetric, ...] = ()
    poll_seconds: float = 60.0
    timeout_seconds: float = 6 * 3600.0

    def key(self, name: str) -> str:
        """The object key of ``name`` in this run's folder."""
        return "/".join(part.strip("/") for part in (self.prefix, self.run_id, name) if part.strip("/"))

    def uri(self, name: str) -> str:
        """The S3 URI of ``name`` in this run's folder."""
        return f"s3://{self.bucket}/{self.key(name)}"


def _put(s3: Any, plan: JudgePlan, name: str, body: str) -> None:
    s3.put_object(
        Bucket=plan.bucket,
        Key=plan.key(name),
        Body=body.encode(),
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=plan.kms_key,
    )


def wait_for_job(
    bedrock: Any, job_arn: str, plan: JudgePlan, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Poll ``GetEvaluationJob`` until ``Completed``; a failed or stopped job, or one past the plan's timeout,
    raises with the service's failure messages."""
    waited = 0.0
    while True:
        status, messages = judge.job_state(bedrock, job_arn)
        if status == "Completed":
            return
        if status in ("Failed", "Stopped"):
            raise RuntimeError(
                f"evaluation job {job_arn} {status}: {'; '.join(messages) or 'no reason given'}"
            )
        if waited >= plan.timeout_seconds:
            raise TimeoutError(f"evaluation job {job_arn} still {status} after {waited:.0f} s")
        sleep(plan.poll_seconds)
        waited += plan.poll_seconds


def judge_answers(
    bedrock: Any,
    s3: Any,
    plan: JudgePlan,
    source: str,
    answers: Iterable[Mapping[str, Any]],
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Write ``source``'s answers, run its judge job to completion and return its judge score."""
    _put(s3, plan, f"{source}.jsonl", judge.dataset_jsonl(answers, source))
    job_name = f"{plan.run_id}-{source}".lower()[:63].rstrip("-")
    request = judge.job_request(
        job_name=job_name,
        role_arn=plan.role_arn,
        judge_model=plan.judge_model,
        source=source,
        dataset_name=source[:63],
        dataset_s3_uri=plan.uri(f"{source}.jsonl"),
        output_s3_uri=plan.uri("judge") + "/",
        metric_names=plan.metric_names,
        custom_metrics=plan.custom_metrics,
        kms_key=plan.kms_key,
    )
    job_arn = bedrock.create_evaluation_job(**request)["jobArn"]
    wait_for_job(bedrock, job_arn, plan, sleep)
    scores = judge.read_scores(s3, plan.uri("judge"), job_name)
    return judge.judge_score(scores, [*plan.metric_names, *(m.name for m in plan.custom_metrics)])


def evaluate_and_promote(
    bedrock: Any,
    s3: Any,
    plan: JudgePlan,
    rule: PromotionRule,
    answers: Mapping[str, Iterable[Mapping[str, Any]]],
    candidate_bench: dict[str, Any],
    promote: Callable[[], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Decision:
    """Judge ``answers["candidate"]`` and ``answers["incumbent"]``, decide, keep the evidence (``decision.json``)
    and call ``promote`` (the tier's traffic shift) only when the rule promotes the candidate."""
    candidate, incumbent = (
        judge_answers(bedrock, s3, plan, role, answers[role], sleep) for role in ("candidate", "incumbent")
    )
    decision = decide(rule, candidate, incumbent, candidate_bench)
    _put(s3, plan, "decision.json", json.dumps(decision.evidence, indent=2, sort_keys=True))
    if decision.promote:
        promote()
    return decision
