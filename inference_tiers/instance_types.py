"""One table of the GPU instance types the tiers deploy: GPUs, memory, EFA interfaces, local NVMe, network.

EC2 names (``p5.48xlarge``) and SageMaker names (``ml.p5.48xlarge``) describe the same hardware, so both are
looked up here. Sources: the EC2 accelerated-computing instance pages (GPU, vCPU, memory, network, EFA),
the EC2 user guide's "Maximize network bandwidth" table (network cards), and the SageMaker
``CreateEndpointConfig`` note that ``KmsKeyId`` is rejected on instances with local NVMe storage.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import botocore
import botocore.session

from inference_tiers.config import ConfigError


@dataclass(frozen=True)
class GpuInstanceType:
    """Hardware facts for one instance type (EC2 name, without the ``ml.`` prefix)."""

    name: str
    gpus: int
    gpu_model: str
    gpu_memory_gb: int
    """Memory per GPU as the vendor states it, in decimal GB (NVIDIA's "48 GB" L40S holds 44.7 GiB)."""
    vcpus: int
    memory_gib: int
    network_gbps: int
    efa_interfaces: int
    """How many EFA devices the instance can attach (one per network card on p4d/p5 families); 0: no EFA."""
    local_nvme: bool
    """Instance-store NVMe: SageMaker rejects an endpoint KmsKeyId on these."""

    @property
    def supports_efa(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def gpu_memory_bytes(self) -> int:
        """Memory per GPU in bytes: vendors state GPU memory in decimal GB, never GiB."""
        return self.gpu_memory_gb * 10**9


def _family(
    prefix: str, gpu_model: str, gpu_memory_gb: int, sizes: dict[str, tuple[int, int, int, int, int]]
) -> dict[str, GpuInstanceType]:
    """sizes: size -> (gpus, vcpus, memory GiB, network Gbps, EFA interfaces); every size has local NVMe."""
    return {
        f"{prefix}.{size}": GpuInstanceType(
            name=f"{prefix}.{size}",
            gpus=gpus,
            gpu_model=gpu_model,
            gpu_memory_gb=gpu_memory_gb,
            vcpus=vcpus,
            memory_gib=memory,
            network_gbps=gbps,
            efa_interfaces=efa,
            local_nvme=True,
        )
        for size, (gpus, vcpus, memory, gbps, efa) in sizes.items()
    }


# fmt: off
GPU_INSTANCE_TYPES: dict[str, GpuInstanceType] = {
    # NVIDIA A10G 24 GB. EFA (one interface) from 8xlarge up.
    **_family("g5", "A10G", 24, {
        "xlarge": (1, 4, 16, 10, 0), "2xlarge": (1, 8, 32, 10, 0), "4xlarge": (1, 16, 64, 25, 0),
        "8xlarge": (1, 32, 128, 25, 1), "12xlarge": (4, 48, 192, 40, 1), "16xlarge": (1, 64, 256, 25, 1),
        "24xlarge": (4, 96, 384, 50, 1), "48xlarge": (8, 192, 768, 100, 1),
    }),
    # NVIDIA L4 24 GB.
    **_family("g6", "L4", 24, {
        "xlarge": (1, 4, 16, 10, 0), "2xlarge": (1, 8, 32, 10, 0), "4xlarge": (1, 16, 64, 25, 0),
        "8xlarge": (1, 32, 128, 25, 1), "12xlarge": (4, 48, 192, 40, 1), "16xlarge": (1, 64, 256, 25, 1),
        "24xlarge": (4, 96, 384, 50, 1), "48xlarge": (8, 192, 768, 100, 1),
    }),
    # NVIDIA L40S 48 GB.
    **_family("g6e", "L40S", 48, {
        "xlarge": (1, 4, 32, 20, 0), "2xlarge": (1, 8, 64, 20, 0), "4xlarge": (1, 16, 128, 20, 0),
        "8xlarge": (1, 32, 256, 25, 1), "12xlarge": (4, 48, 384, 100, 1), "16xlarge": (1, 64, 512, 35, 1),
        "24xlarge": (4, 96, 768, 200, 2), "48xlarge": (8, 192, 1536, 400, 4),
    }),
    **_family("p4d", "A100", 40, {"24xlarge": (8, 96, 1152, 400, 4)}),
    **_family("p4de", "A100", 80, {"24xlarge": (8, 96, 1152, 400, 4)}),
    # p5/p5e: 32 network cards x 100 Gbps EFA; p5en: 16 x 200 Gbps (EFAv3).
    **_family("p5", "H100", 80, {"48xlarge": (8, 192, 2048, 3200, 32)}),
    **_family("p5e", "H200", 141, {"48xlarge": (8, 192, 2048, 3200, 32)}),
    **_family("p5en", "H200", 141, {"48xlarge": (8, 192, 2048, 3200, 16)}),
}

SAGEMAKER_PREFIX = "ml."
# The names of botocore's sagemaker service-model enums that list what each SageMaker API accepts.
ENDPOINT_INSTANCE_TYPES = "ProductionVariantInstanceType"
"""CreateEndpointConfig's ``ProductionVariant.InstanceType`` (and its ``InstancePools``)."""
CLUSTER_INSTANCE_TYPES = "ClusterInstanceType"
"""CreateCluster's ``ClusterInstanceGroupSpecification.InstanceType`` (HyperPod)."""


@functools.cache
def sagemaker_instance_types(shape: str) -> frozenset[str]:
    """The instance types SageMaker's ``shape`` enum accepts, read from the installed botocore's service model."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for(shape).enum)


def closest(name: object, choices: Iterable[str]) -> str:
    """Up to three of ``choices`` nearest to ``name``, for an error message that cannot list them all."""
    matches = difflib.get_close_matches(str(name), sorted(choices), n=3, cutoff=0.5)
    return f" (closest: {', '.join(matches)})" if matches else ""


def unknown_sagemaker_instance_type(name: object, shape: str) -> str | None:
    """None when ``name`` is in SageMaker's ``shape`` enum; otherwise what is accepted, with the closest names."""
    valid = sagemaker_instance_types(shape)
    if name in valid:
        return None
    return f"an instance type of SageMaker's {shape} (botocore {botocore.__version__}){closest(name, valid)}"


def find_gpu_instance_type(name: str) -> GpuInstanceType | None:
    """The facts for ``name`` (EC2 or ``ml.``-prefixed SageMaker name), or None if it is not a known GPU type."""
    return GPU_INSTANCE_TYPES.get(name.removeprefix(SAGEMAKER_PREFIX))


def gpu_instance_type(name: str, *, key: str = "instance_type", sagemaker: bool = False) -> GpuInstanceType:
    """Like :func:`find_gpu_instance_type` but raises ConfigError (a ValueError) naming ``key`` and the choices.

    ``sagemaker=True`` requires the ``ml.`` prefix SageMaker APIs expect; otherwise the EC2 name is required.
    """
    prefix = SAGEMAKER_PREFIX if sagemaker else ""
    facts = find_gpu_instance_type(name) if isinstance(name, str) else None
    if facts is None or name != prefix + facts.name:
        raise ConfigError(key, name, known_gpu_types(name, prefix))
    return facts


def known_gpu_types(name: object, prefix: str = SAGEMAKER_PREFIX) -> str:
    """What a GPU instance type parameter accepts: this table's types (with ``prefix``), nearest first."""
    known = [prefix + n for n in GPU_INSTANCE_TYPES]
    return f"a GPU instance type this library knows{closest(name, known)}: {', '.join(known)}"


def ml_gpu_type(key: str, raw: Any) -> str:
    """Context-key parser: an ``ml.`` GPU instance type of the table, else a ConfigError with the closest names."""
    gpu_instance_type(raw, key=key, sagemaker=True)
    return str(raw)
