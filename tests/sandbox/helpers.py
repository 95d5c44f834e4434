"""Shared by the sandbox tests: vendored CRD schemas, Helm values keys, manifests read back from templates."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from aws_cdk import Stack
from aws_cdk.assertions import Template

from inference_tiers.constructs.sandbox.controller import WRITABLE_TMP_PATCH
from tests.harness import DATA_DIR

DATA = DATA_DIR / "sandbox"
TOKEN = "<token>"

CRD_FILES = {
    ("karpenter.sh/v1", "NodePool"): "karpenter/karpenter.sh_nodepools.yaml",
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): "karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml",
    ("agents.x-k8s.io/v1beta1", "Sandbox"): "agent-sandbox/agents.x-k8s.io_sandboxes.yaml",
    ("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"): (
        "agent-sandbox/extensions.agents.x-k8s.io_sandboxtemplates.yaml"
    ),
    ("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool"): (
        "agent-sandbox/extensions.agents.x-k8s.io_sandboxwarmpools.yaml"
    ),
    ("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim"): (
        "agent-sandbox/extensions.agents.x-k8s.io_sandboxclaims.yaml"
    ),
}


def _strict(schema: Any) -> Any:
    """Refuse fields the schema does not declare (the API server would prune a misspelled one silently)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema.setdefault("additionalProperties", False)
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((DATA / CRD_FILES[(api_version, kind)]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)
    return jsonschema.Draft7Validator(_strict(schema))


def validate_custom_resource(manifest: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless ``manifest`` fits its vendored CRD's schema."""
    crd_validator(manifest["apiVersion"], manifest["kind"]).validate(manifest)


def values_paths(values: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every leaf key path of a values mapping; lists and empty mappings are leaves."""
    if isinstance(values, dict) and values:
        return {p for k, v in values.items() for p in values_paths(v, (*prefix, k))}
    return {prefix}


def missing_values_keys(
    values: dict[str, Any], chart_values_file: str, free_form: tuple[str, ...] = ()
) -> list[str]:
    """Keys of ``values`` that are not keys of the chart's vendored values.yaml, as dotted paths.

    Below a key whose default is an empty mapping (``nodeSelector: {}``), or one named in ``free_form`` (a map
    with example defaults, such as Karpenter's ``nodeSelector``), any key is accepted.
    """
    defaults = yaml.safe_load((DATA / chart_values_file).read_text())
    missing = []
    for path in sorted(values_paths(values)):
        node: Any = defaults
        for depth, part in enumerate(path):
            if ".".join(path[:depth]) in free_form or (depth and node == {}):
                break
            if not isinstance(node, dict) or part not in node:
                missing.append(".".join(path))
                break
            node = node[part]
    return missing


def _resolve(value: Any) -> Any:
    """A CloudFormation string value with every intrinsic function replaced by TOKEN."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(p if isinstance(p, str) else TOKEN for p in parts)
    return TOKEN


def _without_prune_label(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` without the ``aws.cdk.eks/prune-<hash>`` label aws-cdk adds to every applied object."""
    labels = manifest["metadata"].get("labels", {})
    kept = {k: v for k, v in labels.items() if not k.startswith("aws.cdk.eks/prune-")}
    metadata = {k: v for k, v in manifest["metadata"].items() if k != "labels"}
    return {**manifest, "metadata": {**metadata, **({"labels": kept} if kept else {})}}


def manifests(template: Template) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack applies with KubernetesManifest, deploy-time values as TOKEN."""
    found: list[dict[str, Any]] = []
    for resource in template.find_resources("Custom::AWSCDK-EKS-KubernetesResource").values():
        found.extend(
            _without_prune_label(m) for m in json.loads(_resolve(resource["Properties"]["Manifest"]))
        )
    return found


def helm_charts(template: Template) -> dict[str, dict[str, Any]]:
    """Every Helm release of the stack by release name: its properties, with Values parsed."""
    charts = {}
    for resource in template.find_resources("Custom::AWSCDK-EKS-HelmChart").values():
        props = dict(resource["Properties"])
        props["Values"] = json.loads(_resolve(props["Values"])) if "Values" in props else {}
        charts[props["Release"]] = props
    return charts


def chart_values(chart: Any) -> dict[str, Any]:
    """The Values of one ``eks.HelmChart`` construct, parsed, deploy-time values as TOKEN (no synth needed)."""
    resource = chart.node.default_child.node.default_child
    return dict(json.loads(_resolve(Stack.of(chart).resolve(resource._cfn_properties)["Values"])))


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in objects if m["kind"] == kind]


def karpenter_role_id(template: Template) -> str:
    """The logical id of the role that the ``kube-system/karpenter`` Pod Identity association binds."""
    (role_id,) = [
        a["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for a in template.find_resources("AWS::EKS::PodIdentityAssociation").values()
        if a["Properties"]["ServiceAccount"] == "karpenter"
    ]
    return str(role_id)


def policy_statements(template: Template, role_id: str) -> dict[str, dict[str, Any]]:
    """The statements of every ``AWS::IAM::Policy`` attached to ``role_id``, by Sid (``#<index>`` without)."""
    found: dict[str, dict[str, Any]] = {}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            found.update({s.get("Sid", f"#{index}"): s for index, s in enumerate(statements)})
    return found


def chart_template_skeleton(text: str) -> Any:
    """What a Helm template always renders, parsed: the template with every line that holds a template action
    (``{{ ... }}``) dropped. Enough for the literal ports, volume mounts and volumes of a chart's Deployment (not
    for anything values add), and with no helm binary."""
    return yaml.safe_load("\n".join(line for line in text.splitlines() if "{{" not in line))


def fetched_agent_sandbox_chart(directory: Path) -> Path:
    """What the fetch script makes, from the vendored v0.5.6 chart files: ``helm/`` (Chart.yaml, values.yaml,
    the CRDs, templates/deployment.yaml) with ``writable-tmp.patch`` applied by ``git apply``, as the script does."""
    chart = directory / "helm"
    (chart / "templates").mkdir(parents=True)
    (chart / "crds").mkdir()
    upstream = DATA / "agent-sandbox"
    for name in ("Chart.yaml", "values.yaml", "templates/deployment.yaml"):
        shutil.copyfile(upstream / "helm" / name, chart / name)
    for crd in upstream.glob("*.yaml"):
        shutil.copyfile(crd, chart / "crds" / crd.name)
    apply_patch(directory, WRITABLE_TMP_PATCH)
    return chart


def apply_patch(directory: Path, patch: Path) -> None:
    """Apply ``patch`` (paths as in the upstream repository) under ``directory``, as the fetch scripts do."""
    subprocess.run(["git", "apply", str(patch)], cwd=directory, check=True, capture_output=True)
