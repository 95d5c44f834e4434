"""The HyperPod model pod fits its node: for every supported instance type, both thread settings and every
tensor-parallel size, the rendered requests of all the model pods one node runs (``gpus // tp`` of them, each
with the operator's injected containers), plus the system DaemonSets, fit the node's allocatable as
``k8s/allocatable.py`` derives it from nodeadm's formulas, with CPUs from the cores and threads really run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from inference_tiers.instance_types import GPU_INSTANCE_TYPES, SAGEMAKER_PREFIX
from inference_tiers.k8s.allocatable import Resources, node_allocatable, pod_requests
from inference_tiers.k8s.hyperpod_inference import (
    HYPERPOD_NODE_DAEMONSETS,
    OPERATOR_POD_OVERHEAD,
    InferenceEndpoint,
    S3ModelSource,
    VllmWorker,
    render_inference_endpoint_config,
)
from tests.harness import TierBuild
from tests.hyperpod.support import DATA, manifest_documents

CASES = [
    (name, threads, tp)
    for name, facts in GPU_INSTANCE_TYPES.items()
    for threads in (1, 2)
    for tp in range(1, facts.gpus + 1)
]


def _endpoint(instance_type: str, tp: int, threads: int) -> InferenceEndpoint:
    return InferenceEndpoint(
        name="model",
        instance_types=(SAGEMAKER_PREFIX + instance_type,),
        model_source=S3ModelSource(bucket_name="weights", region="us-east-1", location="m/"),
        worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=tp, max_model_len=8192),
        threads_per_core=threads,
    )


@pytest.mark.parametrize(("instance_type", "threads", "tp"), CASES)
def test_every_model_pod_a_node_runs_fits_its_allocatable(instance_type: str, threads: int, tp: int) -> None:
    facts = GPU_INSTANCE_TYPES[instance_type]
    allocatable = node_allocatable(facts, threads_per_core=threads)
    system = sum(HYPERPOD_NODE_DAEMONSETS.values(), Resources())
    try:
        endpoint = _endpoint(instance_type, tp, threads)
    except ValueError as error:
        # Refused only where one core and one GiB per pod really are not left, and it says so.
        cpu_left = (allocatable.cpu_millicores - system.cpu_millicores) * tp // facts.gpus
        assert cpu_left - OPERATOR_POD_OVERHEAD.cpu_millicores < 1000, str(error)
        assert f"threads_per_core={threads}" in str(error) and "use threads_per_core=2" in str(error)
        return
    worker = render_inference_endpoint_config(endpoint)["spec"]["worker"]
    pod = pod_requests({"containers": [worker]}) + OPERATOR_POD_OVERHEAD
    assert pod.gpus == tp and pod.efa == 0 and pod.hugepages_2mi_mib == 0
    node = system
    for _ in range(facts.gpus // tp):
        node = node + pod
    assert node.exceeding(allocatable) == []
    # The request is a real share of the node, not a token amount: at least 90 % of what one pod may take.
    fair_cpu = (allocatable.cpu_millicores - system.cpu_millicores) * tp // facts.gpus
    assert pod.cpu_millicores >= fair_cpu * 0.9 - 1000


def test_one_thread_per_core_halves_the_cpu_request() -> None:
    one, two = (
        render_inference_endpoint_config(_endpoint("p5.48xlarge", 8, t))["spec"]["worker"]["resources"]
        for t in (1, 2)
    )
    # 96 and 192 CPUs: the request follows the CPUs the node exposes, never the nominal 192 vCPUs at 1 thread.
    assert int(one["requests"]["cpu"]) < 96 < int(two["requests"]["cpu"]) < 192
    assert one["requests"]["memory"] == two["requests"]["memory"]


def test_threads_per_core_other_than_1_or_2_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'threads_per_core' got 4; expected one of 1, 2"):
        _endpoint("p5.48xlarge", 8, 4)


def test_the_tier_sizes_the_model_pod_for_the_threads_it_runs(tier_build: Callable[[str], TierBuild]) -> None:
    build = tier_build("hyperpod")
    (stack,) = build.stacks
    settings = stack.settings  # type: ignore[attr-defined]
    (template,) = build.templates().values()
    (document,) = manifest_documents(template)
    requests = document["spec"]["worker"]["resources"]["requests"]
    name = settings.instance_type.removeprefix(SAGEMAKER_PREFIX)
    expected = _endpoint(name, settings.tensor_parallel, settings.threads_per_core).resources()["requests"]
    assert (requests["cpu"], requests["memory"]) == (expected["cpu"], expected["memory"])
    # cdk.json runs one thread per core: fewer CPUs than the node's physical cores.
    assert settings.threads_per_core == 1
    assert int(requests["cpu"]) < GPU_INSTANCE_TYPES[name].vcpus // 2


@pytest.mark.parametrize(
    ("plugin", "values"),
    [
        ("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin-v0.5.20.values.yaml"),
        ("nvidia-device-plugin", "nvidia-device-plugin-0.16.1.values.yaml"),
    ],
)
def test_device_plugin_budgets_are_the_requests_of_the_charts_hyperpod_pins(plugin: str, values: str) -> None:
    """The label names the chart version the HyperPod dependency chart pins (its Chart.yaml at
    sagemaker-hyperpod-cli 011ca927), and the figures are that chart's default requests (tests/data/hyperpod/
    SOURCE.md); the HyperPod chart's values.yaml sets no resources for either."""
    chart = yaml.safe_load((DATA / "HyperPodHelmChart.Chart.yaml").read_text())
    (pinned,) = [d["version"] for d in chart["dependencies"] if d["name"] == plugin]
    (label,) = [k for k in HYPERPOD_NODE_DAEMONSETS if k.startswith(f"{plugin} ")]
    assert f"pin {pinned}" in label
    assert values.removesuffix(".values.yaml").endswith(pinned)
    requests = (yaml.safe_load((DATA / values).read_text())["resources"] or {}).get("requests", {})
    assert HYPERPOD_NODE_DAEMONSETS[label] == Resources(
        cpu_millicores=int(requests.get("cpu", "0m").removesuffix("m")),
        memory_mib=int(requests.get("memory", "0Mi").removesuffix("Mi")),
    )
