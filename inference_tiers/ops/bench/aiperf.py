"""Drive aiperf (PyPI ``aiperf``, pinned in tools/bench/requirements.in) against an OpenAI-compatible URL.

One ``aiperf profile`` run per load level, offline: prompts are synthesised from the corpus aiperf ships and
counted with the local tokenizer tools/bench/setup.sh writes (a path, so aiperf never asks the Hugging Face Hub:
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

from inference_tiers.ops.bench.metrics import Record
from inference_tiers.ops.bench.workload import WorkloadSpec

RECORDS_FILE = "profile_export.jsonl"


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
) -> list[str]:
    """The ``aiperf profile`` command line for one load level of ``spec`` (prompts drawn with ``seed``)."""
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


def parse_records(path: Path) -> list[Record]:
    """The profiling-phase requests of an aiperf ``profile_export.jsonl`` (warm-up excluded)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        meta, metrics = row["metadata"], row.get("metrics", {})
        if meta.get("benchmark_phase", "profiling") != "profiling":
            continue
        error = row.get("error")
        records.append(
            Record(
                start_s=meta["request_start_ns"] / 1e9,
                end_s=meta["request_end_ns"] / 1e9,
                ttft_ms=_value(metrics, "time_to_first_token"),
                input_tokens=int(_value(metrics, "input_sequence_length") or 0),
                output_tokens=int(_value(metrics, "output_sequence_length") or 0),
                error=(error.get("message") or error.get("type") or "error") if error else None,
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
