"""The pinned checkov (tools/checkov/.venv, installed by make test-tools) on a small synthesized stack: it reads
the skips recorded on the resources, with their reasons, and still fails the user's own functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.common.checkov_stack import FrameworkStack, framework_stack
from tools.checkov import scan


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[FrameworkStack, dict[str, Any], list[Path]]:
    if not scan.CHECKOV.exists():
        pytest.fail(
            f"checkov is not installed in {scan.CHECKOV.parent.parent}: run bash tools/checkov/setup.sh"
        )
    outdir = tmp_path_factory.mktemp("checkov")
    built = framework_stack(outdir / "cdk.out")
    built.app.synth()
    files = scan.templates(outdir / "cdk.out")
    [report] = scan.run_checkov(files)
    return built, report, files


def _results(report: dict[str, Any], kind: str, logical_id: str) -> dict[str, dict[str, Any]]:
    return {
        r["check_id"]: r
        for r in report["results"][f"{kind}_checks"]
        if r["resource"].rsplit(".", 1)[1] == logical_id
    }


def test_scans_the_stack_template(scanned: Any) -> None:
    built, report, files = scanned
    assert [f.name for f in files] == [f"{built.stack.artifact_id}.template.json"]
    assert report["check_type"] == "cloudformation"
    assert report["summary"]["checkov_version"] == "3.3.30"
    assert report["summary"]["parsing_errors"] == 0


def test_framework_function_skips_reach_checkov_with_their_reasons(scanned: Any) -> None:
    built, report, _ = scanned
    framework_function = built.provider.node.find_child("framework-onEvent")
    skipped = _results(report, "skipped", built.logical_id(framework_function))
    assert set(skipped) >= {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_173"}
    for result in skipped.values():
        assert result["check_result"]["suppress_comment"].startswith(
            "aws-cdk's custom_resources.Provider framework function: "
        )
    assert _results(report, "failed", built.logical_id(framework_function)) == {}


def test_user_functions_still_fail_the_checks_framework_functions_skip(scanned: Any) -> None:
    built, report, _ = scanned
    for function in [built.user_handler, *built.decoys]:
        failed = _results(report, "failed", built.logical_id(function))
        assert {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"} <= set(failed), function.node.path
        assert _results(report, "skipped", built.logical_id(function)) == {}


def test_access_log_bucket_passes_versioning_and_skips_its_own_logging(scanned: Any) -> None:
    built, report, _ = scanned
    logical_id = built.logical_id(built.stack.node.find_child("AccessLogs"))
    assert "CKV_AWS_21" in _results(report, "passed", logical_id)
    [reason] = [
        r["check_result"]["suppress_comment"] for r in _results(report, "skipped", logical_id).values()
    ]
    assert "server access log destination" in reason
    assert _results(report, "failed", logical_id) == {}


def test_summary_counts_each_failed_check_as_a_problem(scanned: Any) -> None:
    _, report, _ = scanned
    lines, problems = scan.summarize([report])
    assert problems == report["summary"]["failed"] > 0
    assert sum(line.startswith("  FAILED ") for line in lines) == problems
    assert sum(line.startswith("  skipped ") for line in lines) == report["summary"]["skipped"]
