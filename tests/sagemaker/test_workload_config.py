"""The sagemaker tier's opt-in AI workload config: rendered from a bench workload spec (inline or a YAML file),
in a reviewed snapshot, valid for cfn-lint, and refused with the context key when the spec is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.config import ConfigError
from tests.harness import build_tier, cfn_lint_errors

KEY = "sagemaker.benchmark_workload"
SPEC = {
    "shape": "rag",
    "prefix_tokens": 3000,
    "input_tokens": {"mean": 250, "stddev": 40},
    "output_tokens": {"mean": 300, "stddev": 60},
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    built: dict[str, Any] = (
        build_tier("sagemaker", **{KEY: SPEC, "sagemaker.create_endpoint": "true"}).template().to_json()
    )
    return built


def workload_configs(template: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::SageMaker::AIWorkloadConfig"}


def test_opt_in_renders_the_spec_as_sagemaker_reads_it(template: dict[str, Any], snapshot_json: Any) -> None:
    (resource,) = workload_configs(template).values()
    inline = json.loads(resource["Properties"]["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])
    # The shared RAG prefix is part of every prompt SageMaker's aiperf sends.
    assert inline == {
        "benchmark": {"type": "aiperf"},
        "parameters": {
            "prompt_input_tokens_mean": 3250,
            "prompt_input_tokens_stddev": 40,
            "output_tokens_mean": 300,
            "output_tokens_stddev": 60,
        },
    }
    name = resource["Properties"]["AIWorkloadConfigName"]
    assert template["Outputs"]["BenchmarkWorkloadConfigName"]["Value"] == name
    assert resource == snapshot_json


def test_opt_in_passes_cfn_lint(template: dict[str, Any]) -> None:
    assert cfn_lint_errors(template) == []


def test_off_by_default() -> None:
    from tests.harness import cdk_json_context

    assert cdk_json_context()[KEY] == ""


def test_spec_file_and_errors_name_the_key(tmp_path: Path) -> None:
    from inference_tiers.stacks.sagemaker import _benchmark_workload

    path = tmp_path / "chat.yaml"
    path.write_text("shape: chat\noutput_tokens: {mean: 64}\n", encoding="utf-8")
    assert _benchmark_workload(KEY, str(path)).output_tokens.mean == 64
    with pytest.raises(ConfigError, match=rf"context key '{KEY}'.*parameter 'shape' got 'batch'"):
        _benchmark_workload(KEY, {"shape": "batch"})
    with pytest.raises(ConfigError, match=rf"context key '{KEY}'.*cannot read"):
        _benchmark_workload(KEY, str(tmp_path / "missing.yaml"))
