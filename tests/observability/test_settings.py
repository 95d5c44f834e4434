"""The observability tier's context keys: every bad value is a ConfigError naming the key and what is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.ops import smoke
from inference_tiers.ops.smoke import StackError
from tests.harness import make_app
from tests.ops.helpers import StubClients

CLUSTER = "arn:aws:eks:us-east-1:111122223333:cluster/inference"


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("observability.retention_days", "0", "an integer from 1 to 1095"),
        ("observability.alarm_email", "ops", "an email address"),
        ("observability.grafana", "maybe", "true or false"),
        ("observability.eks_cluster_arn", "inference", "an EKS cluster ARN"),
        ("observability.scraper_subnet_ids", "sub-1", "a subnet id"),
        ("observability.scraper_security_group_ids", "default", "a security group id"),
        ("observability.ttft_p90_seconds", "0", "a number from 0.01 to 600"),
        ("observability.queue_depth", "1.5", "an integer from 1 to 100000"),
        ("observability.kv_cache_usage_ratio", "95", "a number from 0.01 to 1"),
        ("observability.gpu_utilization_percent", "101", "a number from 1 to 100"),
        ("observability.efa_drops_per_second", "-1", "a number from 0 to"),
    ],
)
def test_bad_values_name_the_key(key: str, value: Any, accepted: str) -> None:
    with pytest.raises(ConfigError, match=rf"context key '{key}[^']*': got .*expected .*{accepted}"):
        make_app(tier="observability", **{key: value})


def test_scraper_subnets_without_a_cluster_are_refused() -> None:
    with pytest.raises(
        ConfigError, match="'observability.scraper_subnet_ids'.*unless observability.eks_cluster_arn"
    ):
        make_app(tier="observability", **{"observability.scraper_subnet_ids": "subnet-0123456789abcdef0"})


@pytest.mark.parametrize(
    ("overrides", "key", "accepted"),
    [
        ({"observability.scraper_subnet_ids": "subnet-0123456789abcdef0"}, "scraper_subnet_ids", "2 to 5"),
        (
            {"observability.scraper_subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1"},
            "scraper_security_group_ids",
            "1 to 5",
        ),
    ],
)
def test_a_cluster_needs_two_subnets_and_a_security_group(
    overrides: dict[str, str], key: str, accepted: str
) -> None:
    with pytest.raises(ConfigError, match=rf"'observability.{key}'.*{accepted}"):
        make_app(tier="observability", **{"observability.eks_cluster_arn": CLUSTER, **overrides})


def test_smoke_explains_how_to_check_the_workspace() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "InferenceTiers-Observability",
                    "CreationTime": "2026-12-01T00:00:00Z",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "WorkspaceArn", "OutputValue": "arn"}],
                }
            ]
        },
    )
    with pytest.raises(StackError, match=r"InferenceTiers-Observability: .*awscurl --service aps"):
        smoke.run_smoke(clients, "observability")
