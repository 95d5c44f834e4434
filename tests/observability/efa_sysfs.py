"""A fake ``/sys`` with EFA devices laid out as the RDMA core lays them out, for the EFA exporter's tests.

``class/infiniband/<device>`` is a relative symlink into ``devices/`` (as on a real node); the device folder has
the driver's device-wide counters in ``hw_counters/`` and its per-port counters in ``ports/1/hw_counters/``, each
folder with the RDMA core's ``lifespan`` file. The counter names are the EFA driver's (amzn/amzn-drivers
kernel/linux/efa/src/efa_verbs.c @ dba39632, r3.1.0): EFA_DEFINE_DEVICE_STATS + EFA_DEFINE_KVERBS_DEVICE_STATS
and EFA_DEFINE_PORT_STATS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from inference_tiers.k8s.efa_exporter import SCRIPT
from tests.harness import import_file

DEVICE_COUNTERS = (
    "submitted_cmds",
    "completed_cmds",
    "cmds_err",
    "no_completion_cmds",
    "keep_alive_rcvd",
    "alloc_pd_err",
    "create_qp_err",
    "create_cq_err",
    "reg_mr_err",
    "alloc_ucontext_err",
    "create_ah_err",
    "mmap_err",
    "alloc_mr_err",
    "get_dma_mr_err",
)
PORT_COUNTERS = (
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
    "retrans_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
LIFESPAN_MS = 10  # the RDMA core's default (RDMA_HW_STATS_DEFAULT_LIFESPAN)


def load_exporter() -> ModuleType:
    """The exporter script exactly as the ConfigMap ships it, imported from its asset file."""
    return import_file("efa_exporter_under_test", SCRIPT)


@dataclass
class FakeSysfs:
    sys: Path

    @property
    def infiniband(self) -> Path:
        return self.sys / "class" / "infiniband"

    def add_device(self, name: str, pci: str) -> None:
        real = self.sys / "devices" / "pci0000:00" / pci / "infiniband" / name
        for folder in (real / "hw_counters", real / "ports" / "1" / "hw_counters"):
            folder.mkdir(parents=True)
            (folder / "lifespan").write_text(f"{LIFESPAN_MS}\n")
        for counter in DEVICE_COUNTERS:
            (real / "hw_counters" / counter).write_text("0\n")
        for counter in PORT_COUNTERS:
            (real / "ports" / "1" / "hw_counters" / counter).write_text("0\n")
        self.infiniband.mkdir(parents=True, exist_ok=True)
        (self.infiniband / name).symlink_to(Path("../../devices/pci0000:00") / pci / "infiniband" / name)

    def counter_file(self, device: str, counter: str) -> Path:
        base = self.infiniband / device
        return (
            base / "hw_counters" / counter
            if counter in DEVICE_COUNTERS
            else base / "ports/1/hw_counters" / counter
        )

    def add(self, device: str, counter: str, amount: int) -> None:
        """Grow a counter the way the kernel does: the file's value is replaced by a larger one."""
        path = self.counter_file(device, counter)
        staged = path.with_name(f".{path.name}.new")  # never a half-written file for a concurrent scrape
        staged.write_text(f"{int(path.read_text()) + amount}\n")
        staged.replace(path)


def fake_sysfs(root: Path, devices: dict[str, str]) -> FakeSysfs:
    """``devices``: device name to PCI address, such as ``{"rdmap16s27": "0000:10:1b.0"}``."""
    sysfs = FakeSysfs(root / "sys")
    for name, pci in devices.items():
        sysfs.add_device(name, pci)
    return sysfs
