"""What an EKS node running the AL2023 AMI offers pods (its allocatable), from the instance's hardware.

Kubernetes schedules a pod only if its requests fit the node's allocatable: capacity minus kube-reserved,
system-reserved and the hard eviction threshold, and (for memory) minus the pre-allocated huge pages. nodeadm,
the AL2023 node bootstrap, sets those values itself; this module applies its formulas, so a test can prove
that rendered pods fit every instance type before anything is deployed. Sources:

- kube-reserved and eviction: ``awslabs/amazon-eks-ami`` ``nodeadm/internal/kubelet/config.go``
  (``withDefaultReservedResources``, ``getCPUMillicoresToReserve``, ``getMemoryMebibytesToReserve``,
  ``defaultKubeletSubConfig``): CPU 6 % of the first core, 1 % of the second, 0.5 % of the third and
  fourth, 0.25 % of every further one; memory ``11 MiB x maxPods + 255 MiB``; no system-reserved (only its
  cgroup); ``evictionHard: memory.available 100Mi``. Karpenter's troubleshooting guide gives the same sums.
- maxPods: nodeadm's ``eni-max-pods.txt`` (ENIs x (IPv4 addresses per ENI - 1) + 2; network card 0 only on
  multi-card types such as p5), copied below for the GPU types of :mod:`inference_tiers.instance_types`.
- memory capacity: the kernel reports less than the instance's nominal memory; Karpenter's default estimate
  of the gap, ``VM_MEMORY_OVERHEAD_PERCENT`` = 7.5 % (karpenter-provider-aws docs, settings and
  troubleshooting), is used, which is on the safe side for large instances.
- huge pages: kubelet subtracts the pre-allocated huge pages from allocatable memory and advertises them as
  ``hugepages-2Mi``; the EFA installer in the AL2023 NVIDIA AMI pre-allocates 5128 pages of 2 MiB.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from inference_tiers.instance_types import GpuInstanceType

# nodeadm's eni-max-pods.txt (awslabs/amazon-eks-ami @ 5e1334f2) for the types in instance_types.py.
# fmt: off
MAX_PODS: dict[str, int] = {
    "g5.xlarge": 58, "g5.2xlarge": 58, "g5.4xlarge": 234, "g5.8xlarge": 234, "g5.12xlarge": 737,
    "g5.16xlarge": 234, "g5.24xlarge": 737, "g5.48xlarge": 345,
    "g6.xlarge": 58, "g6.2xlarge": 58, "g6.4xlarge": 234, "g6.8xlarge": 234, "g6.12xlarge": 234,
    "g6.16xlarge": 737, "g6.24xlarge": 737, "g6.48xlarge": 737,
    "g6e.xlarge": 58, "g6e.2xlarge": 58, "g6e.4xlarge": 234, "g6e.8xlarge": 234, "g6e.12xlarge": 292,
    "g6e.16xlarge": 737, "g6e.24xlarge": 492, "g6e.48xlarge": 492,
    "p4d.24xlarge": 737, "p4de.24xlarge": 737,
    "p5.48xlarge": 100, "p5e.48xlarge": 100, "p5en.48xlarge": 198,
}
# fmt: on
EVICTION_HARD_MEMORY_MIB = 100
VM_MEMORY_OVERHEAD = 0.075
HUGEPAGES_2MI_PAGES = 5128


@dataclass(frozen=True)
class Resources:
    """An amount of the resources a pod requests or a node offers (CPU in millicores, memory in MiB)."""

    cpu_millicores: int = 0
    memory_mib: int = 0
    hugepages_2mi_mib: int = 0
    gpus: int = 0
    efa: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def exceeding(self, available: Resources) -> list[str]:
        """The resources of which this amount asks for more than ``available`` offers, with both figures."""
        return [
            f"{f.name} {getattr(self, f.name)} > {getattr(available, f.name)}"
            for f in fields(self)
            if getattr(self, f.name) > getattr(available, f.name)
        ]


def kube_reserved_cpu_millicores(cpus: int) -> int:
    """nodeadm's CPU reservation for a node with ``cpus`` CPUs (6 %, 1 %, 0.5 %, 0.5 %, then 0.25 % each)."""
    total = cpus * 1000
    reserved = 0
    for start, end, basis_points in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > start:
            reserved += (min(total, end) - start) * basis_points // 10000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    """nodeadm's memory reservation: 11 MiB per pod the node may run, plus 255 MiB."""
    return 11 * max_pods + 255


def node_allocatable(
    instance: GpuInstanceType,
    *,
    threads_per_core: int = 2,
    efa_devices: int | None = None,
    hugepages_2mi_pages: int = HUGEPAGES_2MI_PAGES,
) -> Resources:
    """The allocatable of an EKS AL2023 node of ``instance`` (every type here has 2 threads per core;
    ``threads_per_core=1`` halves the CPUs), with ``efa_devices`` attached (default: all of them)."""
    if threads_per_core not in (1, 2):
        raise ValueError(f"threads_per_core: got {threads_per_core!r}; expected 1 or 2")
    cpus = instance.vcpus * threads_per_core // 2
    hugepages_mib = hugepages_2mi_pages * 2
    capacity_mib = int(instance.memory_gib * 1024 * (1 - VM_MEMORY_OVERHEAD))
    memory_mib = (
        capacity_mib
        - kube_reserved_memory_mib(MAX_PODS[instance.name])
        - EVICTION_HARD_MEMORY_MIB
        - hugepages_mib
    )
    return Resources(
        cpu_millicores=cpus * 1000 - kube_reserved_cpu_millicores(cpus),
        memory_mib=memory_mib,
        hugepages_2mi_mib=hugepages_mib,
        gpus=instance.gpus,
        efa=instance.efa_interfaces if efa_devices is None else efa_devices,
    )


_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?")
_MIB_PER_UNIT = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024, None: 1 / (1024 * 1024)}
_MIB_PER_UNIT |= {"k": 1000 / 2**20, "M": 10**6 / 2**20, "G": 10**9 / 2**20, "T": 10**12 / 2**20}
_RESOURCE_FIELDS = {
    "cpu": "cpu_millicores",
    "memory": "memory_mib",
    "hugepages-2Mi": "hugepages_2mi_mib",
    "nvidia.com/gpu": "gpus",
    "vpc.amazonaws.com/efa": "efa",
}


def _quantity(resource: str, value: str) -> int:
    """A Kubernetes quantity of ``resource`` in this module's units (rounded up: a request never shrinks)."""
    match = _QUANTITY.fullmatch(str(value))
    if match is None:
        raise ValueError(f"{resource}: {value!r} is not a Kubernetes quantity this check understands")
    number, unit = float(match.group(1)), match.group(2)
    if resource == "cpu":
        amount = number if unit == "m" else number * 1000
    elif resource in ("memory", "hugepages-2Mi"):
        amount = number * _MIB_PER_UNIT[unit]
    elif unit is None:
        amount = number
    else:
        raise ValueError(f"{resource}: {value!r} is a count, it takes no unit")
    return -int(-amount // 1)


def container_requests(requests: Mapping[str, str]) -> Resources:
    """A container's ``resources.requests`` (other resource names, such as ephemeral-storage, ignored)."""
    return Resources(
        **{_RESOURCE_FIELDS[k]: _quantity(k, v) for k, v in requests.items() if k in _RESOURCE_FIELDS}
    )


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: the sum over its containers, or its largest init container
    where that is larger (per resource)."""

    def requests(container: Mapping[str, Any]) -> Resources:
        resources = container.get("resources", {})
        # A resource with a limit and no request is requested at its limit (API server defaulting).
        return container_requests({**resources.get("limits", {}), **resources.get("requests", {})})

    total = Resources()
    for container in pod_spec.get("containers", []):
        total = total + requests(container)
    for init in pod_spec.get("initContainers", []):
        largest = requests(init)
        total = Resources(*(max(getattr(total, f.name), getattr(largest, f.name)) for f in fields(total)))
    return total
