"""Item 8 of issue 20: the sandbox constructs composed in a user's own app, cluster and tenants in two stacks.

Before, ``SandboxTenant`` there rendered default-deny NetworkPolicies that nothing enforced (only the tier's stack
turned on the VPC CNI network policy agent) and no admission policy. Now a tenant cannot be built without the
cluster's ``SandboxIsolation``, and what it needs is in the user's templates, before the tenant's objects.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from inference_tiers.constructs import AgentSandboxController, EksCluster, SandboxIsolation, SandboxTenant
from inference_tiers.k8s.sandbox_tenancy import TenancySpec
from tests.harness import cdk_json_context, nag_findings
from tests.sandbox.helpers import by_kind, manifests

TENANCY = TenancySpec(
    runtime_class_name="kata-qemu-runtime-rs", overhead_cpu_millicores=250, overhead_memory_mib=320
)


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = cdk.App(
        outdir=str(tmp_path_factory.mktemp("cdk.out")),
        context={**cdk_json_context(), "aws:cdk:bundling-stacks": []},
    )
    platform = cdk.Stack(app, "UserPlatform")
    eks = EksCluster(platform, "Eks")
    sandboxes = cdk.Stack(app, "UserSandboxes")
    controller = AgentSandboxController(sandboxes, "Controller", cluster=eks.cluster)
    isolation = SandboxIsolation(
        sandboxes, "Isolation", eks_cluster=eks, runtime_class_name=TENANCY.runtime_class_name
    )
    tenant = SandboxTenant(
        sandboxes,
        "Research",
        cluster=eks.cluster,
        controller=controller,
        isolation=isolation,
        tenancy=TENANCY,
        name="research",
    )
    return {"platform": platform, "sandboxes": sandboxes, "isolation": isolation, "tenant": tenant}


def _logical_id(construct: Construct) -> str:
    (resource,) = [c for c in construct.node.find_all() if isinstance(c, cdk.CfnResource)]
    return cdk.Stack.of(construct).get_logical_id(resource)


def test_the_users_cluster_enforces_network_policies(user_app: dict[str, Any]) -> None:
    addons = Template.from_stack(user_app["platform"]).find_resources("AWS::EKS::Addon").values()
    (vpc_cni,) = [a["Properties"] for a in addons if a["Properties"]["AddonName"] == "vpc-cni"]
    assert json.loads(vpc_cni["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


def test_the_tenants_objects_come_after_the_admission_policy_and_the_policy_agent(
    user_app: dict[str, Any],
) -> None:
    sandboxes: cdk.Stack = user_app["sandboxes"]
    template = Template.from_stack(sandboxes)
    applied = manifests(template)
    (policy,) = by_kind(applied, "ValidatingAdmissionPolicy")
    assert "kata-qemu-runtime-rs" in json.dumps(policy["spec"]["validations"])
    assert len(by_kind(applied, "NetworkPolicy")) == 4
    resources = template.to_json()["Resources"]
    objects_id = _logical_id(user_app["tenant"].manifest)
    policy_id = _logical_id(user_app["isolation"].admission_policy)
    assert policy_id in resources[objects_id]["DependsOn"]
    # The add-on is in the cluster's stack: CloudFormation cannot order across stacks, CDK orders the stacks.
    assert user_app["platform"] in sandboxes.dependencies


def test_no_nag_finding_in_the_users_sandbox_stack(user_app: dict[str, Any]) -> None:
    assert nag_findings(user_app["sandboxes"], AwsSolutionsChecks()) == []
