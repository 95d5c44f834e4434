"""Preflight: every EKS add-on version a tier pins is offered for the cluster's Kubernetes version.

The pins come from :attr:`AccountRequirements.eks_addons`, which each tier fills from the constants its
constructs install (no second list of versions here). ``eks:DescribeAddonVersions`` filtered by Kubernetes
version answers the builds EKS offers for it in this Region; a pin that is not among them fails the check
with the newest offered build to pin instead.

Features the settings turn on (:attr:`AccountRequirements.addon_features`, e.g. the HyperPod inference
operator's KV cache) are checked against the same answer: the pinned build must be at least the first build
that serves the feature, and such a build must be offered.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from inference_tiers.config import AccountRequirements, AddonFeature, AddonPin
from inference_tiers.ops.checks import CheckResult, Clients, could_not_check, error_code

_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)(?:-eksbuild\.([0-9]+))?")


def version_order(version: str) -> tuple[int, ...]:
    """Sort key of an add-on build: ``v1.21.1-eksbuild.3`` -> (1, 21, 1, 3); unparsed builds sort first."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return (-1,)
    return tuple(int(part or 0) for part in match.groups())


def offered_versions(eks: Any, addon: str, kubernetes_version: str) -> tuple[list[str], str | None]:
    """The builds of ``addon`` offered for ``kubernetes_version`` (every page) and EKS's default among them."""
    versions: list[str] = []
    default = None
    pages = eks.get_paginator("describe_addon_versions").paginate(
        addonName=addon, kubernetesVersion=kubernetes_version
    )
    for page in pages:
        for found in page.get("addons", []):
            if found.get("addonName") != addon:
                continue
            for build in found.get("addonVersions", []):
                compatible = [
                    c
                    for c in build.get("compatibilities", [])
                    if c.get("clusterVersion") == kubernetes_version
                ]
                if not compatible:
                    continue
                versions.append(build["addonVersion"])
                if any(c.get("defaultVersion") for c in compatible):
                    default = build["addonVersion"]
    return sorted(set(versions), key=version_order), default


def _result(pin: AddonPin, offered: list[str], default: str | None, k8s: str, region: str) -> CheckResult:
    name = f"EKS add-on {pin.name}"
    if not offered:
        return CheckResult(
            name,
            "fail",
            f"no build of {pin.name} is offered for Kubernetes {k8s} in {region} (pinned {pin.version})",
            f"deploy on a Kubernetes version it supports: aws eks describe-addon-versions --addon-name {pin.name}",
        )
    newest = offered[-1]
    if pin.version not in offered:
        default_text = f", EKS default {default}" if default and default != newest else ""
        return CheckResult(
            name,
            "fail",
            f"{pin.version} is not offered for Kubernetes {k8s} in {region}; newest offered {newest}"
            f"{default_text} ({len(offered)} build{'s' if len(offered) > 1 else ''})",
            f"pin {pin.name} {newest} in {pin.pinned_in}",
        )
    newer = f"; newer: {newest}" if newest != pin.version else ""
    return CheckResult(name, "pass", f"{pin.version} offered for Kubernetes {k8s}{newer}")


def _feature_result(feature: AddonFeature, pin: AddonPin, offered: list[str], k8s: str) -> CheckResult:
    name = f"EKS add-on {pin.name}: {feature.feature}"
    minimum = feature.minimum_version
    serving = [v for v in offered if version_order(v) >= version_order(minimum)]
    if not serving:
        return CheckResult(
            name,
            "fail",
            f"no build from {minimum} on is offered for Kubernetes {k8s}, and {feature.feature} needs one "
            f"(set by {feature.set_by})",
            f"turn {feature.set_by} off, or deploy on a Kubernetes version such a build supports",
        )
    if version_order(pin.version) < version_order(minimum):
        return CheckResult(
            name,
            "fail",
            f"pinned {pin.version} is older than {minimum}, the first build with {feature.feature} (set by "
            f"{feature.set_by}; {feature.source})",
            f"pin {pin.name} {serving[-1]} in {pin.pinned_in}",
        )
    return CheckResult(
        name, "pass", f"{pin.version} has {feature.feature} (from {minimum}; {feature.source})"
    )


def check_eks_addons(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """One result per pinned add-on: offered for the tier's Kubernetes version, or what to pin instead; then
    one per feature of that add-on the settings turn on."""
    k8s = req.kubernetes_version
    if not req.eks_addons or not k8s:
        return []
    eks = clients.client("eks")
    results = []
    for pin in req.eks_addons:
        try:
            offered, default = offered_versions(eks, pin.name, k8s)
        except ClientError as error:
            if error_code(error) == "ResourceNotFoundException":
                offered, default = [], None
            else:
                results.append(could_not_check(f"EKS add-on {pin.name}", error, "eks:DescribeAddonVersions"))
                continue
        results.append(_result(pin, offered, default, k8s, clients.region))
        results += [_feature_result(f, pin, offered, k8s) for f in req.addon_features if f.addon == pin.name]
    return results
