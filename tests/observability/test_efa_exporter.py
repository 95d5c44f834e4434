"""The EFA exporter's own code (the script the ConfigMap ships) against a fake sysfs tree: what it serves over
HTTP on loopback, in which format, with which labels, and what it does with files it cannot use."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from tests.observability.efa_sysfs import (
    DEVICE_COUNTERS,
    LIFESPAN_MS,
    PORT_COUNTERS,
    FakeSysfs,
    fake_sysfs,
    load_exporter,
)
from tests.observability.tools import ALLOW_LISTS, allowed_names, run

DEVICES = {"rdmap16s27": "0000:10:1b.0", "rdmap32s27": "0000:20:1b.0"}
_SAMPLE = re.compile(r"(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\d+)")


@pytest.fixture(scope="module")
def exporter() -> ModuleType:
    return load_exporter()


@pytest.fixture
def sysfs(tmp_path: Path) -> FakeSysfs:
    return fake_sysfs(tmp_path, DEVICES)


@contextmanager
def serving(exporter: ModuleType, root: Path) -> Iterator[str]:
    httpd = exporter.server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _scrape(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def _samples(body: str) -> list[tuple[str, dict[str, str], int]]:
    samples = []
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(line)
        assert match, f"not a sample line: {line!r}"
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        samples.append((match["name"], labels, int(match["value"])))
    return samples


def test_it_serves_exactly_the_allow_listed_family_over_http(exporter: ModuleType, sysfs: FakeSysfs) -> None:
    with serving(exporter, sysfs.infiniband) as url:
        content_type, body = _scrape(url)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert {name for name, _, _ in _samples(body)} == allowed_names("efa")


def test_the_allow_list_says_which_exporter_serves_it() -> None:
    header = ALLOW_LISTS["efa"].read_text().splitlines()[0]
    assert "this project's EFA exporter" in header and "efa_exporter.py" in header
    assert "does not deploy" not in header


def test_every_family_has_one_help_and_one_type_line_before_its_samples(
    exporter: ModuleType, sysfs: FakeSysfs
) -> None:
    body = exporter.render(exporter.collect(sysfs.infiniband))
    seen: list[str] = []
    types: dict[str, str] = {}
    current = None
    for line in body.splitlines():
        if line.startswith("# HELP "):
            current = line.split()[2]
            assert current not in seen, f"{current} has two HELP lines"
            seen.append(current)
            assert len(line.split(maxsplit=3)) == 4, f"{current} has an empty help text"
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name == current
            types[name] = kind
        else:
            assert line.split("{")[0] == current, f"{line!r} is outside its family's block"
    gauges = {"node_amazonefa_lifespan", "node_amazonefa_info"}
    assert {n for n, k in types.items() if k == "gauge"} == gauges
    assert {n for n, k in types.items() if k == "counter"} == allowed_names("efa") - gauges


def test_device_counters_are_per_device_and_port_counters_per_device_and_port(
    exporter: ModuleType, sysfs: FakeSysfs
) -> None:
    sysfs.add("rdmap16s27", "cmds_err", 3)
    sysfs.add("rdmap32s27", "rx_drops", 7)
    samples = _samples(exporter.render(exporter.collect(sysfs.infiniband)))
    by_key = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples}
    assert by_key[("node_amazonefa_cmds_err", (("device", "rdmap16s27"),))] == 3
    assert by_key[("node_amazonefa_rx_drops", (("device", "rdmap32s27"), ("port", "1")))] == 7
    for name, labels, _ in samples:
        counter = name.removeprefix("node_amazonefa_")
        expected = {"device", "port"} if counter in PORT_COUNTERS else {"device"}
        if counter != "lifespan":
            assert set(labels) == expected, (name, labels)
    lifespans = [(labels, v) for n, labels, v in samples if n == "node_amazonefa_lifespan"]
    assert len(lifespans) == 2 * len(DEVICES)  # the device folder and the port folder of each device
    assert {v for _, v in lifespans} == {LIFESPAN_MS}
    info = [labels["device"] for n, labels, v in samples if n == "node_amazonefa_info" and v == 1]
    assert info == sorted(DEVICES)


def test_every_known_counter_has_its_own_help_text(exporter: ModuleType) -> None:
    assert set(exporter.HELP) == {*DEVICE_COUNTERS, *PORT_COUNTERS, "lifespan"}
    assert {exporter.PREFIX + c for c in exporter.HELP} | {"node_amazonefa_info"} == allowed_names("efa")


def test_unreadable_and_foreign_files_are_left_out_and_the_rest_served(
    exporter: ModuleType, sysfs: FakeSysfs, capsys: pytest.CaptureFixture[str]
) -> None:
    sysfs.counter_file("rdmap16s27", "tx_bytes").write_text("not a number\n")
    sysfs.counter_file("rdmap16s27", "rx_bytes").unlink()
    folder = sysfs.counter_file("rdmap16s27", "rx_pkts")
    folder.unlink()
    folder.mkdir()  # a folder where a file belongs: reading it fails (the tests run as root: no chmod 000)
    (sysfs.infiniband / "rdmap16s27" / "hw_counters" / "Not-A-Metric").write_text("1\n")
    samples = _samples(exporter.render(exporter.collect(sysfs.infiniband)))
    first = {n for n, labels, _ in samples if labels["device"] == "rdmap16s27"}
    second = {n for n, labels, _ in samples if labels["device"] == "rdmap32s27"}
    assert second - first == {"node_amazonefa_tx_bytes", "node_amazonefa_rx_bytes", "node_amazonefa_rx_pkts"}
    assert not any("Not-A-Metric" in n for n in first)
    logged = capsys.readouterr().err
    assert "tx_bytes" in logged and "rx_pkts" in logged


def test_a_counter_of_a_newer_driver_is_served_with_a_generic_help(
    exporter: ModuleType, sysfs: FakeSysfs
) -> None:
    (sysfs.infiniband / "rdmap16s27" / "ports" / "1" / "hw_counters" / "future_counter").write_text("5\n")
    body = exporter.render(exporter.collect(sysfs.infiniband))
    assert "# TYPE node_amazonefa_future_counter counter" in body
    assert 'node_amazonefa_future_counter{device="rdmap16s27",port="1"} 5' in body


def test_a_node_without_efa_devices_serves_an_empty_page(exporter: ModuleType, tmp_path: Path) -> None:
    with serving(exporter, tmp_path / "missing") as url:
        assert _scrape(url)[1] == ""


def test_only_the_metrics_path_is_served(exporter: ModuleType, sysfs: FakeSysfs) -> None:
    with serving(exporter, sysfs.infiniband) as url:
        for path in ("/", "/metricsx", "/../metrics"):
            with pytest.raises(urllib.error.HTTPError) as error:
                urllib.request.urlopen(f"{url}{path}", timeout=5)
            assert error.value.code == 404


def test_promtool_finds_nothing_but_the_missing_total_suffix(exporter: ModuleType, sysfs: FakeSysfs) -> None:
    """Real promtool lints the page; the one finding it may report is the counters' missing ``_total``, which
    the family keeps on purpose (the aws-samples EFA exporter's names, which the rules and dashboards read)."""
    result = run("promtool", "check", "metrics", stdin=exporter.render(exporter.collect(sysfs.infiniband)))
    findings = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert findings, "promtool reported nothing: the lint did not run"
    assert len(findings) == len(allowed_names("efa")) - 2  # every counter family once; the two gauges pass
    assert all('counter metrics should have "_total" suffix' in line for line in findings), findings
