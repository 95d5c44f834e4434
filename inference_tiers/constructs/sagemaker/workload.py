"""An ``AWS::SageMaker::AIWorkloadConfig`` from a bench workload spec: the same traffic `inference-tiers bench`
sends, for SageMaker's own AI recommendation and benchmark jobs (which run aiperf on real GPUs)."""

from __future__ import annotations

import re

from aws_cdk import Names
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from inference_tiers.ops.bench.workload import WorkloadSpec, sagemaker_workload_document
from inference_tiers.validation import Args

# AIWorkloadConfigName: lowercase letters and digits joined by hyphens, at most 63 characters (the resource's
# CloudFormation schema as cfn-lint 1.58.0 ships it: DeleteAIWorkloadConfig lowercases the name it looks up).
_NAME = r"[a-z0-9](-*[a-z0-9]){0,62}"


class BenchmarkWorkload(Construct):
    """A SageMaker AI workload config rendered from ``workload``.

    :param workload: the bench workload spec (:func:`inference_tiers.ops.bench.workload.load_workload`).
    :param name: the config's name (default: generated from the construct path; the property replaces the
        resource when it changes, so a fixed name would block a replacement).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, workload: WorkloadSpec, name: str | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("BenchmarkWorkload")
        args.instance("workload", workload, WorkloadSpec)
        if name is None:
            name = re.sub(r"[^a-z0-9]+", "-", Names.unique_resource_name(self, max_length=63).lower()).strip(
                "-"
            )
        args.text("name", name, pattern=_NAME, description="lowercase letters, digits and hyphens (max 63)")
        self.resource = sagemaker.CfnAIWorkloadConfig(
            self,
            "Resource",
            ai_workload_config_name=name,
            ai_workload_configs=sagemaker.CfnAIWorkloadConfig.AIWorkloadConfigsProperty(
                workload_spec=sagemaker.CfnAIWorkloadConfig.WorkloadSpecProperty(
                    inline=sagemaker_workload_document(workload)
                )
            ),
        )
        self.workload_config_name = name
