"""A small evaluator of Kubernetes ``networking.k8s.io/v1`` NetworkPolicy semantics, for rendered policies.

Scope (what the tier's policies use): pod and namespace selectors (``matchLabels``, ``matchExpressions`` with
In, NotIn, Exists, DoesNotExist), ``ipBlock`` with ``except``, numeric TCP/UDP ports (with ``endPort``),
``policyTypes`` (and its default). Not modelled: named ports, SCTP, node-local traffic exemptions, and what an
implementation does with ``ipBlock`` for pod addresses (Kubernetes leaves it undefined).

Semantics (kubernetes.io/docs/concepts/services-networking/network-policies): a pod is isolated in a direction
when a policy of its namespace selects it with that type; traffic is allowed when the source's egress and the
destination's ingress (for a pod) both allow it; rules of all selecting policies add up.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    ip: str


@dataclass(frozen=True)
class Cluster:
    """Namespaces (name to labels; ``kubernetes.io/metadata.name`` is added) and the policies in force."""

    namespaces: Mapping[str, Mapping[str, str]]
    policies: Sequence[dict[str, Any]] = field(default_factory=list)

    def labels(self, namespace: str) -> dict[str, str]:
        return {**self.namespaces[namespace], "kubernetes.io/metadata.name": namespace}


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector; the empty selector selects everything."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        matched = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not matched:
            return False
    return True


def _types(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or (["Ingress"] + (["Egress"] if "egress" in spec else []))


def _peer_matches(cluster: Cluster, policy_namespace: str, peer: dict[str, Any], other: Pod | str) -> bool:
    if "ipBlock" in peer:
        ip = ipaddress.ip_address(other.ip if isinstance(other, Pod) else other)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except", [])
        )
    if not isinstance(other, Pod):
        return False  # selectors match pods only
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], cluster.labels(other.namespace)):
            return False
    elif other.namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector", {}), other.labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry:
            return True
        if not isinstance(entry["port"], int):
            raise NotImplementedError("named ports are outside this evaluator's scope")
        if entry["port"] <= port <= entry.get("endPort", entry["port"]):
            return True
    return False


def _allowed(cluster: Cluster, pod: Pod, direction: str, other: Pod | str, port: int, protocol: str) -> bool:
    selecting = [
        p
        for p in cluster.policies
        if p["metadata"]["namespace"] == pod.namespace
        and direction in _types(p)
        and selects(p["spec"]["podSelector"], pod.labels)
    ]
    if not selecting:
        return True  # not isolated in this direction
    rule_key, peer_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(rule_key, []):
            peers = rule.get(peer_key)
            peer_ok = not peers or any(
                _peer_matches(cluster, policy["metadata"]["namespace"], peer, other) for peer in peers
            )
            if peer_ok and _port_matches(rule.get("ports"), port, protocol):
                return True
    return False


def allows(cluster: Cluster, source: Pod, destination: Pod | str, port: int, protocol: str = "TCP") -> bool:
    """Whether ``source`` may open ``protocol``/``port`` to ``destination`` (a pod, or an IP outside pods)."""
    if not _allowed(cluster, source, "Egress", destination, port, protocol):
        return False
    if isinstance(destination, Pod):
        return _allowed(cluster, destination, "Ingress", source, port, protocol)
    return True
