"""A LiteLLM model key per platform tenant, rendered as plain dicts (no constructs, testable alone).

Per tenant (a :class:`~inference_tiers.k8s.sandbox_tenancy.TenantSpec`) a LiteLLM **team** carries the tenant's
models, budget and rate limits, and one **virtual key** of that team (alias ``<namespace>/sandboxes``) is written
as Secret ``litellm-key`` (field ``api-key``) in the tenant's namespace, from where the SandboxTemplate passes it
to every sandbox as ``OPENAI_API_KEY``.

The provisioner is a Job in the gateway's namespace: the master key reaches it by secretKeyRef and never leaves
that namespace. Its ServiceAccount may only get/update/patch the one Secret (created empty by these manifests, as
RBAC cannot restrict ``create`` to a name) in each tenant namespace. Its Job name carries a hash of the spec, so a
changed tenant setting runs it again; a re-run keeps working keys. Bump a tenant's ``key_rotation`` to replace its
key (the old one is deleted at once). A removed tenant's team is blocked, which stops its key; spend history stays.

The NetworkPolicy of the gateway's pods (``PlatformGateway`` applies it): ingress only from tenant namespaces and
the VPC (the ALB) on the proxy port and from the VPC (the metrics scraper) on the metrics port; egress only to DNS,
the VPC (Aurora 5432, Valkey 6379, VPC endpoints 443) and the EKS Pod Identity agent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from inference_tiers import ASSETS_DIR
from inference_tiers.config import ConfigError
from inference_tiers.k8s.network_peers import network_policy, pods_egress
from inference_tiers.k8s.platform_names import (
    CORE_NODE_LABELS,
    TENANT_KEY_FIELD,
    TENANT_KEY_SECRET,
    GatewayEndpoint,
)
from inference_tiers.k8s.sandbox_tenancy import (
    POD_IDENTITY_AGENT,
    TENANT_LABEL,
    TenantSpec,
    dns_egress_rule,
    gateway_pods_egress,
)
from inference_tiers.k8s.trace_collector import TraceCollector
from inference_tiers.validation import Args, ArgumentError

Manifest = dict[str, Any]

PROVISIONER_SCRIPT = ASSETS_DIR / "platform" / "provision_keys.py"
PROVISIONER_NAME = "tenant-keys"
# Every Job that calls LiteLLM's management API with the master key carries this label: the proxy admits them.
ADMIN_LABELS = {"inference-tiers/litellm-admin": "true"}
PROVISIONER_LABELS = {"app.kubernetes.io/name": PROVISIONER_NAME, **ADMIN_LABELS}
MODEL_REGISTRATION_NAME = "litellm-models"
MANAGED_BY = "inference-tiers"
KEY_ALIAS_SUFFIX = "/sandboxes"
SPEC_DIR = "/provisioner"
# The Job's whole run (the script waits up to 8 min for the gateway) ends well inside the 15 min of CDK's
# kubectl handler.
JOB_DEADLINE_SECONDS = 600
READY_DEADLINE_SECONDS = 480
MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}"
# LiteLLM's duration_in_seconds (litellm/litellm_core_utils/duration_parser.py): <n>s|m|h|d|w|mo.
BUDGET_DURATION_PATTERN = r"[1-9][0-9]{0,3}(s|m|h|d|w|mo)"


@dataclass(frozen=True)
class TenantModelAccess:
    """What a tenant's sandboxes may do through the gateway (a LiteLLM team's settings).

    :param models: the model names (LiteLLM ``model_name``) the tenant may call; all others are refused.
    :param max_budget_usd: spend limit in USD per ``budget_duration``; None: no budget.
    :param budget_duration: when the budget resets, LiteLLM's ``<n>s|m|h|d|w|mo``. Default: ``30d``.
    :param rpm_limit: requests per minute across the tenant; None: unlimited.
    :param tpm_limit: tokens per minute across the tenant; None: unlimited.
    :param max_parallel_requests: requests in flight at once with the tenant's key; None: unlimited.
    :param key_rotation: raise it to replace the tenant's key (the previous key stops working). Default: 0.
    :param owner: what errors name as the owner of a bad value (a construct, or the context key it was read
        from). Default: ``TenantModelAccess``.
    """

    models: Sequence[str]
    max_budget_usd: float | None = None
    budget_duration: str = "30d"
    rpm_limit: int | None = None
    tpm_limit: int | None = None
    max_parallel_requests: int | None = None
    key_rotation: int = 0
    owner: str = "TenantModelAccess"
    """What errors name as the owner of a bad value."""

    def __post_init__(self) -> None:
        args = Args(self.owner)
        models = args.sequence(
            "models",
            self.models,
            lambda n, v: args.text(
                n, v, pattern=MODEL_NAME_PATTERN, description="a LiteLLM model name", allow_token=False
            ),
            min_items=1,
            max_items=64,
            unique=True,
        )
        object.__setattr__(self, "models", models)
        if self.max_budget_usd is not None:
            args.number("max_budget_usd", self.max_budget_usd, minimum=0, exclusive_minimum=True)
        args.text(
            "budget_duration",
            self.budget_duration,
            pattern=BUDGET_DURATION_PATTERN,
            description="a LiteLLM duration such as 1h, 7d, 30d or 1mo",
            allow_token=False,
        )
        for name in ("rpm_limit", "tpm_limit", "max_parallel_requests"):
            if getattr(self, name) is not None:
                args.integer(name, getattr(self, name), minimum=1, maximum=100_000_000)
        args.integer("key_rotation", self.key_rotation, minimum=0, maximum=1_000_000)


_CONTEXT_FIELDS = tuple(f.name for f in fields(TenantModelAccess) if f.name != "owner")


def parse_model_access(key: str, raw: Any) -> TenantModelAccess:
    """The context object at ``key`` (``{"models": [...], "max_budget_usd": 50, ...}``) as a TenantModelAccess;
    a bad or unknown entry raises ``ConfigError`` naming ``<key>.<entry>``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigError(key, raw, "a JSON object") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(key, raw, f"a JSON object with entries {', '.join(_CONTEXT_FIELDS)}")
    for name in raw:
        if name not in _CONTEXT_FIELDS:
            raise ConfigError(f"{key}.{name}", raw[name], f"an entry among {', '.join(_CONTEXT_FIELDS)}")
    try:
        return TenantModelAccess(**raw, owner=key)
    except ArgumentError as error:
        raise ConfigError(f"{key}.{error.param}", error.value, error.accepted) from None
    except TypeError:
        raise ConfigError(f"{key}.models", None, "a list of at least 1 model name (required)") from None


def team_id(tenant: TenantSpec) -> str:
    """The LiteLLM team of a tenant: its namespace (unique in the cluster, stable across deploys)."""
    return tenant.namespace


def key_alias(tenant: TenantSpec) -> str:
    """The alias of the tenant's key, ``<namespace>/sandboxes`` (LiteLLM requires aliases to be unique)."""
    return tenant.namespace + KEY_ALIAS_SUFFIX


def team_body(tenant: TenantSpec, access: TenantModelAccess) -> dict[str, Any]:
    """The ``/team/new`` and ``/team/update`` body: models, budget and limits; None clears a limit."""
    return {
        "team_id": team_id(tenant),
        "team_alias": tenant.namespace,
        "models": list(access.models),
        "max_budget": access.max_budget_usd,
        "budget_duration": access.budget_duration if access.max_budget_usd is not None else None,
        "tpm_limit": access.tpm_limit,
        "rpm_limit": access.rpm_limit,
        "metadata": {"namespace": tenant.namespace, "managed_by": MANAGED_BY},
    }


def key_body(tenant: TenantSpec, access: TenantModelAccess) -> dict[str, Any]:
    """The ``/key/generate`` (and, with ``key``, ``/key/update``) body: the team's key for the tenant's sandboxes,
    limited to the team's models; the budget and rate limits are the team's (LiteLLM enforces both)."""
    return {
        "team_id": team_id(tenant),
        "key_alias": key_alias(tenant),
        "models": list(access.models),
        "max_parallel_requests": access.max_parallel_requests,
        "metadata": {"namespace": tenant.namespace, "managed_by": MANAGED_BY},
    }


def provisioner_spec(tenants: Sequence[tuple[TenantSpec, TenantModelAccess]]) -> dict[str, Any]:
    """The JSON the provisioner reads: every request body it sends, rendered here (and tested) at synth time."""
    return {
        "secret": TENANT_KEY_SECRET,
        "field": TENANT_KEY_FIELD,
        "managed_by": MANAGED_BY,
        "tenants": [
            {
                "namespace": tenant.namespace,
                "generation": access.key_rotation,
                "team": team_body(tenant, access),
                "key": key_body(tenant, access),
            }
            for tenant, access in tenants
        ],
    }


def tenant_key_objects(tenant: TenantSpec, gateway: GatewayEndpoint) -> list[Manifest]:
    """In the tenant's namespace: the empty key Secret, and a Role that lets the provisioner get and write it."""
    meta = {"namespace": tenant.namespace, "labels": {TENANT_LABEL: tenant.name}}
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": TENANT_KEY_SECRET, **meta},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": PROVISIONER_NAME, **meta},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": [TENANT_KEY_SECRET],
                    "verbs": ["get", "update", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": PROVISIONER_NAME, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROVISIONER_NAME},
            "subjects": [
                {"kind": "ServiceAccount", "name": PROVISIONER_NAME, "namespace": gateway.namespace}
            ],
        },
    ]


def provisioner_objects(
    gateway: GatewayEndpoint,
    tenants: Sequence[tuple[TenantSpec, TenantModelAccess]],
    *,
    image: str,
    vpc_cidr: str,
) -> list[Manifest]:
    """In the gateway's namespace: the ServiceAccount, the ConfigMap (script + spec), the Job and its egress
    (the gateway, and the Kubernetes API, where it writes each tenant's key)."""
    meta = {"namespace": gateway.namespace, "labels": dict(PROVISIONER_LABELS)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": PROVISIONER_NAME, **meta}},
        *_admin_job(gateway, PROVISIONER_NAME, provisioner_spec(tenants), image=image, service_account=True),
        network_policy(
            gateway.namespace,
            f"{PROVISIONER_NAME}-egress",
            PROVISIONER_LABELS,
            egress=[
                dns_egress_rule(),
                gateway_pods_egress(gateway),
                # The EKS API server's private endpoint ENIs are in the cluster's VPC subnets.
                _to_cidr(vpc_cidr, 443),
            ],
        ),
    ]


def model_registration_objects(
    gateway: GatewayEndpoint, models: Sequence[Mapping[str, Any]], *, image: str
) -> list[Manifest]:
    """In the gateway's namespace: a Job that adds (or updates) ``models`` through LiteLLM's ``/model/new``
    (bodies of LiteLLM's ``Deployment``, each with a ``model_info.id``), with no Kubernetes API access; the proxy
    must store models in its database (``store_model_in_db``) so that every replica serves them."""
    labels = {"app.kubernetes.io/name": MODEL_REGISTRATION_NAME, **ADMIN_LABELS}
    spec = {"models": [dict(model) for model in models]}
    return [
        *_admin_job(gateway, MODEL_REGISTRATION_NAME, spec, image=image, service_account=False),
        network_policy(
            gateway.namespace,
            f"{MODEL_REGISTRATION_NAME}-egress",
            labels,
            egress=[dns_egress_rule(), gateway_pods_egress(gateway)],
        ),
    ]


def _admin_job(
    gateway: GatewayEndpoint, job: str, spec: Mapping[str, Any], *, image: str, service_account: bool
) -> list[Manifest]:
    """The ConfigMap (script + spec) and the Job that runs the script with the master key (by reference). Its
    name hashes spec, script and image: a change runs it again, the same spec does not."""
    spec_text = json.dumps(spec, sort_keys=True, indent=1)
    script = PROVISIONER_SCRIPT.read_text()
    digest = hashlib.sha256((spec_text + script + image).encode()).hexdigest()[:10]
    name = f"{job}-{digest}"
    labels = {"app.kubernetes.io/name": job, **ADMIN_LABELS}
    meta = {"namespace": gateway.namespace, "labels": labels}
    container = {
        "name": "provision",
        "image": image,
        "command": ["python3", f"{SPEC_DIR}/provision_keys.py"],
        "env": [
            {"name": "SPEC_FILE", "value": f"{SPEC_DIR}/spec.json"},
            {"name": "LITELLM_URL", "value": gateway.base_url},
            {"name": "READY_DEADLINE_SECONDS", "value": str(READY_DEADLINE_SECONDS)},
            {
                "name": "LITELLM_MASTER_KEY",
                "valueFrom": {
                    "secretKeyRef": {"name": gateway.master_key_secret, "key": gateway.master_key_field}
                },
            },
        ],
        "volumeMounts": [{"name": "spec", "mountPath": SPEC_DIR, "readOnly": True}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    identity: dict[str, Any] = (
        {"serviceAccountName": job} if service_account else {"automountServiceAccountToken": False}
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, **meta},
            "data": {"provision_keys.py": script, "spec.json": spec_text},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, **meta},
            "spec": {
                "backoffLimit": 2,
                "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        **identity,
                        "restartPolicy": "Never",
                        "nodeSelector": dict(CORE_NODE_LABELS),
                        "containers": [container],
                        "volumes": [{"name": "spec", "configMap": {"name": name}}],
                    },
                },
            },
        },
    ]


def _to_cidr(cidr: str, port: int) -> dict[str, Any]:
    return {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}


def gateway_network_policies(
    gateway: GatewayEndpoint,
    *,
    vpc_cidr: str,
    alb_cidrs: Sequence[str],
    scraper_cidrs: Sequence[str],
    trace_collector: TraceCollector | None = None,
) -> list[Manifest]:
    """The proxy pods' NetworkPolicy: who may call them and what they may call (trap 8: the Pod Identity agent).

    ``alb_cidrs`` (the load balancer's subnets) reach the proxy port, ``scraper_cidrs`` (the metrics scraper's
    subnets) the metrics port. With the VPC CNI, pods take addresses in the same subnets: what keeps a tenant
    off the metrics port is also its own egress policy, which allows only the proxy port.
    """

    def from_cidrs(cidrs: Sequence[str], port: int) -> dict[str, Any]:
        return {
            "from": [{"ipBlock": {"cidr": c}} for c in cidrs],
            "ports": [{"protocol": "TCP", "port": port}],
        }

    proxy_port = [{"protocol": "TCP", "port": gateway.port}]
    return [
        network_policy(
            gateway.namespace,
            "litellm-proxy",
            gateway.pod_labels,
            ingress=[
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]
                            }
                        },
                        {"podSelector": {"matchLabels": dict(ADMIN_LABELS)}},
                    ],
                    "ports": proxy_port,
                },
                from_cidrs(alb_cidrs, gateway.port),
                from_cidrs(scraper_cidrs, gateway.metrics_port),
            ],
            egress=[
                dns_egress_rule(),
                # Aurora, Valkey and the VPC endpoints (Bedrock runtime, STS, EKS auth, logs) are in the VPC.
                {
                    "to": [{"ipBlock": {"cidr": vpc_cidr}}],
                    "ports": [{"protocol": "TCP", "port": port} for port in (5432, 6379, 443)],
                },
                _to_cidr(POD_IDENTITY_AGENT, 80),
                *(
                    [pods_egress(trace_collector.namespace, trace_collector.pod_labels, trace_collector.port)]
                    if trace_collector
                    else []
                ),
            ],
        )
    ]
