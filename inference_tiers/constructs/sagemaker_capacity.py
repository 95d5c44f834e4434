"""Where model copies run: instance pools, GPUs and host memory per copy, routing and reserved capacity.

One place decides, for every instance pool, whether a model copy fits (tensor-parallel degree against the GPU
count, memory per copy against host memory) and how many instances a number of copies needs. The endpoint and
the tier's account requirements both use it, so the quota a preflight check asks for matches what deploys.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from aws_cdk import Token
from aws_cdk import aws_sagemaker as sagemaker

from inference_tiers.instance_types import GpuInstanceType, gpu_instance_type

MAX_INSTANCE_POOLS = 5
Routing = Literal["LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM"]
ROUTING_STRATEGIES: tuple[Routing, ...] = ("LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM")
_RESERVATION_ARN = re.compile(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:[a-z0-9-]{1,14}/\S+")


@dataclass(frozen=True)
class Capacity:
    """Validated placement: instance types in priority order and the size of one model copy."""

    instance_types: tuple[str, ...]
    pools: tuple[GpuInstanceType, ...]
    gpus_per_copy: int
    memory_per_copy_mb: int
    inference_components: bool

    @classmethod
    def plan(
        cls,
        instance_types: Sequence[str],
        *,
        inference_components: bool,
        tensor_parallel_degree: int | None,
        memory_per_copy_mb: int,
    ) -> Capacity:
        """Raise ValueError unless every pool fits one copy. Default tensor-parallel degree: 1 GPU per
        inference-component copy, every GPU of the smallest pool for a single model."""
        if not 1 <= len(instance_types) <= MAX_INSTANCE_POOLS:
            raise ValueError(
                f"instance_types: got {len(instance_types)} instance types {list(instance_types)}; expected 1 to "
                f"{MAX_INSTANCE_POOLS} (SageMaker instance pools hold at most {MAX_INSTANCE_POOLS} types)"
            )
        if len(set(instance_types)) != len(instance_types):
            raise ValueError(f"instance_types: got {list(instance_types)}; expected distinct instance types")
        pools = tuple(
            gpu_instance_type(name, key=f"instance_types[{i}]", sagemaker=True)
            for i, name in enumerate(instance_types)
        )
        gpus = tensor_parallel_degree or (1 if inference_components else min(p.gpus for p in pools))
        for pool in pools:
            if not 1 <= gpus <= pool.gpus:
                raise ValueError(
                    f"tensor_parallel_degree: got {gpus}; expected 1 to {pool.gpus} (ml.{pool.name} has "
                    f"{pool.gpus} GPU{'s' if pool.gpus > 1 else ''}; every instance pool must fit one model copy)"
                )
            if inference_components and memory_per_copy_mb > pool.memory_gib * 1024:
                raise ValueError(
                    f"memory_per_copy_mb: got {memory_per_copy_mb}; expected at most {pool.memory_gib * 1024} "
                    f"(the host memory of ml.{pool.name})"
                )
        return cls(tuple(instance_types), pools, gpus, memory_per_copy_mb, inference_components)

    @property
    def copies_per_instance(self) -> int:
        """Copies that fit on the smallest pool, by GPUs and host memory (one per instance for a single model)."""
        if not self.inference_components:
            return 1
        return min(
            min(p.gpus // self.gpus_per_copy, (p.memory_gib * 1024) // self.memory_per_copy_mb)
            for p in self.pools
        )

    def instances_for(self, copies: int) -> int:
        """Instances needed for ``copies`` copies (for a single model, copies are instances)."""
        return math.ceil(copies / self.copies_per_instance)

    @property
    def local_nvme_types(self) -> list[str]:
        return [f"ml.{p.name}" for p in self.pools if p.local_nvme]

    def instance_type(self) -> str | None:
        """The variant's ``InstanceType``: set for one type, absent when instance pools are used."""
        return self.instance_types[0] if len(self.instance_types) == 1 else None

    def instance_pools(self) -> list[sagemaker.CfnEndpointConfig.InstancePoolProperty] | None:
        """The variant's ``InstancePools``, priority 1 first; None for a single instance type."""
        if len(self.instance_types) == 1:
            return None
        return [
            sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=name, priority=priority)
            for priority, name in enumerate(self.instance_types, start=1)
        ]


def routing_config(
    routing: str, *, capacity: Capacity, prefix_length: int, concurrency_threshold: int
) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
    """The variant's routing; instance pools require least-outstanding-requests routing."""
    if routing not in ROUTING_STRATEGIES:
        raise ValueError(f"routing: got {routing!r}; expected one of {', '.join(ROUTING_STRATEGIES)}")
    pools = len(capacity.instance_types)
    if pools > 1 and routing != "LEAST_OUTSTANDING_REQUESTS":
        raise ValueError(
            f"routing: got {routing!r} with {pools} instance pools; expected LEAST_OUTSTANDING_REQUESTS "
            f"(SageMaker requires it for instance pools), or a single instance type"
        )
    prefix_aware = None
    if routing == "PREFIX_AWARE":
        if not 1024 <= prefix_length <= 65536:
            raise ValueError(f"prefix_length: got {prefix_length}; expected 1024 to 65536")
        if not 1 <= concurrency_threshold <= 1024:
            raise ValueError(f"prefix_concurrency_threshold: got {concurrency_threshold}; expected 1 to 1024")
        prefix_aware = sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
            prefix_length=prefix_length, concurrency_threshold=concurrency_threshold
        )
    return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
        routing_strategy=routing, prefix_aware_routing_config=prefix_aware
    )


def capacity_reservation_config(
    arn: str | None,
) -> sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty | None:
    """Draw instances only from an ML capacity reservation or training plan (None: on-demand)."""
    if arn is None:
        return None
    if not Token.is_unresolved(arn) and not _RESERVATION_ARN.fullmatch(arn):
        raise ValueError(
            f"capacity_reservation_arn: got {arn!r}; expected an ML reservation or training-plan ARN: "
            f"arn:aws:sagemaker:<region>:<account>:training-plan/<name>"
        )
    return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
        capacity_reservation_preference="capacity-reservations-only", ml_reservation_arn=arn
    )
