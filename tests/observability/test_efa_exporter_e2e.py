"""Loopback end to end for the EFA exporter: its own script serves a fake sysfs tree, a real Prometheus scrapes it
through the AMP scraper's own jobs and relabelling (Kubernetes discovery replaced by a file_sd target that
carries the labels pod discovery would give the rendered DaemonSet's pod), evaluates the rendered rules, and
the EFA alerts go pending or fire with the device and the node as their labels once the counters grow."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from inference_tiers.k8s.efa_exporter import EFA_EXPORTER_PORT, EfaExporterSpec, daemon_set
from inference_tiers.observability import collectors, rules
from tests.observability.efa_sysfs import FakeSysfs, fake_sysfs, load_exporter
from tests.observability.prometheus_server import Prometheus, running_prometheus
from tests.observability.tools import allowed_names

NODE = "ip-10-0-12-34.ec2.internal"
DROPPING, FAILING = "rdmap16s27", "rdmap32s27"
# 200 drops/s on DROPPING. rate(...[5m]) divides by the whole 5 minutes while the series is younger than that,
# so a fast drop rate crosses the default 1/s threshold within seconds of the first scrapes.
DROPS_PER_TICK, TICK_SECONDS = 100, 0.5
THRESHOLD = rules.AlertThresholds().efa_drops_per_second


def _label_name(key: str) -> str:
    """How Kubernetes discovery names a pod label or annotation: every character outside [A-Za-z0-9_] becomes _."""
    return re.sub(r"[^A-Za-z0-9_]", "_", key)


def _discovered(template: dict[str, Any], address: str, namespace: str) -> dict[str, str]:
    """The __meta_* labels Kubernetes pod discovery gives the pod of ``template`` on its metrics port."""
    meta = template["metadata"]
    (port,) = template["spec"]["containers"][0]["ports"]
    labels = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": "efa-exporter-7xk2p",
        "__meta_kubernetes_pod_node_name": NODE,
        "__meta_kubernetes_pod_container_port_name": port["name"],
        "__meta_kubernetes_pod_container_port_number": address.rsplit(":", 1)[1],
    }
    labels |= {f"__meta_kubernetes_pod_label_{_label_name(k)}": v for k, v in meta["labels"].items()}
    labels |= {
        f"__meta_kubernetes_pod_annotation_{_label_name(k)}": v for k, v in meta["annotations"].items()
    }
    # The pod listens on EFA_EXPORTER_PORT; on loopback the exporter takes a free port, so the annotation
    # that names the port names that one (the relabelling then builds the address from it, as in the cluster).
    assert labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] == str(EFA_EXPORTER_PORT)
    labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] = address.rsplit(":", 1)[1]
    return labels


@dataclass
class Setup:
    prometheus: Prometheus
    sysfs: FakeSysfs


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("efa-e2e")
    sysfs = fake_sysfs(folder, {DROPPING: "0000:10:1b.0", FAILING: "0000:20:1b.0"})
    exporter = load_exporter()
    httpd = exporter.server(sysfs.infiniband, "127.0.0.1", 0)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    stop = threading.Event()

    def drop_packets() -> None:
        while not stop.wait(TICK_SECONDS):
            sysfs.add(DROPPING, "rx_drops", DROPS_PER_TICK)

    dropping = threading.Thread(target=drop_packets, daemon=True)
    dropping.start()
    spec = EfaExporterSpec()
    address = f"127.0.0.1:{httpd.server_address[1]}"
    targets = folder / "targets.json"
    labels = _discovered(daemon_set(spec)["spec"]["template"], address, spec.namespace)
    targets.write_text(json.dumps([{"targets": [address], "labels": labels}]))
    (folder / "rules.yaml").write_text(rules.rules_yaml())
    scraper = collectors.eks_scrape_config(NODE.split(".")[0])
    config = {
        "global": {
            **scraper["global"],
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "evaluation_interval": "1s",
        },
        "rule_files": [str(folder / "rules.yaml")],
        # Every job of the AMP scraper sees the pod, as in the cluster; only the annotated-pods job may keep it.
        "scrape_configs": [
            {
                **{k: v for k, v in job.items() if k != "kubernetes_sd_configs"},
                "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
            }
            for job in scraper["scrape_configs"]
        ],
    }
    try:
        with running_prometheus(folder, config) as prometheus:
            yield Setup(prometheus, sysfs)
    finally:
        stop.set()
        dropping.join(timeout=5)
        httpd.shutdown()
        httpd.server_close()
        serving.join(timeout=5)


def test_only_the_annotated_pods_job_scrapes_the_exporter_as_the_node(setup: Setup) -> None:
    (up,) = setup.prometheus.wait_for("up == 1")
    assert up["metric"]["job"] == "efa-exporter"
    assert up["metric"]["instance"] == NODE
    assert {up["metric"][k] for k in ("namespace", "pod", "node")} == {
        "kube-system",
        "efa-exporter-7xk2p",
        NODE,
    }
    assert [r["metric"]["job"] for r in setup.prometheus.query("up")] == ["efa-exporter"]


def test_every_series_it_serves_is_allow_listed_and_the_whole_list_is_served(setup: Setup) -> None:
    result = setup.prometheus.wait_for('group by (__name__) ({__name__=~"node_amazonefa_.+"})')
    assert {r["metric"]["__name__"] for r in result} == allowed_names("efa")


def test_packet_drops_above_the_threshold_make_efa_packet_drops_pending_for_that_device(setup: Setup) -> None:
    (alert,) = setup.prometheus.wait_for('ALERTS{alertname="EfaPacketDrops"}', timeout=30)
    labels = alert["metric"]
    assert (labels["alertstate"], labels["device"], labels["instance"]) == ("pending", DROPPING, NODE)
    (rate,) = setup.prometheus.query(f'rate(node_amazonefa_rx_drops{{device="{DROPPING}"}}[5m])')
    assert float(rate["value"][1]) > THRESHOLD
    assert setup.prometheus.query(f'ALERTS{{alertname="EfaPacketDrops", device="{FAILING}"}}') == []


def test_rdma_write_errors_make_efa_errors_fire_for_that_device_only(setup: Setup) -> None:
    setup.prometheus.wait_for(
        f'count_over_time(node_amazonefa_rdma_write_wr_err{{device="{FAILING}"}}[1m]) >= 2'
    )
    setup.sysfs.add(FAILING, "rdma_write_wr_err", 2)
    firing = setup.prometheus.wait_for('ALERTS{alertname="EfaErrors", alertstate="firing"}', timeout=30)
    assert [(a["metric"]["device"], a["metric"]["instance"]) for a in firing] == [(FAILING, NODE)]
    assert firing[0]["metric"]["severity"] == "critical"
    time.sleep(2)  # two more evaluations: the device without errors stays silent
    assert setup.prometheus.query(f'ALERTS{{alertname="EfaErrors", device="{DROPPING}"}}') == []
