"""docs/hyperpod.md: its python example runs as written and builds what the text says, its signature table is the
constructs' real signatures, and its first-deploy checklist marks as checked exactly what preflight checks."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template

import inference_tiers.constructs as public
from inference_tiers.ops import preflight
from tests.harness import PROJECT_ROOT
from tests.hyperpod.support import manifest_documents
from tests.ops.helpers import tier_requirements
from tests.ops.test_tiers import DeniedClients

DOC = (PROJECT_ROOT / "docs" / "hyperpod.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-week"


def test_the_doc_has_one_example_and_a_mermaid_architecture() -> None:
    assert len(BLOCKS) == 1
    (diagram,) = re.findall(r"```mermaid\n(.*?)```", DOC, flags=re.DOTALL)
    # Every construct of the tier appears in the picture.
    for name in ("HyperPodNetwork", "EksCluster", "HyperPodDependencyChart", "HyperPodCluster",
                 "HyperPodInferenceOperator", "HyperPodObservability", "HyperPodModelEndpoint"):  # fmt: skip
        assert name in diagram, name


def test_the_example_runs_and_sizes_the_model_for_one_thread_per_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HYPERPOD_CHART_DIR", raising=False)
    namespace: dict[str, Any] = {}
    exec(compile(BLOCKS[0], "docs/hyperpod.md", "exec"), namespace)
    template = Template.from_stack(namespace["stack"]).to_json()
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    (group,) = cluster["Properties"]["InstanceGroups"]
    assert (group["InstanceType"], group["InstanceCount"], group["ThreadsPerCore"]) == (
        "ml.p5.48xlarge",
        2,
        1,
    )
    (document,) = manifest_documents(template)
    requests = document["spec"]["worker"]["resources"]["requests"]
    # Eight GPUs on a node exposing 96 CPUs at one thread per core: under 96, never the nominal 192 vCPUs.
    assert requests["nvidia.com/gpu"] == "8" and 80 < int(requests["cpu"]) < 96
    assert document["spec"]["endpointName"] == "llama-3-3-70b"
    assert '"PrincipalArn": "arn:aws:iam::111122223333:role/Platform"' in json.dumps(template)


_ROW = re.compile(r"^\| `(?P<name>\w+)`(?: \(props\))? \| (?P<params>.*) \|$", re.MULTILINE)


def test_the_signature_table_lists_every_parameter_of_every_construct() -> None:
    section = DOC.split("### Signatures", 1)[1].split("\n### ", 1)[0]
    rows = {m["name"]: set(re.findall(r"(?:^|, )`(\w+)`", m["params"])) for m in _ROW.finditer(section)}
    assert len(rows) == 9
    for name, documented in rows.items():
        kind = getattr(public, name)
        if dataclasses.is_dataclass(kind):
            actual = {f.name for f in dataclasses.fields(kind)}
        else:
            actual = set(inspect.signature(kind.__init__).parameters) - {"self", "scope", "construct_id"}
        assert documented == actual, (name, documented ^ actual)


# Each check preflight runs for the tier, by the start of its name, and the checklist item it backs.
ITEM_OF_CHECK = {
    "instance type offerings": "The instance type in your AZ ID",
    "SageMaker quotas": "HyperPod quota for the instance group",
    "quota ml.": "HyperPod quota for the instance group",
    "capacity reservations": "Capacity",
    "training plan ": "Capacity",
    "EKS Kubernetes": "EKS 1.35 and every pinned add-on version",
    "EKS add-on ": "EKS 1.35 and every pinned add-on version",
    "image ": "CDK bootstrap and the vLLM image",
    "CDK bootstrap": "CDK bootstrap and the vLLM image",
}
_ITEM = re.compile(r"^- \[ \] \*\*(?P<title>[^*]+)\*\*(?P<text>.*?)(?=^- \[ \]|\Z)", re.MULTILINE | re.DOTALL)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")


@pytest.mark.usefixtures("no_network")
def test_the_checked_items_are_what_preflight_checks() -> None:
    checks = {
        r.check
        for overrides in ((), (f"hyperpod.training_plan_arn={PLAN}",))
        for r in preflight.run_preflight(
            DeniedClients(), tier_requirements("hyperpod", *overrides), "123456789012"
        )
    }
    unlisted = [c for c in checks if not any(c.startswith(prefix) for prefix in ITEM_OF_CHECK)]
    assert not unlisted, f"checks with no checklist item: {unlisted}"
    backed = {item for check in checks for prefix, item in ITEM_OF_CHECK.items() if check.startswith(prefix)}
    section = DOC.split("## What a first deploy needs", 1)[1].split("\n## ", 1)[0]
    items = {m["title"]: "(checked" in m["text"] for m in _ITEM.finditer(section)}
    assert {title for title, checked in items.items() if checked} == backed
    count = re.search(r"checks the first (\w+)", section)
    assert count is not None and count[1] == {4: "four", 5: "five", 6: "six"}[len(backed)]
    assert all(list(items.values())[: len(backed)])
