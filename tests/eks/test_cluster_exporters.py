"""ClusterExporters: the kube-state-metrics chart pinned and configured as the chart at its recorded commit expects
(pod label and port names the scraper keeps, read-only RBAC, hardened pod on the system nodes), and the EFA
exporter's ConfigMap and DaemonSet: valid Kubernetes 1.35 objects, least privilege, on the EFA nodes only, kept by
the scraper, and with the requests the GPU-node fit test counts."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import aws_cdk as cdk
import kubernetes_validate
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from inference_tiers.constructs.eks import cluster_exporters
from inference_tiers.constructs.eks.cluster import SYSTEM_NODE_LABEL
from inference_tiers.constructs.eks.cluster_exporters import ClusterExporters, kube_state_metrics_values
from inference_tiers.constructs.eks.efa_node_group import EFA_NODE_POOL, GPU_TAINT, GPU_TOLERATION
from inference_tiers.k8s import efa_exporter
from inference_tiers.k8s.allocatable import pod_requests
from inference_tiers.k8s.disaggregated import GPU_NODE_DAEMONSETS
from inference_tiers.k8s.efa_exporter import EFA_EXPORTER_PORT, EfaExporterSpec
from inference_tiers.observability import collectors
from inference_tiers.validation import ArgumentError
from tests.harness import DATA_DIR
from tests.observability.relabel import kept

CHART = json.loads((DATA_DIR / "observability" / "kube-state-metrics-chart.json").read_text())
KUBERNETES = "1.35"


def _job(name: str) -> dict[str, Any]:
    return next(j for j in collectors.eks_scrape_config("c")["scrape_configs"] if j["job_name"] == name)


# --- kube-state-metrics: the pin and the chart facts it relies on ------------------------------------------


def test_the_pinned_chart_and_image_are_the_recorded_release() -> None:
    assert CHART["version"] == cluster_exporters.KUBE_STATE_METRICS_CHART_VERSION
    assert f"v{CHART['appVersion']}" == cluster_exporters.KUBE_STATE_METRICS_TAG
    assert CHART["image"]["registry"] == cluster_exporters.KUBE_STATE_METRICS_REGISTRY
    assert CHART["image"]["repository"] == cluster_exporters.KUBE_STATE_METRICS_REPOSITORY_PATH
    assert CHART["chart"] == collectors.KUBE_STATE_METRICS  # the pod label's value without nameOverride


def test_the_scrape_job_keeps_the_charts_object_port_and_not_its_telemetry_port() -> None:
    assert CHART["defaults"]["kubeRBACProxy.enabled"] is False and CHART["defaults"]["nameOverride"] == ""
    rules = _job(collectors.KUBE_STATE_METRICS)["relabel_configs"]

    def pod(port_name: str) -> dict[str, str]:
        return {
            "__meta_kubernetes_pod_label_app_kubernetes_io_name": CHART["chart"],
            "__meta_kubernetes_pod_container_port_name": port_name,
            "__meta_kubernetes_pod_container_port_number": str(CHART["container_ports"][port_name]),
        }

    assert kept(rules, pod("http"))
    assert not kept(rules, pod("metrics"))


def test_the_values_use_only_keys_the_chart_has_and_keep_its_defaults_that_matter() -> None:
    values = kube_state_metrics_values()
    assert set(values) <= set(CHART["value_keys"])
    for key in ("nameOverride", "kubeRBACProxy", "hostNetwork", "authFilter", "rbac", "service"):
        assert key not in values, f"{key} changes what the scraper or the RBAC relies on"
    # the chart's hardening, stated explicitly and never weaker
    assert values["securityContext"] == CHART["defaults"]["securityContext"]
    assert values["containerSecurityContext"] == CHART["defaults"]["containerSecurityContext"]
    assert CHART["clusterrole_verbs"] == ["list", "watch"]


def test_it_runs_on_the_system_nodes_with_requests_and_limits() -> None:
    values = kube_state_metrics_values()
    assert values["nodeSelector"] == {SYSTEM_NODE_LABEL: "system"}
    assert "tolerations" not in values  # never on the tainted GPU or sandbox nodes
    assert set(values["resources"]) == {"requests", "limits"}


def test_it_does_not_watch_secrets() -> None:
    values = kube_state_metrics_values()
    assert "secrets" in CHART["defaults"]["collectors"]
    assert values["collectorsExclude"] == ["secrets"]


def test_its_pod_fields_are_valid_kubernetes() -> None:
    values = kube_state_metrics_values()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-state-metrics"},
        "spec": {
            "nodeSelector": values["nodeSelector"],
            "securityContext": {k: v for k, v in values["securityContext"].items() if k != "enabled"},
            "containers": [
                {
                    "name": "kube-state-metrics",
                    "image": cluster_exporters.KUBE_STATE_METRICS_IMAGE,
                    "resources": values["resources"],
                    "securityContext": values["containerSecurityContext"],
                }
            ],
        },
    }
    assert kubernetes_validate.validate(pod, KUBERNETES, strict=True) == KUBERNETES


# --- the EFA exporter's objects ------------------------------------------------------------------------------

SPEC = EfaExporterSpec()


def _daemon_set() -> dict[str, Any]:
    return efa_exporter.daemon_set(SPEC)


def _pod() -> dict[str, Any]:
    return dict(_daemon_set()["spec"]["template"]["spec"])


@pytest.mark.parametrize("manifest", efa_exporter.render(SPEC), ids=lambda m: m["kind"])
def test_every_efa_exporter_object_is_valid_kubernetes(manifest: dict[str, Any]) -> None:
    assert kubernetes_validate.validate(manifest, KUBERNETES, strict=True) == KUBERNETES


def test_the_configmap_ships_the_script_and_a_new_script_rolls_the_pods() -> None:
    config_map, daemon_set = efa_exporter.render(SPEC)
    assert config_map["data"] == {"efa_exporter.py": efa_exporter.SCRIPT.read_text()}
    annotations = daemon_set["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations["inference-tiers/script-sha256"]
        == hashlib.sha256(efa_exporter.SCRIPT.read_bytes()).hexdigest()
    )
    (container,) = _pod()["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "script")
    assert f"{mount['mountPath']}/efa_exporter.py" in container["command"]


def test_it_runs_on_the_efa_nodes_only_and_tolerates_their_taint() -> None:
    pod = _pod()
    assert pod["nodeSelector"] == {"inference-tiers/node-pool": EFA_NODE_POOL}
    assert pod["tolerations"] == [dict(GPU_TOLERATION)]
    assert GPU_TAINT.key == GPU_TOLERATION["key"]


def test_it_has_no_privilege_it_does_not_need() -> None:
    pod = _pod()
    (container,) = pod["containers"]
    assert pod["automountServiceAccountToken"] is False
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
    assert host_paths == ["/sys/class/infiniband"]
    assert all(m["readOnly"] for m in container["volumeMounts"])
    # mounted where it is on the host: its entries are relative symlinks into /sys/devices
    infiniband = next(m for m in container["volumeMounts"] if m["name"] == "infiniband")
    assert infiniband["mountPath"] == "/sys/class/infiniband"
    assert set(container["resources"]) == {"requests", "limits"}


def test_its_requests_are_what_the_gpu_node_fit_test_counts() -> None:
    assert pod_requests(_pod()) == efa_exporter.REQUESTS
    assert GPU_NODE_DAEMONSETS["efa-exporter (inference_tiers.k8s.efa_exporter)"] == efa_exporter.REQUESTS


def test_the_scrapers_annotated_pods_job_keeps_it_on_its_port() -> None:
    template = _daemon_set()["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(EFA_EXPORTER_PORT)
    assert annotations["prometheus.io/path"] == "/metrics"
    (container,) = template["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [EFA_EXPORTER_PORT]
    labels = template["metadata"]["labels"]
    target = {
        "__meta_kubernetes_pod_annotation_prometheus_io_scrape": annotations["prometheus.io/scrape"],
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": labels["app.kubernetes.io/name"],
        "__meta_kubernetes_pod_container_port_number": str(EFA_EXPORTER_PORT),
        "__meta_kubernetes_pod_container_port_name": "metrics",
    }
    jobs = collectors.eks_scrape_config("c")["scrape_configs"]
    assert [j["job_name"] for j in jobs if kept(j["relabel_configs"], target)] == ["pods"]
    assert labels["app.kubernetes.io/component"] == collectors.EFA_EXPORTER  # its job name


def test_only_the_efa_exporter_gets_the_node_as_its_instance() -> None:
    (rule,) = [r for r in _job("pods")["relabel_configs"] if r.get("target_label") == "instance"]
    assert re.fullmatch(rule["regex"], "efa-exporter;ip-10-0-1-2.ec2.internal")
    assert re.fullmatch(rule["regex"], "vllm;ip-10-0-1-2.ec2.internal") is None
    assert re.fullmatch(rule["regex"], "efa-exporter;") is None  # no node name: the address stays


@pytest.mark.parametrize(
    ("changes", "param", "accepted"),
    [
        ({"image": "python:latest"}, "image", "pinned tag"),
        ({"image": 3}, "image", "pinned tag"),
        ({"node_labels": {}}, "node_labels", "non-empty mapping"),
        ({"node_labels": {"bad key!": "x"}}, "node_labels", "label keys"),
        ({"namespace": "Kube_System"}, "namespace", "namespace name"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(changes: dict[str, Any], param: str, accepted: str) -> None:
    with pytest.raises(ArgumentError, match=accepted) as error:
        EfaExporterSpec(**changes)
    assert error.value.param == param and error.value.owner == "EfaExporterSpec"


# --- the construct -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> cdk.Stack:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Exporters")
    cluster = eks.Cluster(
        stack,
        "Cluster",
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )
    ClusterExporters(stack, "WithEfa", cluster=cluster, efa_exporter=SPEC)
    ClusterExporters(stack, "WithoutEfa", cluster=cluster)
    return stack


def test_the_construct_installs_the_pinned_chart_and_the_exporter_manifests(stack: cdk.Stack) -> None:
    template = Template.from_stack(stack)
    charts = template.find_resources("Custom::AWSCDK-EKS-HelmChart")
    assert len(charts) == 2
    for chart in charts.values():
        props = chart["Properties"]
        assert (props["Chart"], props["Version"], props["Namespace"]) == (
            "kube-state-metrics",
            CHART["version"],
            "kube-system",
        )
        assert props["Repository"] == "https://prometheus-community.github.io/helm-charts"
        assert json.loads(props["Values"]) == kube_state_metrics_values()
    manifests = template.find_resources(
        "Custom::AWSCDK-EKS-KubernetesResource",
        {"Properties": {"Manifest": Match.string_like_regexp("efa-exporter")}},
    )
    (manifest,) = manifests.values()
    deployed = json.loads(manifest["Properties"]["Manifest"])
    for obj in deployed:  # the label CDK adds so that a later deploy prunes removed objects
        labels = obj["metadata"]["labels"]
        assert [k for k in labels if k.startswith("aws.cdk.eks/prune-")]
        obj["metadata"]["labels"] = {
            k: v for k, v in labels.items() if not k.startswith("aws.cdk.eks/prune-")
        }
    assert deployed == efa_exporter.render(SPEC)


def test_misuse_is_refused_naming_the_parameter(stack: cdk.Stack) -> None:
    bare = eks.Cluster(stack, "Bare", version=eks.KubernetesVersion.V1_35)
    good = stack.node.find_child("Cluster")
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"cluster": bare}, "cluster", "kubectl_provider_options"),
        ({"cluster": "my-cluster"}, "cluster", "ICluster"),
        ({"cluster": good, "efa_exporter": {"image": "python:3.13"}}, "efa_exporter", "EfaExporterSpec"),
    ]
    for index, (props, param, accepted) in enumerate(cases):
        with pytest.raises(ArgumentError, match=accepted) as error:
            ClusterExporters(stack, f"E{index}", **props)
        assert (error.value.owner, error.value.param) == ("ClusterExporters", param)
