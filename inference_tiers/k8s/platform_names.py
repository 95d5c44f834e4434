"""Names the ``platform`` tier's parts agree on: where the gateway runs, how tenants reach it, where core pods go.

One place, so that the gateway chart, the tenants' NetworkPolicies and key Secrets, and the metrics scraper name
the same namespace, Service, port and labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

# Core nodes (the managed node group): LiteLLM, Grafana and every controller select them; Karpenter never
# provisions them (it manages only the Kata and GPU pools).
CORE_NODE_LABELS = MappingProxyType({"node-role": "core"})
"""The labels of the core managed node group; core pods select them."""

GATEWAY_NAMESPACE = "litellm"
"""The gateway's namespace: the master key never leaves it."""
# A tenant's virtual key lives in this Secret of the tenant's namespace (key ``api-key``).
TENANT_KEY_SECRET = "litellm-key"
"""The Secret, in each tenant namespace, that holds the tenant's virtual key."""
TENANT_KEY_FIELD = "api-key"
"""The key of the virtual key in that Secret."""


@dataclass(frozen=True)
class GatewayEndpoint:
    """How pods in the cluster reach the platform's LiteLLM gateway, and how its pods are selected.

    :param namespace: the gateway's namespace.
    :param service: the ClusterIP Service in front of the proxy (LLM traffic).
    :param port: that Service's (and container's) port.
    :param pod_labels: labels that select the proxy pods (NetworkPolicy peers).
    :param metrics_service: the Service serving unauthenticated ``/metrics``.
    :param metrics_port: its port.
    :param master_key_secret: the Kubernetes Secret (in ``namespace``) holding the master key.
    :param master_key_field: the key of the master key in that Secret.
    """

    namespace: str
    service: str
    port: int
    pod_labels: MappingProxyType[str, str]
    metrics_service: str
    metrics_port: int
    master_key_secret: str
    master_key_field: str

    @property
    def base_url(self) -> str:
        """The in-cluster URL of the proxy, ``http://<service>.<namespace>.svc.cluster.local:<port>``."""
        return f"http://{self.service}.{self.namespace}.svc.cluster.local:{self.port}"
