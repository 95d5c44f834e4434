"""The command: configuration loading through the tier registry, output formats, and the exit codes."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from inference_tiers import app_factory
from inference_tiers.config import (
    AccountRequirements,
    ConfigError,
    InstanceNeed,
    TierSpec,
    integer,
    setting,
    text,
)
from inference_tiers.ops import cli
from tests.harness import PROJECT_ROOT
from tests.ops.helpers import StubClients, client_error


@dataclass(frozen=True)
class FakeSettings:
    """A stand-in tier with requirements these tests control (tests/test_ops_tiers.py runs the real ones)."""

    instance_type: str = setting(text(r"p5\.48xlarge|g6e\.12xlarge"), "node instance type")
    node_count: int = setting(integer(1, 8), "nodes")

    def account_requirements(self) -> AccountRequirements:
        return AccountRequirements(
            instances=(InstanceNeed("ec2", self.instance_type, self.node_count),), kubernetes_version="1.35"
        )


@pytest.fixture
def fake_tier(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    tier = app_factory.Tier(spec=TierSpec("disaggregated", FakeSettings), build=lambda app, settings: [])
    monkeypatch.setattr(app_factory, "TIERS", {"disaggregated": tier})
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(
        json.dumps(
            {
                "app": "python3 app.py",
                "context": {
                    "tier": "bedrock",
                    "disaggregated.instance_type": "p5.48xlarge",
                    "disaggregated.node_count": 2,
                    "@aws-cdk/core:enablePartitionLiterals": True,
                },
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return cdk_json


def test_context_is_cdk_json_plus_overrides_with_the_tier_selected(fake_tier: Path) -> None:
    context = cli.load_context(None, ["disaggregated.node_count=4"], "disaggregated")
    assert context["tier"] == "disaggregated" and context["disaggregated.node_count"] == "4"
    requirements = cli.tier_requirements(context, "disaggregated")
    assert requirements.instances == (InstanceNeed("ec2", "p5.48xlarge", 4),)


def test_bad_override_value_is_a_config_error(fake_tier: Path) -> None:
    context = cli.load_context(fake_tier, ["disaggregated.node_count=99"], "disaggregated")
    with pytest.raises(ConfigError, match=r"disaggregated.node_count.*from 1 to 8"):
        cli.tier_requirements(context, "disaggregated")


def _preflight_stubs(quota: float) -> StubClients:
    clients = StubClients()
    clients.stub("sts").add_response(
        "get_caller_identity",
        {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/x", "UserId": "AIDAEXAMPLE"},
    )
    clients.stub("ec2").add_response(
        "describe_instance_type_offerings",
        {
            "InstanceTypeOfferings": [
                {
                    "InstanceType": "p5.48xlarge",
                    "LocationType": "availability-zone-id",
                    "Location": "use1-az6",
                }
            ]
        },
    )
    clients.stub("service-quotas").add_response(
        "get_service_quota", {"Quota": {"QuotaCode": "L-417A185B", "Value": quota}}
    )
    clients.stub("ec2").add_response("describe_capacity_reservations", {"CapacityReservations": []})
    clients.stub("eks").add_response(
        "describe_cluster_versions",
        {"clusterVersions": [{"clusterVersion": "1.35", "versionStatus": "STANDARD_SUPPORT"}]},
    )
    clients.stub("ssm").add_response(
        "get_parameter", {"Parameter": {"Name": "n", "Type": "String", "Value": "30"}}
    )
    return clients


def test_preflight_passes_with_exit_0_and_a_table(
    fake_tier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = _preflight_stubs(quota=384)
    monkeypatch.setattr(cli, "_session", lambda args: clients)
    assert cli.main(["preflight", "--tier", "disaggregated", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "tier: disaggregated, region: us-east-1, account: 123456789012" in out
    assert "PASS    quota Running On-Demand P instances (L-417A185B)" in out
    assert "needs: 2 x p5.48xlarge (ec2), Kubernetes 1.35" in out
    assert "PASS    EKS Kubernetes 1.35" in out
    assert out.rstrip().endswith("5 pass, 0 warn, 0 fail")
    clients.assert_done()


def test_preflight_failure_exits_1_and_json_carries_the_fix(
    fake_tier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = _preflight_stubs(quota=192)
    monkeypatch.setattr(cli, "_session", lambda args: clients)
    assert (
        cli.main(["preflight", "--tier", "disaggregated", "--json", "-c", "disaggregated.node_count=2"]) == 1
    )
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 1 and data["requirements"]["kubernetes_version"] == "1.35"
    [failed] = [r for r in data["results"] if r["status"] == "fail"]
    assert failed["fix"].endswith("--quota-code L-417A185B --desired-value 384")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c", "disaggregated.bogus=1"], "context key 'disaggregated.bogus'"),
        (["-c", "novalue"], "-c 'novalue': expected key=value"),
        (["--cdk-json", "/nonexistent/cdk.json"], "not found; run in the CDK app's directory"),
    ],
)
def test_preflight_config_errors_exit_2(
    fake_tier: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["preflight", "--tier", "disaggregated", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_preflight_for_a_tier_this_build_lacks_exits_2(
    fake_tier: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["preflight", "--tier", "bedrock"]) == 2
    assert "does not provide yet: bedrock" in capsys.readouterr().err


def test_preflight_without_credentials_exits_3(
    fake_tier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(fake_tier.parent / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(fake_tier.parent / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert cli.main(["preflight", "--tier", "disaggregated", "--region", "us-east-1"]) == 3
    err = capsys.readouterr().err
    assert "no AWS credentials found" in err and "Traceback" not in err


def test_smoke_without_a_region_exits_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    assert cli.main(["smoke", "--tier", "sagemaker"]) == 3
    assert "no AWS Region: pass --region" in capsys.readouterr().err


def _smoke_with(monkeypatch: pytest.MonkeyPatch, clients: StubClients) -> None:
    monkeypatch.setattr(cli, "_session", lambda args: clients)


def test_smoke_missing_stack_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = StubClients()
    client_error(
        clients.stub("cloudformation"),
        "describe_stacks",
        "ValidationError",
        "does not exist",
        expected_params={"StackName": "Custom"},
    )
    _smoke_with(monkeypatch, clients)
    assert cli.main(["smoke", "--tier", "sagemaker", "--stack", "Custom"]) == 1
    assert "stack Custom not found in us-east-1" in capsys.readouterr().err


def test_smoke_expired_token_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = StubClients()
    client_error(
        clients.stub("cloudformation"), "describe_stacks", "ExpiredToken", "The security token has expired"
    )
    _smoke_with(monkeypatch, clients)
    assert cli.main(["smoke", "--tier", "bedrock"]) == 3
    err = capsys.readouterr().err
    assert (
        "AWS DescribeStacks: ExpiredToken: The security token has expired" in err and "Traceback" not in err
    )


def test_smoke_table_shows_latency_and_failure_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "InferenceTiers-SageMaker",
                    "CreationTime": datetime.datetime(2026, 12, 1),
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "EndpointName", "OutputValue": "ep"}],
                }
            ]
        },
    )
    clients.stub("sagemaker").add_response(
        "describe_endpoint",
        {
            "EndpointName": "ep",
            "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/ep",
            "EndpointStatus": "Failed",
            "CreationTime": datetime.datetime(2026, 12, 1),
            "LastModifiedTime": datetime.datetime(2026, 12, 1),
        },
    )
    _smoke_with(monkeypatch, clients)
    assert cli.main(["smoke", "--tier", "sagemaker"]) == 1
    out = capsys.readouterr().out
    assert "status  step                ttft ms  total ms  detail" in out
    assert "FAIL    endpoint InService  -        -         ep is Failed" in out


def test_console_script_entry_point_is_main() -> None:
    import tomllib

    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"]["inference-tiers"] == "inference_tiers.ops.cli:main"
    assert callable(cli.main)


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    assert "Exit codes: 0 ok, 1 a check failed, 2 usage/config error" in capsys.readouterr().out


def test_assumed_role_clients_use_the_returned_credentials_in_the_same_region() -> None:
    import boto3

    from inference_tiers.ops.checks import Clients

    base = Clients(
        boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="eu-west-1")
    )
    assumed = base.with_credentials(
        {"AccessKeyId": "ASIAX", "SecretAccessKey": "secret", "SessionToken": "token", "Expiration": None}
    )
    credentials = assumed.session.get_credentials()
    assert (credentials.access_key, credentials.token, assumed.region) == ("ASIAX", "token", "eu-west-1")
    assert assumed.client("bedrock-runtime").meta.region_name == "eu-west-1"


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback() -> None:
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "inference_tiers.ops.cli", "advise", "--model", "qwen3-8b"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # like `| head -0`: gone before the command writes
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err
