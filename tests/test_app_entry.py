"""app.py, the entry point `cdk synth` runs: a wrong context value ends it with the error alone, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import PROJECT_ROOT


@pytest.mark.parametrize(
    ("context", "message"),
    [
        # Refused while parsing the context (an unknown key of a tier).
        (
            {"tier": "bedrock", "bedrock.guardrail_mode": "bogus"},
            "context key 'bedrock.guardrail_mode': got 'bogus'",
        ),
        # Refused by a tier's settings check (a value that conflicts with another key).
        (
            {
                "tier": "hyperpod",
                "hyperpod.inference_gateway": '{"pools":{"model":{"min_replicas":1,"max_replicas":2}}}',
            },
            "context key 'hyperpod.scaling_metric': got 'cloudwatch'",
        ),
    ],
    ids=["unknown-key", "conflicting-keys"],
)
def test_a_wrong_context_value_ends_synth_with_its_message_only(
    context: dict[str, str], message: str, tmp_path: Path
) -> None:
    defaults = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({**defaults, **context}), "CDK_OUTDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"inference-tiers: {message}"), result.stderr
    assert "Traceback" not in result.stderr
