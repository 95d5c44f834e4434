"""Preflight: every container image a tier's template references can be pulled when the deploy needs it.

The images come from :attr:`AccountRequirements.images` (the user's image settings and the pinned defaults):

- an Amazon ECR URI (the user's own repository, or the Region's AWS Deep Learning Containers registry for the
  SageMaker engines' pinned images): ``ecr:DescribeImages`` for its tag or digest, in the image's Region;
- any other registry: an anonymous ``HEAD`` on the manifest (:mod:`inference_tiers.ops.registry`); a registry
  this machine cannot reach leaves the image unchecked (a warning), never a crash;
- a CDK image asset (a Dockerfile in the package): built and pushed by ``cdk deploy`` itself, nothing to push.
"""

from __future__ import annotations

import re

from botocore.exceptions import ClientError

from inference_tiers.config import AccountRequirements, ImageNeed
from inference_tiers.constructs.sagemaker.engines import DLC_REGISTRY_ACCOUNTS
from inference_tiers.ops.checks import CheckResult, Clients, could_not_check, error_code
from inference_tiers.ops.registry import ImageReference, ImageReferenceError, head_manifest, parse_reference

_ECR_REGISTRY = re.compile(r"(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?")


def dlc_uri(reference: str, region: str) -> str | None:
    """``vllm:<tag>`` in ``region``'s Deep Learning Containers registry; None where the library has none."""
    account = DLC_REGISTRY_ACCOUNTS.get(region)
    if account is None:
        return None
    suffix = ".cn" if region.startswith("cn-") else ""
    return f"{account}.dkr.ecr.{region}.amazonaws.com{suffix}/{reference}"


def _push_commands(image: ImageReference, region: str, *, repository_missing: bool) -> str:
    create = (
        f"aws ecr create-repository --region {region} --repository-name {image.repository} "
        "--image-tag-mutability IMMUTABLE --image-scanning-configuration scanOnPush=true && "
        if repository_missing
        else ""
    )
    return (
        f"{create}aws ecr get-login-password --region {region} | docker login --username AWS "
        f"--password-stdin {image.registry} && docker push {image}"
    )


def _check_ecr(
    clients: Clients, name: str, need: ImageNeed, image: ImageReference, *, dlc: bool
) -> CheckResult:
    match = _ECR_REGISTRY.fullmatch(image.registry)
    assert match is not None  # the caller routes only ECR registries here
    account, region = match["account"], match["region"]
    shown = f"Deep Learning Container in {account} ({region}): " if dlc else ""
    image_id = {"imageDigest": image.digest} if image.digest else {"imageTag": image.tag or "latest"}
    try:
        found = clients.client("ecr", region).describe_images(
            registryId=account, repositoryName=image.repository, imageIds=[image_id]
        )["imageDetails"]
    except ClientError as error:
        code = error_code(error)
        missing = {
            "RepositoryNotFoundException": f"no repository {image.repository} in {account} ({region})",
            "ImageNotFoundException": f"{image.manifest_reference} is not in {account}/{image.repository}",
        }.get(code)
        if missing is None:
            arn = f"arn:aws:ecr:{region}:{account}:repository/{image.repository}"
            return could_not_check(name, error, f"ecr:DescribeImages on {arn}")
        if dlc:
            fix = f"copy the image into your own ECR repository in {region} and set {need.set_by} to it"
        else:
            fix = _push_commands(image, region, repository_missing=code == "RepositoryNotFoundException")
        return CheckResult(name, "fail", shown + missing, fix)
    pushed = found[0].get("imagePushedAt") if found else None
    digest = found[0].get("imageDigest", "") if found else ""
    when = f", pushed {pushed:%Y-%m-%d}" if pushed else ""
    return CheckResult(name, "pass", f"{shown}in ECR ({digest or 'digest unknown'}{when})")


def _check_registry(name: str, need: ImageNeed, image: ImageReference, timeout: float) -> CheckResult:
    answer = head_manifest(image, timeout=timeout)
    if answer.status is None:
        return CheckResult(
            name,
            "warn",
            f"unchecked: {image.registry} could not be reached from here ({answer.error})",
            f"rerun where {image.registry} is reachable; the nodes pull it through the VPC's NAT gateway",
        )
    if answer.status == 200:
        pin = (
            f"; to pin by digest: {need.reference}@{answer.digest}"
            if answer.digest and not image.digest
            else ""
        )
        return CheckResult(name, "pass", f"manifest found ({answer.digest or 'no digest reported'}){pin}")
    if answer.status == 404:
        return CheckResult(
            name,
            "fail",
            f"{image.manifest_reference} not found in {image.registry}/{image.repository} (HTTP 404)",
            f"set {need.set_by} to a tag or digest the registry has",
        )
    if answer.status in (401, 403):
        return CheckResult(
            name,
            "fail",
            f"{image.registry} refused an anonymous pull of {image.repository} (HTTP {answer.status}): the "
            "repository is private or does not exist",
            f"copy the image into ECR and set {need.set_by} to that URI (nodes pull anonymously)",
        )
    return CheckResult(
        name,
        "warn",
        f"unchecked: {image.registry} answered HTTP {answer.status}",
        "rerun later (429: rate limited; 5xx: registry trouble)",
    )


def check_image(clients: Clients, need: ImageNeed, *, timeout: float = 10.0) -> CheckResult:
    """Whether the deploy will find ``need``'s image; the result is named after ``need.reference``."""
    name = f"image {need.reference}"
    if need.source == "asset":
        return CheckResult(
            name,
            "pass",
            f"{need.set_by} unset: built and pushed by cdk deploy (a CDK image asset), nothing to push; "
            "Docker must run where cdk deploy runs",
        )
    reference = need.reference
    if need.source == "aws-dlc":
        uri = dlc_uri(need.reference, clients.region)
        if uri is None:
            return CheckResult(
                name,
                "fail",
                f"this library knows no Deep Learning Containers registry in {clients.region}",
                f"copy the image into your own ECR repository in {clients.region} and set {need.set_by} to it",
            )
        reference = uri
    try:
        image = parse_reference(reference)
    except ImageReferenceError as error:
        return CheckResult(name, "fail", str(error), f"set {need.set_by} to a valid image")
    if _ECR_REGISTRY.fullmatch(image.registry):
        return _check_ecr(clients, name, need, image, dlc=need.source == "aws-dlc")
    return _check_registry(name, need, image, timeout)


def check_images(clients: Clients, req: AccountRequirements, *, timeout: float = 10.0) -> list[CheckResult]:
    """One result per image the tier's template references."""
    return [check_image(clients, need, timeout=timeout) for need in req.images]
