"""Where model copies run: instance pools, GPUs and host memory per copy, routing and reserved capacity.

One place decides, for every instance pool, whether a model copy fits (tensor-parallel degree against the GPU
count, memory per copy against host memory) and how many instances a number of copies needs. The endpoint and
the tier's account requirements both use it, so the quota a preflight check asks for matches what deploys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aws_cdk import aws_sagemaker as sagemaker

from inference_tiers.instance_types import (
    ENDPOINT_INSTANCE_TYPES,
    GPU_INSTANCE_TYPES,
    GpuInstanceType,
    find_gpu_instance_type,
    known_gpu_types,
    unknown_sagemaker_instance_type,
)
from inference_tiers.validation import Args

MAX_INSTANCE_POOLS = 5
# The most GPUs any instance type in the table has: an upper bound before the per-pool check.
MAX_GPUS = max(t.gpus for t in GPU_INSTANCE_TYPES.values())
# SageMaker's floor for MinMemoryRequiredInMb (InferenceComponentComputeResourceRequirements).
MIN_MEMORY_PER_COPY_MB = 128
Routing = Literal["LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM"]
ROUTING_STRATEGIES: tuple[Routing, ...] = ("LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM")
_RESERVATION_ARN = r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:[a-z0-9-]{1,14}/\S+"


def _pool(args: Args, param: str, name: Any) -> GpuInstanceType:
    """One endpoint instance type SageMaker accepts that is an ``ml.`` GPU type this library has the facts for."""
    unknown = unknown_sagemaker_instance_type(name, ENDPOINT_INSTANCE_TYPES)
    if unknown is not None:
        raise args.error(param, name, unknown)
    facts = find_gpu_instance_type(name)
    if facts is None:
        raise args.error(param, name, known_gpu_types(name))
    return facts


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
        args: Args | None = None,
    ) -> Capacity:
        """Raise ArgumentError (from ``args``, naming the parameter) unless every pool fits one model copy.

        Default tensor-parallel degree: 1 GPU per inference-component copy, every GPU of the smallest pool for
        a single model.
        """
        args = args or Args("Capacity")
        names = args.sequence(
            "instance_types",
            instance_types,
            lambda param, name: args.text(param, name, allow_token=False),
            min_items=1,
            max_items=MAX_INSTANCE_POOLS,
            unique=True,
        )
        types = tuple(_pool(args, f"instance_types[{i}]", name) for i, name in enumerate(names))
        args.boolean("inference_components", inference_components)
        gpus = (
            args.integer("tensor_parallel_degree", tensor_parallel_degree, minimum=1, maximum=MAX_GPUS)
            if tensor_parallel_degree is not None
            else (1 if inference_components else min(p.gpus for p in types))
        )
        memory = args.integer("memory_per_copy_mb", memory_per_copy_mb, minimum=MIN_MEMORY_PER_COPY_MB)
        for pool in types:
            if gpus > pool.gpus:
                raise args.error(
                    "tensor_parallel_degree",
                    gpus,
                    f"1 to {pool.gpus} (ml.{pool.name} has {pool.gpus} GPU{'s' if pool.gpus > 1 else ''}; "
                    f"every instance pool must fit one model copy)",
                )
            if inference_components and memory > pool.memory_gib * 1024:
                raise args.error(
                    "memory_per_copy_mb",
                    memory,
                    f"at most {pool.memory_gib * 1024} (the host memory of ml.{pool.name})",
                )
        return cls(names, types, gpus, memory, inference_components)

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
    routing: str,
    *,
    capacity: Capacity,
    prefix_length: int,
    concurrency_threshold: int,
    args: Args,
) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
    """The variant's routing; instance pools require least-outstanding-requests routing."""
    routing = args.one_of("routing", routing, ROUTING_STRATEGIES)
    prefix_length = args.integer("prefix_length", prefix_length, minimum=1024, maximum=65536)
    concurrency_threshold = args.integer(
        "prefix_concurrency_threshold", concurrency_threshold, minimum=1, maximum=1024
    )
    pools = len(capacity.instance_types)
    if pools > 1 and routing != "LEAST_OUTSTANDING_REQUESTS":
        raise args.error(
            "routing",
            routing,
            f"LEAST_OUTSTANDING_REQUESTS with {pools} instance pools (SageMaker requires it for instance pools), "
            f"or a single instance type",
        )
    prefix_aware = (
        sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
            prefix_length=prefix_length, concurrency_threshold=concurrency_threshold
        )
        if routing == "PREFIX_AWARE"
        else None
    )
    return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
        routing_strategy=routing, prefix_aware_routing_config=prefix_aware
    )


def capacity_reservation_config(
    arn: str | None, *, args: Args
) -> sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty | None:
    """Draw instances only from an ML capacity reservation or training plan (None: on-demand).

    A deploy-time token is used unparsed.
    """
    if arn is None:
        return None
    arn = args.text(
        "capacity_reservation_arn",
        arn,
        pattern=_RESERVATION_ARN,
        max_length=258,
        description="an ML reservation or training-plan ARN: "
        "arn:aws:sagemaker:<region>:<account>:training-plan/<name>",
    )
    return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
        capacity_reservation_preference="capacity-reservations-only", ml_reservation_arn=arn
    )
