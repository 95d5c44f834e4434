"""The smart inference gateway of the EKS tiers, rendered as plain dicts (no constructs, testable alone).

One pinned set, released and conformance-tested together (docs/inference-gateway.md, "Pinned versions"):
Gateway API Inference Extension **v1.5.0** (``InferencePool`` ``inference.networking.k8s.io/v1`` and its
Endpoint Picker image ``epp:v1.5.0``), **Istio 1.30.1** as the Gateway implementation (its conformance report
for Inference Extension v1.5.0 ran on Gateway API **v1.5.1** standard channel, the CRDs installed here) and
**KEDA 2.20.2** for queue-driven autoscaling. Why not v1.6.0: it removed the Endpoint Picker and its Helm
chart from the repository (moved to llm-d-router, whose images are only tagged ``main``).

What is rendered, per model pool (:class:`ModelPool`):

- an ``InferencePool`` selecting the vLLM pods, with ``endpointPickerRef`` to the pool's Endpoint Picker;
- the Endpoint Picker (EPP): ServiceAccount, RBAC, its ``EndpointPickerConfig`` (prefix-cache, queue-depth and
  KV-utilisation scorers, plus LoRA affinity when adapters are served) in a ConfigMap, Deployment, Service and
  the Istio ``DestinationRule`` that lets the gateway reach its self-signed gRPC TLS port;
- a KEDA ``ScaledObject`` per scaled Deployment (prefill and decode independently) on
  ``vllm:num_requests_waiting`` and ``vllm:kv_cache_usage_perc``.

And once per gateway: the ``Gateway`` (class ``istio``, internal NLB) and an ``HTTPRoute`` to a backend (the
pool, or a Service such as vllm-router for prefill/decode disaggregation).

Every EPP flag is checked by the tests against the pinned EPP's flags, every plugin type against its
registered plugins, every PromQL query is parsed (``promql-parser``) and names only metrics the pinned vLLM and
EPP export, and every object validates against the vendored CRDs
(``inference_tiers/assets/inference_gateway/crd-chart/crds``) or the Kubernetes 1.35 schemas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from inference_tiers import ASSETS_DIR
from inference_tiers.validation import Args, is_token

Manifest = dict[str, Any]

# ---------------------------------------------------------------------------------------------------------
# Pins (each one a released version; docs/inference-gateway.md says why each was chosen)
# ---------------------------------------------------------------------------------------------------------

INFERENCE_EXTENSION_VERSION = "v1.5.0"
# The EPP image of that release (registry.k8s.io has no digest we could read offline: pinned by tag).
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
GATEWAY_API_VERSION = "v1.5.1"
ISTIO_VERSION = "1.30.1"
ISTIO_CHART_REPOSITORY = "https://istio-release.storage.googleapis.com/charts"
KEDA_VERSION = "2.20.2"
KEDA_CHART_REPOSITORY = "https://kedacore.github.io/charts"
GATEWAY_CLASS = "istio"
# A Helm chart holding only crds/: the pinned Gateway API (standard channel) and Inference Extension CRDs,
# byte-identical upstream copies (SOURCE.md beside them), installed before anything that uses them.
CRD_CHART_DIR = ASSETS_DIR / "inference_gateway" / "crd-chart"

INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
EPP_CONFIG_API = "inference.networking.x-k8s.io/v1alpha1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
KEDA_API = "keda.sh/v1alpha1"

# EPP ports at v1.5.0 (pkg/epp/server/options.go defaults): ext_proc gRPC, gRPC health, Prometheus metrics.
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_SCRAPE_ANNOTATIONS = {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": str(EPP_METRICS_PORT),
    # controller-runtime v0.23.3 (the EPP's go.mod) pkg/metrics/server/server.go: defaultMetricsEndpoint, served
    # over HTTP because the EPP leaves metricsserver.Options.SecureServing unset (cmd/epp/runner/runner.go:274).
    "prometheus.io/path": "/metrics",
}
EPP_CONFIG_DIR = "/config"
EPP_CONFIG_FILE = "endpoint-picker.yaml"
GATEWAY_PORT = 80
# vLLM's default OpenAI server port, where it also serves /metrics.
VLLM_PORT = 8000

# Scorer weights of the upstream chart's default profile (epplib _config.yaml at v1.5.0): prefix affinity
# dominates, load breaks ties. LoRA affinity joins with weight 1 only when adapters are served.
SCORER_WEIGHTS: Mapping[str, int] = {
    "queue-scorer": 2,
    "kv-cache-utilization-scorer": 2,
    "prefix-cache-scorer": 3,
}
LORA_SCORER = "lora-affinity-scorer"

# Metrics the scalers read: vLLM's per-engine gauges (vllm/v1/metrics/loggers.py) and, for scale from zero,
# the EPP's request counters (pkg/epp/metrics/metrics.go:84-101 at v1.5.0, labels model_name and
# target_model_name). The first counts only requests the EPP scheduled (pkg/epp/handlers/server.go:240-254 records
# it after director.HandleRequest succeeds); with no pod HandleRequest fails with ServiceUnavailable
# (pkg/epp/requestcontrol/director.go:172-177) and only the error counter grows (server.go:174-179).
QUEUE_METRIC = "vllm:num_requests_waiting"
KV_CACHE_METRIC = "vllm:kv_cache_usage_perc"
EPP_REQUEST_METRIC = "inference_objective_request_total"
EPP_REQUEST_ERROR_METRIC = "inference_objective_request_error_total"

DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")
# CreateLoadBalancer's Name: at most 32 alphanumerics or '-', not starting or ending with '-'.
LOAD_BALANCER_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,30}[A-Za-z0-9])?")
# Read by the AWS Load Balancer Controller only (kubernetes-sigs.github.io/aws-load-balancer-controller, Service
# annotations); the in-tree cloud provider ignores it.
LOAD_BALANCER_NAME_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-name"
# Istio 1.30's Gateway auto-deployment gives the generated Service this type (istio/api 1.30.1
# annotation/annotations.yaml:567-574): ClusterIP for a gateway only in-cluster clients use.
SERVICE_TYPE_ANNOTATION = "networking.istio.io/service-type"
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
# vLLM's served model / LoRA adapter names as they appear in the request's "model" field.
MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}"
S3_PREFIX_PATTERN = r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?"


# ---------------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolScaling:
    """Replica bounds and targets of one scaled Deployment (a KEDA ScaledObject).

    :param min_replicas: 0 (scale to zero: activation on requests reaching the EPP) to ``max_replicas``.
    :param max_replicas: 1-64.
    :param waiting_per_replica: scale out when more requests than this wait per replica
        (``vllm:num_requests_waiting``), 1-10000. Default 4.
    :param kv_cache_utilisation: scale out when the mean KV-cache usage exceeds this fraction
        (``vllm:kv_cache_usage_perc``), 0.05-1. Default 0.8.
    """

    min_replicas: int
    max_replicas: int
    waiting_per_replica: int = 4
    kv_cache_utilisation: float = 0.8

    def __post_init__(self) -> None:
        args = Args("PoolScaling")
        args.integer("max_replicas", self.max_replicas, minimum=1, maximum=64)
        args.integer("min_replicas", self.min_replicas, minimum=0, maximum=self.max_replicas)
        args.integer("waiting_per_replica", self.waiting_per_replica, minimum=1, maximum=10000)
        args.number("kv_cache_utilisation", self.kv_cache_utilisation, minimum=0.05, maximum=1)

    @property
    def scale_to_zero(self) -> bool:
        """Whether the Deployment may have no replica (``min_replicas`` 0)."""
        return self.min_replicas == 0


@dataclass(frozen=True)
class LoraAdapter:
    """A LoRA adapter vLLM serves under ``name`` (the request's ``model``), its files under ``s3_uri``.

    The files are copied from S3 into the pod by an init container (``aws s3 sync``), then loaded by vLLM with
    ``--lora-modules name=/adapters/name``.
    """

    name: str
    s3_uri: str

    def __post_init__(self) -> None:
        args = Args("LoraAdapter")
        args.text("name", self.name, pattern=MODEL_NAME_PATTERN, allow_token=False)
        args.text("s3_uri", self.s3_uri, pattern=S3_PREFIX_PATTERN, description="an s3://bucket/prefix URI")

    @property
    def bucket(self) -> str:
        """The S3 bucket of ``s3_uri``."""
        return self.s3_uri.removeprefix("s3://").split("/", 1)[0]

    @property
    def local_path(self) -> str:
        """Where the init container copies the adapter in the pod (``--lora-modules name=<path>``)."""
        return f"{ADAPTER_DIR}/{self.name.replace('/', '--')}"


ADAPTER_DIR = "/adapters"


@dataclass(frozen=True)
class ModelPool:
    """One InferencePool and its Endpoint Picker: vLLM pods serving ``model_name`` (and LoRA adapters).

    :param name: prefix of every object of this pool (a DNS label of at most 40 characters).
    :param namespace: namespace of the pool, its EPP and the vLLM pods (an InferencePool selects only pods of
        its own namespace).
    :param selector: labels of the vLLM pods (at least one).
    :param model_name: the base model's served name.
    :param target_port: the vLLM port. Default 8000.
    :param adapters: LoRA adapters every pod of the pool loads. Default none.
    :param fail_open: the gateway forwards to any pod when the EPP is unreachable (``FailOpen``) instead of
        failing the request (``FailClose``, the API default). Default True: an EPP restart does not drop traffic.
    """

    name: str
    namespace: str
    selector: Mapping[str, str]
    model_name: str
    target_port: int = VLLM_PORT
    adapters: Sequence[LoraAdapter] = field(default_factory=tuple)
    fail_open: bool = True

    def __post_init__(self) -> None:
        args = Args("ModelPool")
        args.text("name", self.name, pattern=DNS_LABEL.pattern, allow_token=False)
        args.text("namespace", self.namespace, pattern=DNS_LABEL.pattern, allow_token=False)
        args.mapping(
            "selector",
            self.selector,
            lambda n, v: args.text(n, v, pattern=LABEL_VALUE.pattern, allow_token=False),
            key_pattern=LABEL_KEY.pattern,
            max_items=10,
        )
        if not self.selector:
            raise args.error("selector", dict(self.selector), "at least one pod label")
        args.text("model_name", self.model_name, pattern=MODEL_NAME_PATTERN)
        args.integer("target_port", self.target_port, minimum=1, maximum=65535)
        adapters = args.sequence(
            "adapters", self.adapters, lambda n, v: args.instance(n, v, LoraAdapter), max_items=64
        )
        names = [a.name for a in adapters]
        for index, adapter_name in enumerate(names):
            if adapter_name == self.model_name or names.index(adapter_name) != index:
                raise args.error(
                    f"adapters[{index}].name", adapter_name, "a name unique among the adapters and the model"
                )
        args.boolean("fail_open", self.fail_open)

    @property
    def epp_name(self) -> str:
        """The name of the pool's endpoint picker (EPP): its Deployment, Service and service account."""
        return f"{self.name}-epp"

    def epp_labels(self) -> dict[str, str]:
        """The labels of the EPP's pods, which its Service selects."""
        return {
            "app.kubernetes.io/name": "endpoint-picker",
            "app.kubernetes.io/instance": self.epp_name,
            "app.kubernetes.io/part-of": "inference-tiers",
        }


# ---------------------------------------------------------------------------------------------------------
# InferencePool and Endpoint Picker
# ---------------------------------------------------------------------------------------------------------


def metadata(name: str, namespace: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    meta["labels"] = dict(labels or {"app.kubernetes.io/part-of": "inference-tiers"})
    return meta


def render_inference_pool(pool: ModelPool) -> Manifest:
    return {
        "apiVersion": INFERENCE_POOL_API,
        "kind": "InferencePool",
        "metadata": metadata(pool.name, pool.namespace),
        "spec": {
            "selector": {"matchLabels": dict(pool.selector)},
            "targetPorts": [{"number": pool.target_port}],
            "endpointPickerRef": {
                "kind": "Service",
                "name": pool.epp_name,
                "port": {"number": EPP_GRPC_PORT},
                "failureMode": "FailOpen" if pool.fail_open else "FailClose",
            },
        },
    }


def endpoint_picker_config(pool: ModelPool) -> dict[str, Any]:
    """The ``EndpointPickerConfig``: the upstream default profile, plus LoRA affinity when adapters exist."""
    weights = dict(SCORER_WEIGHTS)
    if pool.adapters:
        weights[LORA_SCORER] = 1
    return {
        "apiVersion": EPP_CONFIG_API,
        "kind": "EndpointPickerConfig",
        "plugins": [
            *({"type": scorer} for scorer in weights),
            # Scrapes every pod's vLLM /metrics (queue, KV usage, LoRA adapters); parameters as upstream's.
            {
                "type": "metrics-data-source",
                "parameters": {"scheme": "http", "path": "/metrics", "insecureSkipVerify": False},
            },
            {"type": "core-metrics-extractor"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [{"pluginRef": scorer, "weight": weight} for scorer, weight in weights.items()],
            }
        ],
    }


def endpoint_picker_args(pool: ModelPool) -> list[str]:
    """Flags of the pinned EPP (each one checked by the tests against its flag list)."""
    return [
        "--pool-name",
        pool.name,
        "--pool-namespace",
        pool.namespace,
        "--pool-group",
        INFERENCE_POOL_API.split("/")[0],
        "--config-file",
        f"{EPP_CONFIG_DIR}/{EPP_CONFIG_FILE}",
        "--grpc-port",
        str(EPP_GRPC_PORT),
        "--grpc-health-port",
        str(EPP_HEALTH_PORT),
        "--metrics-port",
        str(EPP_METRICS_PORT),
        # The AMP scraper (and any in-cluster Prometheus of the annotated-pods kind) presents no Kubernetes token,
        # and the EPP's default (pkg/epp/server/options.go:116,189: --metrics-endpoint-auth true) makes
        # controller-runtime's metrics server refuse it (cmd/epp/runner/runner.go:274-283). Off, the server
        # serves /metrics over plain HTTP on the metrics port, as vLLM serves its own.
        "--metrics-endpoint-auth=false",
        "--zap-encoder",
        "json",
        # No collector is deployed with the tier: exporting traces would only log connection errors.
        "--tracing=false",
        # pprof handlers serve heap and goroutine dumps on the metrics port: off in production.
        "--enable-pprof=false",
    ]


def render_endpoint_picker(pool: ModelPool) -> list[Manifest]:
    """ServiceAccount, RBAC, config, Deployment, Service and Istio DestinationRule of the pool's EPP."""
    name, namespace, labels = pool.epp_name, pool.namespace, pool.epp_labels()
    meta = metadata(name, namespace, labels)
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        # Reads its pool and the pods it selects; objectives and rewrites are read if you add any.
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": ["inference.networking.k8s.io"],
                "resources": ["inferencepools"],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": ["inference.networking.x-k8s.io"],
                "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                "verbs": ["get", "list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {EPP_CONFIG_FILE: yaml.safe_dump(endpoint_picker_config(pool), sort_keys=False)},
    }
    container = {
        "name": "epp",
        "image": EPP_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": endpoint_picker_args(pool),
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        # One replica serves: the EPP's gRPC health service is named after the extension.
        "livenessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "readinessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"},
            "periodSeconds": 2,
        },
        # The EPP is on every request's path (upstream sizing: 0.5-1 CPU per request/s of long prompts).
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "config", "mountPath": EPP_CONFIG_DIR, "readOnly": True}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            # One active replica: the prefix-cache index lives in the EPP's memory, so two active replicas
            # would each see half the prompts and route the same prefix to different pods.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                # The EKS scraper's annotated-pods job (observability/collectors.py) scrapes the EPP's counters,
                # which the KEDA scale-from-zero trigger reads.
                "metadata": {"labels": labels, "annotations": EPP_SCRAPE_ANNOTATIONS},
                "spec": {
                    "serviceAccountName": name,
                    "terminationGracePeriodSeconds": 130,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [
                {"name": "grpc-ext-proc", "port": EPP_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {
                    "name": "http-metrics",
                    "port": EPP_METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }
    # The EPP serves ext_proc over TLS with a self-signed certificate (--secure-serving defaults to true);
    # Istio's gateway must originate TLS to it without verifying that certificate (traffic stays in the pod
    # network; the upstream chart's Istio provider renders the same rule).
    destination_rule = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": meta,
        "spec": {
            "host": f"{name}.{namespace}.svc.cluster.local",
            "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}},
        },
    }
    return [
        service_account,
        role,
        binding,
        config,
        deployment,
        service,
        destination_rule,
    ]


# ---------------------------------------------------------------------------------------------------------
# Gateway and HTTPRoute
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatewaySpec:
    """The Gateway and its one HTTPRoute.

    :param name: Gateway and HTTPRoute name.
    :param namespace: their namespace (the backend's).
    :param allowed_cidrs: client CIDRs the internal NLB admits (tokens accepted).
    :param request_timeout_seconds: the route's request timeout, 1-3600 (long generations). Default 600.
    :param load_balancer_name: the NLB's name (the AWS Load Balancer Controller's
        ``service.beta.kubernetes.io/aws-load-balancer-name``), for a CloudWatch metric of that NLB to name it;
        1-32 letters, digits and '-', unique per Region and account. Default None: the controller names it.
    :param load_balancer: an internal NLB for clients in the VPC (``allowed_cidrs``). False: a ClusterIP
        Service only, for in-cluster clients (``allowed_cidrs`` and ``load_balancer_name`` unused). Default True.
    """

    name: str
    namespace: str
    allowed_cidrs: Sequence[str]
    request_timeout_seconds: int = 600
    load_balancer_name: str | None = None
    load_balancer: bool = True

    def __post_init__(self) -> None:
        args = Args("GatewaySpec")
        args.boolean("load_balancer", self.load_balancer)
        args.text("name", self.name, pattern=DNS_LABEL.pattern, allow_token=False)
        args.text("namespace", self.namespace, pattern=DNS_LABEL.pattern, allow_token=False)
        if not is_token(self.allowed_cidrs):
            args.sequence(
                "allowed_cidrs",
                self.allowed_cidrs,
                lambda n, v: args.text(n, v),
                min_items=1 if self.load_balancer else 0,
            )
        args.integer("request_timeout_seconds", self.request_timeout_seconds, minimum=1, maximum=3600)
        if self.load_balancer_name is not None:
            name = args.text(
                "load_balancer_name",
                self.load_balancer_name,
                pattern=LOAD_BALANCER_NAME.pattern,
                description="1-32 letters, digits and '-', not starting or ending with '-' "
                "(an Elastic Load Balancing name)",
                allow_token=False,
            )
            if name.startswith("internal-"):
                raise args.error(
                    "load_balancer_name", name, "a name not starting with 'internal-' (ELB's rule)"
                )


def render_gateway(spec: GatewaySpec) -> Manifest:
    """An Istio Gateway; Istio deploys its proxy with a LoadBalancer Service carrying these annotations, or, with
    ``load_balancer=False``, a ClusterIP Service (no load balancer at all)."""
    listeners = [
        {
            "name": "http",
            "protocol": "HTTP",
            "port": GATEWAY_PORT,
            "allowedRoutes": {"namespaces": {"from": "Same"}},
        }
    ]
    if not spec.load_balancer:
        meta = metadata(spec.name, spec.namespace)
        meta["annotations"] = {SERVICE_TYPE_ANNOTATION: "ClusterIP"}
        return {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": meta,
            "spec": {"gatewayClassName": GATEWAY_CLASS, "listeners": listeners},
        }
    cidrs = spec.allowed_cidrs if is_token(spec.allowed_cidrs) else ",".join(spec.allowed_cidrs)
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": metadata(spec.name, spec.namespace),
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "infrastructure": {
                # Copied by Istio onto the generated Service: an internal NLB limited to the clients' CIDRs
                # (the AWS cloud controller reads the first two, the AWS Load Balancer Controller the third).
                "annotations": {
                    "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
                    "service.beta.kubernetes.io/load-balancer-source-ranges": cidrs,
                    **(
                        {LOAD_BALANCER_NAME_ANNOTATION: spec.load_balancer_name}
                        if spec.load_balancer_name
                        else {}
                    ),
                }
            },
            "listeners": listeners,
        },
    }


def render_http_route(spec: GatewaySpec, backend: Mapping[str, Any]) -> Manifest:
    """All paths of the gateway to ``backend`` (from :func:`pool_backend` or :func:`service_backend`)."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": metadata(spec.name, spec.namespace),
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": spec.name}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [dict(backend)],
                    "timeouts": {"request": f"{spec.request_timeout_seconds}s"},
                }
            ],
        },
    }


def pool_backend(pool: ModelPool) -> dict[str, Any]:
    return {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool.name}


def service_backend(name: str, port: int) -> dict[str, Any]:
    return {"kind": "Service", "name": name, "port": port}
