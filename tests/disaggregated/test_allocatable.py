"""The rendered pods fit the GPU nodes: for every EFA instance type and tensor-parallel size, one vLLM pod plus
everything else that may land on its node (mooncake_master, the DaemonSets) requests no more CPU, memory,
huge pages, GPUs or EFA devices than an EKS AL2023 node offers after kubelet's reservations."""

from __future__ import annotations

from typing import Any

import pytest

from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.k8s.allocatable import (
    MAX_PODS,
    Resources,
    container_requests,
    kube_reserved_cpu_millicores,
    kube_reserved_memory_mib,
    node_allocatable,
    pod_requests,
)
from inference_tiers.k8s.disaggregated import (
    EFA_INSTANCE_TYPES,
    GPU_NODE_DAEMONSETS,
    GPU_TAINT_KEY,
    DisaggregatedWorkloadSpec,
    render_workload,
)

CASES = [
    (name, tp, kv_store)
    for name in EFA_INSTANCE_TYPES
    for tp in range(1, GPU_INSTANCE_TYPES[name].gpus + 1)
    if GPU_INSTANCE_TYPES[name].gpus % tp == 0
    for kv_store in (False, True)
]


def _gpu_node_pods(spec: DisaggregatedWorkloadSpec) -> dict[str, dict[str, Any]]:
    """Pod templates that can be scheduled on the GPU nodes: they tolerate the GPU taint."""
    pods = {}
    for manifest in render_workload(spec):
        if manifest["kind"] != "Deployment":
            continue
        pod = manifest["spec"]["template"]["spec"]
        if any(t.get("key") == GPU_TAINT_KEY for t in pod.get("tolerations", [])):
            pods[manifest["metadata"]["name"]] = pod
    return pods


def test_every_instance_type_has_its_nodeadm_max_pods() -> None:
    assert set(EFA_INSTANCE_TYPES) <= set(MAX_PODS) and set(MAX_PODS) == set(GPU_INSTANCE_TYPES)


@pytest.mark.parametrize(("instance_type", "tp", "kv_store"), CASES)
def test_the_busiest_gpu_node_fits_its_allocatable(instance_type: str, tp: int, kv_store: bool) -> None:
    spec = DisaggregatedWorkloadSpec(
        model_id="org/model",
        instance_type=instance_type,
        vllm_image="a/vllm:1",
        router_image="a/router:1",
        tensor_parallel_size=tp,
        enable_kv_store=kv_store,
        kv_store_segment_gib_per_rank=1,
    )
    pods = _gpu_node_pods(spec)
    vllm = [pods.pop(spec.resource_name(role)) for role in ("prefill", "decode")]
    assert set(pods) == ({spec.resource_name("mooncake-master")} if kv_store else set())
    # The anti-affinity allows one vLLM pod per node; every other GPU-node pod may join any of them.
    busiest = max((pod_requests(p) for p in vllm), key=lambda r: (r.cpu_millicores, r.memory_mib))
    for pod in pods.values():
        busiest = busiest + pod_requests(pod)
    for daemonset in GPU_NODE_DAEMONSETS.values():
        busiest = busiest + daemonset
    allocatable = node_allocatable(GPU_INSTANCE_TYPES[instance_type], efa_devices=spec.efa)
    assert busiest.exceeding(allocatable) == []
    assert busiest.gpus == tp and busiest.efa == GPU_INSTANCE_TYPES[instance_type].efa_interfaces


def test_fewer_efa_devices_on_the_node_means_fewer_requested() -> None:
    spec = DisaggregatedWorkloadSpec(
        model_id="org/model",
        instance_type="p5.48xlarge",
        vllm_image="a/v:1",
        router_image="a/r:1",
        efa_devices=8,
    )
    (prefill, _) = _gpu_node_pods(spec).values()
    assert pod_requests(prefill).efa == 8
    assert pod_requests(prefill).exceeding(node_allocatable(spec.instance, efa_devices=8)) == []


def test_nodeadm_reservation_formulas() -> None:
    # 6 % of core 1, 1 % of core 2, 0.5 % of cores 3-4, 0.25 % of the rest (nodeadm config.go).
    assert [kube_reserved_cpu_millicores(n) for n in (1, 2, 4, 16, 192)] == [60, 70, 80, 110, 550]
    assert kube_reserved_memory_mib(100) == 1355 and kube_reserved_memory_mib(737) == 8362
    p5 = node_allocatable(GPU_INSTANCE_TYPES["p5.48xlarge"])
    assert p5 == Resources(
        cpu_millicores=192_000 - 550,
        memory_mib=int(2048 * 1024 * 0.925) - 1355 - 100 - 10256,
        hugepages_2mi_mib=10256,
        gpus=8,
        efa=32,
    )
    # Without SMT (threads_per_core 1) the node has half the CPUs.
    assert (
        node_allocatable(GPU_INSTANCE_TYPES["p5.48xlarge"], threads_per_core=1).cpu_millicores == 96_000 - 310
    )


def test_a_request_for_the_whole_instance_does_not_fit() -> None:
    # The check can fail: the instance's nominal CPUs and memory are more than kubelet hands to pods.
    p5 = GPU_INSTANCE_TYPES["p5.48xlarge"]
    whole = Resources(cpu_millicores=p5.vcpus * 1000, memory_mib=p5.memory_gib * 1024)
    assert whole.exceeding(node_allocatable(p5)) == [
        f"cpu_millicores 192000 > {192_000 - 550}",
        f"memory_mib 2097152 > {node_allocatable(p5).memory_mib}",
    ]


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ({"cpu": "144"}, Resources(cpu_millicores=144_000)),
        ({"cpu": "500m", "memory": "4Gi"}, Resources(cpu_millicores=500, memory_mib=4096)),
        ({"hugepages-2Mi": "5120Mi", "nvidia.com/gpu": "8"}, Resources(hugepages_2mi_mib=5120, gpus=8)),
        ({"memory": "1G", "vpc.amazonaws.com/efa": "32"}, Resources(memory_mib=954, efa=32)),
        ({"ephemeral-storage": "10Gi"}, Resources()),
    ],
)
def test_kubernetes_quantities_are_read_rounding_up(requests: dict[str, str], expected: Resources) -> None:
    assert container_requests(requests) == expected


@pytest.mark.parametrize("requests", [{"cpu": "two"}, {"nvidia.com/gpu": "8Gi"}])
def test_an_unreadable_quantity_is_an_error_not_a_zero(requests: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="quantity|takes no unit"):
        container_requests(requests)


def test_a_limit_without_a_request_counts_and_init_containers_count_at_their_largest() -> None:
    pod = {
        "containers": [{"resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "1"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
    }
    assert pod_requests(pod) == Resources(cpu_millicores=3000, memory_mib=2048)
