"""The platform gateway's Helm values (inference_tiers/k8s/litellm_chart.py) against the pinned LiteLLM chart.

Evidence: BerriAI/litellm @ 5cf956f7a83c1679899d4ae320ca7549ce39a5ec, ``helm/litellm/`` (Chart.yaml, values.yaml,
tests/monolith_tests.yaml), excerpts vendored in tests/data/platform/litellm-chart (SOURCE.md). No ``helm`` binary
is available offline, so the seam is checked key by key against the pinned values.yaml and the templates that
read them (cited per test), not by rendering the chart.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from inference_tiers.k8s import litellm_chart as chart
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS, GATEWAY_NAMESPACE
from inference_tiers.litellm.config import LITELLM_VERSION, PORT, BedrockModel, GuardrailConfig, render_config
from inference_tiers.validation import ArgumentError
from tests.harness import DATA_DIR
from tests.sandbox.helpers import _strict, missing_values_keys

CHART_DATA = DATA_DIR / "platform" / "litellm-chart"
SECRETS_STORE_DATA = DATA_DIR / "platform" / "secrets-store-csi"
GUARDRAIL = GuardrailConfig("arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", "2")
MODELS = [
    BedrockModel("nova", "us.amazon.nova-2-lite-v1:0", GUARDRAIL, "us-east-1"),
    BedrockModel("claude", "us.anthropic.claude-sonnet-4-5-v1:0", GUARDRAIL, "us-east-1"),
]
STATE = chart.GatewayState("db.internal", "5433", "litellm", "cache.internal", "6379")
BALANCER = chart.LoadBalancer("arn:aws:acm:us-east-1:123456789012:certificate/abc", 660)


# A key that holds a secret: its value may only name an environment variable (``os.environ/NAME``).
_SECRET_KEY = re.compile(r"(password|master_key|salt_key|api_key|secret_key|auth_token)$", re.IGNORECASE)


def secret_literals(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, value) of every secret-like literal in ``value``: a string under a secret key that is not an
    ``os.environ/`` reference, or any string that looks like a LiteLLM key (``sk-...``)."""
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in secret_literals(v, f"{path}.{k}".lstrip("."))]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in secret_literals(v, f"{path}[{i}]")]
    if isinstance(value, str):
        leaf = path.rsplit(".", 1)[-1]
        if (_SECRET_KEY.search(leaf) and not value.startswith("os.environ/")) or re.search(
            r"\bsk-\w{4,}", value
        ):
            return [(path, value)]
    return []


def values(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "state": STATE,
        "node_selector": CORE_NODE_LABELS,
        "secret_provider_class": "litellm-state",
        "load_balancer": BALANCER,
        **overrides,
    }
    return chart.chart_values(render_config(MODELS), **arguments)


def test_chart_is_the_pinned_proxy_release() -> None:
    """Chart.yaml @5cf956f: ``appVersion: "1.104.0"``, the proxy release the project pins; the chart's image tag
    defaults to it (values.yaml ``image.tag: ""``; monolith_tests.yaml asserts ``ghcr.io/berriai/litellm:1.104.0``),
    so the values leave ``image`` alone."""
    metadata = yaml.safe_load((CHART_DATA / "Chart.yaml").read_text())
    assert metadata["appVersion"] == LITELLM_VERSION == chart.CHART_APP_VERSION
    assert "image" not in values()


def test_every_value_is_a_key_of_the_pinned_chart() -> None:
    """Every key set is a key of values.yaml @5cf956f (below an empty-map default such as nodeSelector, any key)."""
    rendered = values()
    # Free-form by the chart's design: the proxy config (gateway.config.proxy_config: {}), the annotations and the
    # liveness probe (a whole Probe; _workload.tpl renders ``with .Values.gateway.livenessProbe`` with toYaml).
    free_form = ("gateway.livenessProbe",)
    assert missing_values_keys(rendered, "../platform/litellm-chart/values-keys.yaml", free_form) == []
    assert missing_values_keys({"gateway": {"pdbs": {}}}, "../platform/litellm-chart/values-keys.yaml") == [
        "gateway.pdbs"
    ]


def test_monolith_with_two_or_more_replicas_a_pdb_and_zone_spread() -> None:
    """monolith_tests.yaml @5cf956f: ``monolith.enabled`` renders one Deployment configured by ``gateway.*``
    (HPA ``minReplicas``, PDB ``maxUnavailable``; _workload.tpl ``topologySpreadConstraints``, ``nodeSelector``)."""
    gateway = values(replicas=3)["gateway"]
    assert values()["monolith"] == {"enabled": True}
    assert gateway["hpa"]["minReplicas"] == 3 and gateway["hpa"]["enabled"] is True
    assert gateway["pdb"] == {"enabled": True, "maxUnavailable": 1}
    zone = [
        c for c in gateway["topologySpreadConstraints"] if c["topologyKey"] == "topology.kubernetes.io/zone"
    ]
    assert zone and zone[0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert zone[0]["labelSelector"]["matchLabels"] == dict(chart.pod_labels())


def test_gateway_and_migration_run_on_core_nodes() -> None:
    """values.yaml @5cf956f: ``migrationJob.nodeSelector`` ("The Job does not inherit the other components'
    scheduling values") next to ``gateway.nodeSelector``."""
    rendered = values()
    assert rendered["gateway"]["nodeSelector"] == dict(CORE_NODE_LABELS)
    assert rendered["migrationJob"]["nodeSelector"] == dict(CORE_NODE_LABELS)


def test_probes_resources_and_metrics_sidecar() -> None:
    """values.yaml @5cf956f: ``gateway.startupProbe`` (empty by default), ``gateway.resources`` (4Gi) and
    ``gateway.metricsServer`` (sidecar serving unauthenticated /metrics on ``<fullname>-metrics``; the http port
    serves /metrics behind virtual-key auth, and the renderer keeps ``require_auth_for_metrics_endpoint``)."""
    gateway = values()["gateway"]
    assert gateway["startupProbe"]["httpGet"] == {"path": "/health/readiness", "port": "http"}
    memory = gateway["resources"]["requests"]["memory"]
    assert memory.endswith("Gi") and int(memory[:-2]) >= 4
    assert gateway["resources"]["limits"]["memory"] == memory
    assert gateway["metricsServer"] == {"enabled": True, "port": chart.METRICS_PORT}
    assert gateway["config"]["proxy_config"]["litellm_settings"]["require_auth_for_metrics_endpoint"] is True


def test_migration_hook_ends_inside_the_kubectl_handler() -> None:
    """values.yaml @5cf956f ``migrationJob.activeDeadlineSeconds`` (default 1800, a budget over every retry):
    at most 600 s, so the pre-install hook fails before CDK's 15-minute kubectl handler (trap 1)."""
    job = values()["migrationJob"]
    assert job["activeDeadlineSeconds"] <= 600
    assert job["serviceAccountName"] == chart.SERVICE_ACCOUNT


def test_keepalive_outlasts_the_load_balancer() -> None:
    """LiteLLM's ``KEEPALIVE_TIMEOUT`` (seconds uvicorn keeps an idle connection) above the ALB's idle timeout
    (trap 10), and the ALB idle timeout the ingress sets is the one it is derived from."""
    rendered = values()
    env = {e["name"]: e["value"] for e in rendered["gateway"]["extraEnv"]}
    attributes = rendered["ingress"]["annotations"]["alb.ingress.kubernetes.io/load-balancer-attributes"]
    idle = int(attributes.split("=")[1])
    assert idle == BALANCER.idle_timeout_seconds
    assert int(env["KEEPALIVE_TIMEOUT"]) > idle
    assert "KEEPALIVE_TIMEOUT" not in {e["name"] for e in values(load_balancer=None)["gateway"]["extraEnv"]}


def test_ingress_is_internal_https_only() -> None:
    """AWS Load Balancer Controller annotations (docs/guide/ingress/annotations.md): ``scheme`` internal,
    ``listen-ports`` HTTPS 443 only, the user's ``certificate-arn``; values.yaml @5cf956f ``ingress.controller: alb``."""
    ingress = values()["ingress"]
    notes = ingress["annotations"]
    assert ingress["enabled"] is True and ingress["controller"] == "alb"
    assert notes["alb.ingress.kubernetes.io/scheme"] == "internal"
    assert json.loads(notes["alb.ingress.kubernetes.io/listen-ports"]) == [{"HTTPS": 443}]
    assert notes["alb.ingress.kubernetes.io/certificate-arn"] == BALANCER.certificate_arn
    assert "ingress" not in values(load_balancer=None)


def test_proxy_config_is_the_gateway_tiers_with_guardrails() -> None:
    """One renderer, two runtimes: the chart's proxy_config is render_config's, every Bedrock model carrying
    the guardrail (litellm_params.guardrailConfig), with requests allowed while the database is unreachable."""
    proxy = values()["gateway"]["config"]["proxy_config"]
    expected = render_config(MODELS)
    assert proxy["model_list"] == expected["model_list"]
    for entry in proxy["model_list"]:
        assert entry["litellm_params"]["guardrailConfig"] == GUARDRAIL.render()
    assert proxy["general_settings"]["allow_requests_on_db_unavailable"] is True
    assert expected["general_settings"]["allow_requests_on_db_unavailable"] is False


def test_secrets_by_reference_only() -> None:
    """_helpers.tpl (litellm.serverEnv) reads the database user/password, Redis password and master key from
    Secrets by name; masterkey_secret_tests.yaml @13a46db: ``masterKey.generate`` with no ``secretName`` renders
    ``<fullname>-masterkey`` in the cluster. No value the chart gets holds a secret."""
    rendered = values()
    assert rendered["masterKey"] == {"secretName": "", "secretKey": "master-key", "generate": True}
    assert rendered["database"]["writer"]["passwordSecret"]["name"] == chart.STATE_SECRET
    assert rendered["redis"]["passwordSecret"]["name"] == chart.STATE_SECRET
    assert secret_literals(rendered) == []
    assert secret_literals({"general_settings": {"master_key": "sk-1234"}}) == [
        ("general_settings.master_key", "sk-1234")
    ]
    env = {e["name"] for e in rendered["gateway"]["extraEnv"]}
    assert not env & {"LITELLM_MASTER_KEY", "DATABASE_PASSWORD", "REDIS_PASSWORD", "DATABASE_URL"}


def test_endpoint_names_the_charts_objects() -> None:
    """monolith_tests.yaml @5cf956f: Service ``<fullname>`` port 4000 selecting name/instance/component=proxy,
    metrics Service ``<fullname>-metrics``; masterkey_secret_tests.yaml: ``<fullname>-masterkey``."""
    endpoint = chart.gateway_endpoint()
    assert endpoint.namespace == GATEWAY_NAMESPACE
    assert endpoint.service == values()["fullnameOverride"]
    assert endpoint.metrics_service == f"{endpoint.service}-metrics"
    assert endpoint.master_key_secret == f"{endpoint.service}-masterkey"
    assert dict(endpoint.pod_labels)["app.kubernetes.io/component"] == "proxy"
    assert endpoint.base_url == "http://litellm-gateway.litellm.svc.cluster.local:4000"


def _provider_class() -> dict[str, Any]:
    return chart.secret_provider_class(
        "litellm-state", database_secret_arn="arn:db", redis_secret_arn="arn:redis", region="us-east-1"
    )


def test_secret_provider_class_syncs_the_state_secret() -> None:
    """aws/secrets-store-csi-driver-provider-aws 3.1.1 provider/secret_descriptor.go: ``SecretDescriptor`` json
    tags objectName :29, objectAlias :32, objectType :41, jmesPath :47; ``JMESPathEntry`` path :69, objectAlias :72
    (both required); every synced key is an alias the provider writes. server/server.go reads the attributes
    ``region`` :42, ``objects`` :45 and ``usePodIdentity`` :47, the last with strconv.ParseBool (:166-172), which
    takes "true"."""
    spc = _provider_class()
    synced = spc["spec"]["secretObjects"][0]
    assert synced["secretName"] == chart.STATE_SECRET
    objects = json.loads(spc["spec"]["parameters"]["objects"])
    aliases = {a["objectAlias"] for o in objects for a in o.get("jmesPath", [o])}
    assert {d["objectName"] for d in synced["data"]} == aliases
    assert spc["spec"]["parameters"]["usePodIdentity"] == "true"
    fields = {"objectName", "objectType", "objectAlias", "jmesPath"}
    assert all(set(o) <= fields and o["objectType"] == "secretsmanager" for o in objects)
    assert all(set(e) == {"path", "objectAlias"} for o in objects for e in o.get("jmesPath", []))
    assert set(spc["spec"]["parameters"]) == {"objects", "usePodIdentity", "region"}


def test_secret_provider_class_fits_the_pinned_crd() -> None:
    """The driver's CRD (kubernetes-sigs/secrets-store-csi-driver v1.6.0, vendored with its SOURCE.md), strict:
    ``secretObjects`` (apis/v1/secretproviderclass_types.go :55) of secretName :39, type :41, data :46
    (objectName :31, key :33); a misspelled field is refused, not pruned."""
    crd = yaml.safe_load(
        (SECRETS_STORE_DATA / "secrets-store.csi.x-k8s.io_secretproviderclasses.yaml").read_text()
    )
    (version,) = (v for v in crd["spec"]["versions"] if v["name"] == "v1")
    validator = jsonschema.Draft7Validator(_strict(version["schema"]["openAPIV3Schema"]))
    spc = _provider_class()
    assert (
        crd["spec"]["group"] == spc["apiVersion"].split("/")[0]
        and crd["spec"]["names"]["kind"] == spc["kind"]
    )
    validator.validate(spc)
    spc["spec"]["secretObjects"][0]["secretname"] = spc["spec"]["secretObjects"][0].pop("secretName")
    assert not validator.is_valid(spc)


def test_secrets_store_values_are_keys_of_the_pinned_charts() -> None:
    """Provider chart 3.1.1 (Chart.yaml ``version``; Chart.lock bundles the driver chart 1.6.0 as dependency
    ``secrets-store-csi-driver``); the driver's values.yaml v1.6.0 has ``syncSecret.enabled`` (RBAC to write
    Secrets, templates/role-syncsecret.yaml), ``enableSecretRotation`` and ``rotationPollInterval`` (the
    ``--enable-secret-rotation`` / ``--rotation-poll-interval`` flags, templates/secrets-store-csi-driver.yaml
    :78-83)."""
    provider = yaml.safe_load((SECRETS_STORE_DATA / "provider-Chart.yaml").read_text())
    assert (provider["name"], provider["version"]) == (
        chart.SECRETS_STORE_CHART,
        chart.SECRETS_STORE_CHART_VERSION,
    )
    (driver,) = yaml.safe_load((SECRETS_STORE_DATA / "provider-Chart.lock").read_text())["dependencies"]
    assert (driver["name"], driver["version"]) == ("secrets-store-csi-driver", "1.6.0")
    rendered = chart.secrets_store_values()
    subchart = rendered.pop("secrets-store-csi-driver")
    assert missing_values_keys(rendered, "../platform/secrets-store-csi/provider-values.yaml") == []
    assert missing_values_keys(subchart, "../platform/secrets-store-csi/driver-values.yaml") == []
    assert subchart["syncSecret"]["enabled"] is True and subchart["enableSecretRotation"] is True
    assert subchart["rotationPollInterval"] == f"{chart.ROTATION_POLL_SECONDS}s"
    # usePodIdentity needs the driver to request pod tokens for this audience (provider values.yaml :64-66);
    # the chart's default does, and a list set here would replace it.
    defaults = yaml.safe_load((SECRETS_STORE_DATA / "provider-values.yaml").read_text())
    assert {"audience": "pods.eks.amazonaws.com"} in defaults["secrets-store-csi-driver"]["tokenRequests"]
    assert "tokenRequests" not in subchart


@pytest.fixture
def liveliness_port() -> Iterator[int]:
    """A stand-in for the proxy's ``/health/liveliness`` on a free local port."""

    class Alive(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
            self.send_response(200 if self.path == "/health/liveliness" else 404)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Alive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_a_rotated_password_fails_the_liveness_probe(tmp_path: Path, liveliness_port: int) -> None:
    """The probe is run here with ``sh`` and ``python3`` (the LiteLLM image's): alive while the mounted password
    equals the one the container started with (DATABASE_PASSWORD by secretKeyRef of
    ``database.writer.passwordSecret``: the chart's templates/_helpers.tpl ``litellm.serverEnv``, read at BerriAI/litellm
    07e8a9b, the nearest stored version; 5cf956f's is not in the index) and the proxy answers; a rotation that changed the mount fails it, and the
    kubelet restarts the container with the Secret's new value."""
    probe = values()["gateway"]["livenessProbe"]
    command = [
        part.replace(chart.SECRETS_MOUNT, str(tmp_path)).replace(f":{PORT}/", f":{liveliness_port}/")
        for part in probe["exec"]["command"]
    ]
    (tmp_path / chart.DATABASE_PASSWORD_KEY).write_text("first-password")

    def alive(password: str) -> bool:
        environment = {"PATH": os.environ["PATH"], "DATABASE_PASSWORD": password}
        return subprocess.run(command, env=environment, capture_output=True, timeout=30).returncode == 0

    assert alive("first-password")
    assert not alive("stale-password")
    (tmp_path / chart.DATABASE_PASSWORD_KEY).write_text("second-password")
    assert not alive("first-password") and alive("second-password")
    # Restarted within the poll interval plus the probe's failures, well inside a day.
    window = chart.ROTATION_POLL_SECONDS + probe["periodSeconds"] * probe["failureThreshold"]
    assert window <= 5 * 60


def test_the_liveness_probe_still_needs_the_proxy_to_answer(tmp_path: Path) -> None:
    probe = values()["gateway"]["livenessProbe"]
    command = [part.replace(chart.SECRETS_MOUNT, str(tmp_path)) for part in probe["exec"]["command"]]
    command = [part.replace(f":{PORT}/", ":9/") for part in command]  # the discard port: nothing answers
    (tmp_path / chart.DATABASE_PASSWORD_KEY).write_text("pw")
    environment = {"PATH": os.environ["PATH"], "DATABASE_PASSWORD": "pw"}
    assert subprocess.run(command, env=environment, capture_output=True, timeout=30).returncode != 0


@pytest.mark.parametrize(
    ("param", "overrides", "match"),
    [
        ("replicas", {"replicas": 1}, "from 2"),
        ("max_replicas", {"replicas": 4, "max_replicas": 3}, "from 4"),
        ("node_selector", {"node_selector": {}}, "at least one node label"),
        ("node_selector['node-role']", {"node_selector": {"node-role": "core nodes"}}, "matching"),
        ("state", {"state": "db"}, "GatewayState"),
    ],
)
def test_bad_input_names_the_parameter(param: str, overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ArgumentError, match=match) as raised:
        values(**overrides)
    assert raised.value.param == param
