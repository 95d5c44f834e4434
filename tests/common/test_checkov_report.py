"""The checkov helper the opted-in tier tests use must report a failed check when there is one."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs

from tests.harness import TierBuild, checkov_report


def test_an_unencrypted_queue_fails_the_scan(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(app, "Plain")
    sqs.CfnQueue(stack, "Queue")  # no KmsMasterKeyId, no SqsManagedSseEnabled: CKV_AWS_27
    clean, report = checkov_report(TierBuild(app, [stack]))
    assert not clean
    assert "FAILED CKV_AWS_27" in report, report
