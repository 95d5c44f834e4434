"""Values of LiteLLM's componentized Helm chart for the ``platform`` tier, rendered by pure functions.

The proxy's configuration is the ``gateway`` tier's (:func:`inference_tiers.litellm.config.render_config`):
one renderer, two runtimes (ECS there, this chart here). The chart is ``helm/litellm`` of BerriAI/litellm at
:data:`CHART_COMMIT`, whose ``appVersion`` is the proxy release the project pins (``LITELLM_VERSION``); it runs
in monolith mode (one Deployment serving the LLM API, the management API and no UI).

Secrets reach the pods by reference only: the master key is generated in the cluster by the chart (kept across
upgrades, never in a value); the database and Valkey passwords stay in Secrets Manager and the Secrets Store CSI
driver's AWS provider syncs them into the Kubernetes Secret :data:`STATE_SECRET` when a gateway or migration pod
mounts :func:`secret_provider_class`'s volume (docs/platform.md, "PlatformGateway").

Names and labels below are those the chart renders at :data:`CHART_COMMIT` (its own unit tests
``helm/litellm/tests/monolith_tests.yaml`` and ``masterkey_secret_tests.yaml`` assert them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from inference_tiers.k8s.platform_names import GATEWAY_NAMESPACE, GatewayEndpoint
from inference_tiers.litellm.config import (
    CONFIG_ENV,
    LITELLM_VERSION,
    PORT,
    proxy_environment,
    tracing_environment,
)
from inference_tiers.validation import Args

CHART_REPOSITORY = "https://github.com/BerriAI/litellm.git"
CHART_COMMIT = "5cf956f7a83c1679899d4ae320ca7549ce39a5ec"
"""BerriAI/litellm commit of the vendored ``helm/litellm`` chart: Chart.yaml ``version: 1.0.0``,
``appVersion: "1.104.0"`` (= ``LITELLM_VERSION``)."""
CHART_APP_VERSION = LITELLM_VERSION
RELEASE = "litellm"
# fullnameOverride: the monolith Deployment and Service take the chart's fullname (monolith_tests.yaml: "metadata.name
# RELEASE-NAME-litellm" = <release>-<chart name>), the metrics Service "<fullname>-metrics", the generated master key
# Secret "<fullname>-masterkey" (masterkey_secret_tests.yaml).
FULLNAME = "litellm-gateway"
SERVICE_ACCOUNT = "litellm-gateway"
METRICS_PORT = 4001
MASTER_KEY_SECRET = f"{FULLNAME}-masterkey"
MASTER_KEY_FIELD = "master-key"
# The Kubernetes Secret the CSI driver syncs from Secrets Manager, and its keys.
STATE_SECRET = "litellm-state"
DATABASE_USERNAME_KEY = "db-username"
DATABASE_PASSWORD_KEY = "db-password"
REDIS_PASSWORD_KEY = "redis-password"
SECRETS_VOLUME = "aws-secrets"
SECRETS_MOUNT = "/mnt/aws-secrets"
# The Secrets Store CSI driver and its AWS provider, from the provider's chart (which bundles the driver's chart at
# 1.6.0, its Chart.lock). Not the EKS add-on aws-secrets-store-csi-driver-provider: it accepts the driver's
# syncSecret.enabled but does not pass it on, so the sync RBAC is missing (secrets-store-csi-driver-provider-aws#597).
SECRETS_STORE_CHART_REPOSITORY = "https://aws.github.io/secrets-store-csi-driver-provider-aws"
SECRETS_STORE_CHART = "secrets-store-csi-driver-provider-aws"
SECRETS_STORE_CHART_VERSION = "3.1.1"
SECRETS_STORE_RELEASE = "secrets-provider-aws"
SECRETS_STORE_NAMESPACE = "kube-system"
# How often the driver re-reads every mounted secret and updates the synced Secret (its rotation reconciler): a
# rotated database password reaches the pods within this, and the proxy restarts within LIVENESS_WINDOW_SECONDS more.
ROTATION_POLL_SECONDS = 120
LIVENESS_PERIOD_SECONDS = 15
LIVENESS_FAILURES = 6
# A migration attempt that blocks on the database fails within this, well inside the 15 minutes the CDK kubectl
# handler lives (platform-cluster.md trap 1; the chart's default is 1800 s).
MIGRATION_DEADLINE_SECONDS = 540
# The proxy keeps idle client connections open this much longer than the load balancer does, so that the load
# balancer, not the proxy, closes them: no 502 on a reused connection (trap 10; LiteLLM's KEEPALIVE_TIMEOUT).
KEEPALIVE_MARGIN_SECONDS = 15
MIN_MEMORY_GIB = 4
_K8S_LABEL_VALUE = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
_K8S_LABEL_KEY = r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"


def pod_labels() -> MappingProxyType[str, str]:
    """The labels that select the proxy pods (the Deployment's selector at :data:`CHART_COMMIT`)."""
    return MappingProxyType(
        {
            "app.kubernetes.io/name": "litellm",
            "app.kubernetes.io/instance": RELEASE,
            "app.kubernetes.io/component": "proxy",
        }
    )


def gateway_endpoint() -> GatewayEndpoint:
    """Where the chart's proxy answers in the cluster, with its metrics Service and master key Secret."""
    return GatewayEndpoint(
        namespace=GATEWAY_NAMESPACE,
        service=FULLNAME,
        port=PORT,
        pod_labels=pod_labels(),
        metrics_service=f"{FULLNAME}-metrics",
        metrics_port=METRICS_PORT,
        master_key_secret=MASTER_KEY_SECRET,
        master_key_field=MASTER_KEY_FIELD,
    )


@dataclass(frozen=True)
class GatewayState:
    """Where the proxy's PostgreSQL and Valkey answer (deploy-time tokens accepted).

    :param database_host: the writer endpoint.
    :param database_port: its port.
    :param database_name: the database.
    :param redis_host: the Valkey primary endpoint (TLS).
    :param redis_port: its port.
    """

    database_host: str
    database_port: str
    database_name: str
    redis_host: str
    redis_port: str


@dataclass(frozen=True)
class LoadBalancer:
    """The internal ALB in front of the proxy (AWS Load Balancer Controller Ingress).

    :param certificate_arn: the ACM certificate of the HTTPS listener.
    :param idle_timeout_seconds: the ALB's idle timeout; the proxy's keep-alive is longer.
    """

    certificate_arn: str
    idle_timeout_seconds: int


def keepalive_timeout(idle_timeout_seconds: int) -> int:
    """The proxy's ``KEEPALIVE_TIMEOUT`` for a load balancer that closes idle connections after
    ``idle_timeout_seconds``."""
    return idle_timeout_seconds + KEEPALIVE_MARGIN_SECONDS


def _ingress(balancer: LoadBalancer) -> dict[str, Any]:
    """The chart's Ingress for the AWS Load Balancer Controller: internal, HTTPS only, pod targets.

    Annotations: kubernetes-sigs/aws-load-balancer-controller docs/guide/ingress/annotations.md (v2.x)."""
    prefix = "alb.ingress.kubernetes.io"
    return {
        "enabled": True,
        "className": "alb",
        "controller": "alb",
        "annotations": {
            f"{prefix}/scheme": "internal",
            f"{prefix}/target-type": "ip",
            f"{prefix}/listen-ports": json.dumps([{"HTTPS": 443}]),
            f"{prefix}/certificate-arn": balancer.certificate_arn,
            f"{prefix}/ssl-policy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
            f"{prefix}/backend-protocol": "HTTP",
            f"{prefix}/healthcheck-path": "/health/liveliness",
            f"{prefix}/load-balancer-attributes": (
                f"idle_timeout.timeout_seconds={balancer.idle_timeout_seconds}"
            ),
        },
    }


def _spread(labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """Replicas spread over zones (hard) and nodes (soft)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": dict(labels)},
        }
        for key, when in (
            ("topology.kubernetes.io/zone", "DoNotSchedule"),
            ("kubernetes.io/hostname", "ScheduleAnyway"),
        )
    ]


def _environment(
    proxy_config_text: str, balancer: LoadBalancer | None, trace_endpoint: str | None
) -> list[dict[str, str]]:
    """The proxy's plain environment: the gateway tier's (less the inline configuration, which the chart mounts
    as a file, and the log level, which the chart sets), TLS to Valkey, the keep-alive above the ALB's, and the
    trace exporter's (the gateway tier's ``tracing_environment``)."""
    plain = {
        name: value
        for name, value in proxy_environment(proxy_config_text).items()
        if name not in (CONFIG_ENV, "LITELLM_LOG")
    }
    plain["REDIS_SSL"] = "True"
    if balancer is not None:
        plain["KEEPALIVE_TIMEOUT"] = str(keepalive_timeout(balancer.idle_timeout_seconds))
    if trace_endpoint is not None:
        plain.update(tracing_environment(trace_endpoint))
    return [{"name": name, "value": value} for name, value in plain.items()]


def secrets_store_values() -> dict[str, Any]:
    """The provider chart's values: the bundled driver with secret sync (its RBAC on Secrets) and rotation on.

    Keys: the driver chart's values.yaml (kubernetes-sigs/secrets-store-csi-driver v1.6.0, ``syncSecret``,
    ``enableSecretRotation``, ``rotationPollInterval``), under the provider chart's dependency key."""
    return {
        "secrets-store-csi-driver": {
            "syncSecret": {"enabled": True},
            "enableSecretRotation": True,
            "rotationPollInterval": f"{ROTATION_POLL_SECONDS}s",
        }
    }


def _liveness_probe() -> dict[str, Any]:
    """The proxy is alive while it answers ``/health/liveliness`` (the chart's own probe) AND still holds the
    database password the CSI volume has now: after a rotation the volume changes, the probe fails and the kubelet
    restarts the container, whose ``DATABASE_PASSWORD`` (secretKeyRef) is then read from the updated Secret."""
    password_file = f"{SECRETS_MOUNT}/{DATABASE_PASSWORD_KEY}"
    liveliness = (
        "import urllib.request; "
        f"urllib.request.urlopen('http://127.0.0.1:{PORT}/health/liveliness', timeout=8)"
    )
    return {
        "exec": {
            "command": [
                "sh",
                "-c",
                f'[ "$(cat {password_file})" = "$DATABASE_PASSWORD" ] && exec python3 -c "{liveliness}"',
            ]
        },
        "initialDelaySeconds": 10,
        "periodSeconds": LIVENESS_PERIOD_SECONDS,
        "timeoutSeconds": 10,
        "failureThreshold": LIVENESS_FAILURES,
    }


def chart_values(
    proxy_config: Mapping[str, Any],
    *,
    state: GatewayState,
    replicas: int = 2,
    max_replicas: int = 10,
    node_selector: Mapping[str, str],
    secret_provider_class: str,
    load_balancer: LoadBalancer | None = None,
    trace_endpoint: str | None = None,
) -> dict[str, Any]:
    """The chart's values for the proxy configuration ``proxy_config`` (``render_config``'s output).

    :param state: the database and Valkey endpoints.
    :param replicas: the fewest proxy pods (2 to 100): the HPA's floor.
    :param max_replicas: the HPA's ceiling (``replicas`` to 100).
    :param node_selector: where the proxy and its migration Job run.
    :param secret_provider_class: the SecretProviderClass whose volume syncs :data:`STATE_SECRET`.
    :param load_balancer: the internal ALB; None for in-cluster clients only.
    :param trace_endpoint: the OTLP/HTTP base URL the proxy exports spans to (with ``proxy_config`` rendered
        with ``ProxyFeatures(tracing=True)``); None: no traces.
    """
    args = Args("chart_values")
    args.instance("state", state, GatewayState)
    args.integer("replicas", replicas, minimum=2, maximum=100)
    args.integer("max_replicas", max_replicas, minimum=replicas, maximum=100)
    selector = args.mapping(
        "node_selector",
        node_selector,
        lambda name, value: args.text(name, value, pattern=_K8S_LABEL_VALUE, allow_token=False),
        key_pattern=_K8S_LABEL_KEY,
    )
    if not selector:
        raise args.error("node_selector", selector, "at least one node label (the core nodes)")
    if load_balancer is not None:
        args.instance("load_balancer", load_balancer, LoadBalancer)
    config = dict(proxy_config)
    # /health/readiness pings the database with a 2 s timeout: a cold pod of a busy database would go NotReady
    # (platform-cluster.md §1.2 item 5). Keys and budgets are still checked from the Valkey/in-memory caches.
    config["general_settings"] = {**config["general_settings"], "allow_requests_on_db_unavailable": True}
    csi_volume = {
        "name": SECRETS_VOLUME,
        "csi": {
            "driver": "secrets-store.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": secret_provider_class},
        },
    }
    csi_mount = {"name": SECRETS_VOLUME, "mountPath": SECRETS_MOUNT, "readOnly": True}
    labels = pod_labels()
    values: dict[str, Any] = {
        "fullnameOverride": FULLNAME,
        "monolith": {"enabled": True},
        # The pod's ServiceAccount exists before the chart (PlatformGateway creates it with its Pod Identity
        # association), so the pre-install migration hook can use it too.
        "serviceAccounts": {"gateway": {"create": False, "name": SERVICE_ACCOUNT}},
        "masterKey": {"secretName": "", "secretKey": MASTER_KEY_FIELD, "generate": True},
        "database": {
            "writer": {
                "host": state.database_host,
                "port": state.database_port,
                "dbname": state.database_name,
                "sslMode": "require",
                "passwordSecret": {
                    "name": STATE_SECRET,
                    "usernameKey": DATABASE_USERNAME_KEY,
                    "passwordKey": DATABASE_PASSWORD_KEY,
                },
            }
        },
        "redis": {
            "host": state.redis_host,
            "port": state.redis_port,
            "passwordSecret": {"name": STATE_SECRET, "passwordKey": REDIS_PASSWORD_KEY},
        },
        "migrationJob": {
            "activeDeadlineSeconds": MIGRATION_DEADLINE_SECONDS,
            "serviceAccountName": SERVICE_ACCOUNT,
            "nodeSelector": selector,
            "volumes": [csi_volume],
            "volumeMounts": [csi_mount],
        },
        "gateway": {
            "logLevel": "WARNING",
            "extraEnv": _environment(json.dumps(config), load_balancer, trace_endpoint),
            "volumes": [csi_volume],
            "volumeMounts": [csi_mount],
            "config": {"create": True, "proxy_config": config},
            "metricsServer": {"enabled": True, "port": METRICS_PORT},
            "resources": {
                "requests": {"cpu": "1", "memory": f"{MIN_MEMORY_GIB}Gi"},
                "limits": {"memory": f"{MIN_MEMORY_GIB}Gi"},
            },
            "livenessProbe": _liveness_probe(),
            "startupProbe": {
                "httpGet": {"path": "/health/readiness", "port": "http"},
                "failureThreshold": 30,
                "periodSeconds": 10,
            },
            "hpa": {"enabled": True, "minReplicas": replicas, "maxReplicas": max_replicas},
            "pdb": {"enabled": True, "maxUnavailable": 1},
            "nodeSelector": selector,
            "topologySpreadConstraints": _spread(labels),
        },
    }
    if load_balancer is not None:
        values["ingress"] = _ingress(load_balancer)
    return values


def secret_provider_class(
    name: str, *, database_secret_arn: str, redis_secret_arn: str, region: str
) -> dict[str, Any]:
    """The SecretProviderClass (Secrets Store CSI driver, AWS provider) that syncs the database user and
    password (JSON keys ``username``/``password`` of the RDS secret) and the Valkey AUTH token (a plain string)
    into :data:`STATE_SECRET`, read with the mounting pod's EKS Pod Identity.

    At the pinned provider (aws/secrets-store-csi-driver-provider-aws 3.1.1): ``objects`` is YAML (JSON here) of
    ``provider/secret_descriptor.go`` (``SecretDescriptor``: objectName :29, objectAlias :32, objectType :41,
    jmesPath :47; ``JMESPathEntry``: path :69, objectAlias :72); ``region``, ``objects`` and ``usePodIdentity``
    are the attributes ``server/server.go`` reads (:42, :45, :47), the last parsed with ``strconv.ParseBool``
    (:166-172). ``secretObjects`` is the driver's (kubernetes-sigs/secrets-store-csi-driver v1.6.0
    ``apis/v1/secretproviderclass_types.go``: secretName :39, type :41, data :46 of objectName :31 / key :33,
    spec field :55); it syncs only with the driver's ``syncSecret.enabled`` (:func:`secrets_store_values`)."""
    objects = [
        {
            "objectName": database_secret_arn,
            "objectType": "secretsmanager",
            "jmesPath": [
                {"path": "username", "objectAlias": DATABASE_USERNAME_KEY},
                {"path": "password", "objectAlias": DATABASE_PASSWORD_KEY},
            ],
        },
        {"objectName": redis_secret_arn, "objectType": "secretsmanager", "objectAlias": REDIS_PASSWORD_KEY},
    ]
    keys = (DATABASE_USERNAME_KEY, DATABASE_PASSWORD_KEY, REDIS_PASSWORD_KEY)
    return {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": {"name": name, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "provider": "aws",
            "parameters": {"objects": json.dumps(objects), "usePodIdentity": "true", "region": region},
            "secretObjects": [
                {
                    "secretName": STATE_SECRET,
                    "type": "Opaque",
                    "data": [{"objectName": key, "key": key} for key in keys],
                }
            ],
        },
    }
