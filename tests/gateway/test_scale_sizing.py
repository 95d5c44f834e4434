"""Database connections sized at synth: pool per worker x workers x the task maximum must fit the Aurora
capacity the gateway sets; and the container command bounds each worker's concurrency and recycles it."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from inference_tiers.constructs.gateway import LiteLLMGateway
from inference_tiers.litellm.config import (
    CONCURRENCY_PER_WORKER,
    DATABASE_POOL_PER_WORKER,
    RECYCLE_AFTER_REQUESTS,
    RECYCLE_JITTER,
)
from inference_tiers.litellm.database import aurora_max_connections, proxy_connection_budget
from tests.gateway.test_constructs import bedrock, certificate, expect, make_stack

WORKERS = 4  # LiteLLMGateway's default


@pytest.mark.parametrize(
    ("capacity", "documented"),
    [
        # max_connections AWS reports for Aurora PostgreSQL Serverless v2 (AWS re:Post "Working of
        # max_connections for Amazon Aurora PostgreSQL Serverless", which quotes the Aurora User Guide).
        ((0.5, 1), 189),
        ((1, 16), 3360),
        ((0.5, 16), 2000),
        ((1, 64), 5000),
    ],
)
def test_the_proxy_budget_stays_within_what_aurora_allows(
    capacity: tuple[float, float], documented: int
) -> None:
    assert proxy_connection_budget(*capacity) <= documented
    assert aurora_max_connections(*capacity) >= documented


def gateway(tmp_path: Any, **props: Any) -> LiteLLMGateway:
    stack, vpc = make_stack(tmp_path)
    return LiteLLMGateway(
        stack, "Gateway", vpc=vpc, models=[bedrock()], certificate=certificate(stack), **props
    )


def test_more_tasks_than_the_database_serves_are_refused_at_synth(tmp_path: Any) -> None:
    fits = proxy_connection_budget(0.5, 8) // (DATABASE_POOL_PER_WORKER * WORKERS)
    expect("LiteLLMGateway", "max_count", lambda: gateway(tmp_path, max_count=fits + 1))
    with pytest.raises(
        Exception, match=rf"at most {fits} tasks: database_connection_pool_limit 10 x workers 4"
    ):
        gateway(tmp_path / "again", max_count=fits + 1)


def test_a_larger_database_or_fewer_workers_admit_more_tasks(tmp_path: Any) -> None:
    fits = proxy_connection_budget(0.5, 8) // (DATABASE_POOL_PER_WORKER * WORKERS)
    gateway(tmp_path / "acu", max_count=fits + 1, database_capacity=(0.5, 16))
    gateway(tmp_path / "workers", max_count=fits + 1, workers=2)


def test_the_largest_fleet_that_fits_synthesizes_with_bounded_recycled_workers(tmp_path: Any) -> None:
    fits = proxy_connection_budget(0.5, 8) // (DATABASE_POOL_PER_WORKER * WORKERS)
    built = gateway(tmp_path, max_count=fits)
    assert built.config["general_settings"]["database_connection_pool_limit"] == DATABASE_POOL_PER_WORKER
    definitions = Template.from_stack(cdk.Stack.of(built)).find_resources("AWS::ECS::TaskDefinition")
    commands = [
        " ".join(container["Command"])
        for definition in definitions.values()
        for container in definition["Properties"]["ContainerDefinitions"]
        if "Command" in container
    ]
    serving = [c for c in commands if "--skip_server_startup" not in c]
    assert serving, commands
    for command in serving:
        assert f"--limit_concurrency {CONCURRENCY_PER_WORKER}" in command
        assert f"--max_requests_before_restart {RECYCLE_AFTER_REQUESTS}" in command
        assert f"--max_requests_before_restart_jitter {RECYCLE_JITTER}" in command
