"""preflight's EKS add-on check: Stubber responses shaped like eks:DescribeAddonVersions (botocore validates
them against the service model), and the pins it checks traced back to what the templates install."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from inference_tiers.config import TIER_ORDER, AccountRequirements, AddonPin, tier_defaults
from inference_tiers.constructs.eks.cluster import AddonVersions
from inference_tiers.ops.eks_addons import check_eks_addons, version_order
from tests.harness import TierBuild
from tests.ops.helpers import StubClients, client_error, tier_requirements

K8S = "1.35"
CERT_MANAGER = AddonPin(
    "cert-manager",
    "v1.18.2-eksbuild.2",
    "inference_tiers.constructs.hyperpod.inference_operator:DEFAULT_ADDON_VERSIONS",
)
REQ = AccountRequirements(kubernetes_version=K8S, eks_addons=(CERT_MANAGER,))
PARAMS = {"addonName": "cert-manager", "kubernetesVersion": K8S}


def _build(version: str, *, cluster_version: str = K8S, default: bool = False) -> dict[str, Any]:
    return {
        "addonVersion": version,
        "architecture": ["amd64", "arm64"],
        "computeTypes": ["ec2", "auto", "hybrid"],
        "compatibilities": [
            {"clusterVersion": cluster_version, "platformVersions": ["*"], "defaultVersion": default}
        ],
        "requiresConfiguration": False,
        "requiresIamPermissions": False,
    }


def _page(*builds: dict[str, Any], token: str | None = None, name: str = "cert-manager") -> dict[str, Any]:
    page: dict[str, Any] = {
        "addons": [
            {
                "addonName": name,
                "type": "security",
                "addonVersions": list(builds),
                "publisher": "eks",
                "owner": "aws",
                "defaultNamespace": "cert-manager",
            }
        ]
    }
    if token:
        page["nextToken"] = token
    return page


@pytest.fixture
def clients() -> StubClients:
    return StubClients()


def test_a_pinned_build_that_is_offered_passes_and_names_a_newer_one(clients: StubClients) -> None:
    clients.stub("eks").add_response(
        "describe_addon_versions",
        _page(_build("v1.19.1-eksbuild.1", default=True), _build("v1.18.2-eksbuild.2")),
        PARAMS,
    )
    [result] = check_eks_addons(clients, REQ)
    assert result.check == "EKS add-on cert-manager" and result.status == "pass"
    assert result.detail == "v1.18.2-eksbuild.2 offered for Kubernetes 1.35; newer: v1.19.1-eksbuild.1"
    clients.assert_done()


def test_a_build_not_offered_fails_with_the_newest_to_pin_and_where(clients: StubClients) -> None:
    # v1.10 sorts after v1.9 (numbers, not text); eksbuild.10 after eksbuild.9.
    clients.stub("eks").add_response(
        "describe_addon_versions",
        _page(
            _build("v1.9.0-eksbuild.9"),
            _build("v1.10.0-eksbuild.9", default=True),
            _build("v1.10.0-eksbuild.10"),
        ),
        PARAMS,
    )
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "fail"
    assert result.detail == (
        "v1.18.2-eksbuild.2 is not offered for Kubernetes 1.35 in us-east-1; newest offered "
        "v1.10.0-eksbuild.10, EKS default v1.10.0-eksbuild.9 (3 builds)"
    )
    assert result.fix == (
        "pin cert-manager v1.10.0-eksbuild.10 in "
        "inference_tiers.constructs.hyperpod.inference_operator:DEFAULT_ADDON_VERSIONS"
    )


def test_every_page_is_read(clients: StubClients) -> None:
    stub = clients.stub("eks")
    stub.add_response("describe_addon_versions", _page(_build("v1.17.0-eksbuild.1"), token="t1"), PARAMS)
    stub.add_response(
        "describe_addon_versions", _page(_build("v1.18.2-eksbuild.2")), {**PARAMS, "nextToken": "t1"}
    )
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "pass" and result.detail == "v1.18.2-eksbuild.2 offered for Kubernetes 1.35"
    clients.assert_done()


def test_builds_for_another_kubernetes_version_or_add_on_do_not_count(clients: StubClients) -> None:
    page = _page(_build("v1.18.2-eksbuild.2", cluster_version="1.34"))
    page["addons"] += _page(_build("v1.18.2-eksbuild.2"), name="metrics-server")["addons"]
    clients.stub("eks").add_response("describe_addon_versions", page, PARAMS)
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "fail" and result.detail.startswith("no build of cert-manager is offered")


@pytest.mark.parametrize("error", [None, "ResourceNotFoundException"])
def test_an_add_on_without_builds_for_the_version_fails(clients: StubClients, error: str | None) -> None:
    if error:
        client_error(clients.stub("eks"), "describe_addon_versions", error, status=404)
    else:
        clients.stub("eks").add_response("describe_addon_versions", {"addons": []}, PARAMS)
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "fail"
    assert result.detail == (
        "no build of cert-manager is offered for Kubernetes 1.35 in us-east-1 (pinned v1.18.2-eksbuild.2)"
    )
    assert "aws eks describe-addon-versions --addon-name cert-manager" in result.fix


def test_access_denied_is_a_warning_naming_the_permission(clients: StubClients) -> None:
    client_error(clients.stub("eks"), "describe_addon_versions", "AccessDeniedException", status=403)
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "warn" and result.fix == "allow eks:DescribeAddonVersions for this identity"


def test_another_error_fails_the_check(clients: StubClients) -> None:
    client_error(clients.stub("eks"), "describe_addon_versions", "ServerException", status=500)
    [result] = check_eks_addons(clients, REQ)
    assert result.status == "fail" and result.detail.startswith("ServerException")


def test_nothing_to_check_without_a_kubernetes_version(clients: StubClients) -> None:
    assert check_eks_addons(clients, AccountRequirements(eks_addons=(CERT_MANAGER,))) == []


def test_version_order() -> None:
    assert sorted(["v1.10.0-eksbuild.1", "v1.9.9-eksbuild.2", "odd", "v1.10.0"], key=version_order) == [
        "odd",
        "v1.9.9-eksbuild.2",
        "v1.10.0",
        "v1.10.0-eksbuild.1",
    ]


# --- the pins are the constructs' own ----------------------------------------------------------------------


def _pinned_value(pin: AddonPin) -> str:
    """The value where ``pin.pinned_in`` says it is set: a ``module:CONSTANT`` or a context key (its default)."""
    if ":" not in pin.pinned_in:
        return str(tier_defaults()[pin.pinned_in])
    module, _, attribute = pin.pinned_in.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    if isinstance(value, AddonVersions):
        return value.by_name()[pin.name]
    if isinstance(value, str):
        return value
    return str(value[pin.name])


@pytest.mark.parametrize("tier", TIER_ORDER)
def test_every_pin_names_the_constant_that_holds_it(tier: str) -> None:
    req = tier_requirements(tier)
    assert bool(req.eks_addons) == bool(req.kubernetes_version), "an EKS tier pins its add-ons"
    for pin in req.eks_addons:
        assert _pinned_value(pin) == pin.version, pin


def test_hyperpod_without_observability_does_not_check_its_add_on() -> None:
    names = {pin.name for pin in tier_requirements("hyperpod", "hyperpod.observability=false").eks_addons}
    assert "amazon-sagemaker-hyperpod-observability" not in names and "cert-manager" in names


def _template_addons(build: TierBuild) -> set[tuple[str, str]]:
    return {
        (resource["Properties"]["AddonName"], resource["Properties"]["AddonVersion"])
        for template in build.templates().values()
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::EKS::Addon"
    }


@pytest.mark.parametrize("tier", TIER_ORDER)
def test_preflight_checks_exactly_the_add_ons_the_template_installs(
    tier: str, tier_build: Callable[[str], TierBuild]
) -> None:
    pins = {(pin.name, pin.version) for pin in tier_requirements(tier).eks_addons}
    assert pins == _template_addons(tier_build(tier))
