"""Per-tenant sandbox objects of the agent-sandbox tier, rendered as plain dicts (no constructs, testable alone).

Each tenant gets a namespace ``sandbox-<tenant>`` with:

- Pod Security ``restricted`` enforced (and audited, warned) at the cluster's version: the API server itself
  refuses privileged pods, privilege escalation, root, host namespaces and missing seccomp there.
- A ResourceQuota (sandbox count, CPU and memory including the Kata pod overhead, no load balancers, node ports
  or volume claims) and a LimitRange (every container gets, and may not exceed, the sandbox size).
- NetworkPolicies: default deny in both directions, then DNS to CoreDNS only, the model gateway, the tenant's
  allow-list, the EKS Pod Identity agent, and ingress only from namespaces labelled as this tenant's clients.
  The instance metadata service is never reachable (allow-list entries that cover it are refused).
- A service account without an API token and the agent-sandbox ``SandboxTemplate`` (Kata runtime class,
  requests = limits, read-only root, non-root, seccomp RuntimeDefault, all capabilities dropped, no service
  links, ``karpenter.sh/do-not-disrupt``) and a ``SandboxWarmPool`` that claims reference (v1beta1 claims name a
  pool, never a template); a pool of 0 replicas means every claim cold-starts.

A cluster-wide ValidatingAdmissionPolicy refuses any pod in a tenant namespace that does not use the Kata
runtime class, mounts a service-account token or allows privilege escalation, and any SandboxClaim there
without a shutdown time or with ``shutdownPolicy: Retain``: sandboxes are destroyed after use.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from inference_tiers.config import PINNED_IMAGE_DESCRIPTION, PINNED_IMAGE_PATTERN
from inference_tiers.k8s.platform_names import TENANT_KEY_FIELD, TENANT_KEY_SECRET, GatewayEndpoint
from inference_tiers.validation import Args

Manifest = dict[str, Any]

AGENT_SANDBOX_VERSION = "v0.5.6"
AGENT_SANDBOX_COMMIT = "211b7579cabed9460c1a692eb687084ff4c5879d"
AGENT_SANDBOX_IMAGE = "registry.k8s.io/agent-sandbox/agent-sandbox-controller"
AGENT_SANDBOX_NAMESPACE = "agent-sandbox-system"
SANDBOX_API = "extensions.agents.x-k8s.io/v1beta1"

KUBERNETES_MINOR = "v1.35"
TENANT_LABEL = "inference-tiers/sandbox-tenant"
CLIENT_LABEL = "inference-tiers/sandbox-client"
SANDBOX_SERVICE_ACCOUNT = "sandbox"
TEMPLATE_NAME = "sandbox"
WARM_POOL_NAME = "sandbox"
SANDBOX_UID = 65532  # the conventional "nonroot" user of distroless images; any image runs as it
# EKS Pod Identity agent (link-local, on every node) and the instance metadata service, which stays blocked.
POD_IDENTITY_AGENT = "169.254.170.23/32"
METADATA_ADDRESSES = (ipaddress.IPv4Address("169.254.169.254"), ipaddress.IPv4Address("169.254.170.2"))
DEFAULT_SANDBOX_IMAGE = "public.ecr.aws/docker/library/python:3.13.1-slim-bookworm"
DEFAULT_SANDBOX_COMMAND: tuple[str, ...] = ("sleep", "infinity")

TENANT_NAME_PATTERN = r"[a-z]([-a-z0-9]{0,28}[a-z0-9])?"
_EGRESS = re.compile(r"(?P<cidr>[0-9.]+/[0-9]{1,2}):(?P<port>[0-9]{1,5})")


def parse_egress(args: Args, param: str, value: Any) -> tuple[str, int]:
    """``CIDR:port`` (``10.1.0.0/16:443``) that does not cover the instance metadata service."""
    accepted = "CIDR:port such as 10.20.0.0/16:443 (a port from 1 to 65535, no link-local metadata address)"
    text = args.text(param, value, max_length=24, description=accepted, allow_token=False)
    match = _EGRESS.fullmatch(text)
    try:
        network = ipaddress.IPv4Network(match["cidr"]) if match else None
    except ValueError:
        network = None
    if match is None or network is None or not 1 <= int(match["port"]) <= 65535:
        raise args.error(param, value, accepted)
    if any(address in network for address in METADATA_ADDRESSES):
        raise args.error(
            param,
            value,
            "a block that does not contain the instance metadata service (169.254.169.254) or the ECS/EKS "
            "credential endpoints: sandboxes must never reach node credentials",
        )
    return str(network), int(match["port"])


@dataclass(frozen=True)
class TenancySpec:
    """What every tenant shares: the runtime class, the model gateway, the sandbox image.

    :param runtime_class_name: the Kata RuntimeClass sandbox pods use.
    :param overhead_cpu_millicores: the RuntimeClass's pod overhead (counted in quotas).
    :param overhead_memory_mib: the same, memory.
    :param model_gateway_url: ``https://host[:port]`` every sandbox may call (``MODEL_GATEWAY_URL``), or None.
    :param model_gateway_cidrs: the CIDRs that host resolves to (NetworkPolicy matches addresses, not names).
    :param platform_gateway: the in-cluster LiteLLM of the ``platform`` tier, instead of ``model_gateway_url``:
        sandboxes get ``OPENAI_BASE_URL`` and their tenant's key as ``OPENAI_API_KEY``, may reach only its
        proxy pods (and DNS), and have no AWS identity (no route to the Pod Identity agent).
    :param image: default sandbox image (pinned tag or digest).
    :param command: the container command; empty: the image's entrypoint.
    :param owner: the name an ``ArgumentError`` gives for these settings (default ``TenancySpec``).
    """

    runtime_class_name: str
    overhead_cpu_millicores: int
    overhead_memory_mib: int
    model_gateway_url: str | None = None
    model_gateway_cidrs: Sequence[str] = ()
    image: str = DEFAULT_SANDBOX_IMAGE
    command: Sequence[str] = DEFAULT_SANDBOX_COMMAND
    platform_gateway: GatewayEndpoint | None = None
    owner: str = "TenancySpec"
    gateway_port: int | None = field(init=False)
    """The port of ``model_gateway_url`` (its scheme's default when it names none); None without a gateway."""

    def __post_init__(self) -> None:
        args = Args(self.owner)
        args.text(
            "runtime_class_name", self.runtime_class_name, pattern=r"kata-[a-z0-9-]+", allow_token=False
        )
        args.integer("overhead_cpu_millicores", self.overhead_cpu_millicores, minimum=0, maximum=8000)
        args.integer("overhead_memory_mib", self.overhead_memory_mib, minimum=0, maximum=65536)
        args.text("image", self.image, pattern=PINNED_IMAGE_PATTERN, description=PINNED_IMAGE_DESCRIPTION)
        args.sequence(
            "command",
            self.command,
            lambda n, v: args.text(n, v, max_length=1024, allow_token=False),
            max_items=32,
        )
        port = None
        if self.model_gateway_url is not None:
            port = _gateway_port(args, self.model_gateway_url)
            args.sequence(
                "model_gateway_cidrs",
                self.model_gateway_cidrs,
                lambda n, v: parse_egress(args, n, f"{v}:{port}")[0],
                min_items=1,
                max_items=16,
            )
            if self.platform_gateway is not None:
                raise args.error(
                    "platform_gateway",
                    self.platform_gateway,
                    "None when model_gateway_url is set (one gateway)",
                )
        elif self.model_gateway_cidrs:
            raise args.error(
                "model_gateway_cidrs", list(self.model_gateway_cidrs), "empty without model_gateway_url"
            )
        object.__setattr__(self, "gateway_port", port)


def _gateway_port(args: Args, url: str) -> int:
    accepted = (
        "an http(s) URL without path, such as https://gateway.internal.example.com or http://10.0.1.5:4000"
    )
    args.text("model_gateway_url", url, max_length=512, description=accepted, allow_token=False)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise args.error("model_gateway_url", url, accepted) from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
    ):
        raise args.error("model_gateway_url", url, accepted)
    return port or (443 if parts.scheme == "https" else 80)


@dataclass(frozen=True)
class TenantSpec:
    """One tenant: its namespace, quota, sandbox size, warm pool and egress allow-list.

    :param name: tenant name (DNS label, at most 30 characters); the namespace is ``sandbox-<name>``.
    :param max_sandboxes: sandboxes (pods) at once, warm ones included. Default: 10.
    :param cpu_millicores: CPU of one sandbox (requests = limits: Kata sizes the micro-VM from limits).
    :param memory_mib: memory of one sandbox.
    :param scratch_mib: writable scratch space (``/tmp``, ``/workspace``, ``$HOME``), an emptyDir each.
    :param warm_pool: sandboxes kept started and unclaimed, ready for a claim. Default: 0 (cold starts).
    :param egress: extra destinations, ``CIDR:port`` each.
    :param image: this tenant's sandbox image; None: the tier's.
    """

    name: str
    max_sandboxes: int = 10
    cpu_millicores: int = 1000
    memory_mib: int = 2048
    scratch_mib: int = 4096
    warm_pool: int = 0
    egress: Sequence[str] = ()
    image: str | None = None
    owner: str = "TenantSpec"
    egress_rules: tuple[tuple[str, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        args = Args(self.owner)
        args.text(
            "name",
            self.name,
            pattern=TENANT_NAME_PATTERN,
            description="a DNS label of at most 30 characters (lower-case letters, digits, '-'), such as team-a",
            allow_token=False,
        )
        args.integer("max_sandboxes", self.max_sandboxes, minimum=1, maximum=5000)
        args.integer("cpu_millicores", self.cpu_millicores, minimum=250, maximum=64000)
        args.integer("memory_mib", self.memory_mib, minimum=256, maximum=262144)
        args.integer("scratch_mib", self.scratch_mib, minimum=64, maximum=1_048_576)
        args.integer("warm_pool", self.warm_pool, minimum=0, maximum=self.max_sandboxes)
        rules = args.sequence(
            "egress", self.egress, lambda n, v: parse_egress(args, n, v), max_items=32, unique=True
        )
        object.__setattr__(self, "egress_rules", tuple(rules))
        if self.image is not None:
            args.text("image", self.image, pattern=PINNED_IMAGE_PATTERN, description=PINNED_IMAGE_DESCRIPTION)

    @property
    def namespace(self) -> str:
        return f"sandbox-{self.name}"


def _metadata(tenant: TenantSpec, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": tenant.namespace, "labels": {TENANT_LABEL: tenant.name}}


def namespace(tenant: TenantSpec) -> Manifest:
    """The tenant namespace, Pod Security ``restricted`` enforced at the cluster's minor version."""
    labels = {TENANT_LABEL: tenant.name}
    for mode in ("enforce", "audit", "warn"):
        labels[f"pod-security.kubernetes.io/{mode}"] = "restricted"
        labels[f"pod-security.kubernetes.io/{mode}-version"] = KUBERNETES_MINOR
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant.namespace, "labels": labels}}


def resource_quota(tenant: TenantSpec, tenancy: TenancySpec) -> Manifest:
    """Sandbox count and compute (container size plus the Kata overhead the scheduler charges per pod)."""
    cpu = tenant.max_sandboxes * (tenant.cpu_millicores + tenancy.overhead_cpu_millicores)
    memory = tenant.max_sandboxes * (tenant.memory_mib + tenancy.overhead_memory_mib)
    compute = {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}
    hard = {
        "pods": str(tenant.max_sandboxes),
        **{f"requests.{k}": v for k, v in compute.items()},
        **{f"limits.{k}": v for k, v in compute.items()},
        "requests.ephemeral-storage": f"{tenant.max_sandboxes * tenant.scratch_mib * 3}Mi",
        "count/sandboxclaims.extensions.agents.x-k8s.io": str(tenant.max_sandboxes),
        "services.loadbalancers": "0",
        "services.nodeports": "0",
        "persistentvolumeclaims": "0",
    }
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _metadata(tenant, "sandboxes"),
        "spec": {"hard": hard},
    }


def limit_range(tenant: TenantSpec) -> Manifest:
    """Every container gets the sandbox size by default and may not ask for more."""
    size = {"cpu": f"{tenant.cpu_millicores}m", "memory": f"{tenant.memory_mib}Mi"}
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(tenant, "sandbox-size"),
        "spec": {"limits": [{"type": "Container", "default": size, "defaultRequest": size, "max": size}]},
    }


def dns_egress_rule() -> dict[str, Any]:
    """Egress to CoreDNS only (UDP and TCP 53): a default deny that forgets it breaks every name lookup."""
    return {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }


def gateway_pods_egress(gateway: GatewayEndpoint) -> dict[str, Any]:
    """Egress to the platform gateway's proxy pods (its namespace and pod labels) on the proxy port only."""
    return {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": gateway.namespace}},
                "podSelector": {"matchLabels": dict(gateway.pod_labels)},
            }
        ],
        "ports": [{"protocol": "TCP", "port": gateway.port}],
    }


def network_policies(tenant: TenantSpec, tenancy: TenancySpec) -> list[Manifest]:
    """Default deny, then exactly what a sandbox needs; policies are additive, so the deny stays underneath."""

    def policy(name: str, spec: dict[str, Any]) -> Manifest:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _metadata(tenant, name),
            "spec": {"podSelector": {}, **spec},
        }

    egress: list[dict[str, Any]] = []
    if tenancy.platform_gateway is not None:
        egress.append(gateway_pods_egress(tenancy.platform_gateway))
    else:
        egress.append(
            {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}], "ports": [{"protocol": "TCP", "port": 80}]}
        )
    if tenancy.model_gateway_url is not None:
        egress.append(
            {
                "to": [
                    {"ipBlock": {"cidr": str(ipaddress.IPv4Network(c))}} for c in tenancy.model_gateway_cidrs
                ],
                "ports": [{"protocol": "TCP", "port": tenancy.gateway_port}],
            }
        )
    egress.extend(
        {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}
        for cidr, port in tenant.egress_rules
    )
    return [
        policy("default-deny", {"policyTypes": ["Ingress", "Egress"]}),
        policy("allow-dns", {"policyTypes": ["Egress"], "egress": [dns_egress_rule()]}),
        policy("allow-egress", {"policyTypes": ["Egress"], "egress": egress}),
        policy(
            "allow-clients",
            {
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {CLIENT_LABEL: tenant.name}}}]}],
            },
        ),
    ]


def service_account(tenant: TenantSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(tenant, SANDBOX_SERVICE_ACCOUNT),
        "automountServiceAccountToken": False,
    }


def sandbox_pod_spec(tenant: TenantSpec, tenancy: TenancySpec) -> dict[str, Any]:
    """The pod spec every sandbox of ``tenant`` runs (the SandboxTemplate's ``podTemplate.spec``)."""
    size = {"cpu": f"{tenant.cpu_millicores}m", "memory": f"{tenant.memory_mib}Mi"}
    scratch = {"ephemeral-storage": f"{tenant.scratch_mib * 3}Mi"}
    container: dict[str, Any] = {
        "name": "sandbox",
        "image": tenant.image or tenancy.image,
        "resources": {"requests": {**size, **scratch}, "limits": {**size, **scratch}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "env": [{"name": "HOME", "value": "/home/sandbox"}],
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "workspace", "mountPath": "/workspace"},
            {"name": "home", "mountPath": "/home/sandbox"},
        ],
        "workingDir": "/workspace",
    }
    if tenancy.command:
        container["command"] = list(tenancy.command)
    if tenancy.model_gateway_url is not None:
        container["env"].append({"name": "MODEL_GATEWAY_URL", "value": tenancy.model_gateway_url})
    if tenancy.platform_gateway is not None:
        # OpenAI SDKs append /chat/completions to OPENAI_BASE_URL, whose default ends in /v1.
        container["env"] += [
            {"name": "OPENAI_BASE_URL", "value": tenancy.platform_gateway.base_url + "/v1"},
            {
                "name": "OPENAI_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": TENANT_KEY_SECRET, "key": TENANT_KEY_FIELD}},
            },
        ]
    return {
        "runtimeClassName": tenancy.runtime_class_name,
        "serviceAccountName": SANDBOX_SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SANDBOX_UID,
            "runAsGroup": SANDBOX_UID,
            "fsGroup": SANDBOX_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": name, "emptyDir": {"sizeLimit": f"{tenant.scratch_mib}Mi"}}
            for name in ("tmp", "workspace", "home")
        ],
        "terminationGracePeriodSeconds": 30,
    }


def sandbox_template(tenant: TenantSpec, tenancy: TenancySpec) -> Manifest:
    """The SandboxTemplate: our NetworkPolicies instead of the controller's (which would block CoreDNS)."""
    return {
        "apiVersion": SANDBOX_API,
        "kind": "SandboxTemplate",
        "metadata": _metadata(tenant, TEMPLATE_NAME),
        "spec": {
            "networkPolicyManagement": "Unmanaged",
            "envVarsInjectionPolicy": "Disallowed",
            "volumeClaimTemplatesPolicy": "Disallowed",
            "podTemplate": {
                "metadata": {
                    "labels": {TENANT_LABEL: tenant.name, "app.kubernetes.io/name": "agent-sandbox"},
                    # A sandbox's state lives in its micro-VM: Karpenter must not move it.
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": sandbox_pod_spec(tenant, tenancy),
            },
        },
    }


def warm_pool(tenant: TenantSpec) -> Manifest:
    """The pool claims name; ``replicas`` sandboxes are kept ready (0: claims start cold from the template)."""
    return {
        "apiVersion": SANDBOX_API,
        "kind": "SandboxWarmPool",
        "metadata": _metadata(tenant, WARM_POOL_NAME),
        "spec": {
            "replicas": tenant.warm_pool,
            "sandboxTemplateRef": {"name": TEMPLATE_NAME},
            "updateStrategy": {"type": "OnReplenish"},
        },
    }


def tenant_manifests(tenant: TenantSpec, tenancy: TenancySpec) -> list[Manifest]:
    """Everything in the tenant namespace except the namespace itself, in apply order."""
    return [
        resource_quota(tenant, tenancy),
        limit_range(tenant),
        *network_policies(tenant, tenancy),
        service_account(tenant),
        sandbox_template(tenant, tenancy),
        warm_pool(tenant),
    ]


def sandbox_claim(tenant: TenantSpec, shutdown_time: str) -> Manifest:
    """A claim as an agent runtime creates it: from the tenant's pool, deleted at ``shutdown_time`` (RFC 3339)."""
    return {
        "apiVersion": SANDBOX_API,
        "kind": "SandboxClaim",
        "metadata": {"generateName": "agent-", "namespace": tenant.namespace},
        "spec": {
            "warmPoolRef": {"name": WARM_POOL_NAME},
            "lifecycle": {"shutdownTime": shutdown_time, "shutdownPolicy": "Delete"},
        },
    }


def claim_command(tenant: TenantSpec, ttl_minutes: int) -> str:
    """A shell command that claims one sandbox of ``tenant`` for ``ttl_minutes`` (GNU date, kubectl)."""
    marker = "SHUTDOWN_TIME"
    prefix, suffix = json.dumps(sandbox_claim(tenant, marker), separators=(",", ":")).split(marker)
    return f"echo '{prefix}'\"$(date -u -d '+{ttl_minutes} minutes' +%Y-%m-%dT%H:%M:%SZ)\"'{suffix}' | kubectl create -f -"


def admission_policy(runtime_class_name: str) -> list[Manifest]:
    """A ValidatingAdmissionPolicy (and its binding) for every namespace labelled as a sandbox tenant's."""
    name = "inference-tiers-sandbox-tenants"
    # Parenthesised as a whole: a member call binds tighter than +, so without them .all() would apply to the
    # init containers alone (and the sum to a bool, an evaluation error that fails every pod).
    containers = (
        "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
    )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["pods"],
                        },
                        {
                            "apiGroups": ["extensions.agents.x-k8s.io"],
                            "apiVersions": ["v1beta1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["sandboxclaims"],
                        },
                    ]
                },
                "variables": [{"name": "isPod", "expression": "request.kind.kind == 'Pod'"}],
                "validations": [
                    {
                        "expression": (
                            f"!variables.isPod || (has(object.spec.runtimeClassName) && "
                            f"object.spec.runtimeClassName == '{runtime_class_name}')"
                        ),
                        "message": f"sandbox pods must use the Kata runtime class {runtime_class_name}",
                    },
                    {
                        "expression": (
                            "!variables.isPod || (has(object.spec.automountServiceAccountToken) && "
                            "!object.spec.automountServiceAccountToken)"
                        ),
                        "message": "sandbox pods must set automountServiceAccountToken: false",
                    },
                    {
                        "expression": (
                            f"!variables.isPod || {containers}.all(c, has(c.securityContext) && "
                            "has(c.securityContext.allowPrivilegeEscalation) && "
                            "!c.securityContext.allowPrivilegeEscalation)"
                        ),
                        "message": "sandbox containers must set allowPrivilegeEscalation: false",
                    },
                    {
                        "expression": (
                            "variables.isPod || (has(object.spec.lifecycle) && "
                            "has(object.spec.lifecycle.shutdownTime) && has(object.spec.lifecycle.shutdownPolicy) && "
                            "object.spec.lifecycle.shutdownPolicy != 'Retain')"
                        ),
                        "message": "sandbox claims must set lifecycle.shutdownTime and shutdownPolicy Delete or "
                        "DeleteForeground, so that every sandbox is destroyed after use",
                    },
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]}
                },
            },
        },
    ]


def controller_values(node_selector: Mapping[str, str]) -> dict[str, Any]:
    """Helm values of the agent-sandbox chart: extensions on, pinned image, core nodes, restricted pod."""
    return {
        # The HelmChart creates the namespace; the chart's own Namespace object would collide with it.
        "namespace": {"create": False, "name": AGENT_SANDBOX_NAMESPACE},
        "image": {"repository": AGENT_SANDBOX_IMAGE, "tag": AGENT_SANDBOX_VERSION},
        "replicaCount": 2,
        "controller": {"leaderElect": True, "extensions": True},
        "nodeSelector": dict(node_selector),
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
