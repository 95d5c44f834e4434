"""The sandbox constructs refuse misuse with an ArgumentError naming the construct, parameter and what is accepted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.sandbox import (
    AgentSandboxController,
    Karpenter,
    KataSandboxNodes,
    PodIdentityRole,
    SandboxIsolation,
    SandboxTenant,
)
from inference_tiers.k8s.sandbox_tenancy import TenancySpec
from inference_tiers.validation import ArgumentError
from tests.harness import cdk_json_context
from tests.sandbox.helpers import chart_values

TENANCY = TenancySpec(
    runtime_class_name="kata-qemu-runtime-rs", overhead_cpu_millicores=250, overhead_memory_mib=320
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Misuse")
    eks = EksCluster(stack, "Eks", admin_principal_arns=["arn:aws:iam::123456789012:role/Admin"])
    karpenter = Karpenter(stack, "Karpenter", cluster=eks.cluster)
    controller = AgentSandboxController(stack, "Controller", cluster=eks.cluster)
    isolation = SandboxIsolation(
        stack, "Isolation", eks_cluster=eks, runtime_class_name=TENANCY.runtime_class_name
    )
    other = EksCluster(cdk.Stack(app, "Other"), "Eks")
    other_isolation = SandboxIsolation(
        other, "Isolation", eks_cluster=other, runtime_class_name=TENANCY.runtime_class_name
    )
    return {
        "stack": stack,
        "eks": eks,
        "karpenter": karpenter,
        "controller": controller,
        "isolation": isolation,
        "other_isolation": other_isolation,
    }


_counter = iter(range(10_000))


def _id() -> str:
    return f"C{next(_counter)}"


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"version": "1.12.0"}, "version", "1.13.0 or later"),
        ({"version": "latest"}, "version", "an exact release X.Y.Z"),
        (
            {"node_selector": {"inference-tiers/node-pool": 1}},
            r"node_selector\['inference-tiers/node-pool'\]",
            "string",
        ),
        ({"cluster": "my-cluster"}, "cluster", "an ICluster"),
    ],
)
def test_karpenter_refuses(base: dict[str, Any], kwargs: dict[str, Any], param: str, accepted: str) -> None:
    with pytest.raises(ArgumentError, match=rf"Karpenter: parameter '{param}' got .*{accepted}"):
        Karpenter(base["stack"], _id(), **{"cluster": base["eks"].cluster, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"subnets": []}, "subnets", "a list of 1 to 16"),
        ({"subnets": "subnet-0123"}, "subnets", "a string is not a list"),
        ({"karpenter": "karpenter"}, "karpenter", "a Karpenter"),
        ({"node_mode": "vm"}, "node_mode", "one of 'nested', 'metal'"),
        ({"instance_families": ["m7i"]}, r"instance_families\[0\]", "one of 'c8i'"),
        ({"max_vcpus": "1000"}, "max_vcpus", "an integer"),
    ],
)
def test_kata_nodes_refuse(base: dict[str, Any], kwargs: dict[str, Any], param: str, accepted: str) -> None:
    eks = base["eks"]
    props = {
        "cluster": eks.cluster,
        "karpenter": base["karpenter"],
        "subnets": eks.vpc.private_subnets,
        **kwargs,
    }
    with pytest.raises(ArgumentError, match=rf"KataSandboxNodes: parameter '{param}' got .*{accepted}"):
        KataSandboxNodes(base["stack"], _id(), **props)


def test_controller_refuses_a_string_or_an_unfetched_directory(base: dict[str, Any], tmp_path: Path) -> None:
    cluster = base["eks"].cluster
    with pytest.raises(
        ArgumentError, match=r"AgentSandboxController: parameter 'chart_directory' .*pathlib.Path"
    ):
        AgentSandboxController(base["stack"], _id(), cluster=cluster, chart_directory=str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match=r"parameter 'chart_directory' got .*the agent-sandbox chart"):
        AgentSandboxController(base["stack"], _id(), cluster=cluster, chart_directory=tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"tenancy": {"runtime_class_name": "kata-qemu-runtime-rs"}}, "tenancy", "a TenancySpec"),
        ({"controller": "agent-sandbox"}, "controller", "an AgentSandboxController"),
        ({"name": "Team A"}, "name", "a DNS label"),
        ({"egress": ["169.254.169.254/32:80"]}, r"egress\[0\]", "instance metadata"),
        ({"warm_pool": 3, "max_sandboxes": 2}, "warm_pool", "from 0 to 2"),
        ({"isolation": None}, "isolation", "a SandboxIsolation construct .*enforces the NetworkPolicies"),
        ({"isolation": "other"}, "isolation", "a SandboxIsolation of the cluster given as cluster"),
        (
            {"tenancy": dataclasses.replace(TENANCY, runtime_class_name="kata-clh-runtime-rs")},
            "tenancy",
            "runtime_class_name 'kata-qemu-runtime-rs', the class the isolation's admission policy requires",
        ),
    ],
)
def test_tenant_refuses(base: dict[str, Any], kwargs: dict[str, Any], param: str, accepted: str) -> None:
    if kwargs.get("isolation") == "other":
        kwargs = {"isolation": base["other_isolation"]}
    with pytest.raises(ArgumentError, match=rf"SandboxTenant: parameter '{param}' got .*{accepted}"):
        SandboxTenant(base["stack"], _id(), **tenant_props(base, **{"name": "t", **kwargs}))


def tenant_props(base: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """SandboxTenant's keyword arguments on the shared test cluster, with ``overrides``."""
    return {
        "cluster": base["eks"].cluster,
        "controller": base["controller"],
        "isolation": base["isolation"],
        "tenancy": TENANCY,
        **overrides,
    }


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"namespace": "Kube_System"}, "namespace", "a Kubernetes namespace name"),
        ({"service_account": ""}, "service_account", "a Kubernetes service account name"),
        ({"cluster": None}, "cluster", "an ICluster"),
    ],
)
def test_pod_identity_role_refuses(
    base: dict[str, Any], kwargs: dict[str, Any], param: str, accepted: str
) -> None:
    props = {
        "cluster": base["eks"].cluster,
        "namespace": "ns",
        "service_account": "sa",
        "description": "d",
        **kwargs,
    }
    with pytest.raises(ArgumentError, match=rf"PodIdentityRole: parameter '{param}' got .*{accepted}"):
        PodIdentityRole(base["stack"], _id(), **props)


def test_a_tenant_in_someone_elses_app_gets_its_role_and_objects(base: dict[str, Any]) -> None:
    tenant = SandboxTenant(
        base["stack"],
        _id(),
        cluster=base["eks"].cluster,
        controller=base["controller"],
        isolation=base["isolation"],
        tenancy=TENANCY,
        name="ext",
    )
    assert tenant.namespace == "sandbox-ext"
    assert tenant.identity.association.namespace == "sandbox-ext"
    assert tenant.identity.association.service_account == "sandbox"


def test_a_second_tenant_of_the_same_name_on_the_cluster_is_refused(base: dict[str, Any]) -> None:
    props = tenant_props(base, name="twice")
    first = SandboxTenant(base["stack"], _id(), **props)
    with pytest.raises(
        ArgumentError,
        match=rf"SandboxTenant: parameter 'name' got 'twice'.* no other SandboxTenant .*\({first.node.path} has",
    ):
        SandboxTenant(base["stack"], _id(), **props)


def test_a_tenant_cannot_be_built_without_isolation(base: dict[str, Any]) -> None:
    with pytest.raises(
        TypeError, match=r"SandboxTenant.__init__\(\) missing 1 required keyword-only argument: 'isolation'"
    ):
        SandboxTenant(  # type: ignore[call-arg]
            base["stack"],
            _id(),
            cluster=base["eks"].cluster,
            controller=base["controller"],
            tenancy=TENANCY,
            name="n",
        )


@pytest.mark.parametrize(
    ("kwargs", "param", "accepted"),
    [
        ({"eks_cluster": "cluster"}, "eks_cluster", "an EksCluster construct"),
        ({"runtime_class_name": "Kata QEMU"}, "runtime_class_name", "a RuntimeClass name"),
    ],
)
def test_isolation_refuses(base: dict[str, Any], kwargs: dict[str, Any], param: str, accepted: str) -> None:
    props = {"eks_cluster": base["eks"], "runtime_class_name": "kata-qemu-runtime-rs", **kwargs}
    with pytest.raises(ArgumentError, match=rf"SandboxIsolation: parameter '{param}' got .*{accepted}"):
        SandboxIsolation(base["stack"], _id(), **props)


def test_karpenter_pins_the_controller_digest_only_for_the_release_it_was_recorded_for(
    base: dict[str, Any],
) -> None:
    """Another chart version keeps its own controller image (its release commit wrote tag and digest into it)."""
    other = Karpenter(base["stack"], _id(), cluster=base["eks"].cluster, version="1.13.0")
    assert "image" not in chart_values(other.chart)["controller"]
    assert chart_values(base["karpenter"].chart)["controller"]["image"]["tag"] == "1.14.1"
