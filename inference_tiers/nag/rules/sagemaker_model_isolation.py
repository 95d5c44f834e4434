"""SM2: a SageMaker model runs in the customer's VPC and, where its container allows it, network-isolated.

Findings: ``VpcConfig`` (no VpcConfig: the container reaches the internet through SageMaker's network) and
``NetworkIsolation`` (EnableNetworkIsolation is not true: the container can make outbound calls).
"""

from __future__ import annotations

from cdk_nag import NagMessageLevel

from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings


def check(resource: Resource, facts: AppFacts) -> Result:
    props = resource.properties
    found = []
    if not props.get("VpcConfig"):
        found.append("VpcConfig")
    if props.get("EnableNetworkIsolation") is not True:
        found.append("NetworkIsolation")
    return findings(found)


RULE = Rule(
    suffix="SM2",
    level=NagMessageLevel.ERROR,
    info="The SageMaker model does not run in a VPC with network isolation.",
    explanation=(
        "A model container with outbound network access can exfiltrate prompts and weights. Set VpcConfig "
        "to private subnets and a security group, and EnableNetworkIsolation to true when the container "
        "loads its weights from ModelDataSource (S3); acknowledge NetworkIsolation, with the reason, only "
        "for a container that must call out (for example one that downloads weights from a model hub)."
    ),
    documentation="https://docs.aws.amazon.com/sagemaker/latest/dg/mkt-algo-model-internet-free.html",
    resource_types=frozenset({"AWS::SageMaker::Model"}),
    check=check,
)
