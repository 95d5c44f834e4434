"""Let SageMaker measure: an AI workload config from the spec, then an AI benchmark job on a deployed endpoint.

The pinned botocore (1.44.x) has ``CreateAIWorkloadConfig`` and ``CreateAIBenchmarkJob`` (sagemaker service
model, 2017-07-24); request shapes as that model defines them. The job runs aiperf on SageMaker's side and writes
its results to ``s3_output``.
"""

from __future__ import annotations

from typing import Any

from inference_tiers.ops.bench.workload import WorkloadSpec, sagemaker_workload_document

# AIWorkloadConfigName and AIBenchmarkJobName: lowercase letters, digits and single hyphens (the CloudFormation
# schema of AWS::SageMaker::AIWorkloadConfig, cfn-lint 1.58.0, explains why: the delete call lowercases the name).
NAME_PATTERN = r"[a-z0-9](-*[a-z0-9]){0,62}"


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
    if workload_config is None:
        workload_config = f"{job_name}-workload"[:63].rstrip("-")
        client.create_ai_workload_config(
            AIWorkloadConfigName=workload_config,
            AIWorkloadConfigs={"WorkloadSpec": {"Inline": sagemaker_workload_document(spec)}},
        )
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
