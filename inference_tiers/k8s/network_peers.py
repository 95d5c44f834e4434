"""NetworkPolicy rule pieces the platform's policies share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pods_egress(namespace: str, labels: Mapping[str, str], port: int) -> dict[str, Any]:
    """An egress rule to the pods with ``labels`` in ``namespace``, on TCP ``port``."""
    return {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "podSelector": {"matchLabels": dict(labels)},
            }
        ],
        "ports": [{"protocol": "TCP", "port": port}],
    }
