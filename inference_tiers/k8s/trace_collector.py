"""The platform's trace collector, rendered as plain dicts: the AWS Distro for OpenTelemetry collector on the core
nodes, receiving the LiteLLM proxies' spans over OTLP and exporting them to AWS X-Ray.

The configuration is :func:`~inference_tiers.observability.collectors.trace_collector_config`, the trace
pipeline the gateway tier's ECS sidecar runs, listening on the pod's address instead of loopback. It is passed as
``AOT_CONFIG_CONTENT``, as the sidecar's is (aws-otel-collector v0.49.0 ``pkg/config/config_factory.go``). The
collector's AWS credentials come from EKS Pod Identity (its ServiceAccount's association, made by
``PlatformObservability``): the pods cannot reach the instance metadata service (IMDSv2, hop limit 1), so the
only resource detector is ``env``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inference_tiers.k8s.network_peers import network_policy, pods_peer
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS, GatewayEndpoint
from inference_tiers.observability.collectors import to_yaml, trace_collector_config

Manifest = dict[str, Any]

NAMESPACE = "otel"
NAME = "otel-collector"
SERVICE_ACCOUNT = NAME
LABELS: Mapping[str, str] = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "inference-tiers"}
OTLP_GRPC_PORT = 4317
OTLP_HTTP_PORT = 4318
# The health_check extension's port; bound to the pod's address so that kubelet's probes reach it.
HEALTH_PORT = 13133
REPLICAS = 2


@dataclass(frozen=True)
class TraceCollector:
    """Where in-cluster clients send spans (OTLP/HTTP), and how the collector's pods are selected."""

    namespace: str = NAMESPACE
    service: str = NAME
    port: int = OTLP_HTTP_PORT

    @property
    def endpoint(self) -> str:
        """``http://<service>.<namespace>.svc.cluster.local:<port>``: LiteLLM appends ``/v1/traces``."""
        return f"http://{self.service}.{self.namespace}.svc.cluster.local:{self.port}"

    @property
    def pod_labels(self) -> dict[str, str]:
        """The collector pods' labels (NetworkPolicy peers)."""
        return dict(LABELS)


def collector_config(region: str) -> dict[str, Any]:
    """The collector's configuration: OTLP on every address of the pod, X-Ray in ``region``."""
    config = trace_collector_config(
        region, grpc=f"0.0.0.0:{OTLP_GRPC_PORT}", http=f"0.0.0.0:{OTLP_HTTP_PORT}"
    )
    config["extensions"]["health_check"] = {"endpoint": f"0.0.0.0:{HEALTH_PORT}"}
    return config


def collector_objects(region: str, *, image: str, clients: GatewayEndpoint) -> list[Manifest]:
    """The namespace, ServiceAccount, Deployment (two replicas on the core nodes), Service and a NetworkPolicy
    admitting only ``clients``' pods (the LiteLLM proxies) to the OTLP ports. ``region`` may be a token."""
    meta = {"namespace": NAMESPACE, "labels": dict(LABELS)}
    probe = {"httpGet": {"path": "/", "port": HEALTH_PORT}, "periodSeconds": 10, "timeoutSeconds": 5}
    container = {
        "name": "collector",
        "image": image,
        "env": [{"name": "AOT_CONFIG_CONTENT", "value": to_yaml(collector_config(region))}],
        "ports": [
            {"name": "otlp-grpc", "containerPort": OTLP_GRPC_PORT, "protocol": "TCP"},
            {"name": "otlp-http", "containerPort": OTLP_HTTP_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        # No read-only root or dropped capabilities until the collector's writes and binds are recorded from its
        # source (tests/data/hardened_containers.yaml), as the gateway tier's ADOT sidecar.
        "securityContext": {"allowPrivilegeEscalation": False, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": dict(LABELS)}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, **meta}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME, **meta},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": dict(LABELS)},
                "template": {
                    "metadata": {"labels": dict(LABELS)},
                    "spec": {
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "nodeSelector": dict(CORE_NODE_LABELS),
                        "topologySpreadConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                                "labelSelector": {"matchLabels": dict(LABELS)},
                            }
                        ],
                        "containers": [container],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, **meta},
            "spec": {
                "selector": dict(LABELS),
                "ports": [
                    {
                        "name": "otlp-grpc",
                        "port": OTLP_GRPC_PORT,
                        "targetPort": "otlp-grpc",
                        "protocol": "TCP",
                    },
                    {
                        "name": "otlp-http",
                        "port": OTLP_HTTP_PORT,
                        "targetPort": "otlp-http",
                        "protocol": "TCP",
                    },
                ],
            },
        },
        network_policy(
            NAMESPACE,
            NAME,
            LABELS,
            ingress=[
                {
                    "from": [pods_peer(clients.namespace, clients.pod_labels)],
                    "ports": [
                        {"protocol": "TCP", "port": OTLP_GRPC_PORT},
                        {"protocol": "TCP", "port": OTLP_HTTP_PORT},
                    ],
                }
            ],
        ),
    ]
