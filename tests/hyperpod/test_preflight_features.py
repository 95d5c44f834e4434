"""preflight checks the inference operator add-on build each chosen operator feature needs (KV cache, intelligent
routing, prefill/decode), against eks:DescribeAddonVersions answered by a botocore Stubber, and the LMCache image
the features need."""

from __future__ import annotations

import dataclasses

import pytest

from inference_tiers.config import AccountRequirements, AddonFeature, AddonPin
from inference_tiers.constructs.hyperpod.inference_operator import INFERENCE_ADDON
from inference_tiers.ops.eks_addons import check_eks_addons
from tests.ops.helpers import StubClients, tier_requirements
from tests.ops.test_preflight_addons import _build, _page

K8S = "1.35"
PARAMS = {"addonName": INFERENCE_ADDON, "kubernetesVersion": K8S}
FEATURES_ON = (
    "hyperpod.vllm_image=lmcache/vllm-openai:v0.3.7",
    "hyperpod.kv_cache_l2=redis",
    "hyperpod.routing_strategy=session",
    "hyperpod.instance_type=ml.p5.48xlarge",
    "hyperpod.prefill_decode=true",
    "hyperpod.max_concurrent_requests=32",
    "hyperpod.operator_addon_version=v2.0.0-eksbuild.2",
)


def _operator_only(req: AccountRequirements) -> AccountRequirements:
    """``req`` with only the operator's pin (one DescribeAddonVersions call to stub)."""
    (pin,) = [p for p in req.eks_addons if p.name == INFERENCE_ADDON]
    return dataclasses.replace(req, eks_addons=(pin,))


def _answer(clients: StubClients, *versions: str) -> None:
    page = _page(*(_build(v) for v in versions), name=INFERENCE_ADDON)
    clients.stub("eks").add_response("describe_addon_versions", page, PARAMS)


def test_the_default_tier_turns_on_no_operator_feature() -> None:
    assert tier_requirements("hyperpod").addon_features == ()


def test_each_chosen_feature_is_checked_against_the_pinned_operator_build() -> None:
    req = _operator_only(tier_requirements("hyperpod", *FEATURES_ON))
    assert req.eks_addons[0].version == "v2.0.0-eksbuild.2"
    assert {(f.feature, f.set_by, f.minimum_version) for f in req.addon_features} == {
        ("the KV cache (kvCacheSpec)", "hyperpod.kv_cache_l2", "v1.0.0-eksbuild.1"),
        ("intelligent routing (intelligentRoutingSpec)", "hyperpod.routing_strategy", "v1.0.0-eksbuild.1"),
        ("prefill/decode (pdSpec)", "hyperpod.prefill_decode", "v2.0.0-eksbuild.2"),
        ("request limits (requestLimits)", "hyperpod.max_concurrent_requests", "v2.0.0-eksbuild.2"),
    }
    clients = StubClients()
    _answer(clients, "v1.0.0-eksbuild.1", "v2.0.0-eksbuild.2")
    results = check_eks_addons(clients, dataclasses.replace(req, kubernetes_version=K8S))
    clients.assert_done()
    assert [r.status for r in results] == ["pass"] * 5


def test_a_rendered_field_no_offered_build_has_fails_preflight() -> None:
    """Only v1.0.0-eksbuild.1 (operator 3.0, whose CRD lacks spec.pdSpec and spec.worker.requestLimits) is
    offered for the cluster's Kubernetes version: the fields the tier renders would be rejected, so it fails."""
    req = _operator_only(tier_requirements("hyperpod", *FEATURES_ON))
    clients = StubClients()
    _answer(clients, "v1.0.0-eksbuild.1")
    results = {
        r.check: r for r in check_eks_addons(clients, dataclasses.replace(req, kubernetes_version=K8S))
    }
    prefix = f"EKS add-on {INFERENCE_ADDON}"
    for feature, key in (
        ("prefill/decode (pdSpec)", "hyperpod.prefill_decode"),
        ("request limits (requestLimits)", "hyperpod.max_concurrent_requests"),
    ):
        result = results[f"{prefix}: {feature}"]
        assert result.status == "fail"
        assert result.detail.startswith(f"no build from v2.0.0-eksbuild.2 on is offered for Kubernetes {K8S}")
        assert result.fix.startswith(f"turn {key} off")
    assert results[prefix].status == "fail"  # the pinned build itself is not offered either


PIN = AddonPin(INFERENCE_ADDON, "v1.0.0-eksbuild.1", "module:PINS")
NEWER = AddonFeature(
    INFERENCE_ADDON, "a later feature", "hyperpod.some_key", "v2.0.0-eksbuild.2", "release notes"
)


@pytest.mark.parametrize(
    ("offered", "status", "detail", "fix"),
    [
        (
            ("v1.0.0-eksbuild.1", "v2.0.0-eksbuild.2", "v2.1.0-eksbuild.1"),
            "fail",
            "pinned v1.0.0-eksbuild.1 is older than v2.0.0-eksbuild.2, the first build with a later feature "
            "(set by hyperpod.some_key; release notes)",
            "pin amazon-sagemaker-hyperpod-inference v2.1.0-eksbuild.1 in module:PINS",
        ),
        (
            ("v1.0.0-eksbuild.1", "v1.9.0-eksbuild.3"),
            "fail",
            "no build from v2.0.0-eksbuild.2 on is offered for Kubernetes 1.35, and a later feature needs one",
            "turn hyperpod.some_key off, or deploy on a Kubernetes version such a build supports",
        ),
    ],
)
def test_a_pin_older_than_the_feature_fails_with_what_to_do(
    offered: tuple[str, ...], status: str, detail: str, fix: str
) -> None:
    clients = StubClients()
    _answer(clients, *offered)
    req = AccountRequirements(kubernetes_version=K8S, eks_addons=(PIN,), addon_features=(NEWER,))
    _, feature = check_eks_addons(clients, req)
    assert (feature.status, feature.fix) == (status, fix)
    assert feature.detail.startswith(detail)


def test_a_feature_no_offered_build_serves_fails() -> None:
    clients = StubClients()
    _answer(clients, "v2.0.0-eksbuild.2")
    pin = dataclasses.replace(PIN, version="v2.0.0-eksbuild.2")
    later = dataclasses.replace(NEWER, minimum_version="v3.0.0-eksbuild.1")
    req = AccountRequirements(kubernetes_version=K8S, eks_addons=(pin,), addon_features=(later,))
    _, feature = check_eks_addons(clients, req)
    assert feature.status == "fail"
    assert feature.detail.startswith("no build from v3.0.0-eksbuild.1 on is offered")


def test_features_of_another_add_on_are_not_reported_under_this_one() -> None:
    clients = StubClients()
    _answer(clients, "v1.0.0-eksbuild.1")
    other = dataclasses.replace(NEWER, addon="cert-manager")
    req = AccountRequirements(kubernetes_version=K8S, eks_addons=(PIN,), addon_features=(other,))
    assert [r.check for r in check_eks_addons(clients, req)] == [f"EKS add-on {INFERENCE_ADDON}"]


def test_the_image_check_gets_the_lmcache_image_the_features_need() -> None:
    images = tier_requirements("hyperpod", *FEATURES_ON).images
    assert ("lmcache/vllm-openai:v0.3.7", "hyperpod.vllm_image") in {(i.reference, i.set_by) for i in images}
