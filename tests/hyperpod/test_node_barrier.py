"""The node barrier's handler: complete only when every instance group has its instances Running."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from inference_tiers.constructs.hyperpod.cluster import ASSETS
from tests.harness import import_file


def _handler() -> ModuleType:
    return import_file("node_barrier", Path(ASSETS) / "node_barrier" / "index.py")


class FakeSageMaker:
    """ListClusterNodes in two pages."""

    def __init__(self, statuses: list[tuple[str, str]]) -> None:
        self.nodes = [
            {"InstanceGroupName": group, "InstanceId": f"i-{i}", "InstanceStatus": {"Status": status}}
            for i, (group, status) in enumerate(statuses)
        ]
        self.calls: list[dict[str, Any]] = []

    def list_cluster_nodes(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if "NextToken" not in kwargs:
            return {"ClusterNodeSummaries": self.nodes[:1], "NextToken": "page-2"}
        return {"ClusterNodeSummaries": self.nodes[1:]}


EVENT: dict[str, Any] = {
    "RequestType": "Create",
    "ResourceProperties": {
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
        "InstanceGroups": {"gpu": "2", "cpu": "1"},
    },
}


def test_waits_while_an_instance_is_not_running() -> None:
    client = FakeSageMaker([("gpu", "Running"), ("gpu", "DeepHealthCheckInProgress"), ("cpu", "Running")])
    assert _handler().is_complete(EVENT, None, client) == {"IsComplete": False}
    assert client.calls[1] == {
        "ClusterName": EVENT["ResourceProperties"]["ClusterArn"],
        "NextToken": "page-2",
    }


def test_completes_when_every_group_is_running() -> None:
    client = FakeSageMaker([("gpu", "Running"), ("gpu", "Running"), ("cpu", "Running")])
    assert _handler().is_complete(EVENT, None, client) == {"IsComplete": True}


def test_delete_completes_at_once_and_on_event_names_the_cluster() -> None:
    handler = _handler()
    assert handler.is_complete({**EVENT, "RequestType": "Delete"}, None, None) == {"IsComplete": True}
    assert handler.on_event(EVENT, None) == {"PhysicalResourceId": EVENT["ResourceProperties"]["ClusterArn"]}
