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

from inference_tiers.config import ConfigError
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
        key_prefix: str = "",
    ) -> Capacity:
        """Raise ConfigError (a ValueError naming ``key_prefix`` + the prop) unless every pool fits one copy.

        Default tensor-parallel degree: 1 GPU per inference-component copy, every GPU of the smallest pool for
        a single model.
        """
        types_key = f"{key_prefix}instance_types"
        if not 1 <= len(instance_types) <= MAX_INSTANCE_POOLS:
            raise ConfigError(
                types_key,
                list(instance_types),
                f"1 to {MAX_INSTANCE_POOLS} instance types (SageMaker instance pools hold at most "
                f"{MAX_INSTANCE_POOLS})",
            )
        if len(set(instance_types)) != len(instance_types):
            raise ConfigError(types_key, list(instance_types), "distinct instance types")
        pools = tuple(
            gpu_instance_type(name, key=f"{types_key}[{i}]", sagemaker=True)
            for i, name in enumerate(instance_types)
        )
        gpus = tensor_parallel_degree or (1 if inference_components else min(p.gpus for p in pools))
        for pool in pools:
            if not 1 <= gpus <= pool.gpus:
                raise ConfigError(
                    f"{key_prefix}tensor_parallel_degree",
                    gpus,
                    f"1 to {pool.gpus} (ml.{pool.name} has {pool.gpus} GPU{'s' if pool.gpus > 1 else ''}; "
                    f"every instance pool must fit one model copy)",
                )
            if inference_components and memory_per_copy_mb > pool.memory_gib * 1024:
                raise ConfigError(
                    f"{key_prefix}memory_per_copy_mb",
                    memory_per_copy_mb,
                    f"at most {pool.memory_gib * 1024} (the host memory of ml.{pool.name})",
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
    routing: str,
    *,
    capacity: Capacity,
    prefix_length: int,
    concurrency_threshold: int,
    key_prefix: str = "",
) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
    """The variant's routing; instance pools require least-outstanding-requests routing."""
    key = f"{key_prefix}routing"
    if routing not in ROUTING_STRATEGIES:
        raise ConfigError(key, routing, f"one of {', '.join(ROUTING_STRATEGIES)}")
    pools = len(capacity.instance_types)
    if pools > 1 and routing != "LEAST_OUTSTANDING_REQUESTS":
        raise ConfigError(
            key,
            routing,
            f"LEAST_OUTSTANDING_REQUESTS with {pools} instance pools (SageMaker requires it for instance pools), "
            f"or a single instance type",
        )
    prefix_aware = None
    if routing == "PREFIX_AWARE":
        if not 1024 <= prefix_length <= 65536:
            raise ConfigError(f"{key_prefix}prefix_length", prefix_length, "1024 to 65536")
        if not 1 <= concurrency_threshold <= 1024:
            raise ConfigError(f"{key_prefix}prefix_concurrency_threshold", concurrency_threshold, "1 to 1024")
        prefix_aware = sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
            prefix_length=prefix_length, concurrency_threshold=concurrency_threshold
        )
    return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
        routing_strategy=routing, prefix_aware_routing_config=prefix_aware
    )


def capacity_reservation_config(
    arn: str | None, *, key_prefix: str = ""
) -> sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty | None:
    """Draw instances only from an ML capacity reservation or training plan (None: on-demand)."""
    if arn is None:
        return None
    if not Token.is_unresolved(arn) and not _RESERVATION_ARN.fullmatch(arn):
        raise ConfigError(
            f"{key_prefix}capacity_reservation_arn",
            arn,
            "an ML reservation or training-plan ARN: arn:aws:sagemaker:<region>:<account>:training-plan/<name>",
        )
    return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
        capacity_reservation_preference="capacity-reservations-only", ml_reservation_arn=arn
    )
