"""EventBridge target: once Secrets Manager has rotated the proxy's database password, start a new deployment of
the proxy's ECS service, so that every task restarts with the new password (ECS injects secrets only when a task
starts, and LiteLLM opens new database connections within minutes).

The rule sends ``{"Cluster", "Service", "SecretArn", "Detail"}``: the first three are the stack's own values,
``Detail`` is the RotationSucceeded record. A rotation of any other secret changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

import boto3


def on_rotation(event: dict[str, Any], _context: Any, ecs: Any = None) -> dict[str, Any]:
    # The record names the secret in additionalEventData.SecretId; matching its ARN anywhere in the record keeps
    # this independent of that field's spelling (Secrets Manager has changed arn/aRN before).
    if event["SecretArn"] not in json.dumps(event["Detail"]):
        print("a rotation of another secret: nothing to restart")
        return {"Restarted": False}
    ecs = ecs or boto3.client("ecs")
    ecs.update_service(cluster=event["Cluster"], service=event["Service"], forceNewDeployment=True)
    print(f"new deployment of {event['Service']} after the rotation of {event['SecretArn']}")
    return {"Restarted": True}
