"""Shared by the inference-gateway tests: the vendored CRDs and flag/metric/plugin lists, and a schema check."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import promql_parser
import yaml

from inference_tiers.k8s.inference_gateway import CRD_CHART_DIR
from tests.harness import DATA_DIR

DATA = DATA_DIR / "inference_gateway"
# The CRDs the construct installs are the ones the tests validate against (one copy, in the package).
CRDS = CRD_CHART_DIR / "crds"
KEDA_CRDS = DATA / "keda"
KUBERNETES_VERSION = "1.35"

_CRD_FILES = {
    "InferencePool": CRDS / "inference.networking.k8s.io_inferencepools.yaml",
    "Gateway": CRDS / "gateway.networking.k8s.io_gateways.yaml",
    "HTTPRoute": CRDS / "gateway.networking.k8s.io_httproutes.yaml",
    "ScaledObject": KEDA_CRDS / "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": KEDA_CRDS / "keda.sh_triggerauthentications.yaml",
    # Every Istio CRD is in one multi-document file (what the pinned base chart installs).
    "DestinationRule": DATA / "istio" / "crd-all.gen.yaml",
}


def listed(path: Path) -> set[str]:
    """The first word of every non-comment line of a vendored list."""
    return {
        line.split()[0] for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")
    }


@cache
def _schema(kind: str, version: str) -> dict[str, Any]:
    crd = next(
        doc
        for doc in yaml.safe_load_all(_CRD_FILES[kind].read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == kind
    )
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)
    return _strict(copy.deepcopy(schema))


def _strict(schema: Any) -> Any:
    """Refuse fields the schema does not name (the API server would silently prune a misspelt one)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema.setdefault("additionalProperties", False)
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


def validate(manifest: dict[str, Any]) -> None:
    """Validate against the vendored CRD of its kind (strict), or the Kubernetes 1.35 schema for core kinds."""
    kind = manifest["kind"]
    if kind in _CRD_FILES:
        version = manifest["apiVersion"].split("/")[1]
        schema = _schema(kind, version)
        # Istio's CRD schemas describe spec and status only; the object header is the API server's.
        header = {"apiVersion", "kind", "metadata"} - set(schema["properties"])
        jsonschema.Draft7Validator(schema).validate({k: v for k, v in manifest.items() if k not in header})
    else:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def metric_names(query: str) -> set[str]:
    """Every metric a PromQL query selects (it must parse: promql_parser raises otherwise)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.AggregateExpr):
            walk(node.expr)
        elif isinstance(node, promql_parser.Call):
            for arg in node.args:
                walk(arg)
        elif isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs)
            walk(node.rhs)
        elif isinstance(node, promql_parser.ParenExpr):
            walk(node.expr)

    walk(promql_parser.parse(query))
    return names


def exported_metrics() -> set[str]:
    """What the pinned EPP and every vLLM release behind the gateway export (the lists under tests/data): the
    hyperpod tier's v0.10.1 and the disaggregated tier's v0.33.0."""
    vllm = listed(DATA_DIR / "hyperpod" / "vllm-metrics-v0.10.1.txt") & listed(
        DATA_DIR / "disaggregated" / "vllm-metrics-v0.33.0.txt"
    )
    return vllm | listed(DATA / "epp-v1.5.0-metrics.txt")
