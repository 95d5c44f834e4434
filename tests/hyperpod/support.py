"""Shared helpers of the hyperpod tests: the real CRD schema, template dependency walks, a minimal chart."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from inference_tiers.constructs.hyperpod.inference_operator import (
    DEFAULT_ADDON_VERSIONS,
    INFERENCE_ADDON,
    OPERATOR_ADDON_BUILDS,
    fields_missing_from,
    rendered_operator_fields,
)
from tests.harness import DATA_DIR

DATA = DATA_DIR / "hyperpod"


# The CRD each supported add-on build meets (tests/data/hyperpod/SOURCE.md: the chart whose CRD each build
# carries, OPERATOR_ADDON_BUILDS).
CRD_FILES = {
    build: f"inferenceendpointconfigs-chart-{release.chart}.crd.yaml"
    for build, release in OPERATOR_ADDON_BUILDS.items()
}


@cache
def inference_endpoint_config_schema(build: str = DEFAULT_ADDON_VERSIONS[INFERENCE_ADDON]) -> dict[str, Any]:
    """``spec.versions[v1].schema.openAPIV3Schema`` of the InferenceEndpointConfig CRD add-on ``build`` carries
    (see SOURCE.md); default: the build the tier pins by default."""
    crd = yaml.safe_load((DATA / CRD_FILES[build]).read_text())
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = v1["schema"]["openAPIV3Schema"]
    return schema


def build_for(document: Mapping[str, Any]) -> str:
    """The oldest supported add-on build the construct lets ``document`` meet: the first whose field minimums
    cover what it renders. A field missing from OPERATOR_FIELD_MINIMUMS then meets the oldest CRD and fails."""
    fields = rendered_operator_fields(document)
    return next(b for b in OPERATOR_ADDON_BUILDS if not fields_missing_from(b, fields))


def validate_inference_endpoint_config(document: dict[str, Any], build: str | None = None) -> None:
    """``document`` is valid for, and loses no field on, the CRD of add-on ``build`` (default: :func:`build_for`)."""
    import jsonschema

    build = build or build_for(document)
    assert document["apiVersion"] == "inference.sagemaker.aws.amazon.com/v1"
    assert document["kind"] == "InferenceEndpointConfig"
    jsonschema.Draft7Validator(inference_endpoint_config_schema(build)).validate(document)
    assert pruned_fields(document, build=build) == [], f"fields the CRD of {build} does not declare"


def pruned_fields(
    value: Any, schema: dict[str, Any] | None = None, path: str = "", *, build: str | None = None
) -> list[str]:
    """Fields of ``value`` the API server would drop: a structural CRD schema keeps only declared properties
    (unless ``x-kubernetes-preserve-unknown-fields`` or ``additionalProperties``), which jsonschema does not
    check (kubectl's strict field validation rejects them instead). ``schema`` defaults to the
    InferenceEndpointConfig v1 schema of add-on ``build`` (default :func:`build_for`; ``metadata`` is the API
    server's own)."""
    if schema is None:
        schema = inference_endpoint_config_schema(build or build_for(value))
        value = {k: v for k, v in value.items() if k != "metadata"}
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        if "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            return [
                f
                for k, v in value.items()
                if isinstance(extra, dict)
                for f in pruned_fields(v, extra, f"{path}.{k}")
            ]
        properties = schema.get("properties", {})
        found = [f"{path}.{k}" for k in value if k not in properties]
        return found + [
            f
            for k, v in value.items()
            if k in properties
            for f in pruned_fields(v, properties[k], f"{path}.{k}")
        ]
    if isinstance(value, list) and "items" in schema:
        return [f for i, v in enumerate(value) for f in pruned_fields(v, schema["items"], f"{path}[{i}]")]
    return []


def depends_on(template: Mapping[str, Any], logical_id: str) -> set[str]:
    """Everything ``logical_id`` waits for: DependsOn plus Ref/GetAtt references, transitively."""
    resources = template["Resources"]
    seen: set[str] = set()
    pending = [logical_id]
    while pending:
        current = pending.pop()
        resource = resources[current]
        direct = set(resource.get("DependsOn", [])) | _references(resource.get("Properties", {}))
        for dep in direct & set(resources):
            if dep not in seen:
                seen.add(dep)
                pending.append(dep)
    return seen


def _references(value: Any) -> set[str]:
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            return {value["Ref"]}
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        return set().union(*(_references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    return set()


def logical_ids(template: Mapping[str, Any], resource_type: str, **properties: Any) -> list[str]:
    """Logical ids of resources of ``resource_type`` whose properties include ``properties``."""
    return [
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
        and all(resource.get("Properties", {}).get(k) == v for k, v in properties.items())
    ]


def only(ids: list[str]) -> str:
    assert len(ids) == 1, ids
    return ids[0]


def resolve_join(value: Any, placeholder: str = "token") -> str:
    """Flatten an ``Fn::Join`` of strings and tokens into text, tokens replaced by ``placeholder``."""
    if isinstance(value, str):
        return value
    separator, parts = value["Fn::Join"]
    return str(separator).join(part if isinstance(part, str) else placeholder for part in parts)


def manifest_documents(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object applied by a KubernetesManifest custom resource, tokens as placeholders."""
    documents: list[dict[str, Any]] = []
    for resource in template["Resources"].values():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            documents += json.loads(resolve_join(resource["Properties"]["Manifest"]))
    return documents


def write_minimal_chart(directory: Path, *, package_dependencies: bool = True) -> Path:
    """A Helm chart with one remote dependency, packaged into charts/ like `helm dependency build` does."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "hyperpod-helm-chart",
                "version": "0.1.0",
                "dependencies": [
                    {
                        "name": "nvidia-device-plugin",
                        "version": "0.16.1",
                        "repository": "https://nvidia.github.io/k8s-device-plugin",
                    }
                ],
            }
        )
    )
    (directory / "templates").mkdir(exist_ok=True)
    (directory / "templates" / "namespace.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: aws-hyperpod\n"
    )
    if package_dependencies:
        (directory / "charts").mkdir(exist_ok=True)
        (directory / "charts" / "nvidia-device-plugin-0.16.1.tgz").write_bytes(b"\x1f\x8b")
    return directory
