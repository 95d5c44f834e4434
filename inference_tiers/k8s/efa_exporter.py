"""The EFA exporter's Kubernetes objects (plain dicts): a ConfigMap with the exporter script and a DaemonSet that
runs it on every EFA GPU node, where the AMP scraper's annotated-pods job finds it.

No public image of an EFA exporter exists (the aws-samples one is a node_exporter fork without a published
image), so the exporter is this project's own standard-library script (``assets/efa_exporter/efa_exporter.py``),
mounted into a pinned python slim image. The pod reads ``/sys/class/infiniband`` through a read-only hostPath at
the same path: its device entries are relative symlinks into ``/sys/devices``, which resolve only where the
container's own (read-only) sysfs sits beside them. It runs as ``nobody`` with a read-only root file system, no
capabilities, no service-account token and no host network: the counter files are world-readable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inference_tiers import ASSETS_DIR
from inference_tiers.k8s.allocatable import Resources
from inference_tiers.k8s.disaggregated import (
    COMPONENT_LABEL,
    DEFAULT_GPU_NODE_LABELS,
    GPU_TAINT_KEY,
    image_reference,
    is_label_map,
)
from inference_tiers.observability.collectors import EFA_EXPORTER
from inference_tiers.validation import Args

Manifest = dict[str, Any]

SCRIPT = ASSETS_DIR / "efa_exporter" / "efa_exporter.py"
# The same python image the agent-sandbox tier pins (Docker's official image through its ECR Public mirror, which
# needs no Docker Hub login and has no anonymous pull limit from AWS). Pinned by tag, not digest: no registry can
# be reached from where this project is built to read the digest; the preflight command checks the tag exists.
EFA_EXPORTER_IMAGE = "public.ecr.aws/docker/library/python:3.13.1-slim-bookworm"
# Not 9100 or 9400: the scraper's node-exporter and dcgm-exporter jobs keep those ports on any pod.
EFA_EXPORTER_PORT = 9110
SYSFS_INFINIBAND = "/sys/class/infiniband"
SCRIPT_DIR = "/opt/efa-exporter"
NOBODY = 65534
# A Python http.server that reads ~35 files per device on each scrape: 32 devices stay well under these.
REQUESTS = Resources(cpu_millicores=10, memory_mib=32)
LIMITS = Resources(cpu_millicores=100, memory_mib=64)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"


def _quantities(resources: Resources) -> dict[str, str]:
    return {"cpu": f"{resources.cpu_millicores}m", "memory": f"{resources.memory_mib}Mi"}


@dataclass(frozen=True)
class EfaExporterSpec:
    """Where and with what the exporter runs; checked on creation (an ``ArgumentError`` names ``owner``)."""

    image: str = EFA_EXPORTER_IMAGE
    """A python 3.11+ image with a pinned tag or digest (the script needs nothing but the standard library)."""
    node_labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GPU_NODE_LABELS))
    """The labels of the EFA GPU nodes (``EfaNodeGroup``'s ``inference-tiers/node-pool: gpu-efa``)."""
    namespace: str = "kube-system"
    """The namespace of the ConfigMap and the DaemonSet (hostPath volumes need one without a restricted or
    baseline Pod Security level; kube-system has none)."""
    owner: str = "EfaExporterSpec"

    def __post_init__(self) -> None:
        args = Args(self.owner)
        image_reference(args, "image", self.image)
        if not is_label_map(self.node_labels) or not self.node_labels:
            raise args.error(
                "node_labels",
                self.node_labels,
                "a non-empty mapping of Kubernetes label keys to label values",
            )
        args.text(
            "namespace",
            self.namespace,
            pattern=_DNS_LABEL,
            allow_token=False,
            description="a Kubernetes namespace name (DNS label, 1-63 characters)",
        )


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": EFA_EXPORTER, COMPONENT_LABEL: EFA_EXPORTER}


def config_map(spec: EfaExporterSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": EFA_EXPORTER, "namespace": spec.namespace, "labels": _labels()},
        "data": {SCRIPT.name: SCRIPT.read_text()},
    }


def _container(spec: EfaExporterSpec) -> dict[str, Any]:
    return {
        "name": EFA_EXPORTER,
        "image": spec.image,
        "command": ["python3", f"{SCRIPT_DIR}/{SCRIPT.name}"],
        "args": ["--sysfs", SYSFS_INFINIBAND, "--port", str(EFA_EXPORTER_PORT)],
        "ports": [{"name": "metrics", "containerPort": EFA_EXPORTER_PORT, "protocol": "TCP"}],
        "resources": {"requests": _quantities(REQUESTS), "limits": _quantities(LIMITS)},
        "livenessProbe": {
            "httpGet": {"path": "/metrics", "port": "metrics"},
            "periodSeconds": 30,
            "timeoutSeconds": 5,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
            {"name": "infiniband", "mountPath": SYSFS_INFINIBAND, "readOnly": True},
        ],
    }


def daemon_set(spec: EfaExporterSpec) -> Manifest:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": EFA_EXPORTER, "namespace": spec.namespace, "labels": _labels()},
        "spec": {
            "selector": {"matchLabels": _labels()},
            "template": {
                "metadata": {
                    "labels": _labels(),
                    # What the AMP scraper's annotated-pods job keeps (collectors.eks_scrape_config).
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(EFA_EXPORTER_PORT),
                        "prometheus.io/path": "/metrics",
                        # A new script rolls the pods (a ConfigMap change alone restarts nothing).
                        "inference-tiers/script-sha256": hashlib.sha256(SCRIPT.read_bytes()).hexdigest(),
                    },
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "nodeSelector": dict(spec.node_labels),
                    "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": NOBODY,
                        "runAsGroup": NOBODY,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [_container(spec)],
                    "volumes": [
                        {"name": "script", "configMap": {"name": EFA_EXPORTER, "defaultMode": 0o444}},
                        {
                            "name": "infiniband",
                            "hostPath": {"path": SYSFS_INFINIBAND, "type": "Directory"},
                        },
                    ],
                },
            },
        },
    }


def render(spec: EfaExporterSpec) -> list[Manifest]:
    """The ConfigMap first: the DaemonSet's pods mount it."""
    return [config_map(spec), daemon_set(spec)]
