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


# What the app imports for one tier: its own stack module and the constructs it uses, never another tier's, nor an
# aws-cdk module only another tier uses (aws_eks_v2 alone takes about 0.1 s). Run in a fresh interpreter, so modules
# the test process already loaded do not count.
_IMPORTED_FOR_ONE_TIER = """
import sys
from inference_tiers.app_factory import parse_app_config
from inference_tiers.constructs.common.nag import add_nag_checks
parse_app_config({"tier": sys.argv[1], "hyperpod.instance_type": "ml.g5.48xlarge"})
print("\\n".join(m for m in sys.modules if m.startswith(("inference_tiers.", "aws_cdk."))))
"""


@pytest.mark.parametrize(
    ("tier", "not_imported"),
    [
        (
            "bedrock",
            [
                "inference_tiers.stacks.sagemaker",
                "inference_tiers.stacks.hyperpod",
                "inference_tiers.stacks.gateway",
                "inference_tiers.constructs.eks",
                "inference_tiers.constructs.sandbox",
                "aws_cdk.aws_eks_v2",
                "aws_cdk.aws_ec2",
                "aws_cdk.aws_s3_deployment",
            ],
        ),
        (
            "sagemaker",
            [
                "inference_tiers.stacks.bedrock",
                "inference_tiers.stacks.disaggregated",
                "inference_tiers.constructs.hyperpod",
                "inference_tiers.constructs.gateway",
                "aws_cdk.aws_eks_v2",
            ],
        ),
    ],
)
def test_parsing_one_tier_imports_only_that_tier(tier: str, not_imported: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTED_FOR_ONE_TIER, tier],
        cwd=PROJECT_ROOT,
        env=os.environ,
        capture_output=True,
        text=True,
        check=True,
    )
    modules = set(result.stdout.split())
    assert f"inference_tiers.stacks.{tier}" in modules
    assert not set(not_imported) & modules


def test_a_key_of_a_tier_not_selected_is_still_checked_without_importing_it() -> None:
    from inference_tiers.app_factory import parse_app_config
    from inference_tiers.config import ConfigError

    config = parse_app_config({"tier": "bedrock", "hyperpod.instance_type": "ml.p5.48xlarge"})
    assert config.tiers == ("bedrock",)
    with pytest.raises(ConfigError, match=r"context key 'hyperpod.instance_typ'.*hyperpod.instance_type"):
        parse_app_config({"tier": "bedrock", "hyperpod.instance_typ": "ml.p5.48xlarge"})
