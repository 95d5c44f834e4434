"""The disaggregated tier's Kubernetes manifests, rendered without CDK and checked against pinned facts.

Reference lists (vLLM flags, KV connectors, metrics, vllm-router 0.1.17 --help) are copies under
tests/data/disaggregated/ with an attribution line; the router test also runs the pinned wheel's own parser.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from inference_tiers.k8s.disaggregated import (
    BOOTSTRAP_PORT,
    BOOTSTRAP_PORT_ANNOTATION,
    VLLM_PORT,
    DisaggregatedWorkloadSpec,
    kv_transfer_config,
    render,
    render_transfer_benchmark,
    router_args,
    vllm_serve_args,
)
from tests.harness import DATA_DIR

DATA = DATA_DIR / "disaggregated"
MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def _lines(name: str) -> list[str]:
    return [line for line in (DATA / name).read_text().splitlines() if line and not line.startswith("#")]


VLLM_FLAGS = set(_lines("vllm-serve-flags.txt"))
ROUTER_FLAGS = set(
    re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", (DATA / "vllm-router-0.1.17-help.txt").read_text())
)
KV = [line.split("=", 1) for line in _lines("vllm-kv-connectors.txt")]
KV_CONNECTORS = {v for k, v in KV if k == "kv_connector"}
KV_ROLES = {v for k, v in KV if k == "kv_role"}
KV_CONFIG_KEYS = {v for k, v in KV if k == "kv_transfer_config_key"}
MOONCAKE_EXTRA_KEYS = {v for k, v in KV if k == "mooncake_connector_extra_config_key"}


def make_spec(**overrides: Any) -> DisaggregatedWorkloadSpec:
    props: dict[str, Any] = {
        "model_id": MODEL,
        "instance_type": "p5.48xlarge",
        "vllm_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-mooncake-efa:t",
        "router_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/inference-tiers/vllm-router:0.1.17",
    }
    return DisaggregatedWorkloadSpec(**{**props, **overrides})


SPECS = {
    "default": make_spec(),
    "kv-store": make_spec(enable_kv_store=True, max_model_len=131072, prefill_replicas=2, decode_replicas=3),
    "p5en-tp4": make_spec(instance_type="p5en.48xlarge", tensor_parallel_size=4, hf_token_secret_name=None),
}


def by_kind_name(manifests: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def deployment(spec: DisaggregatedWorkloadSpec, component: str) -> dict[str, Any]:
    return by_kind_name(render(spec))[("Deployment", spec.resource_name(component))]


def container(spec: DisaggregatedWorkloadSpec, component: str) -> dict[str, Any]:
    containers = deployment(spec, component)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def arg_value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, f"{flag} must appear once in {args}"
    return args[args.index(flag) + 1]


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c["env"]}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics for matchLabels and In/NotIn/Exists/DoesNotExist expressions."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------------------------------------------------
# Schema validation
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_manifest_validates_against_kubernetes_1_35_strict(name: str) -> None:
    manifests = render(SPECS[name])
    kinds = [m["kind"] for m in manifests]
    assert kinds[0] == "Namespace"
    assert {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"} <= set(kinds)
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35"


def test_strict_validation_catches_a_misspelled_field() -> None:
    manifest = deployment(make_spec(), "prefill")
    manifest["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # "resources" misspelled
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_mooncake_master_flags_are_flags_of_the_pinned_wheel() -> None:
    known = set(_lines("mooncake-master-0.3.13.post1-flags.txt"))
    master = container(SPECS["kv-store"], "mooncake-master")
    assert master["command"] == ["mooncake_master"]
    flags = {a.removeprefix("--").split("=", 1)[0] for a in master["args"]}
    assert flags and flags <= known, flags - known


def test_kv_store_adds_master_service_and_config() -> None:
    spec = SPECS["kv-store"]
    objects = by_kind_name(render(spec))
    assert ("Deployment", "vllm-pd-mooncake-master") in objects
    assert ("Service", "vllm-pd-mooncake-master") in objects
    config = json.loads(objects[("ConfigMap", "vllm-pd-mooncake-config")]["data"]["mooncake.json"])
    # metadata_server: without "://" Mooncake reads a string as an etcd endpoint, except the literal
    # P2PHANDSHAKE (peers exchange segment metadata directly, no metadata server). Mooncake v0.3.12.post1
    # (6041a609; the snapshot has no v0.3.13.post1 tag, and HEAD 3b5a5941 keeps the same code)
    # mooncake-transfer-engine/src/transfer_engine.cpp:418-433, transfer_metadata.cpp:172,
    # transfer_metadata_plugin.cpp:525-549. The tier deploys no etcd, Redis or HTTP metadata server.
    assert config == {
        "mode": "embedded",
        "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "vllm-pd-mooncake-master.inference.svc:50051",
        "global_segment_size": "32GB",
        "local_buffer_size": "4GB",
        "protocol": "efa",
        "device_name": "",
    }
    rendered = json.dumps(render(spec))
    assert not re.search(r"etcd|redis://|/metadata\b", rendered, re.IGNORECASE)
    assert ("Deployment", "vllm-pd-mooncake-master") not in by_kind_name(render(SPECS["default"]))
    master = objects[("Deployment", "vllm-pd-mooncake-master")]["spec"]["template"]["spec"]
    assert master["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "inference-tiers/node-pool": "gpu-efa",
    }
    assert master["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert "nvidia.com/gpu" not in master["containers"][0]["resources"]["limits"]


# ---------------------------------------------------------------------------------------------------------
# vLLM arguments and the KV-transfer configuration
# ---------------------------------------------------------------------------------------------------------


_POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}
_HF_TOKEN = {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}}
_EFA_ENV = [("VLLM_HOST_IP", _POD_IP), ("FI_PROVIDER", "efa"), ("FI_EFA_USE_DEVICE_RDMA", "1")]
_KV_STORE_ENV = [("MOONCAKE_CONFIG_PATH", "/etc/mooncake/mooncake.json")]


@pytest.mark.parametrize(
    ("name", "role", "expected"),
    [
        ("default", "prefill", [("HF_HOME", "/models/hf"), ("VLLM_MOONCAKE_BOOTSTRAP_PORT", "8998"), ("HF_TOKEN", _HF_TOKEN)]),
        ("default", "decode", [("HF_HOME", "/models/hf"), ("HF_TOKEN", _HF_TOKEN)]),
        ("kv-store", "prefill", [("HF_HOME", "/models/hf"), ("VLLM_MOONCAKE_BOOTSTRAP_PORT", "8998"), ("HF_TOKEN", _HF_TOKEN), *_KV_STORE_ENV]),
        ("kv-store", "decode", [("HF_HOME", "/models/hf"), ("HF_TOKEN", _HF_TOKEN), *_KV_STORE_ENV]),
        ("p5en-tp4", "prefill", [("HF_HOME", "/models/hf"), ("VLLM_MOONCAKE_BOOTSTRAP_PORT", "8998")]),
        ("p5en-tp4", "decode", [("HF_HOME", "/models/hf")]),
    ],
)  # fmt: skip
def test_vllm_containers_get_exactly_these_variables(
    name: str, role: str, expected: list[tuple[str, str | dict[str, Any]]]
) -> None:
    """The whole env list, so an added variable (HF_HUB_OFFLINE=1 would stop the first model download) fails."""
    env = [(e["name"], e.get("value", e.get("valueFrom"))) for e in container(SPECS[name], role)["env"]]
    assert env == [*_EFA_ENV, *expected]


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_every_vllm_flag_is_a_flag_of_the_pinned_vllm(name: str, role: str) -> None:
    c = container(SPECS[name], role)
    assert c["command"] == ["vllm"]
    assert c["args"][:2] == ["serve", MODEL]
    flags = [a for a in c["args"] if a.startswith("--")]
    assert flags and set(flags) <= VLLM_FLAGS, set(flags) - VLLM_FLAGS


@pytest.mark.parametrize("role,kv_role", [("prefill", "kv_producer"), ("decode", "kv_consumer")])
def test_kv_transfer_config_parses_with_mooncake_roles_and_efa(role: str, kv_role: str) -> None:
    spec = make_spec()
    config = json.loads(arg_value(container(spec, role)["args"], "--kv-transfer-config"))
    assert config == {
        "kv_connector": "MooncakeConnector",
        "kv_role": kv_role,
        "kv_connector_extra_config": {"mooncake_protocol": "efa"},
    }
    assert set(config) <= KV_CONFIG_KEYS
    assert config["kv_connector"] in KV_CONNECTORS and config["kv_role"] in KV_ROLES
    assert set(config["kv_connector_extra_config"]) <= MOONCAKE_EXTRA_KEYS


@pytest.mark.parametrize(
    "role,outer,store", [("prefill", "kv_producer", "kv_both"), ("decode", "kv_consumer", "kv_consumer")]
)
def test_kv_store_wraps_both_connectors_in_multiconnector(role: str, outer: str, store: str) -> None:
    config = json.loads(arg_value(container(SPECS["kv-store"], role)["args"], "--kv-transfer-config"))
    assert config["kv_connector"] == "MultiConnector" and config["kv_role"] == outer
    p2p, pool = config["kv_connector_extra_config"]["connectors"]
    assert p2p == kv_transfer_config(role, kv_store=False)  # "efa" still set on the nested P2P connector
    assert pool == {"kv_connector": "MooncakeStoreConnector", "kv_role": store}
    for connector in (config, p2p, pool):
        assert set(connector) <= KV_CONFIG_KEYS
        assert connector["kv_connector"] in KV_CONNECTORS and connector["kv_role"] in KV_ROLES
    env = env_of(container(SPECS["kv-store"], role))
    assert env["MOONCAKE_CONFIG_PATH"]["value"] == "/etc/mooncake/mooncake.json"


def test_tensor_parallelism_defaults_to_every_gpu_of_the_node() -> None:
    assert arg_value(container(make_spec(), "decode")["args"], "--tensor-parallel-size") == "8"
    assert arg_value(container(SPECS["p5en-tp4"], "decode")["args"], "--tensor-parallel-size") == "4"
    assert arg_value(vllm_serve_args(SPECS["kv-store"], "prefill"), "--max-model-len") == "131072"
    assert "--max-model-len" not in vllm_serve_args(make_spec(), "prefill")


def test_efa_transport_environment() -> None:
    for role in ("prefill", "decode"):
        env = env_of(container(make_spec(), role))
        assert env["VLLM_HOST_IP"] == {
            "name": "VLLM_HOST_IP",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        }
        assert env["FI_PROVIDER"]["value"] == "efa"
        assert env["FI_EFA_USE_DEVICE_RDMA"]["value"] == "1"
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "hf-token",
            "key": "token",
            "optional": True,
        }
    prefill = env_of(container(make_spec(), "prefill"))
    assert prefill["VLLM_MOONCAKE_BOOTSTRAP_PORT"]["value"] == str(BOOTSTRAP_PORT)
    assert "VLLM_MOONCAKE_BOOTSTRAP_PORT" not in env_of(container(make_spec(), "decode"))
    assert "HF_TOKEN" not in env_of(container(SPECS["p5en-tp4"], "prefill"))
    dotted = env_of(container(make_spec(hf_token_secret_name="hf.token-2"), "decode"))
    assert dotted["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "hf.token-2"


# ---------------------------------------------------------------------------------------------------------
# Scheduling, resources, probes
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("instance,gpus,efa", [("p5.48xlarge", 8, 32), ("p5en.48xlarge", 8, 16)])
def test_resources_request_the_gpus_every_efa_device_and_hugepages(
    instance: str, gpus: int, efa: int
) -> None:
    spec = make_spec(instance_type=instance)
    for role in ("prefill", "decode"):
        resources = container(spec, role)["resources"]
        for kind in ("requests", "limits"):
            assert resources[kind]["nvidia.com/gpu"] == str(gpus)
            assert resources[kind]["vpc.amazonaws.com/efa"] == str(efa)
            assert resources[kind]["hugepages-2Mi"] == "5120Mi"
            assert resources[kind]["memory"] == "1536Gi"  # 3/4 of 2048 GiB
        assert resources["requests"]["cpu"] == "144"
        assert "IPC_LOCK" in container(spec, role)["securityContext"]["capabilities"]["add"]


def test_tp_below_the_node_requests_only_its_gpus() -> None:
    assert container(SPECS["p5en-tp4"], "prefill")["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_dev_shm_is_memory_backed() -> None:
    pod = deployment(make_spec(), "decode")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/dev/shm"] == "dshm"
    assert not any("hostPath" in v for v in pod["volumes"])  # never /dev/infiniband from the host


def test_prefill_and_decode_never_share_a_node() -> None:
    spec = make_spec()
    pods = {role: deployment(spec, role)["spec"]["template"] for role in ("prefill", "decode")}
    for role, template in pods.items():
        terms = template["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert len(terms) == 1 and terms[0]["topologyKey"] == "kubernetes.io/hostname"
        # The term repels pods of both roles, so a prefill never lands next to a decode (or another prefill).
        for other in pods.values():
            assert selector_matches(terms[0]["labelSelector"], other["metadata"]["labels"]), role
        assert not selector_matches(terms[0]["labelSelector"], spec.labels("router"))


def test_gpu_pods_tolerate_the_taint_and_select_the_efa_nodes() -> None:
    pod = deployment(make_spec(), "prefill")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "inference-tiers/node-pool": "gpu-efa",
    }
    assert pod["automountServiceAccountToken"] is False
    custom = deployment(make_spec(gpu_node_labels={"pool": "p5"}), "prefill")["spec"]["template"]["spec"]
    assert custom["nodeSelector"]["pool"] == "p5"


def test_probes_are_sized_for_model_load_and_efa_registration() -> None:
    c = container(make_spec(), "prefill")
    startup = c["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"}
    assert startup["periodSeconds"] * startup["failureThreshold"] == 60 * 60
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    longer = container(make_spec(startup_timeout_minutes=90), "prefill")["startupProbe"]
    assert longer["periodSeconds"] * longer["failureThreshold"] == 90 * 60


def test_replica_counts() -> None:
    spec = SPECS["kv-store"]
    assert deployment(spec, "prefill")["spec"]["replicas"] == 2
    assert deployment(spec, "decode")["spec"]["replicas"] == 3
    assert deployment(spec, "router")["spec"]["replicas"] == 1


def test_metrics_are_exposed_for_scraping() -> None:
    spec = SPECS["kv-store"]
    expected = {
        "prefill": str(VLLM_PORT),
        "decode": str(VLLM_PORT),
        "router": "29000",
        "mooncake-master": "9003",
    }
    for component, port in expected.items():
        template = deployment(spec, component)["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == port
        ports = {p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
        assert int(port) in ports


# ---------------------------------------------------------------------------------------------------------
# Router
# ---------------------------------------------------------------------------------------------------------


def _selector_arg(args: list[str], flag: str) -> dict[str, str]:
    start = args.index(flag) + 1
    values = []
    for a in args[start:]:
        if a.startswith("--"):
            break
        values.append(a)
    return dict(v.split("=", 1) for v in values)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_router_flag_is_a_flag_of_vllm_router_0_1_17(name: str) -> None:
    args = container(SPECS[name], "router")["args"]
    flags = [a for a in args if a.startswith("--")]
    assert flags and set(flags) <= ROUTER_FLAGS, set(flags) - ROUTER_FLAGS
    assert arg_value(args, "--kv-connector") == "mooncake"
    assert "--vllm-pd-disaggregation" in args and "--service-discovery" in args


def test_router_selectors_match_exactly_their_role_pods() -> None:
    spec = make_spec()
    args = container(spec, "router")["args"]
    labels = {
        role: deployment(spec, role)["spec"]["template"]["metadata"]["labels"]
        for role in ("prefill", "decode")
    }
    for role, other in (("prefill", "decode"), ("decode", "prefill")):
        selector = _selector_arg(args, f"--{role}-selector")
        assert selector_matches({"matchLabels": selector}, labels[role])
        assert not selector_matches({"matchLabels": selector}, labels[other])
    assert arg_value(args, "--service-discovery-namespace") == spec.namespace
    assert arg_value(args, "--service-discovery-port") == str(VLLM_PORT)
    prefill = deployment(spec, "prefill")["spec"]["template"]
    assert prefill["metadata"]["annotations"][BOOTSTRAP_PORT_ANNOTATION] == str(BOOTSTRAP_PORT)
    assert BOOTSTRAP_PORT in {p["containerPort"] for p in prefill["spec"]["containers"][0]["ports"]}
    assert (
        BOOTSTRAP_PORT_ANNOTATION
        not in deployment(spec, "decode")["spec"]["template"]["metadata"]["annotations"]
    )


def test_router_args_parse_and_build_a_router_with_the_pinned_wheel() -> None:
    """vllm-router==0.1.17 (dev extra): its own argparse, validation and Rust Router constructor accept them."""
    import argparse
    from importlib.metadata import version

    from vllm_router.router import Router
    from vllm_router.router_args import RouterArgs

    assert version("vllm-router") == "0.1.17"
    spec = make_spec()
    parser = argparse.ArgumentParser(exit_on_error=False)
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    parsed = RouterArgs.from_cli_args(parser.parse_args(router_args(spec)), use_router_prefix=False)
    parsed._validate_router_args()
    assert parsed.kv_connector == "mooncake" and parsed.vllm_pd_disaggregation and parsed.service_discovery
    assert parsed.prefill_selector == spec.selector_labels("prefill")
    assert parsed.decode_selector == spec.selector_labels("decode")
    assert (parsed.host, parsed.port, parsed.prometheus_host) == ("0.0.0.0", 30000, "0.0.0.0")
    assert Router.from_args(parsed) is not None
    with pytest.raises(SystemExit):  # the same parser rejects a flag 0.1.17 does not have
        parser.parse_args([*router_args(spec), "--pd-disaggregation"])


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_pinned_router_starts_with_the_rendered_arguments() -> None:
    """Start the real vllm-router 0.1.17 on loopback with the rendered arguments (host/ports overridden last).

    Outside a cluster its Kubernetes discovery cannot start, which it logs and survives; everything else
    (P/D mode, Mooncake connector, policies, metrics server) is the configuration the pods will run.
    """
    port, metrics_port = _free_loopback_port(), _free_loopback_port()
    args = [
        *router_args(make_spec()),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    executable = Path(sys.executable).with_name("vllm-router")
    process = subprocess.Popen([executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 15
        health = None
        while health is None and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    health = response.status
            except OSError:
                time.sleep(0.2)
        assert health == 200, f"router exited with {process.poll()} or never answered /health"
    finally:
        process.terminate()
        log = process.communicate(timeout=10)[0].decode(errors="replace")
    assert "VllmPDRouter instance created" in log
    assert "Mooncake connector enabled" in log


def test_router_rbac_allows_only_reading_pods_in_its_namespace() -> None:
    spec = make_spec()
    objects = by_kind_name(render(spec))
    role = objects[("Role", "vllm-pd-router")]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = objects[("RoleBinding", "vllm-pd-router")]
    assert binding["roleRef"]["name"] == "vllm-pd-router"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "vllm-pd-router", "namespace": "inference"}
    ]
    assert ("ServiceAccount", "vllm-pd-router") in objects
    assert deployment(spec, "router")["spec"]["template"]["spec"]["serviceAccountName"] == "vllm-pd-router"
    assert not any(m["kind"].startswith("Cluster") for m in render(spec))


def test_router_is_behind_an_internal_load_balancer() -> None:
    spec = make_spec(allowed_cidrs=["10.1.0.0/16"])
    service = by_kind_name(render(spec))[("Service", "vllm-pd-router")]
    assert service["spec"]["type"] == "LoadBalancer"
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.1.0.0/16"]
    assert selector_matches({"matchLabels": service["spec"]["selector"]}, spec.labels("router"))
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]


# ---------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------


def test_transfer_benchmark_pods_mirror_the_vllm_pods_on_two_nodes() -> None:
    spec = make_spec(instance_type="p5en.48xlarge")
    target, initiator = render_transfer_benchmark(spec)
    vllm = container(spec, "prefill")
    for pod in (target, initiator):
        assert kubernetes_validate.validate(pod, "1.35", strict=True) == "1.35"
        [c] = pod["spec"]["containers"]
        assert c["command"] == ["sleep", "infinity"] and c["image"] == spec.vllm_image
        assert c["resources"] == vllm["resources"]
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
        assert {e["name"] for e in c["env"]} == {"VLLM_HOST_IP", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"}
        [term] = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert selector_matches(term["labelSelector"], target["metadata"]["labels"])
        assert selector_matches(term["labelSelector"], initiator["metadata"]["labels"])
    assert [p["metadata"]["name"] for p in (target, initiator)] == [
        "vllm-pd-transfer-bench-target",
        "vllm-pd-transfer-bench-initiator",
    ]
    assert all(m["kind"] != "Pod" for m in render(spec))  # not part of the deployed workload


def test_extra_env_reaches_both_vllm_roles_after_the_managed_variables() -> None:
    spec = make_spec(extra_env={"MC_EFA_NIC_SELECTION": "local", "MC_MAX_CONCURRENT_REG_MR": "16"})
    for role in ("prefill", "decode"):
        names = [e["name"] for e in container(spec, role)["env"]]
        assert names[-2:] == ["MC_EFA_NIC_SELECTION", "MC_MAX_CONCURRENT_REG_MR"]
        assert env_of(container(spec, role))["MC_EFA_NIC_SELECTION"]["value"] == "local"
    assert "MC_EFA_NIC_SELECTION" not in env_of(container(make_spec(), "prefill"))
