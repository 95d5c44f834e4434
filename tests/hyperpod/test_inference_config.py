"""The InferenceEndpointConfig builder: every rendering validates against the operator's real CRD schema, and
every inconsistent combination is rejected before anything is deployed."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from inference_tiers.k8s.hyperpod_inference import (
    AutoScaling,
    CloudWatchTrigger,
    FsxModelSource,
    InferenceEndpoint,
    PrometheusTrigger,
    RequestLimits,
    S3ModelSource,
    VllmWorker,
    render_inference_endpoint_config,
)
from tests.hyperpod.support import inference_endpoint_config_schema, validate_inference_endpoint_config

AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"
WORKER = VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=8, max_model_len=16384)


def endpoint(**overrides: Any) -> InferenceEndpoint:
    values: dict[str, Any] = {
        "name": "llama-3-3-70b",
        "instance_types": ("ml.p5.48xlarge",),
        "model_source": S3ModelSource(bucket_name="models", region="us-west-2", location="Llama-3.3-70B"),
        "worker": WORKER,
        "endpoint_name": "llama-3-3-70b",
        "request_limits": RequestLimits(max_concurrent_requests=64, max_queue_size=128),
        "autoscaling": AutoScaling(1, 4, CloudWatchTrigger.sagemaker_invocations("llama-3-3-70b", 60)),
    }
    values.update(overrides)
    return InferenceEndpoint(**values)


VARIANTS = {
    "s3-cloudwatch-registered": endpoint(),
    "fsx-prometheus-alb-only": endpoint(
        model_source=FsxModelSource(file_system_id="fs-0123456789abcdef0", location="/models/llama"),
        endpoint_name=None,
        autoscaling=AutoScaling(0, 2, PrometheusTrigger.concurrent_requests(AMP, "llama-3-3-70b", 8)),
    ),
    "priority-list": endpoint(
        instance_types=("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4de.24xlarge"), request_limits=None
    ),
    "no-autoscaling": endpoint(
        instance_types=("ml.g6e.12xlarge",),
        worker=replace(WORKER, tensor_parallel_size=4, environment={"VLLM_LOGGING_LEVEL": "INFO"}),
        autoscaling=None,
    ),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_configs_validate_against_the_crd(name: str) -> None:
    validate_inference_endpoint_config(render_inference_endpoint_config(VARIANTS[name]))


def test_the_schema_check_rejects_what_the_operator_would_reject() -> None:
    document = render_inference_endpoint_config(VARIANTS["s3-cloudwatch-registered"])
    broken = copy.deepcopy(document)
    del broken["spec"]["worker"]["modelInvocationPort"]
    with pytest.raises(jsonschema.ValidationError, match="modelInvocationPort"):
        jsonschema.Draft7Validator(inference_endpoint_config_schema()).validate(broken)
    wrong_type = copy.deepcopy(document)
    wrong_type["spec"]["autoScalingSpec"]["cloudWatchTrigger"]["metricType"] = "Sum"
    with pytest.raises(jsonschema.ValidationError, match="Sum"):
        jsonschema.Draft7Validator(inference_endpoint_config_schema()).validate(wrong_type)


def test_worker_matches_vllm_and_the_instance() -> None:
    spec = render_inference_endpoint_config(VARIANTS["s3-cloudwatch-registered"])["spec"]
    worker = spec["worker"]
    assert spec["instanceType"] == "ml.p5.48xlarge"
    assert spec["invocationEndpoint"] == "v1/chat/completions"
    assert spec["loadBalancer"]["healthCheckPath"] == "/health"
    assert spec["metrics"]["modelMetrics"] == {"path": "/metrics", "port": 8000}
    assert worker["modelInvocationPort"]["containerPort"] == 8000
    args = worker["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert args[args.index("--port") + 1] == "8000"
    assert args[args.index("--model") + 1] == worker["modelVolumeMount"]["mountPath"] == "/opt/ml/model"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # A p5 with one thread per core (the default) exposes 96 CPUs, not 192: minus kubelet's 310m, the
    # DaemonSets' 1185m and the operator's 250m, 94 whole cores. Memory: 2048 GiB less 7.5 % kernel overhead,
    # kube-reserved (11 MiB x 100 pods + 255), eviction (100 MiB), huge pages (10256 MiB), DaemonSets
    # (1300 MiB) and the operator's 256 MiB: 1881 GiB.
    assert worker["resources"]["requests"]["cpu"] == "94"
    assert worker["resources"]["requests"]["memory"] == "1881Gi"
    assert worker["requestLimits"] == {
        "maxConcurrentRequests": 64,
        "maxQueueSize": 128,
        "overflowStatusCode": 429,
    }


def test_registration_and_autoscaling_render_as_the_operator_expects() -> None:
    spec = render_inference_endpoint_config(VARIANTS["s3-cloudwatch-registered"])["spec"]
    assert spec["endpointName"] == "llama-3-3-70b"
    trigger = spec["autoScalingSpec"]["cloudWatchTrigger"]
    assert trigger["namespace"] == "AWS/SageMaker" and trigger["metricName"] == "Invocations"
    assert {"name": "EndpointName", "value": "llama-3-3-70b"} in trigger["dimensions"]
    alb_only = render_inference_endpoint_config(VARIANTS["fsx-prometheus-alb-only"])["spec"]
    assert "endpointName" not in alb_only
    assert alb_only["modelSourceConfig"]["fsxStorage"] == {"fileSystemId": "fs-0123456789abcdef0"}
    assert alb_only["autoScalingSpec"]["prometheusTrigger"]["serverAddress"] == AMP
    assert alb_only["autoScalingSpec"]["minReplicaCount"] == 0


def test_priority_list_uses_instance_types_and_sizes_for_the_smallest() -> None:
    spec = render_inference_endpoint_config(VARIANTS["priority-list"])["spec"]
    assert "instanceType" not in spec
    assert spec["instanceTypes"] == ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4de.24xlarge"]
    # p4de has 96 vCPUs (48 cores at one thread per core) and 1152 GiB: the request must fit there too
    assert spec["worker"]["resources"]["requests"]["cpu"] == "46"
    assert spec["worker"]["resources"]["requests"]["memory"] == "1045Gi"


def test_tensor_parallelism_above_the_instance_gpus_is_rejected() -> None:
    with pytest.raises(
        ValueError,
        match=r"InferenceEndpoint: parameter 'worker.tensor_parallel_size' got 8; expected 1 to 4: ml.g6e.12xlarge has 4 GPUs",
    ):
        endpoint(instance_types=("ml.g6e.12xlarge",))
    with pytest.raises(ValueError, match=r"ml.g6e.2xlarge has 1 GPUs"):
        endpoint(instance_types=("ml.p5.48xlarge", "ml.g6e.2xlarge"))


def test_health_path_inconsistent_with_vllm_is_rejected() -> None:
    with pytest.raises(
        ValueError,
        match=r"'health_check_path' got '/ping'; expected one of /health \(where the vLLM worker serves",
    ):
        endpoint(health_check_path="/ping")


def test_metrics_port_inconsistent_with_the_worker_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"'metrics_port' got 8080; expected 8000 or unset"):
        endpoint(metrics_port=8080)
    assert (
        render_inference_endpoint_config(endpoint(metrics_port=8000))["spec"]["metrics"]["modelMetrics"][
            "port"
        ]
        == 8000
    )


def test_other_inconsistencies_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"'invocation_path' got 'invocations'"):
        endpoint(invocation_path="invocations")
    with pytest.raises(
        ValueError,
        match=r"'autoscaling' got 'sagemaker-invocations'; expected a Prometheus trigger, or endpoint_name set",
    ):
        endpoint(endpoint_name=None)
    with pytest.raises(ValueError, match=r"InferenceEndpoint: parameter 'name' got 'Llama_70B'"):
        endpoint(name="Llama_70B")
    with pytest.raises(
        ValueError,
        match=r"'instance_types\[0\]' got 'p5.48xlarge'; expected a GPU instance type this library knows",
    ):
        endpoint(instance_types=("p5.48xlarge",))
    with pytest.raises(ValueError, match=r"'instance_types' got \(\); expected a list of at least 1 items"):
        endpoint(instance_types=())
    with pytest.raises(
        ValueError,
        match=r"VllmWorker: parameter 'image' got 'vllm/vllm-openai'; expected a container image with a pinned tag",
    ):
        VllmWorker(image="vllm/vllm-openai", tensor_parallel_size=1)
    with pytest.raises(
        ValueError, match=r"AutoScaling: parameter 'min_replicas' got 3; expected at most max_replicas \(2\)"
    ):
        AutoScaling(3, 2, CloudWatchTrigger.sagemaker_invocations("x", 1))
    with pytest.raises(
        ValueError,
        match=r"RequestLimits: parameter 'max_concurrent_requests' got 0; expected an integer at least 1",
    ):
        RequestLimits(max_concurrent_requests=0)
    with pytest.raises(ValueError, match=r"FsxModelSource: parameter 'file_system_id' got 'fsx-1'"):
        FsxModelSource(file_system_id="fsx-1", location="/m")
