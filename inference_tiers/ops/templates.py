"""``inference-tiers preflight --templates DIR``: what any app's synthesized templates need from an account.

Reads every ``*.template.json`` under ``DIR`` (``cdk.out``, nested stacks and stages included) and finds:

- instance types: EKS node groups, Auto Scaling groups and EC2 instances (their own type or their launch
  template's), SageMaker endpoint variants and HyperPod instance groups, with their counts;
- the EKS cluster's Kubernetes version and its pinned add-on versions (``AWS::EKS::Addon``);
- container images given as plain strings: SageMaker models, ECS task definitions, and the pods of Kubernetes
  manifests the CDK applies (``Custom::AWSCDK-EKS-KubernetesResource``); images CDK builds (assets) and
  references built from intrinsics are left to ``cdk deploy``;
- Bedrock models: foundation-model and inference-profile ARNs in IAM policies and application inference
  profiles' sources.

The result feeds the same checks as ``preflight --tier``; values CloudFormation only resolves at deploy time
(``Ref``, ``Fn::*``) cannot be checked and are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_tiers.config import AccountRequirements, AddonPin, ImageNeed, InstanceNeed
from inference_tiers.ops.checks import CheckResult, Clients
from inference_tiers.ops.preflight import check_bedrock, run_preflight

# arn:<partition>:bedrock:<region>:<account>:foundation-model/<id> (or inference-profile/<id>); partition, Region
# and account are often intrinsics, rendered as "*" by _texts.
_BEDROCK_ARN = re.compile(r"arn:[^:]*:bedrock:[^:]*:[^:]*:(foundation-model|inference-profile)/([\w.:-]+)")
_SUB_VARIABLE = re.compile(r"\$\{[^}]*\}")
# A cross-Region inference profile id is the model id behind a geography prefix (us., eu., apac., global. ...).
_PROFILE_PREFIX = re.compile(r"[a-z]+\.")


class TemplateError(ValueError):
    """A templates directory that cannot be read: names the path and what was expected."""


@dataclass(frozen=True)
class _Resource:
    template: str
    logical_id: str
    type: str
    properties: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.template}: {self.logical_id}"


@dataclass(frozen=True)
class TemplateRequirements:
    """The account needs found in a set of templates: one :class:`AccountRequirements` per Bedrock model (the
    first carries everything else), so each model is checked with the inference profile that serves it."""

    requirements: tuple[AccountRequirements, ...]
    templates: tuple[str, ...]


def _resources(directory: Path) -> Iterator[_Resource]:
    paths = sorted(directory.rglob("*.template.json"))
    if not paths:
        raise TemplateError(
            f"{directory}: no *.template.json found; run cdk synth and pass its output folder"
        )
    for path in paths:
        try:
            template = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise TemplateError(f"{path}: cannot read as a JSON template ({error})") from None
        name = str(path.relative_to(directory))
        for logical_id, resource in (template.get("Resources") or {}).items():
            if isinstance(resource, dict):
                yield _Resource(name, logical_id, str(resource.get("Type")), resource.get("Properties") or {})


def _ref(value: Any) -> str | None:
    """The logical id of ``{"Ref": id}``, else None."""
    return value.get("Ref") if isinstance(value, dict) and isinstance(value.get("Ref"), str) else None


def _count(value: Any, default: int = 1) -> int:
    """An instance count: an integer, or digits in a string (aws-cdk writes Auto Scaling sizes as strings)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _instances(resources: list[_Resource]) -> list[InstanceNeed]:
    launch_types = {
        r.logical_id: r.properties.get("LaunchTemplateData", {}).get("InstanceType")
        for r in resources
        if r.type == "AWS::EC2::LaunchTemplate"
    }
    needs: list[InstanceNeed] = []

    def add(service: Any, instance_type: Any, count: int) -> None:
        if isinstance(instance_type, str) and count > 0:
            needs.append(InstanceNeed(service, instance_type, count))

    for r in resources:
        p = r.properties
        if r.type == "AWS::EKS::Nodegroup":
            scaling = p.get("ScalingConfig", {})
            count = _count(scaling.get("DesiredSize"), _count(scaling.get("MinSize")))
            template_id = _ref(p.get("LaunchTemplate", {}).get("Id"))
            for instance_type in p.get("InstanceTypes") or [launch_types.get(template_id or "")]:
                add("ec2", instance_type, count)
        elif r.type == "AWS::AutoScaling::AutoScalingGroup":
            template_id = _ref(p.get("LaunchTemplate", {}).get("LaunchTemplateId"))
            add(
                "ec2",
                launch_types.get(template_id or ""),
                _count(p.get("DesiredCapacity"), _count(p.get("MinSize"))),
            )
        elif r.type == "AWS::EC2::Instance":
            add(
                "ec2",
                p.get("InstanceType")
                or launch_types.get(_ref(p.get("LaunchTemplate", {}).get("LaunchTemplateId")) or ""),
                1,
            )
        elif r.type == "AWS::SageMaker::EndpointConfig":
            for variant in p.get("ProductionVariants", []):
                add(
                    "sagemaker-endpoint",
                    variant.get("InstanceType"),
                    _count(variant.get("InitialInstanceCount")),
                )
        elif r.type == "AWS::SageMaker::Cluster":
            for group in p.get("InstanceGroups", []):
                add("sagemaker-hyperpod", group.get("InstanceType"), _count(group.get("InstanceCount")))
    return needs


def _manifest_images(node: Any) -> Iterator[str]:
    """Every ``image`` of a container (``containers``, ``initContainers``) anywhere in a Kubernetes object."""
    if isinstance(node, list):
        for item in node:
            yield from _manifest_images(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (
                    c["image"] for c in value if isinstance(c, dict) and isinstance(c.get("image"), str)
                )
            else:
                yield from _manifest_images(value)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _images(resources: list[_Resource]) -> list[ImageNeed]:
    found: dict[str, str] = {}
    for r in resources:
        p = r.properties
        images: list[Any] = []
        if r.type == "AWS::SageMaker::Model":
            containers = [p.get("PrimaryContainer") or {}, *p.get("Containers", [])]
            images = [c.get("Image") for c in containers if isinstance(c, dict)]
        elif r.type == "AWS::ECS::TaskDefinition":
            images = [c.get("Image") for c in p.get("ContainerDefinitions", []) if isinstance(c, dict)]
        elif r.type == "Custom::AWSCDK-EKS-KubernetesResource":
            # aws-cdk-lib 2.275.0 aws-eks-v2/lib/k8s-manifest.js: Manifest is stack.toJsonString(manifest), an
            # Fn::Join when the manifest holds tokens (rendered with "*" for them).
            images = list(_manifest_images(_json(next(_texts(p.get("Manifest")), ""))))
        for image in images:
            # "*": part of the reference is only known at deploy time.
            if isinstance(image, str) and "*" not in image:
                found.setdefault(image, r.where)
    return [ImageNeed(image, where) for image, where in found.items()]


def _texts(node: Any) -> Iterator[str]:
    """Every string in ``node``, with ``Fn::Join`` and ``Fn::Sub`` rendered and what only a deploy resolves
    (``Ref``, other intrinsics, ``${...}``) as ``*``."""
    if isinstance(node, str):
        yield _SUB_VARIABLE.sub("*", node)
    elif isinstance(node, list):
        for item in node:
            yield from _texts(item)
    elif isinstance(node, dict):
        join = node.get("Fn::Join")
        sub = node.get("Fn::Sub")
        if len(node) == 1 and isinstance(join, list) and len(join) == 2 and isinstance(join[1], list):
            yield str(join[0]).join(part if isinstance(part, str) else "*" for part in join[1])
        elif len(node) == 1 and isinstance(sub, str):
            yield _SUB_VARIABLE.sub("*", sub)
        else:
            for value in node.values():
                yield from _texts(value)


def _bedrock(resources: list[_Resource]) -> list[tuple[str, str | None]]:
    """(model id, the cross-Region profile id that serves it, if the templates reference one), per model: a
    profile's model counts even when only the profile is referenced."""
    models: set[str] = set()
    profiles: set[str] = set()
    for r in resources:
        if r.type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role") or r.type.startswith(
            "AWS::Bedrock::"
        ):
            for text in _texts(r.properties):
                for kind, identifier in _BEDROCK_ARN.findall(text):
                    (models if kind == "foundation-model" else profiles).add(identifier)
    served = {_PROFILE_PREFIX.sub("", profile, count=1): profile for profile in sorted(profiles)}
    return [(model, served.get(model)) for model in sorted(models | served.keys())]


def requirements_from_templates(directory: Path) -> TemplateRequirements:
    """Scan ``directory`` (a ``cdk synth`` output folder); raises :class:`TemplateError` when there is nothing
    to read."""
    if not directory.is_dir():
        raise TemplateError(f"{directory}: not a directory; pass the folder cdk synth wrote (cdk.out)")
    resources = list(_resources(directory))
    versions = sorted(
        {
            version
            for r in resources
            for version in (
                r.properties.get("Version") if r.type == "AWS::EKS::Cluster" else None,
                r.properties.get("Config", {}).get("version")
                if r.type == "Custom::AWSCDK-EKS-Cluster"
                else None,
            )
            if isinstance(version, str)
        }
    )
    if len(versions) > 1:
        raise TemplateError(
            f"{directory}: EKS clusters of several Kubernetes versions ({', '.join(versions)}); check one app at a time"
        )
    addons = tuple(
        AddonPin(r.properties["AddonName"], r.properties["AddonVersion"], r.where)
        for r in resources
        if r.type == "AWS::EKS::Addon"
        and isinstance(r.properties.get("AddonName"), str)
        and isinstance(r.properties.get("AddonVersion"), str)
    )
    bedrock: list[tuple[str | None, str | None]] = [*_bedrock(resources)] or [(None, None)]
    first_model, first_profile = bedrock[0]
    everything = AccountRequirements(
        instances=tuple(_instances(resources)),
        bedrock_model_id=first_model,
        bedrock_inference_profile_id=first_profile,
        kubernetes_version=versions[0] if versions else None,
        eks_addons=addons,
        images=tuple(_images(resources)),
    )
    more = tuple(
        AccountRequirements(bedrock_model_id=model, bedrock_inference_profile_id=profile)
        for model, profile in bedrock[1:]
    )
    return TemplateRequirements((everything, *more), tuple(sorted({r.template for r in resources})))


def run_template_preflight(clients: Clients, found: TemplateRequirements, account: str) -> list[CheckResult]:
    """Every preflight check on the first requirements, then the Bedrock check of each further model."""
    first, *more = found.requirements
    results = run_preflight(clients, first, account)
    for requirements in more:
        results.extend(check_bedrock(clients, requirements))
    return results
