"""Bedrock model-evaluation jobs with an LLM judge on answers we bring ("bring your own inference responses").

The answers of one model (candidate or incumbent) are written as a JSONL dataset; one job per model scores them
(two jobs rather than one with two models: whether two precomputed sources may share a job is not documented).
Request shapes are those of ``CreateEvaluationJob`` / ``GetEvaluationJob`` in the bedrock service model
(2023-04-20) of the pinned botocore (1.44.x). Dataset lines follow the Bedrock User Guide, "Create a prompt dataset
for a model evaluation job that uses a model as judge" (model-evaluation-prompt-datasets-judge.html): ``prompt``,
optional ``referenceResponse`` and ``category``, and ``modelResponses`` whose ``modelIdentifier`` equals the job's
``inferenceSourceIdentifier``; at most 1000 prompts per job.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inference_tiers.validation import Args

# botocore bedrock: EvaluationJobName, EvaluationPrecomputedInferenceSourceIdentifier, EvaluationDatasetName,
# MetricName (custom metric names).
JOB_NAME_PATTERN = r"[a-z0-9](-*[a-z0-9]){0,62}"
SOURCE_PATTERN = r"[a-zA-Z0-9]([a-zA-Z0-9._-]){0,255}"
DATASET_NAME_PATTERN = r"[0-9a-zA-Z-_.]{1,63}"
MAX_PROMPTS = 1000
# botocore bedrock EvaluationTaskType, plus "General", the value of the User Guide's LLM-as-judge examples
# (botocore does not check enums, so the service decides; which one it wants for judge jobs is unconfirmed).
TASK_TYPES = ("General", "Summarization", "Classification", "QuestionAndAnswer", "Generation", "Custom")
_RESULT_SUFFIX = "_output.jsonl"


@dataclass(frozen=True)
class CustomMetric:
    """A judge metric of the user's: ``instructions`` hold the judge prompt (with ``{{prompt}}`` and
    ``{{prediction}}``), ``rating_scale`` maps each definition to its numeric value."""

    name: str
    instructions: str
    rating_scale: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        args = Args("CustomMetric")
        args.text("name", self.name, pattern=DATASET_NAME_PATTERN, max_length=63, allow_token=False)
        args.text("instructions", self.instructions, max_length=5000, allow_token=False)
        if not 1 <= len(self.rating_scale) <= 10:
            raise args.error("rating_scale", self.rating_scale, "1 to 10 (definition, value) pairs")
        for definition, value in self.rating_scale:
            args.text("rating_scale definition", definition, max_length=100, allow_token=False)
            args.number("rating_scale value", value)

    def definition(self) -> dict[str, Any]:
        """The ``customMetricDefinition`` of the request (botocore bedrock CustomMetricDefinition)."""
        return {
            "name": self.name,
            "instructions": self.instructions,
            "ratingScale": [
                {"definition": d, "value": {"floatValue": float(v)}} for d, v in self.rating_scale
            ],
        }


def dataset_jsonl(answers: Iterable[Mapping[str, Any]], source: str) -> str:
    """The JSONL dataset of ``source``'s answers: each item has ``prompt`` and ``response`` (strings) and
    optionally ``reference`` and ``category``."""
    args = Args("evaluation dataset")
    args.text("source", source, pattern=SOURCE_PATTERN, allow_token=False)
    lines = []
    for index, answer in enumerate(answers):
        line: dict[str, Any] = {
            "prompt": args.text(f"[{index}].prompt", answer.get("prompt"), allow_token=False)
        }
        for key, field in (("reference", "referenceResponse"), ("category", "category")):
            if answer.get(key) is not None:
                line[field] = args.text(f"[{index}].{key}", answer[key], allow_token=False)
        response = args.text(f"[{index}].response", answer.get("response"), min_length=0, allow_token=False)
        line["modelResponses"] = [{"response": response, "modelIdentifier": source}]
        lines.append(json.dumps(line, ensure_ascii=False))
    if not 1 <= len(lines) <= MAX_PROMPTS:
        raise args.error("answers", f"{len(lines)} items", f"1 to {MAX_PROMPTS} prompts per job")
    return "\n".join(lines) + "\n"


def job_request(
    *,
    job_name: str,
    role_arn: str,
    judge_model: str,
    source: str,
    dataset_name: str,
    dataset_s3_uri: str,
    output_s3_uri: str,
    metric_names: tuple[str, ...],
    custom_metrics: tuple[CustomMetric, ...] = (),
    kms_key: str | None = None,
    task_type: str = "General",
) -> dict[str, Any]:
    """The ``CreateEvaluationJob`` request: an automated job, judged by ``judge_model``, on the answers of
    ``source`` in ``dataset_s3_uri``; results under ``output_s3_uri``."""
    args = Args("evaluation job")
    args.text("job_name", job_name, pattern=JOB_NAME_PATTERN, allow_token=False)
    args.text("source", source, pattern=SOURCE_PATTERN, allow_token=False)
    args.text("dataset_name", dataset_name, pattern=DATASET_NAME_PATTERN, allow_token=False)
    args.one_of("task_type", task_type, TASK_TYPES)
    for param, uri in (("dataset_s3_uri", dataset_s3_uri), ("output_s3_uri", output_s3_uri)):
        args.text(param, uri, pattern=r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.*", allow_token=False)
    # A custom metric is scored only when its name is also listed in metricNames (public samples do so).
    names = [*metric_names, *(m.name for m in custom_metrics)]
    if not 1 <= len(names) <= 25 or len(set(names)) != len(names):
        raise args.error(
            "metric_names", names, "1 to 25 distinct metric names (built-in and custom together)"
        )
    judge = {"bedrockEvaluatorModels": [{"modelIdentifier": judge_model}]}
    automated: dict[str, Any] = {
        "datasetMetricConfigs": [
            {
                "taskType": task_type,
                "dataset": {"name": dataset_name, "datasetLocation": {"s3Uri": dataset_s3_uri}},
                "metricNames": names,
            }
        ],
        "evaluatorModelConfig": judge,
    }
    if custom_metrics:
        automated["customMetricConfig"] = {
            "customMetrics": [{"customMetricDefinition": m.definition()} for m in custom_metrics],
            "evaluatorModelConfig": judge,
        }
    request: dict[str, Any] = {
        "jobName": job_name,
        "roleArn": role_arn,
        "applicationType": "ModelEvaluation",
        "evaluationConfig": {"automated": automated},
        "inferenceConfig": {
            "models": [{"precomputedInferenceSource": {"inferenceSourceIdentifier": source}}]
        },
        "outputDataConfig": {"s3Uri": output_s3_uri},
    }
    if kms_key is not None:
        request["customerEncryptionKeyId"] = kms_key
    return request


def job_state(bedrock: Any, job_arn: str) -> tuple[str, tuple[str, ...]]:
    """The job's status and failure messages (``GetEvaluationJob``)."""
    job = bedrock.get_evaluation_job(jobIdentifier=job_arn)
    return str(job["status"]), tuple(job.get("failureMessages") or ())


def _bucket_and_prefix(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix


def read_scores(s3: Any, output_s3_uri: str, job_name: str) -> dict[str, float]:
    """Mean judge score per metric over every ``*_output.jsonl`` the job wrote under ``output_s3_uri/job_name/``.

    Paths are listed, not built (their layout has job and model ids in it, model-evaluation-report-s3.html);
    a ``null`` result (the judge found the metric not applicable) is left out of the mean.
    """
    bucket, prefix = _bucket_and_prefix(output_s3_uri)
    prefix = f"{prefix.rstrip('/')}/{job_name}/".lstrip("/")
    results: dict[str, list[float]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if not item["Key"].endswith(_RESULT_SUFFIX):
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode()
            for line in filter(None, body.splitlines()):
                for score in json.loads(line)["automatedEvaluationResult"]["scores"]:
                    if score.get("result") is not None:
                        results.setdefault(score["metricName"], []).append(float(score["result"]))
    if not results:
        raise ValueError(
            f"evaluation job {job_name}: no scores found under s3://{bucket}/{prefix}*{_RESULT_SUFFIX}"
        )
    return {name: statistics.fmean(values) for name, values in sorted(results.items())}


def judge_score(scores: Mapping[str, float], metric_names: Iterable[str]) -> float:
    """The one number the promotion rule compares: the mean of ``metric_names``' scores (each must be there)."""
    names = list(metric_names)
    missing = [n for n in names if n not in scores]
    if not names or missing:
        raise ValueError(f"judge score: metrics {missing or names} have no score; scored: {sorted(scores)}")
    return statistics.fmean(scores[n] for n in names)
