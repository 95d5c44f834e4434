"""SM1: a SageMaker endpoint configuration encrypts what it stores with a customer-managed KMS key.

Findings: ``Volume`` (the instances' storage volume; not required when every instance type has local NVMe,
which SageMaker encrypts in hardware and for which it rejects a KmsKeyId), ``DataCapture`` (captured
requests and responses), ``AsyncOutput`` (asynchronous inference results).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdk_nag import NagMessageLevel

from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings


def _has_local_nvme(instance_type: Any) -> bool:
    if not isinstance(instance_type, str):
        return False
    known = GPU_INSTANCE_TYPES.get(instance_type.removeprefix("ml."))
    return known is not None and known.local_nvme


def _instance_types(variants: list[Any]) -> list[Any]:
    types = []
    for variant in variants:
        if not isinstance(variant, Mapping):
            continue
        if "InstanceType" in variant:
            types.append(variant["InstanceType"])
        types += [pool.get("InstanceType") for pool in iam.as_list(variant.get("InstancePools"))]
    return types


def check(resource: Resource, facts: AppFacts) -> Result:
    props = resource.properties
    found = []
    instance_types = _instance_types(iam.as_list(props.get("ProductionVariants")))
    if not props.get("KmsKeyId") and not all(_has_local_nvme(t) for t in instance_types):
        found.append("Volume")
    capture = props.get("DataCaptureConfig")
    if isinstance(capture, Mapping) and not capture.get("KmsKeyId"):
        found.append("DataCapture")
    asynchronous = props.get("AsyncInferenceConfig")
    if isinstance(asynchronous, Mapping):
        output = asynchronous.get("OutputConfig")
        if not (isinstance(output, Mapping) and output.get("KmsKeyId")):
            found.append("AsyncOutput")
    return findings(found)


RULE = Rule(
    suffix="SM1",
    level=NagMessageLevel.ERROR,
    info="The SageMaker endpoint configuration stores data without a customer-managed KMS key.",
    explanation=(
        "Model artifacts on the instance volume, captured prompts and completions, and asynchronous results "
        "are the sensitive parts of an inference endpoint. Set KmsKeyId (Volume; not on instance types with "
        "local NVMe, which SageMaker encrypts itself), DataCaptureConfig.KmsKeyId (DataCapture) and "
        "AsyncInferenceConfig.OutputConfig.KmsKeyId (AsyncOutput) to a customer-managed key."
    ),
    documentation="https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html",
    resource_types=frozenset({"AWS::SageMaker::EndpointConfig"}),
    check=check,
)
