"""Time `npx cdk synth` of each tier against an empty CDK app, the same way, on this machine, in one run; then
time the whole test suite once.

Both synths go through the CLI with the cdk-nag plugin registered, several runs each, interleaved so that machine
noise hits both alike. Prints the median of each and the ratio tier/empty (target: at most 1.25), then the
suite's wall time and worker count against its 90 s goal (reported, not enforced: it depends on the cores).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inference_tiers.app_factory import TIERS  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
TARGET_RATIO = 1.25  # issue 24: each tier at most 1.25x an empty app through the same CLI
SUITE_GOAL_S = 90

EMPTY_APP = """\
import aws_cdk as cdk
from inference_tiers.constructs.common.nag import add_nag_checks

app = cdk.App()
cdk.Stack(app, "Empty")
add_nag_checks(app)
app.synth()
"""


def synth_seconds(app_dir: Path, args: list[str], outdir: Path) -> float:
    start = time.perf_counter()
    # The tiers' synth warnings (unfetched charts, no admin principal) would bury the table: they are shown only
    # when a synth fails.
    result = subprocess.run(
        [
            str(ROOT / "node_modules/.bin/cdk"),
            "synth",
            "--quiet",
            "--no-notices",
            "-o",
            str(outdir),
            *args,
        ],
        cwd=app_dir,
        check=False,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if result.returncode:
        sys.exit(f"cdk synth {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}")
    return seconds


def main() -> int:
    env_python = str(Path(sys.executable))
    with tempfile.TemporaryDirectory() as tmp:
        empty_dir = Path(tmp) / "empty-app"
        empty_dir.mkdir()
        (empty_dir / "app.py").write_text(EMPTY_APP)
        # Same feature flags as the project, so the only difference is what the app builds.
        flags = {
            k: v
            for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items()
            if k.startswith("@")
        }
        (empty_dir / "cdk.json").write_text(json.dumps({"app": f"{env_python} app.py", "context": flags}))
        samples: dict[str, list[float]] = {"(empty app)": [], **{t: [] for t in TIERS}}
        for run in range(RUNS):
            samples["(empty app)"].append(synth_seconds(empty_dir, [], Path(tmp) / f"empty-{run}"))
            for tier in TIERS:
                samples[tier].append(synth_seconds(ROOT, ["-c", f"tier={tier}"], Path(tmp) / f"{tier}-{run}"))

    baseline = statistics.median(samples["(empty app)"])
    print(f"{'app':<16} {'median s':>9} {'ratio':>6}   runs: {RUNS}")
    worst = 0.0
    for name, values in samples.items():
        ratio = statistics.median(values) / baseline
        worst = max(worst, ratio)
        print(f"{name:<16} {statistics.median(values):>9.2f} {ratio:>6.2f}")
    verdict = "within" if worst <= TARGET_RATIO else "OVER"
    print(f"worst ratio {worst:.2f}: {verdict} the {TARGET_RATIO}x target")
    print(suite_report())
    return 0 if worst <= TARGET_RATIO else 1


def suite_report() -> str:
    """One run of the suite as `make test` runs it (pytest-xdist, one worker per core)."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT, check=False
    )
    seconds = time.perf_counter() - start
    outcome = "passed" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
    return f"test suite: {seconds:.0f} s on {os.cpu_count()} cores, {outcome}; goal {SUITE_GOAL_S} s"


if __name__ == "__main__":
    sys.exit(main())
