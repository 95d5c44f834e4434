"""Bedrock evaluation-job answers at the pinned botocore's shapes (bedrock 2023-04-20) and the job's output lines
(model-evaluation-report-s3.html: ``automatedEvaluationResult.scores[]`` {metricName, result}, then the input)."""

from __future__ import annotations

import io
import json
from typing import Any

from botocore.response import StreamingBody
from botocore.stub import Stubber

ROLE_ARN = "arn:aws:iam::123456789012:role/judge"


def job_arn(suffix: str) -> str:
    """An evaluation-job ARN (the id is 12 lowercase letters or digits)."""
    return f"arn:aws:bedrock:us-east-1:123456789012:evaluation-job/{suffix:a<12}"


def get_job_response(arn: str, status: str, messages: tuple[str, ...] = ()) -> dict[str, Any]:
    """A ``GetEvaluationJob`` answer with every required member."""
    response: dict[str, Any] = {
        "jobName": "job",
        "status": status,
        "jobArn": arn,
        "roleArn": ROLE_ARN,
        "jobType": "Automated",
        "evaluationConfig": {
            "automated": {
                "datasetMetricConfigs": [
                    {"taskType": "General", "dataset": {"name": "d"}, "metricNames": ["Builtin.Correctness"]}
                ]
            }
        },
        "inferenceConfig": {"models": [{"precomputedInferenceSource": {"inferenceSourceIdentifier": "m"}}]},
        "outputDataConfig": {"s3Uri": "s3://eval-bucket/out/"},
        "creationTime": "2026-12-05T10:00:00Z",
    }
    if messages:
        response["failureMessages"] = list(messages)
    return response


def output_line(scores: dict[str, float | None]) -> str:
    """One line of a job's ``*_output.jsonl``."""
    return json.dumps(
        {
            "automatedEvaluationResult": {
                "scores": [{"metricName": name, "result": result} for name, result in scores.items()]
            },
            "inputRecord": {"prompt": "p", "modelResponses": [{"response": "r", "modelIdentifier": "m"}]},
        }
    )


def stub_output(s3: Stubber, bucket: str, prefix: str, keys: list[str], lines: list[str]) -> None:
    """The listing of ``prefix`` (``keys`` under it) and the body of its first key."""
    s3.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": prefix + k} for k in keys], "IsTruncated": False},
        {"Bucket": bucket, "Prefix": prefix},
    )
    body = "\n".join(lines).encode()
    s3.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(body), len(body))},
        {"Bucket": bucket, "Key": prefix + keys[0]},
    )
