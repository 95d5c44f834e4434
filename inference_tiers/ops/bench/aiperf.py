"""Drive aiperf (PyPI ``aiperf``, pinned in tools/bench/requirements.in) against an OpenAI-compatible URL.

One ``aiperf profile`` run per load level, offline: prompts are synthesised from the corpus aiperf ships and
sized with the local tokenizer tools/bench/setup.sh writes; tokens are the server's usage, else that tokenizer's
count (the tokenizer is given as a path, so aiperf never asks the Hugging Face Hub:
aiperf 0.13.0 aiperf/common/tokenizer.py ``resolve_alias`` treats an existing path as local). Its per-request
export (``profile_export.jsonl``, ``--export-level records``) becomes :class:`Record` objects, so the figures are
computed the same way as for the native SageMaker and Bedrock runs.

Flags as aiperf 0.13.0 ``aiperf profile --help`` lists them (aiperf/config/flags/cli_config.py).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from inference_tiers.ops.bench.metrics import TOKENIZER, USAGE, Record, error_kind_of_status
from inference_tiers.ops.bench.workload import WorkloadSpec

RECORDS_FILE = "profile_export.jsonl"
# The unit of a request the server gave no usage for under --use-server-token-count: rerun with the tokenizer.
NO_COUNT = "none"


def counted(records: list[Record]) -> bool:
    """Whether the run has token counts: false when the server reported no usage for any successful request."""
    return any(r.token_unit != NO_COUNT for r in records if r.error is None) or all(r.error for r in records)


def aiperf_command(
    aiperf: Path,
    url: str,
    model: str,
    spec: WorkloadSpec,
    level: float,
    *,
    tokenizer: Path,
    artifact_dir: Path,
    seed: int,
    api_key: str | None = None,
    server_tokens: bool = True,
) -> list[str]:
    """The ``aiperf profile`` command line for one load level of ``spec`` (prompts drawn with ``seed``); with
    ``server_tokens`` aiperf counts tokens from the server's usage (aiperf 0.13.0
    aiperf/config/flags/cli_config.py ``--use-server-token-count``; it then sets ``stream_options.include_usage``
    itself), else with the tokenizer."""
    command = [
        str(aiperf), "profile",
        "--url", url,
        "--endpoint-type", "chat",
        "--streaming",
        "--model-names", model,
        "--tokenizer", str(tokenizer),
        "--synthetic-input-tokens-mean", str(spec.input_tokens.mean),
        "--synthetic-input-tokens-stddev", str(spec.input_tokens.stddev),
        "--output-tokens-mean", str(spec.output_tokens.mean),
        "--output-tokens-stddev", str(spec.output_tokens.stddev),
        "--request-count", str(spec.load.requests_per_level),
        "--artifact-dir", str(artifact_dir),
        "--export-level", "records",
        "--random-seed", str(seed),
        "--ui-type", "none",
        "--no-gpu-telemetry",
        "--no-server-metrics",
    ]  # fmt: skip
    if server_tokens:
        command.append("--use-server-token-count")
    if spec.load.mode == "concurrency":
        command += ["--concurrency", str(int(level))]
    else:
        command += ["--request-rate", f"{level:g}"]
    if spec.prefix_tokens:
        # One shared prefix before every prompt: the RAG document every question is asked about.
        command += ["--num-prefix-prompts", "1", "--prefix-prompt-length", str(spec.prefix_tokens)]
    if spec.turns.mean > 1:
        # Multi-turn sessions: aiperf's default context mode (deltas_without_responses) resends every earlier
        # turn and the live answers, so each turn's prompt is the whole growing context.
        command += [
            "--conversation-num", str(math.ceil(spec.load.requests_per_level / spec.turns.mean)),
            "--conversation-turn-mean", str(spec.turns.mean),
            "--conversation-turn-stddev", str(spec.turns.stddev),
            "--conversation-turn-delay-mean", f"{spec.think_time_ms:g}",
        ]  # fmt: skip
    if api_key:
        command += ["--api-key", api_key]
    return command


def _value(metrics: dict[str, Any], name: str) -> float | None:
    metric = metrics.get(name)
    return float(metric["value"]) if metric else None


def _tokens(metrics: dict[str, Any]) -> tuple[int, int, str] | None:
    """(input, output, unit): the server's usage when the record has it, else the tokenizer's counts, else None.
    Usage completion tokens include reasoning, as the native drivers count them; aiperf 0.13.0's
    ``output_sequence_length`` under ``--use-server-token-count`` leaves reasoning out
    (aiperf/records/inference_result_parser.py ``_server_output_minus_reasoning``), so it is not read then."""
    completion = _value(metrics, "usage_completion_tokens")
    if completion is not None:
        return int(_value(metrics, "usage_prompt_tokens") or 0), int(completion), USAGE
    output = _value(metrics, "output_sequence_length")
    if output is None:
        return None
    return int(_value(metrics, "input_sequence_length") or 0), int(output), TOKENIZER


def _error_kind(error: dict[str, Any]) -> str:
    """aiperf 0.13.0's ErrorDetails (aiperf/common/models/error_models.py) carries the HTTP status as ``code``."""
    code = error.get("code")
    return error_kind_of_status(code) if isinstance(code, int) and code >= 400 else "error"


def parse_records(path: Path) -> list[Record]:
    """The profiling-phase requests of an aiperf ``profile_export.jsonl`` (warm-up excluded); a successful
    request without any token count (no usage under ``--use-server-token-count``) has the unit ``None``."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        meta, metrics = row["metadata"], row.get("metrics", {})
        if meta.get("benchmark_phase", "profiling") != "profiling":
            continue
        error = row.get("error")
        sent, received, unit = _tokens(metrics) or (0, 0, NO_COUNT)
        records.append(
            Record(
                start_s=meta["request_start_ns"] / 1e9,
                end_s=meta["request_end_ns"] / 1e9,
                ttft_ms=_value(metrics, "time_to_first_token"),
                # aiperf 0.13.0 aiperf/metrics/types/time_to_first_output_token_metric.py: the first non-reasoning token.
                ttfa_ms=_value(metrics, "time_to_first_output_token"),
                input_tokens=sent,
                output_tokens=received,
                error=(error.get("message") or error.get("type") or "error") if error else None,
                token_unit=unit,
                error_kind=_error_kind(error) if error else None,
            )
        )
    return records


def run_aiperf(command: list[str], artifact_dir: Path, *, timeout: float) -> list[Record]:
    """Run one level; a failed run raises with the end of aiperf's output."""
    artifact_dir.mkdir(parents=True, exist_ok=True)
    try:
        # Its own process group: aiperf starts a controller and worker processes, which a timeout must end too.
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
    except FileNotFoundError:
        raise ValueError(
            f"aiperf not found at {command[0]}: run `bash tools/bench/setup.sh` or pass --aiperf"
        ) from None
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise RuntimeError(f"aiperf ran past {timeout:g} s (artifacts in {artifact_dir})") from None
    records_file = artifact_dir / RECORDS_FILE
    if process.returncode != 0 or not records_file.exists():
        tail = "\n".join(output.splitlines()[-15:])
        raise RuntimeError(f"aiperf exited {process.returncode} (artifacts in {artifact_dir}):\n{tail}")
    return parse_records(records_file)
