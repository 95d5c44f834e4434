"""Let SageMaker measure: an AI workload config from the spec, then an AI benchmark job on a deployed endpoint,
or an AI recommendation job that deploys the model on candidate instance types itself.

The pinned botocore (1.44.x) has ``CreateAIWorkloadConfig``, ``CreateAIBenchmarkJob`` and
``CreateAIRecommendationJob`` (sagemaker service model, 2017-07-24); request shapes as that model defines them.
The jobs run aiperf on SageMaker's side and write their results to ``s3_output``.
"""

from __future__ import annotations

from typing import Any

from inference_tiers.ops.bench.workload import WorkloadSpec, sagemaker_workload_document

# AIWorkloadConfigName and AIBenchmarkJobName: lowercase letters, digits and single hyphens (the CloudFormation
# schema of AWS::SageMaker::AIWorkloadConfig, cfn-lint 1.58.0, explains why: the delete call lowercases the name).
NAME_PATTERN = r"[a-z0-9](-*[a-z0-9]){0,62}"
# PerformanceTarget.Constraints[].Metric of CreateAIRecommendationJob (the service model's enum).
GOALS = ("ttft-ms", "throughput", "cost")


def _workload_config(client: Any, spec: WorkloadSpec, job_name: str, existing: str | None) -> str:
    """``existing``, or a new workload config named after the job, created from ``spec``."""
    if existing is not None:
        return existing
    name = f"{job_name}-workload"[:63].rstrip("-")
    client.create_ai_workload_config(
        AIWorkloadConfigName=name,
        AIWorkloadConfigs={"WorkloadSpec": {"Inline": sagemaker_workload_document(spec)}},
    )
    return name


def start_benchmark_job(
    client: Any,
    spec: WorkloadSpec,
    *,
    job_name: str,
    endpoint: str,
    component: str | None,
    role_arn: str,
    s3_output: str,
    workload_config: str | None = None,
) -> dict[str, str]:
    """Create the workload config (unless ``workload_config`` names a deployed one) and start the job."""
    workload_config = _workload_config(client, spec, job_name, workload_config)
    target: dict[str, Any] = {"Identifier": endpoint}
    if component:
        target["InferenceComponents"] = [{"Identifier": component}]
    response = client.create_ai_benchmark_job(
        AIBenchmarkJobName=job_name,
        BenchmarkTarget={"Endpoint": target},
        OutputConfig={"S3OutputLocation": s3_output},
        AIWorkloadConfigIdentifier=workload_config,
        RoleArn=role_arn,
    )
    return {
        "job": job_name,
        "workload_config": workload_config,
        "arn": str(response.get("AIBenchmarkJobArn", "")),
    }


def start_recommendation_job(
    client: Any,
    spec: WorkloadSpec,
    *,
    job_name: str,
    model_s3_uri: str,
    goal: str,
    instance_types: tuple[str, ...],
    role_arn: str,
    s3_output: str,
    workload_config: str | None = None,
) -> dict[str, str]:
    """Start a recommendation job: SageMaker deploys the model (S3 weights) on ``instance_types`` (or its own
    choice when empty), runs the workload and recommends the configuration best for ``goal``."""
    workload_config = _workload_config(client, spec, job_name, workload_config)
    request: dict[str, Any] = {
        "AIRecommendationJobName": job_name,
        "ModelSource": {"S3": {"S3Uri": model_s3_uri}},
        "OutputConfig": {"S3OutputLocation": s3_output},
        "AIWorkloadConfigIdentifier": workload_config,
        "PerformanceTarget": {"Constraints": [{"Metric": goal}]},
        "RoleArn": role_arn,
    }
    if instance_types:
        request["ComputeSpec"] = {"InstanceTypes": list(instance_types)}
    response = client.create_ai_recommendation_job(**request)
    return {
        "job": job_name,
        "workload_config": workload_config,
        "arn": str(response.get("AIRecommendationJobArn", "")),
    }
