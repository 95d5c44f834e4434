"""The Kubernetes RBAC the AMP managed scraper needs inside a cluster (AMP user guide, "Configuring your Amazon
EKS cluster" for managed collectors): AMP maps the scraper's access entry to the user ``aps-collector-user``,
which may only read what service discovery and scraping need: a subset of the guide's ClusterRole (no ingresses,
configmaps or control-plane metrics, which no scrape job reads; tests/observability/test_hub.py compares them)."""

from __future__ import annotations

from typing import Any

SCRAPER_USER = "aps-collector-user"
ROLE_NAME = "aps-collector-role"
_READ = ["describe", "get", "list", "watch"]


def scraper_rbac() -> list[dict[str, Any]]:
    """The ClusterRole and ClusterRoleBinding (plain manifests)."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE_NAME},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["nodes", "nodes/proxy", "nodes/metrics", "services", "endpoints", "pods"],
                    "verbs": _READ,
                },
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE_NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE_NAME},
            "subjects": [{"kind": "User", "name": SCRAPER_USER, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    ]
