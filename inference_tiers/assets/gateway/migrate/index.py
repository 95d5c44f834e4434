"""Custom resource: once per deploy that changes its properties, before anything connects as the proxy's role,

1. provision the proxy's own database role and database through the RDS Data API, as the master user
   (the queries come from ``inference_tiers.litellm.database``: each returns the statements to run);
2. when the properties name a task definition (``TaskDefinitionArn``: the ``gateway`` tier, once per new task
   definition), run the proxy image once with ``--skip_server_startup`` (LiteLLM's migrations) as a Fargate task
   and wait for it to exit 0. Serving tasks run with ``DISABLE_SCHEMA_UPDATE=true``, so no two versions migrate at
   once. Without one (the ``platform`` tier), the LiteLLM chart's migration hook migrates.

Delete does nothing: the database is retained with the cluster.
"""

from __future__ import annotations

import json
import time
from typing import Any

import boto3

PASSWORD_PARAMETER = ":password"
POLL_SECONDS = 10
# The Data API errors of a writer that is not reachable yet (botocore's rds-data service model, 2018-08-01:
# "The DB cluster doesn't have a DB instance", "The writer instance in the DB cluster isn't available", a paused
# Serverless v2 instance resuming): retried with these waits, 195 s at most, then raised. Once the first statement
# has gone through, the writer is up, so the whole event spends at most that long retrying.
RETRYABLE = frozenset(
    {"DatabaseNotFoundException", "DatabaseUnavailableException", "DatabaseResumingException"}
)
BACKOFF_SECONDS = (5, 10, 20, 40, 60, 60)
# Stop waiting for the migration task before Lambda's 15-minute limit (the retries above included), so the
# failure reaches CloudFormation with a reason.
WAIT_SECONDS = 12 * 60 - sum(BACKOFF_SECONDS)


def on_event(event: dict[str, Any], _context: Any, clients: dict[str, Any] | None = None) -> dict[str, Any]:
    properties = event["ResourceProperties"]
    physical_id = f"{properties['DatabaseClusterArn']}/{properties['Database']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    clients = clients or {name: boto3.client(name) for name in ("rds-data", "secretsmanager", "ecs")}
    bootstrap(clients["rds-data"], clients["secretsmanager"], properties)
    if "TaskDefinitionArn" not in properties:
        return {"PhysicalResourceId": physical_id}
    task_arn = run_migrations(clients["ecs"], properties)
    return {"PhysicalResourceId": physical_id, "Data": {"MigrationTaskArn": task_arn}}


def bootstrap(rds_data: Any, secrets: Any, properties: dict[str, Any]) -> None:
    """Run each query as the master user, then each statement it returns (psql's \\gexec)."""
    password = json.loads(secrets.get_secret_value(SecretId=properties["AppSecretArn"])["SecretString"])[
        "password"
    ]
    common = {"resourceArn": properties["DatabaseClusterArn"], "secretArn": properties["MasterSecretArn"]}
    for query in properties["Queries"]:
        parameters = (
            [{"name": "password", "value": {"stringValue": password}}] if PASSWORD_PARAMETER in query else []
        )
        result = execute(rds_data, sql=query, parameters=parameters, **common)
        for row in result.get("records", []):
            execute(rds_data, sql=row[0]["stringValue"], **common)


def execute(rds_data: Any, **statement: Any) -> dict[str, Any]:
    """One statement on the ``postgres`` database, retried while the writer is not reachable yet."""
    for delay in BACKOFF_SECONDS:
        try:
            return dict(rds_data.execute_statement(database="postgres", **statement))
        except Exception as error:  # botocore's ClientError carries the error code in .response
            code = getattr(error, "response", {}).get("Error", {}).get("Code")
            if code not in RETRYABLE:
                raise
            print(f"the Data API answered {code}; retrying in {delay} s")
            time.sleep(delay)
    return dict(rds_data.execute_statement(database="postgres", **statement))


def run_migrations(ecs: Any, properties: dict[str, Any]) -> str:
    """Start the migration task and wait until it stops; raise unless its container exited 0."""
    started = ecs.run_task(
        cluster=properties["ClusterArn"],
        taskDefinition=properties["TaskDefinitionArn"],
        launchType="FARGATE",
        count=1,
        networkConfiguration={
            "awsvpcConfiguration": {
                "subnets": properties["Subnets"],
                "securityGroups": properties["SecurityGroups"],
                "assignPublicIp": "DISABLED",
            }
        },
        overrides={
            "containerOverrides": [
                {
                    "name": properties["ContainerName"],
                    "command": [properties["MigrateCommand"]],
                    "environment": [{"name": "DISABLE_SCHEMA_UPDATE", "value": "false"}],
                }
            ]
        },
        startedBy="inference-tiers-migrate",
    )
    if started.get("failures") or not started.get("tasks"):
        raise RuntimeError(f"the migration task did not start: {started.get('failures')}")
    task_arn = str(started["tasks"][0]["taskArn"])
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        task = ecs.describe_tasks(cluster=properties["ClusterArn"], tasks=[task_arn])["tasks"][0]
        if task["lastStatus"] == "STOPPED":
            container = next(c for c in task["containers"] if c["name"] == properties["ContainerName"])
            if container.get("exitCode") == 0:
                print(f"migrations applied by {task_arn}")
                return task_arn
            raise RuntimeError(
                f"the migration task {task_arn} failed: exit code {container.get('exitCode')}, "
                f"{task.get('stoppedReason')} {container.get('reason', '')} (its log is in the proxy's log group)"
            )
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"the migration task {task_arn} did not finish within {WAIT_SECONDS // 60} minutes")
