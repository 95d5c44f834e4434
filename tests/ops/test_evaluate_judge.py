"""Bedrock LLM-as-judge jobs on our own answers: the dataset lines, the request checked by botocore against the
pinned bedrock service model (2023-04-20, botocore 1.44.8), the job's state and the scores read back."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ParamValidationError

from inference_tiers.ops.evaluate.judge import (
    TASK_TYPES,
    CustomMetric,
    dataset_jsonl,
    job_request,
    job_state,
    judge_score,
    read_scores,
)
from inference_tiers.validation import ArgumentError
from tests.ops.evaluate_stubs import get_job_response, job_arn, output_line, stub_output
from tests.ops.helpers import StubClients

JOB_ARN = job_arn("abcdefghijkl")
CONCISE = CustomMetric(
    name="Concise",
    instructions="Is the answer concise? Prompt: {{prompt}} Answer: {{prediction}}",
    rating_scale=(("wordy", 0.0), ("concise", 1.0)),
)


def _request(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "job_name": "cand-v2-judge",
        "role_arn": "arn:aws:iam::123456789012:role/judge",
        "judge_model": "anthropic.claude-3-5-sonnet-20240620-v1:0",
        "source": "cand-v2",
        "dataset_name": "support-set",
        "dataset_s3_uri": "s3://eval-bucket/runs/r1/cand-v2.jsonl",
        "output_s3_uri": "s3://eval-bucket/runs/r1/judge/",
        "metric_names": ("Builtin.Correctness", "Builtin.Helpfulness"),
        "custom_metrics": (CONCISE,),
        "kms_key": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    }
    return job_request(**{**params, **overrides})


def test_dataset_lines_carry_the_answers_under_the_jobs_source_identifier() -> None:
    text = dataset_jsonl(
        [
            {"prompt": "2+2?", "response": "4", "reference": "4", "category": "math"},
            {"prompt": "hi", "response": ""},
        ],
        "cand-v2",
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {
        "prompt": "2+2?",
        "referenceResponse": "4",
        "category": "math",
        "modelResponses": [{"response": "4", "modelIdentifier": "cand-v2"}],
    }
    assert lines[1] == {"prompt": "hi", "modelResponses": [{"response": "", "modelIdentifier": "cand-v2"}]}


@pytest.mark.parametrize(
    ("answers", "source", "param"),
    [
        ([{"prompt": "p", "response": "r"}] * 1001, "cand", "answers"),
        ([], "cand", "answers"),
        ([{"prompt": "", "response": "r"}], "cand", r"\[0\].prompt"),
        ([{"prompt": "p"}], "cand", r"\[0\].response"),
        ([{"prompt": "p", "response": "r"}], "-cand", "source"),
    ],
    ids=["over-1000", "empty", "empty-prompt", "no-response", "bad-source"],
)
def test_bad_dataset_names_the_item(answers: list[dict[str, Any]], source: str, param: str) -> None:
    with pytest.raises(ArgumentError, match=f"parameter '{param}'"):
        dataset_jsonl(answers, source)


def test_request_is_accepted_by_the_pinned_bedrock_model_and_judges_our_answers() -> None:
    clients = StubClients()
    request = _request()
    clients.stub("bedrock").add_response("create_evaluation_job", {"jobArn": JOB_ARN}, request)
    # botocore validates the parameters against the service model before the Stubber answers.
    assert clients.client("bedrock").create_evaluation_job(**request)["jobArn"] == JOB_ARN
    clients.assert_done()
    automated = request["evaluationConfig"]["automated"]
    # A custom metric is listed in metricNames too, and both judges are the same model.
    assert automated["datasetMetricConfigs"][0]["metricNames"][-1] == "Concise"
    assert automated["customMetricConfig"]["evaluatorModelConfig"] == automated["evaluatorModelConfig"]
    assert request["inferenceConfig"]["models"] == [
        {"precomputedInferenceSource": {"inferenceSourceIdentifier": "cand-v2"}}
    ]


def test_request_without_custom_metrics_or_key_is_accepted_too() -> None:
    clients = StubClients()
    request = _request(custom_metrics=(), kms_key=None)
    assert "customMetricConfig" not in request["evaluationConfig"]["automated"]
    assert "customerEncryptionKeyId" not in request
    clients.stub("bedrock").add_response("create_evaluation_job", {"jobArn": JOB_ARN}, request)
    clients.client("bedrock").create_evaluation_job(**request)
    clients.assert_done()


def test_task_types_are_the_service_models_plus_the_judge_examples_general() -> None:
    model = botocore.session.get_session().get_service_model("bedrock")
    assert set(TASK_TYPES) - {"General"} == set(model.shape_for("EvaluationTaskType").enum)


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"job_name": "Cand_V2"}, "job_name"),
        ({"source": "cand v2"}, "source"),
        ({"task_type": "Chat"}, "task_type"),
        ({"output_s3_uri": "eval-bucket/out"}, "output_s3_uri"),
        ({"metric_names": ("Builtin.Correctness", "Concise")}, "metric_names"),
        ({"metric_names": (), "custom_metrics": ()}, "metric_names"),
    ],
)
def test_bad_request_names_the_parameter(overrides: dict[str, Any], param: str) -> None:
    with pytest.raises(ArgumentError, match=f"parameter '{param}'"):
        _request(**overrides)


def test_bad_custom_metric_names_the_parameter() -> None:
    with pytest.raises(ArgumentError, match="parameter 'rating_scale'"):
        CustomMetric(name="Concise", instructions="x", rating_scale=())
    with pytest.raises(ArgumentError, match="parameter 'name'"):
        CustomMetric(name="has space", instructions="x", rating_scale=(("ok", 1.0),))


def test_the_service_model_refuses_a_wrong_key() -> None:
    """Guards the Stubber check itself: the console file's ``metricName`` is not the API's ``name``."""
    request = _request()
    definition = request["evaluationConfig"]["automated"]["customMetricConfig"]["customMetrics"][0]
    definition["customMetricDefinition"]["metricName"] = definition["customMetricDefinition"].pop("name")
    clients = StubClients()
    clients.stub("bedrock").add_response("create_evaluation_job", {"jobArn": JOB_ARN})
    with pytest.raises(ParamValidationError, match="metricName"):
        clients.client("bedrock").create_evaluation_job(**request)


def test_job_state_reads_status_and_failure_messages() -> None:
    clients = StubClients()
    message = "AccessDenied on s3://eval-bucket/runs/r1/cand-v2.jsonl"
    clients.stub("bedrock").add_response(
        "get_evaluation_job", get_job_response(JOB_ARN, "Failed", (message,)), {"jobIdentifier": JOB_ARN}
    )
    assert job_state(clients.client("bedrock"), JOB_ARN) == ("Failed", (message,))
    clients.assert_done()


def test_scores_are_means_over_every_output_file_and_skip_not_applicable() -> None:
    clients = StubClients()
    stub_output(
        clients.stub("s3"),
        "eval-bucket",
        "runs/r1/judge/cand-v2-judge/",
        [
            "cand-v2-judge/uuid/models/cand-v2/taskTypes/General/datasets/support-set/a_output.jsonl",
            "cand-v2-judge/uuid/custom_metrics/Concise.json",
        ],
        [
            output_line({"Builtin.Correctness": 1.0, "Concise": 0.0}),
            output_line({"Builtin.Correctness": None, "Concise": 1.0}),
            output_line({"Builtin.Correctness": 0.5, "Concise": 1.0}),
        ],
    )
    scores = read_scores(clients.client("s3"), "s3://eval-bucket/runs/r1/judge/", "cand-v2-judge")
    clients.assert_done()
    assert scores == {"Builtin.Correctness": 0.75, "Concise": pytest.approx(2 / 3)}
    assert judge_score(scores, ["Builtin.Correctness", "Concise"]) == pytest.approx((0.75 + 2 / 3) / 2)
    with pytest.raises(ValueError, match="Builtin.Helpfulness"):
        judge_score(scores, ["Builtin.Helpfulness"])


def test_no_output_file_is_an_error_naming_the_prefix() -> None:
    clients = StubClients()
    clients.stub("s3").add_response(
        "list_objects_v2", {"IsTruncated": False}, {"Bucket": "eval-bucket", "Prefix": "out/j/"}
    )
    with pytest.raises(ValueError, match="s3://eval-bucket/out/j/"):
        read_scores(clients.client("s3"), "s3://eval-bucket/out", "j")
