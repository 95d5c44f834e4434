"""Custom resource: complete once every HyperPod instance group has its instances Running.

``AWS::SageMaker::Cluster`` reaches InService before all nodes have passed deep health checks and joined EKS;
anything scheduled before then (add-ons, models) sits Pending or times out. HyperPod reports an instance as
Running only after its lifecycle scripts and deep health checks succeeded. The CDK Provider framework calls
``is_complete`` every minute until it returns True or the total timeout (hours) expires.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3


def on_event(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    # The waiting happens in is_complete; Delete has nothing to clean up.
    return {"PhysicalResourceId": event["ResourceProperties"]["ClusterArn"]}


def is_complete(event: dict[str, Any], _context: Any, client: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    properties = event["ResourceProperties"]
    expected = {name: int(count) for name, count in properties["InstanceGroups"].items()}
    running = running_instances(client or boto3.client("sagemaker"), properties["ClusterArn"])
    missing = {name: count - running[name] for name, count in expected.items() if running[name] < count}
    print(f"running instances per group: {dict(running)}; still waiting for: {missing}")
    return {"IsComplete": not missing}


def running_instances(client: Any, cluster_arn: str) -> Counter[str]:
    """Running instances per instance group (ListClusterNodes, all pages)."""
    counts: Counter[str] = Counter()
    token = None
    while True:
        page = client.list_cluster_nodes(ClusterName=cluster_arn, **({"NextToken": token} if token else {}))
        for node in page.get("ClusterNodeSummaries", []):
            if node["InstanceStatus"]["Status"] == "Running":
                counts[node["InstanceGroupName"]] += 1
        token = page.get("NextToken")
        if not token:
            return counts
