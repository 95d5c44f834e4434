"""No internet-facing load balancer can front a HyperPod model: what the synthesized template guarantees.

The HyperPod inference operator makes one ALB per model through the AWS Load Balancer Controller the add-on
bundles (v2.13.2, tests/data/iam_reference/aws-load-balancer-controller-v2.13.2.json.SOURCE). Its source at
github.com/kubernetes-sigs/aws-load-balancer-controller, tag v2.13.2:
- the Ingress scheme is the one an Ingress (annotation or IngressClassParams) asks for, else the controller's
  ``--default-load-balancer-scheme`` (pkg/ingress/model_build_load_balancer.go:135-163), ``internal`` unless set
  (pkg/config/controller_config.go:148); the operator's CRD has no scheme field, so we cannot see what it asks;
- subnets are discovered by role tag, ``kubernetes.io/role/internal-elb`` for internal and
  ``kubernetes.io/role/elb`` for internet-facing (pkg/networking/subnet_resolver.go:22-23, 161-177);
- when no subnet carries the tag, discovery falls back to reachability: the subnets whose route table has an
  internet gateway route (subnet_resolver.go:182-188, 325-392), on by default (feature gate
  SubnetDiscoveryByReachability, pkg/config/feature_gates.go:68). Explicit subnets (annotation) skip discovery.
So subnet tags alone cannot prevent an internet-facing ALB: with the ``elb`` tag removed, the fallback still finds
the public subnets. What does prevent it is the controller's role: it may create load balancers only with
``elasticloadbalancing:Scheme`` = ``internal``, and the controller always sends the scheme
(pkg/deploy/elbv2/load_balancer_manager.go:331).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

import pytest

from tests.harness import TierBuild
from tests.iam_policy import listed, reference_policy

CREATE_LOAD_BALANCER = "elasticloadbalancing:CreateLoadBalancer"
INTERNAL_ONLY = {"elasticloadbalancing:Scheme": "internal"}


@pytest.fixture(scope="module")
def template(tier_build: Callable[[str], TierBuild]) -> Mapping[str, Any]:
    return tier_build("hyperpod").template().to_json()


def _subnet_tags(template: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {t["Key"]: t["Value"] for t in r["Properties"].get("Tags", [])}
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::Subnet"
    ]


def _allow_statements(template: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every Allow statement of every identity policy in the template (policies and roles' inline ones)."""
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [properties["PolicyDocument"]]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in properties.get("Policies", [])]
        else:
            continue
        for document in documents:
            yield from (s for s in document["Statement"] if s["Effect"] == "Allow")


def test_only_private_subnets_carry_a_load_balancer_role_tag(template: Mapping[str, Any]) -> None:
    tags = _subnet_tags(template)
    public = [t for t in tags if t.get("aws-cdk:subnet-type") == "Public"]
    private = [
        t for t in tags if t.get("aws-cdk:subnet-type") == "Private" or t.get("Name") == "hyperpod-private"
    ]
    assert len(public) == 2 and len(private) == 3
    assert all(t["kubernetes.io/role/internal-elb"] == "1" for t in private)
    # subnet_resolver.go:23: the internet-facing discovery tag is on no subnet of the VPC.
    assert not [t for t in tags if "kubernetes.io/role/elb" in t]


def test_load_balancers_may_be_created_internal_only(template: Mapping[str, Any]) -> None:
    creating = [
        s
        for s in _allow_statements(template)
        if any(fnmatchcase(CREATE_LOAD_BALANCER.lower(), a.lower()) for a in listed(s["Action"]))
    ]
    # Of the template's own policies, only the load-balancer controller's may create load balancers, and only
    # internal ones. AWS managed policies are not in the template: the operator's creates none (next test); the EKS
    # cluster role's AmazonEKSClusterPolicy serves the in-tree cloud provider, which makes no ALB (Services only).
    assert len(creating) == 1
    assert creating[0]["Condition"]["StringEquals"] == INTERNAL_ONLY


def test_the_operators_managed_policy_creates_no_load_balancer() -> None:
    """The operator role's AWS managed policy (vendored v3, tests/data/iam_reference) only describes them."""
    actions = {
        a
        for s in reference_policy("AmazonSageMakerHyperPodInferenceAccess-v3")["Statement"]
        for a in listed(s["Action"])
    }
    assert {a for a in actions if a.startswith("elasticloadbalancing:")} == {
        "elasticloadbalancing:DescribeLoadBalancers"
    }
