"""The NetworkPolicies the platform renders, and the rule pieces they share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pods_peer(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The pods with ``labels`` in ``namespace`` (by its name label), as one peer of a rule."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": dict(labels)},
    }


def pods_egress(namespace: str, labels: Mapping[str, str], port: int) -> dict[str, Any]:
    """An egress rule to the pods with ``labels`` in ``namespace``, on TCP ``port``."""
    return {"to": [pods_peer(namespace, labels)], "ports": [{"protocol": "TCP", "port": port}]}


def network_policy(
    namespace: str,
    name: str,
    pod_labels: Mapping[str, str],
    *,
    ingress: list[dict[str, Any]] | None = None,
    egress: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A policy isolating the selected pods in each direction it lists (an empty list denies that direction)."""
    spec: dict[str, Any] = {"podSelector": {"matchLabels": dict(pod_labels)}, "policyTypes": []}
    for kind, rules in (("Ingress", ingress), ("Egress", egress)):
        if rules is not None:
            spec["policyTypes"].append(kind)
            spec[kind.lower()] = rules
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
