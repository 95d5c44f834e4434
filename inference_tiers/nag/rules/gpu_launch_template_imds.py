"""GPU1: a GPU node's launch template requires IMDSv2 with a hop limit of 1.

A launch template is a GPU one when it names an accelerated instance type (p, g, trn, inf, dl families) or
when an EKS managed node group in its stack uses it with an accelerated AMI type or instance type.
Findings: ``HttpTokens`` (not ``required``) and ``HopLimit`` (``HttpPutResponseHopLimit`` not 1; the EKS
AMIs' own default is 2, so it must be set).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

_ACCELERATED = re.compile(r"(ml\.)?(p\d|g\d|gr\d|trn\d|inf\d|dl\d)[a-z-]*\.[0-9a-z]+")
_ACCELERATED_AMI = ("NVIDIA", "GPU", "NEURON")


def is_accelerated(instance_type: Any) -> bool:
    return isinstance(instance_type, str) and _ACCELERATED.fullmatch(instance_type) is not None


def _used_by_gpu_node_group(template: Resource, facts: AppFacts) -> bool:
    names = {f"<{template.logical_id}>"}
    for group in facts.of_type("AWS::EKS::Nodegroup"):
        reference = group.properties.get("LaunchTemplate")
        if group.stack != template.stack or not isinstance(reference, Mapping):
            continue
        if iam.render(reference.get("Id")) not in names and iam.render(reference.get("Name")) not in names:
            continue
        ami = str(group.properties.get("AmiType", ""))
        if any(a in ami for a in _ACCELERATED_AMI):
            return True
        if any(is_accelerated(t) for t in iam.as_list(group.properties.get("InstanceTypes"))):
            return True
    return False


def check(resource: Resource, facts: AppFacts) -> Result:
    data = resource.properties.get("LaunchTemplateData")
    data = data if isinstance(data, Mapping) else {}
    if not is_accelerated(data.get("InstanceType")) and not _used_by_gpu_node_group(resource, facts):
        return NagRuleCompliance.NOT_APPLICABLE
    metadata = data.get("MetadataOptions")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    if metadata.get("HttpEndpoint") == "disabled":
        return NagRuleCompliance.COMPLIANT
    found = []
    if metadata.get("HttpTokens") != "required":
        found.append("HttpTokens")
    if metadata.get("HttpPutResponseHopLimit") != 1:
        found.append("HopLimit")
    return findings(found)


RULE = Rule(
    suffix="GPU1",
    level=NagMessageLevel.ERROR,
    info="The GPU launch template does not require IMDSv2 with a hop limit of 1.",
    explanation=(
        "With IMDSv1 or a hop limit above 1, any pod on the node (model servers run third-party code) can "
        "read the node role's credentials from the instance metadata service. Set MetadataOptions "
        "HttpTokens: required and HttpPutResponseHopLimit: 1, and give pods their own role (EKS Pod "
        "Identity or IRSA); acknowledge HopLimit, with the reason, only where a pod must reach IMDS."
    ),
    documentation="https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html",
    resource_types=frozenset({"AWS::EC2::LaunchTemplate"}),
    check=check,
)
