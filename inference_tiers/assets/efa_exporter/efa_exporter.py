"""EFA hardware counters for Prometheus, with the Python standard library only (it runs in a plain python image).

The RDMA core publishes every counter an RDMA driver registers as one read-only sysfs file (mode 0444), and
the EFA driver registers two sets (``EFA_DEFINE_DEVICE_STATS`` and ``EFA_DEFINE_PORT_STATS`` in the driver's
``efa_verbs.c``):

    <root>/<device>/hw_counters/<counter>              device-wide: admin-queue commands, verbs errors
    <root>/<device>/ports/<port>/hw_counters/<counter>  per port: traffic, RDMA read/write, drops, retransmits

where ``<root>`` is ``/sys/class/infiniband``. Each file becomes ``node_amazonefa_<counter>`` with the labels
``device`` (and ``port`` for the per-port set). Every driver counter only grows, so each family is a ``counter``;
the one exception is ``lifespan``, which the RDMA core (not the driver) adds to each ``hw_counters`` folder:
how many milliseconds it caches the values before asking the device again (writable by root, so a gauge).
``node_amazonefa_info{device}`` is 1 for every device found, so a dashboard can count the devices of a node.

Counters the driver adds in a later release are served too (any file name that is a valid metric name), with a
generic help text. A file that cannot be read or holds no integer is left out of that scrape and logged.
"""

from __future__ import annotations

import argparse
import http.server
import re
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PREFIX = "node_amazonefa_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
GAUGES = frozenset({"lifespan"})
INFO = "info"
# What each counter of the EFA driver (amzn-drivers r3.1.0) counts, as its name and the driver's code say.
HELP = {
    "submitted_cmds": "Admin-queue commands the driver submitted to the device.",
    "completed_cmds": "Admin-queue commands the device completed.",
    "cmds_err": "Admin-queue commands that completed with an error.",
    "no_completion_cmds": "Admin-queue commands that timed out without a completion.",
    "keep_alive_rcvd": "Keep-alive events received from the device.",
    "alloc_pd_err": "Failed protection-domain allocations.",
    "create_qp_err": "Failed queue-pair creations.",
    "create_cq_err": "Failed completion-queue creations.",
    "reg_mr_err": "Failed memory-region registrations.",
    "alloc_ucontext_err": "Failed user-context allocations.",
    "create_ah_err": "Failed address-handle creations.",
    "mmap_err": "Failed mmap calls on the device.",
    "alloc_mr_err": "Failed kernel memory-region allocations.",
    "get_dma_mr_err": "Failed kernel DMA memory-region requests.",
    "tx_bytes": "Bytes transmitted.",
    "tx_pkts": "Packets transmitted.",
    "rx_bytes": "Bytes received.",
    "rx_pkts": "Packets received.",
    "rx_drops": "Received packets dropped.",
    "send_bytes": "Bytes of send work requests.",
    "send_wrs": "Send work requests.",
    "recv_bytes": "Bytes of receive work requests.",
    "recv_wrs": "Receive work requests.",
    "rdma_read_wrs": "RDMA read work requests.",
    "rdma_read_bytes": "Bytes read by RDMA read work requests.",
    "rdma_read_wr_err": "RDMA read work requests that failed.",
    "rdma_read_resp_bytes": "Bytes sent in responses to remote RDMA reads.",
    "rdma_write_wrs": "RDMA write work requests.",
    "rdma_write_bytes": "Bytes written by RDMA write work requests.",
    "rdma_write_wr_err": "RDMA write work requests that failed.",
    "rdma_write_recv_bytes": "Bytes received from remote RDMA writes.",
    "retrans_bytes": "Bytes retransmitted.",
    "retrans_pkts": "Packets retransmitted.",
    "retrans_timeout_events": "Retransmission timeouts.",
    "unresponsive_remote_events": "Remote peers that stopped responding.",
    "impaired_remote_conn_events": "Connections to remote peers that became impaired.",
    "lifespan": "Milliseconds the RDMA core caches this folder's counter values before reading the device again.",
}
_METRIC_NAME = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class Sample:
    counter: str
    labels: tuple[tuple[str, str], ...]
    value: int


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _read_folder(folder: Path, labels: tuple[tuple[str, str], ...]) -> Iterable[Sample]:
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if not _METRIC_NAME.fullmatch(path.name) or path.name == INFO:
            continue
        try:
            value = int(path.read_text().strip())
        except (OSError, ValueError) as error:
            print(f"efa-exporter: skipped {path}: {error}", file=sys.stderr)
            continue
        yield Sample(path.name, labels, value)


def collect(root: Path) -> list[Sample]:
    """Every counter of every EFA device under ``root``, and one ``info`` sample per device."""
    samples: list[Sample] = []
    devices = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for device in devices:
        labels = (("device", device.name),)
        samples.append(Sample(INFO, labels, 1))
        samples.extend(_read_folder(device / "hw_counters", labels))
        ports = device / "ports"
        for port in sorted(ports.iterdir()) if ports.is_dir() else []:
            samples.extend(_read_folder(port / "hw_counters", (*labels, ("port", port.name))))
    return samples


def _help(counter: str) -> str:
    if counter == INFO:
        return "1 for every EFA device the exporter found."
    return HELP.get(counter, f"EFA hardware counter {counter} (not documented by this exporter).")


def render(samples: Iterable[Sample]) -> str:
    """The Prometheus text exposition (format 0.0.4): one HELP and TYPE line per family, then its samples."""
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.counter, []).append(sample)
    lines: list[str] = []
    for counter, members in families.items():
        name = PREFIX + counter
        kind = "gauge" if counter in GAUGES or counter == INFO else "counter"
        lines += [f"# HELP {name} {_help(counter)}", f"# TYPE {name} {kind}"]
        for sample in members:
            labels = ",".join(f'{key}="{_escape(value)}"' for key, value in sample.labels)
            lines.append(f"{name}{{{labels}}} {sample.value}")
    return "\n".join(lines) + "\n" if lines else ""


def handler(root: Path) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = render(collect(root)).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
            """No line per request: the scraper and the liveness probe call every few seconds."""

    return Handler


def server(root: Path, host: str, port: int) -> http.server.ThreadingHTTPServer:
    return http.server.ThreadingHTTPServer((host, port), handler(root))


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve EFA hw_counters as Prometheus metrics.")
    parser.add_argument(
        "--sysfs", type=Path, default=Path("/sys/class/infiniband"), help="RDMA device folder"
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, default=9110)
    args = parser.parse_args(argv)
    # As PID 1 of its container the process ignores SIGTERM unless it handles it: stop at once on pod deletion.
    signal.signal(signal.SIGTERM, _stop)
    with server(args.sysfs, args.host, args.port) as httpd:
        httpd.serve_forever()


if __name__ == "__main__":
    main()
