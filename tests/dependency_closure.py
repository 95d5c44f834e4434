"""Dependency closure of the custom resources (Lambda-backed steps) in a synthesized template.

CloudFormation orders a resource only after what it names: ``DependsOn``, ``Ref``, ``Fn::GetAtt`` and
``Fn::Sub`` references, transitively. A custom resource whose handler calls something it does not (transitively)
name can run before that thing exists, or after it is deleted. :func:`missing_dependencies` lists, for one
custom resource, what its handler calls but its closure lacks:

- **policies**: every ``AWS::IAM::Policy`` attached to a role the step acts as (each Lambda function's and
  state machine's role in the closure, and the task and execution roles of an ECS task definition the custom
  resource names): a role without its policy is refused by the very call the step makes;
- **network**: for each subnet a step runs in (a function's ``VpcConfig``, or ``Subnets``/``SubnetIds`` the
  custom resource passes on, e.g. for an ECS task), the subnet's route-table association and its default route
  (NAT or internet gateway) where the route table has one;
- **database writer**: for each ``AWS::RDS::DBCluster`` the custom resource or a handler's environment names, its
  writer ``AWS::RDS::DBInstance`` (the cluster answers no connection, nor the RDS Data API, before it exists);
- **Kubernetes access**: for each EKS cluster the custom resource names, the ``AWS::EKS::AccessEntry`` of every
  role in its closure that has one (the kubectl handler's access to the API);
- **nodes**: a Helm chart's pods need nodes: an ``AWS::EKS::Nodegroup`` of the cluster, or a custom resource
  that stands for nodes joining it (``node_barrier_types``), in the closure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

CUSTOM_TYPES = ("AWS::CloudFormation::CustomResource",)
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def references(value: Any) -> set[str]:
    """Logical ids ``value`` names through Ref, Fn::GetAtt and Fn::Sub (pseudo parameters left out)."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                found.update(_SUB_NAME.findall(text))
                if isinstance(inner, list):
                    found |= references(inner[1])
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return {name for name in found if not name.startswith("AWS::")}


def direct_dependencies(resources: Mapping[str, Any], logical_id: str) -> set[str]:
    resource = resources[logical_id]
    depends_on = resource.get("DependsOn", [])
    named = {depends_on} if isinstance(depends_on, str) else set(depends_on)
    return (named | references(resource.get("Properties", {}))) & set(resources)


def closure(resources: Mapping[str, Any], logical_id: str) -> set[str]:
    """Everything ``logical_id`` waits for, transitively (itself excluded)."""
    seen: set[str] = set()
    pending = [logical_id]
    while pending:
        for dependency in direct_dependencies(resources, pending.pop()) - seen:
            seen.add(dependency)
            pending.append(dependency)
    seen.discard(logical_id)
    return seen


def custom_resources(resources: Mapping[str, Any]) -> list[str]:
    """Logical ids of every custom resource (a Lambda-backed step) of the template."""
    return sorted(
        name
        for name, resource in resources.items()
        if resource["Type"].startswith("Custom::") or resource["Type"] in CUSTOM_TYPES
    )


def _of_type(resources: Mapping[str, Any], names: Iterable[str], kind: str) -> list[str]:
    return sorted(name for name in names if resources[name]["Type"] == kind)


def _attached_to(resources: Mapping[str, Any], kind: str, key: str, target: str) -> list[str]:
    """Resources of ``kind`` whose property ``key`` names ``target`` (a list of them or one)."""
    return sorted(
        name
        for name, resource in resources.items()
        if resource["Type"] == kind and target in references(resource["Properties"].get(key))
    )


def _acting_roles(resources: Mapping[str, Any], logical_id: str, reach: set[str]) -> set[str]:
    roles: set[str] = set()
    for name in _of_type(resources, reach, "AWS::Lambda::Function"):
        roles |= references(resources[name]["Properties"]["Role"])
    for name in _of_type(resources, reach, "AWS::StepFunctions::StateMachine"):
        roles |= references(resources[name]["Properties"]["RoleArn"])
    own = direct_dependencies(resources, logical_id)
    for name in _of_type(resources, own, "AWS::ECS::TaskDefinition"):
        properties = resources[name]["Properties"]
        roles |= references([properties.get("TaskRoleArn"), properties.get("ExecutionRoleArn")])
    return roles & set(resources)


def _subnets_used(resources: Mapping[str, Any], logical_id: str, reach: set[str]) -> set[str]:
    properties = resources[logical_id]["Properties"]
    subnets = references([properties.get("Subnets"), properties.get("SubnetIds")])
    for name in _of_type(resources, reach, "AWS::Lambda::Function"):
        subnets |= references(resources[name]["Properties"].get("VpcConfig", {}).get("SubnetIds"))
    return {name for name in subnets & set(resources) if resources[name]["Type"] == "AWS::EC2::Subnet"}


def _network(resources: Mapping[str, Any], subnet: str) -> list[str]:
    needed = []
    for association in _attached_to(resources, "AWS::EC2::SubnetRouteTableAssociation", "SubnetId", subnet):
        needed.append(association)
        (table,) = references(resources[association]["Properties"]["RouteTableId"])
        needed += [
            route
            for route in _attached_to(resources, "AWS::EC2::Route", "RouteTableId", table)
            if resources[route]["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"
        ]
    return needed


def missing_dependencies(
    resources: Mapping[str, Any], logical_id: str, *, node_barrier_types: Iterable[str] = ()
) -> dict[str, str]:
    """What the handler of custom resource ``logical_id`` calls but its closure lacks: name -> why needed."""
    reach = closure(resources, logical_id)
    needed: dict[str, str] = {}
    for role in _acting_roles(resources, logical_id, reach):
        for policy in _attached_to(resources, "AWS::IAM::Policy", "Roles", role):
            needed[policy] = f"policy of {role}, a role the step acts as"
    for subnet in _subnets_used(resources, logical_id, reach):
        for name in _network(resources, subnet):
            needed[name] = f"network of subnet {subnet}, where the step runs"
    missing = {name: why for name, why in needed.items() if name not in reach}

    properties = resources[logical_id]["Properties"]
    named = references(properties)
    for name in _of_type(resources, reach, "AWS::Lambda::Function"):
        named |= references(resources[name]["Properties"].get("Environment"))
    for cluster in _of_type(resources, named & set(resources), "AWS::RDS::DBCluster"):
        instances = _attached_to(resources, "AWS::RDS::DBInstance", "DBClusterIdentifier", cluster)
        # The writer: the instance that waits for no other instance of the cluster (readers wait for it).
        for writer in [i for i in instances if not closure(resources, i) & set(instances)]:
            if writer not in reach:
                missing[writer] = f"the writer instance of {cluster}, which the step connects to"

    for cluster in _of_type(resources, named & set(resources), "AWS::EKS::Cluster"):
        for entry in _attached_to(resources, "AWS::EKS::AccessEntry", "ClusterName", cluster):
            principal = references(resources[entry]["Properties"]["PrincipalArn"])
            if principal & reach and entry not in reach:
                missing[entry] = f"Kubernetes API access of {', '.join(sorted(principal))} to {cluster}"
        if resources[logical_id]["Type"] == HELM_CHART:
            nodes = _attached_to(resources, "AWS::EKS::Nodegroup", "ClusterName", cluster)
            nodes += [name for name, r in resources.items() if r["Type"] in tuple(node_barrier_types)]
            if not set(nodes) & reach:
                missing[" or ".join(nodes) or "a node group"] = f"nodes of {cluster} for the chart's pods"
    return missing
