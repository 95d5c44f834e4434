"""bench without an engine: the workload spec's validation, the figures on hand-computed records, the report,
the aiperf command line and export parsing, advise --measured, and the SageMaker AI benchmark job (Stubber)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from inference_tiers.ops import cli
from inference_tiers.ops.bench import aiperf
from inference_tiers.ops.bench.measured import advise_measured, render_measured
from inference_tiers.ops.bench.metrics import Pricing, Record, level_figures, percentile
from inference_tiers.ops.bench.report import merge_results, render_svg, render_table, write_report
from inference_tiers.ops.bench.run import target_from_stack
from inference_tiers.ops.bench.sagemaker_job import start_benchmark_job, start_recommendation_job
from inference_tiers.ops.bench.workload import SHAPE_DEFAULTS, Slo, load_workload, parse_workload
from inference_tiers.ops.smoke import StackError
from tests.ops.helpers import StubClients
from tests.ops.test_smoke import _stack


def write_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workload.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# --- workload spec ----------------------------------------------------------------------------------------


def test_spec_overrides_the_shape_defaults(tmp_path: Path) -> None:
    spec = load_workload(
        write_spec(
            tmp_path,
            "shape: agentic\nturns: {mean: 3}\nthink_time_ms: 250\n"
            "load: {mode: rate, levels: [0.5, 2], requests_per_level: 30}\nslo: {ttft_p90_ms: 300}\n",
        )
    )
    assert (spec.turns.mean, spec.turns.stddev, spec.think_time_ms) == (3, 0, 250)
    assert (spec.load.mode, spec.load.levels, spec.load.requests_per_level) == ("rate", (0.5, 2.0), 30)
    # Unset keys keep the shape's defaults.
    assert spec.input_tokens == SHAPE_DEFAULTS["agentic"].input_tokens
    assert spec.slo == Slo(
        300, SHAPE_DEFAULTS["agentic"].slo.itl_p90_ms, SHAPE_DEFAULTS["agentic"].slo.e2e_p90_ms
    )


def test_shapes_differ_where_their_traffic_does() -> None:
    assert SHAPE_DEFAULTS["rag"].prefix_tokens > SHAPE_DEFAULTS["rag"].input_tokens.mean
    assert SHAPE_DEFAULTS["reasoning"].output_tokens.mean > SHAPE_DEFAULTS["chat"].output_tokens.mean
    assert SHAPE_DEFAULTS["agentic"].turns.mean > 1 and SHAPE_DEFAULTS["agentic"].think_time_ms > 0


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"shape": "batch"},
            r"parameter 'shape' got 'batch'; expected one of 'chat', 'rag', 'reasoning', 'agentic'",
        ),
        ({"shape": "chat", "tokens": 5}, r"parameter '\(document\) key' got 'tokens'"),
        (
            {"shape": "chat", "input_tokens": {"mean": 0}},
            r"parameter 'input_tokens.mean' got 0; expected an integer from 1",
        ),
        (
            {"shape": "chat", "load": {"mode": "burst"}},
            r"parameter 'load.mode' got 'burst'; expected one of 'concurrency'",
        ),
        (
            {"shape": "chat", "load": {"levels": [1.5]}},
            r"parameter 'load.levels\[0\]' got 1.5; expected an integer",
        ),
        ({"shape": "chat", "load": {"levels": [2, 2]}}, r"parameter 'load.levels\[1\]' got 2.*at most once"),
        (
            {"shape": "chat", "slo": {"ttft_p99_ms": 5}},
            r"parameter 'slo key' got 'ttft_p99_ms'; expected one of 'ttft_p90_ms'",
        ),
        (
            {"shape": "chat", "slo": {"itl_p90_ms": -1}},
            r"parameter 'slo.itl_p90_ms' got -1; expected a number greater than 0",
        ),
        (
            {"shape": "chat", "turns": {"mean": 3}},
            r"parameter 'turns.mean' got 3; expected 1 unless shape is 'agentic'",
        ),
        (
            {"shape": "chat", "load": {"levels": [1, 16], "requests_per_level": 8}},
            r"parameter 'load.levels' got 16.0; expected concurrency levels up to the 8 sessions",
        ),
        (
            {"shape": "agentic", "load": {"levels": [4], "requests_per_level": 10}},
            r"parameter 'load.levels' got 4.0; expected concurrency levels up to the 2 sessions",
        ),
        (["chat"], r"parameter '\(document\)' got .*expected a mapping"),
    ],
)
def test_spec_errors_name_the_key_the_value_and_what_fits(document: object, message: str) -> None:
    with pytest.raises(ValueError, match=r"^spec\.yaml: " + message):
        parse_workload(document, "spec.yaml")


def test_unreadable_spec_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not YAML"):
        load_workload(write_spec(tmp_path, "shape: [chat\n"))


# --- figures ------------------------------------------------------------------------------------------------

SLO = Slo(ttft_p90_ms=100, itl_p90_ms=10, e2e_p90_ms=1000)


def test_goodput_and_cost_per_good_token_equal_the_hand_computed_case() -> None:
    # Four requests in 2 s of wall time, 11 output tokens each:
    records = [
        Record(0.0, 0.5, 50, 100, 11),  # ITL (500-50)/10 = 45 ms: misses the 10 ms ITL SLO
        Record(0.0, 0.1, 50, 100, 11),  # ITL 5, e2e 100: good
        Record(1.0, 1.09, 80, 100, 11),  # ITL 1, e2e 90: good
        Record(1.5, 2.0, None, 0, 0, "HTTP 503"),  # failed
    ]
    # 3.6 USD/h for 2 s = 0.002 USD; 33 output tokens, 22 of them good.
    figures = level_figures(4, records, SLO, Pricing("1 x test", usd_per_hour=3.6))
    assert figures["good_requests"] == 2 and figures["good_tokens"] == 22 and figures["errors"] == 1
    assert figures["goodput_requests_per_s"] == 1.0
    assert figures["error_rate"] == 0.25 and figures["meets_slo"] is False
    assert figures["usd"] == pytest.approx(0.002)
    assert figures["usd_per_1m_output_tokens"] == pytest.approx(0.002 / 33 * 1e6, rel=1e-4)
    assert figures["usd_per_1m_good_tokens"] == pytest.approx(0.002 / 22 * 1e6, rel=1e-4)
    assert figures["output_tokens_per_s"] == 16.5
    # ITL = (e2e - TTFT) / (output tokens - 1): 45, 5 and 1 ms, interpolated like numpy.
    assert figures["itl_ms"] == {"p50": 5.0, "p90": 37.0, "p99": 44.2}


def test_a_request_over_the_e2e_slo_alone_is_not_good() -> None:
    # TTFT 50 ms and ITL (1500-50)/200 = 7.25 ms are within the SLO; e2e 1500 ms is not.
    figures = level_figures(1, [Record(0.0, 1.5, 50, 100, 201)], SLO, None)
    assert figures["itl_ms"]["p90"] == 7.25 and figures["e2e_ms"]["p90"] == 1500.0
    assert figures["good_requests"] == 0 and figures["meets_slo"] is False


def test_per_token_pricing_counts_the_tokens_sent_and_received() -> None:
    records = [Record(0.0, 1.0, 10, 1000, 500)]
    figures = level_figures(1, records, SLO, Pricing("test", usd_per_1m_input=1.0, usd_per_1m_output=4.0))
    assert figures["usd"] == pytest.approx((1000 * 1.0 + 500 * 4.0) / 1e6)
    assert figures["usd_per_1m_output_tokens"] == pytest.approx(6.0)


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)


# --- report and advise --measured -----------------------------------------------------------------------


def target(name: str, tier: str | None, rows: list[tuple[float, bool, float | None]]) -> dict[str, object]:
    stats = {"p50": 10.0, "p90": 20.0, "p99": 30.0}
    return {
        "name": name,
        "tier": tier,
        "levels": [
            {"level": level, "meets_slo": ok, "usd_per_1m_good_tokens": cost, "ttft_ms": stats, "itl_ms": stats,
             "e2e_ms": stats, "output_tokens_per_s": 100.0 * level, "requests_per_s": level, "error_rate": 0.0,
             "goodput_requests_per_s": level, "usd_per_1m_output_tokens": cost}
            for level, ok, cost in rows
        ],
    }  # fmt: skip


WORKLOAD = {
    "load": {"mode": "concurrency"},
    "slo": {"ttft_p90_ms": 100.0, "itl_p90_ms": 10.0, "e2e_p90_ms": 1e4},
}
RESULTS = {
    "workload": WORKLOAD,
    "targets": [
        # Listed out of tier order on purpose: advise orders by the project's tiers.
        target("hyperpod", "hyperpod", [(1, True, 9.0), (8, True, 2.0), (32, True, 1.0)]),
        target("sagemaker", "sagemaker", [(1, True, 3.0), (8, True, 2.5), (32, False, 4.0)]),
        target("bedrock", "bedrock", [(1, True, 5.0), (8, False, None), (32, False, None)]),
    ],
}


def test_measured_advice_picks_the_cheapest_target_meeting_the_slo_and_where_the_next_tier_pays() -> None:
    advice = advise_measured(RESULTS, 1)
    assert advice["choice"] == "sagemaker"  # bedrock 5.0, hyperpod 9.0 at load 1
    assert advice["next"] == "hyperpod" and advice["next_pays_at"] == 8.0  # 2.0 < 2.5 at load 8
    assert advise_measured(RESULTS, 10)["choice"] == "hyperpod"  # judged at the next measured level, 32
    assert advise_measured(RESULTS, 64)["choice"] is None  # nobody was measured that high
    assert "next: hyperpod pays from 8 concurrent requests" in render_measured(advice)


def test_advise_measured_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS), encoding="utf-8")
    assert cli.main(["advise", "--measured", str(path), "--load", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["choice"] == "sagemaker"
    # No target meets the SLOs at 64: a script must not read that as a choice.
    assert cli.main(["advise", "--measured", str(path), "--load", "64"]) == 1
    assert "none of the measured targets meets the SLOs" in capsys.readouterr().out
    assert cli.main(["advise", "--measured", str(path)]) == 2
    assert "also pass --load" in capsys.readouterr().err


def test_report_merges_targets_of_one_workload_and_refuses_another(tmp_path: Path) -> None:
    first = merge_results(tmp_path, WORKLOAD, target("a", None, [(1, True, 1.0)]))
    write_report(tmp_path, first)
    both = merge_results(tmp_path, WORKLOAD, target("b", None, [(1, True, 2.0), (4, False, None)]))
    assert [t["name"] for t in both["targets"]] == ["a", "b"]
    svg = render_svg(both)
    assert svg.count("<polyline") == 2 and "TTFT SLO 100 ms" in svg
    assert "10/20/30" in render_table(both) and "missed" in render_table(both)
    with pytest.raises(ValueError, match="another workload spec"):
        merge_results(tmp_path, {**WORKLOAD, "shape": "rag"}, target("c", None, []))


# --- aiperf command line and export ---------------------------------------------------------------------


def test_aiperf_command_carries_the_shape(tmp_path: Path) -> None:
    spec = parse_workload(
        {"shape": "agentic", "prefix_tokens": 64, "load": {"levels": [4], "requests_per_level": 20}}
    )
    command = aiperf.aiperf_command(
        Path("aiperf"), "http://x", "m", spec, 4, tokenizer=tmp_path, artifact_dir=tmp_path, seed=3
    )
    flags = {
        flag: command[i + 1]
        for i, flag in enumerate(command)
        if flag.startswith("--") and i + 1 < len(command)
    }
    assert command[:2] == ["aiperf", "profile"] and "--streaming" in command
    assert flags["--concurrency"] == "4" and flags["--prefix-prompt-length"] == "64"
    assert flags["--conversation-turn-mean"] == "5" and flags["--conversation-num"] == "4"
    assert flags["--conversation-turn-delay-mean"] == "2000" and flags["--random-seed"] == "3"
    rate = parse_workload({"shape": "chat", "load": {"mode": "rate"}})
    assert "--request-rate" in aiperf.aiperf_command(
        Path("aiperf"), "http://x", "m", rate, 0.5, tokenizer=tmp_path, artifact_dir=tmp_path, seed=3
    )


def test_aiperf_export_becomes_records(tmp_path: Path) -> None:
    def row(phase: str, start: int, error: object = None) -> str:
        return json.dumps(
            {
                "metadata": {
                    "benchmark_phase": phase,
                    "request_start_ns": start,
                    "request_end_ns": start + 10**9,
                },
                "metrics": {
                    "time_to_first_token": {"value": 12.5, "unit": "ms"},
                    "input_sequence_length": {"value": 100, "unit": "tokens"},
                    "output_sequence_length": {"value": 20, "unit": "tokens"},
                },
                "error": error,
            }
        )

    path = tmp_path / "profile_export.jsonl"
    path.write_text(
        "\n".join(
            [
                row("warmup", 0),
                row("profiling", 2 * 10**9),
                # aiperf 0.13.0 ErrorDetails (aiperf/common/models/error_models.py): the HTTP status is ``code``.
                row("profiling", 3 * 10**9, {"code": 503, "message": "503"}),
                row("profiling", 4 * 10**9, {"code": 429, "message": "slow down"}),
            ]
        )
    )
    records = aiperf.parse_records(path)
    assert [(r.start_s, r.e2e_ms, r.ttft_ms, r.error, r.error_kind) for r in records] == [
        (2.0, 1000.0, 12.5, None, None),
        (3.0, 1000.0, 12.5, "503", "5xx"),
        (4.0, 1000.0, 12.5, "slow down", "throttled"),
    ]


# --- SageMaker AI benchmark and recommendation jobs ------------------------------------------------------------------------


def test_sagemaker_benchmark_job_from_the_spec() -> None:
    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    spec = parse_workload(
        {"shape": "rag", "prefix_tokens": 1000, "input_tokens": {"mean": 200, "stddev": 20}}
    )
    with Stubber(client) as stubber:
        stubber.add_response(
            "create_ai_workload_config",
            {
                "AIWorkloadConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:ai-workload-config/run1-workload"
            },
            {
                "AIWorkloadConfigName": "run1-workload",
                "AIWorkloadConfigs": {
                    "WorkloadSpec": {
                        "Inline": json.dumps(
                            {
                                "benchmark": {"type": "aiperf"},
                                "parameters": {
                                    "output_tokens_mean": 200,
                                    "output_tokens_stddev": 50,
                                    "prompt_input_tokens_mean": 1200,
                                    "prompt_input_tokens_stddev": 20,
                                },
                            },
                            sort_keys=True,
                        )
                    }
                },
            },
        )
        stubber.add_response(
            "create_ai_benchmark_job",
            {"AIBenchmarkJobArn": "arn:aws:sagemaker:us-east-1:123456789012:ai-benchmark-job/run1"},
            {
                "AIBenchmarkJobName": "run1",
                "BenchmarkTarget": {
                    "Endpoint": {"Identifier": "ep", "InferenceComponents": [{"Identifier": "ic"}]}
                },
                "OutputConfig": {"S3OutputLocation": "s3://bucket/bench/"},
                "AIWorkloadConfigIdentifier": "run1-workload",
                "RoleArn": "arn:aws:iam::123456789012:role/bench",
            },
        )
        started = start_benchmark_job(
            client,
            spec,
            job_name="run1",
            endpoint="ep",
            component="ic",
            role_arn="arn:aws:iam::123456789012:role/bench",
            s3_output="s3://bucket/bench/",
        )
        stubber.assert_no_pending_responses()
    assert started["arn"].endswith("ai-benchmark-job/run1")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--url", "http://x", "--sagemaker-endpoint", "ep"], "exactly one of --tier, --url"),
        (["--url", "http://x", "--token-prices", "1,2"], "--token-prices '1,2': expected 'INPUT,OUTPUT'"),
        (
            ["--url", "http://x", "--instance-type", "ml.nope.xlarge"],
            "'ml.nope.xlarge': not in the price table",
        ),
        (
            ["--url", "http://x", "--instance-type", "g6e.xlarge", "--instance-count", "0"],
            "--instance-count 0",
        ),
        (
            ["--url", "http://x", "--api-key-env", "BENCH_UNSET_VARIABLE"],
            "BENCH_UNSET_VARIABLE: that environment",
        ),
        (["--url", "http://x", "--tokenizer", "/nonexistent"], "tokenizer /nonexistent: not found"),
    ],
)
def test_bench_usage_errors_stop_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    spec = write_spec(tmp_path, "shape: chat\nmodel: m\n")
    assert cli.main(["bench", "--workload", str(spec), "--out", str(tmp_path / "out"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("tier", "outputs", "expected"),
    [
        (
            "sagemaker",
            {"EndpointName": "ep", "InferenceComponentName": "ic"},
            ("sagemaker", "ep", "ic", None),
        ),
        (
            "hyperpod",
            {"InvokeUrl": "http://lb/v1", "SageMakerEndpointName": "ep"},
            ("openai", None, None, "http://lb/v1"),
        ),
        ("hyperpod", {"SageMakerEndpointName": "hp-ep"}, ("sagemaker", "hp-ep", None, None)),
        (
            "disaggregated",
            {"RouterEndpoint": "http://router:8000"},
            ("openai", None, None, "http://router:8000"),
        ),
    ],
)
def test_tier_targets_come_from_the_stack_outputs(
    tier: str, outputs: dict[str, str], expected: tuple[str | None, ...]
) -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response("describe_stacks", _stack(outputs), {"StackName": "s"})
    target = target_from_stack(clients, tier, "s", None)
    assert (target.kind, target.endpoint, target.component, target.url) == expected and target.tier == tier


def test_tier_target_errors_name_the_missing_output_or_the_way_round() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response("describe_stacks", _stack({"Other": "x"}), {"StackName": "s"})
    with pytest.raises(StackError, match="stack s has no output EndpointName"):
        target_from_stack(clients, "sagemaker", "s", None)
    clients.stub("cloudformation").add_response("describe_stacks", _stack({}), {"StackName": "g"})
    with pytest.raises(StackError, match="pass the endpoint explicitly"):
        target_from_stack(clients, "gateway", "g", None)


def test_sagemaker_recommendation_job_on_a_deployed_workload_config() -> None:
    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        # No CreateAIWorkloadConfig: the tier's deployed one (output BenchmarkWorkloadConfigName) is named.
        stubber.add_response(
            "create_ai_recommendation_job",
            {"AIRecommendationJobArn": "arn:aws:sagemaker:us-east-1:123456789012:ai-recommendation-job/rec1"},
            {
                "AIRecommendationJobName": "rec1",
                "ModelSource": {"S3": {"S3Uri": "s3://models/qwen3-8b/"}},
                "OutputConfig": {"S3OutputLocation": "s3://bucket/rec/"},
                "AIWorkloadConfigIdentifier": "deployed-workload",
                "PerformanceTarget": {"Constraints": [{"Metric": "ttft-ms"}]},
                "RoleArn": "arn:aws:iam::123456789012:role/bench",
                "ComputeSpec": {"InstanceTypes": ["ml.g6e.2xlarge", "ml.p5.48xlarge"]},
            },
        )
        started = start_recommendation_job(
            client,
            parse_workload({"shape": "chat"}),
            job_name="rec1",
            model_s3_uri="s3://models/qwen3-8b/",
            goal="ttft-ms",
            instance_types=("ml.g6e.2xlarge", "ml.p5.48xlarge"),
            role_arn="arn:aws:iam::123456789012:role/bench",
            s3_output="s3://bucket/rec/",
            workload_config="deployed-workload",
        )
        stubber.assert_no_pending_responses()
    assert started == {
        "job": "rec1",
        "workload_config": "deployed-workload",
        "arn": "arn:aws:sagemaker:us-east-1:123456789012:ai-recommendation-job/rec1",
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sagemaker-recommendation", "Rec_1"], "'Rec_1': expected lowercase letters"),
        (["--sagemaker-recommendation", "rec1"], "also pass --role-arn"),
        (
            [
                "--sagemaker-recommendation",
                "rec1",
                "--role-arn",
                "r",
                "--s3-output",
                "s3://b/",
                "--model-s3-uri",
                "m",
            ],
            "--model-s3-uri 'm': expected the s3:// prefix",
        ),
    ],
)
def test_recommendation_job_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    spec = write_spec(tmp_path, "shape: chat\n")
    assert cli.main(["bench", "--workload", str(spec), *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_failed_engine_run_is_exit_1_with_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "shape: chat\nmodel: m\nload: {levels: [1]}\n")
    argv = ["bench", "--workload", str(spec), "--out", str(tmp_path / "out"), "--url", "http://127.0.0.1:9"]
    assert cli.main([*argv, "--aiperf", "/bin/false", "--tokenizer", str(tmp_path)]) == 1
    assert "error: aiperf exited 1" in capsys.readouterr().err
