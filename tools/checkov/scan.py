"""Run the pinned checkov (tools/checkov/.venv) on every template a `cdk synth` wrote, and report.

    python tools/checkov/scan.py cdk.out

Prints, per template, the counts and every failed and skipped check (a skip with the reason recorded on the
resource); exits 1 on any failed check, parsing error, or skip without a reason. `make checkov` runs it after
synthesizing each tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CHECKOV = Path(__file__).resolve().parent / ".venv" / "bin" / "checkov"


def templates(outdir: Path) -> list[Path]:
    """The stack templates of a cloud assembly (the manifest's stacks) and any nested stack templates."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    stacks = [
        outdir / artifact["properties"]["templateFile"]
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "aws:cloudformation:stack"
    ]
    return sorted({*stacks, *outdir.glob("*.nested.template.json")})


def run_checkov(files: list[Path]) -> list[dict[str, Any]]:
    """checkov's JSON report for ``files`` (framework cloudformation, offline): one entry per check type."""
    if not CHECKOV.exists():
        raise SystemExit(f"{CHECKOV} is missing: run bash tools/checkov/setup.sh first")
    command = [str(CHECKOV), "--framework", "cloudformation", "--skip-download", "--output", "json"]
    for file in files:
        command += ["--file", str(file)]
    # checkov exits 1 when a check fails; the report says why, so only a report that doesn't parse is an error.
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"checkov gave no JSON report (exit {result.returncode}):\n{result.stderr}"
        ) from None
    if isinstance(report, dict) and "results" not in report:
        # No resource to scan: checkov prints only a summary.
        return []
    return report if isinstance(report, list) else [report]


def summarize(reports: list[dict[str, Any]]) -> tuple[list[str], int]:
    """The report lines and the number of problems (failed checks, parsing errors, skips without a reason)."""
    lines: list[str] = []
    problems = 0
    for report in reports:
        summary, results = report["summary"], report["results"]
        lines.append(
            f"checkov {summary['checkov_version']} ({report['check_type']}): {summary['passed']} passed, "
            f"{summary['failed']} failed, {summary['skipped']} skipped, "
            f"{summary['parsing_errors']} parsing errors, {summary['resource_count']} resources"
        )
        for path in results.get("parsing_errors", []):
            lines.append(f"  PARSING ERROR {path}")
            problems += 1
        for check in results.get("failed_checks", []):
            lines.append(
                f"  FAILED {check['check_id']} {check['resource']} ({_file(check)}): {check['check_name']}"
            )
            problems += 1
        for check in results.get("skipped_checks", []):
            reason = (check["check_result"].get("suppress_comment") or "").strip()
            lines.append(f"  skipped {check['check_id']} {check['resource']}: {reason or 'NO REASON GIVEN'}")
            problems += not reason
    return lines, problems


def _file(check: dict[str, Any]) -> str:
    return Path(check["file_path"]).name


def main(outdir: str) -> int:
    files = templates(Path(outdir))
    print(f"checkov on {len(files)} template(s) in {outdir}/: {', '.join(f.name for f in files)}")
    lines, problems = summarize(run_checkov(files))
    print("\n".join(lines))
    print(f"checkov: {problems} problem(s)" if problems else "checkov: no failed check")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cdk.out"))
