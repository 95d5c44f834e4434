"""What the tenant-key tests share: a gateway endpoint as the platform's chart names it, a tenancy and tenants."""

from __future__ import annotations

from types import MappingProxyType

from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.k8s.sandbox_tenancy import TenancySpec, TenantSpec
from inference_tiers.k8s.tenant_keys import TenantModelAccess

GATEWAY = GatewayEndpoint(
    namespace="litellm",
    service="litellm-gateway",
    port=4000,
    pod_labels=MappingProxyType(
        {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/component": "gateway"}
    ),
    metrics_service="litellm-gateway-metrics",
    metrics_port=4001,
    master_key_secret="litellm-masterkey",
    master_key_field="masterkey",
)
TENANCY = TenancySpec(
    runtime_class_name="kata-qemu-runtime-rs",
    overhead_cpu_millicores=250,
    overhead_memory_mib=320,
    platform_gateway=GATEWAY,
)
TEAM_A = TenantSpec(name="team-a")
TEAM_B = TenantSpec(name="team-b")
ACCESS = TenantModelAccess(
    models=("nova-lite", "claude-haiku"),
    max_budget_usd=50.0,
    budget_duration="30d",
    rpm_limit=60,
    tpm_limit=100_000,
)
TENANTS = ((TEAM_A, ACCESS), (TEAM_B, TenantModelAccess(models=("nova-lite",), max_parallel_requests=4)))
