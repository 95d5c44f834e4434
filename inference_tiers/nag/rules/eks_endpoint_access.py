"""EKS1: an EKS cluster's API endpoint is private, or public only to listed CIDR ranges (never 0.0.0.0/0)."""

from __future__ import annotations

from collections.abc import Mapping

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule

OPEN = {"0.0.0.0/0", "::/0"}


def check(resource: Resource, facts: AppFacts) -> Result:
    vpc = resource.properties.get("ResourcesVpcConfig")
    vpc = vpc if isinstance(vpc, Mapping) else {}
    # EKS's defaults: a public endpoint, open to 0.0.0.0/0.
    if vpc.get("EndpointPublicAccess", True) is False:
        return NagRuleCompliance.COMPLIANT
    cidrs = iam.as_list(vpc.get("PublicAccessCidrs"))
    if cidrs and not OPEN & {iam.render(c) for c in cidrs}:
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="EKS1",
    level=NagMessageLevel.ERROR,
    info="The EKS cluster's API endpoint is public to the whole internet.",
    explanation=(
        "A GPU cluster's API server is one stolen credential away from running anyone's workload on the most "
        "expensive instances in the account. Set EndpointPublicAccess to false (reach it from the VPC), or "
        "list the CIDR ranges that may reach it in PublicAccessCidrs."
    ),
    documentation="https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html",
    resource_types=frozenset({"AWS::EKS::Cluster"}),
    check=check,
)
