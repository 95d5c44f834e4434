"""LoRA on HyperPod: the worker fetches its adapters with a service account whose role reads only their prefixes.

The rendering validates against the operator's CRD and keeps no field the API server would prune; the
launcher script is run for real against moto's S3; the construct's IAM, ServiceAccount and order are read
from the synthesized template.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_kms as kms
from cdk_nag import AwsSolutionsChecks
from moto import mock_aws

from inference_tiers.constructs import HyperPodModelEndpoint
from inference_tiers.k8s.hyperpod_inference import (
    InferenceEndpoint,
    LoraServing,
    S3ModelSource,
    VllmWorker,
    render_inference_endpoint_config,
)
from inference_tiers.k8s.inference_gateway import LoraAdapter
from inference_tiers.k8s.inference_gateway_lora import LAUNCHER_ADAPTER_DIR
from tests.harness import DATA_DIR, nag_findings
from tests.hyperpod.support import (
    depends_on,
    logical_ids,
    manifest_documents,
    only,
    pruned_fields,
    validate_inference_endpoint_config,
    write_minimal_chart,
)
from tests.hyperpod.test_constructs import Parts
from tests.inference_gateway.support import listed, validate

SQL = LoraAdapter("sql-lora", "s3://adapters-bucket/tenants/sql-lora")
CHAT = LoraAdapter("org/chat-lora", "s3://other-adapters/chat/")
LORA = LoraServing(adapters=(SQL, CHAT), region="us-west-2", max_lora_rank=32)
BASE = InferenceEndpoint(
    name="qwen",
    instance_types=("ml.p5.48xlarge",),
    model_source=S3ModelSource(bucket_name="weights", region="us-west-2", location="qwen"),
    worker=VllmWorker(image="vllm/vllm-openai:v0.10.1", tensor_parallel_size=1),
)
WITH_LORA = replace(BASE, lora=LORA)


def test_lora_rendering_validates_and_keeps_every_field() -> None:
    document = render_inference_endpoint_config(WITH_LORA)
    validate_inference_endpoint_config(document)


def test_the_pruning_check_finds_a_worker_volume_mount() -> None:
    """Why no init container hands the adapters over: the v1 worker has no volumeMounts to receive them."""
    document = render_inference_endpoint_config(WITH_LORA)
    document["spec"]["worker"]["volumeMounts"] = [{"name": "adapters", "mountPath": "/adapters"}]
    with pytest.raises(AssertionError, match="does not declare"):  # jsonschema alone accepts it...
        validate_inference_endpoint_config(document)
    assert pruned_fields(document) == [".spec.worker.volumeMounts"]  # ...the API server would reject it


def test_without_lora_nothing_changes() -> None:
    spec = render_inference_endpoint_config(BASE)["spec"]
    assert "command" not in spec["worker"] and "kubernetes" not in spec
    assert not any("lora" in arg for arg in spec["worker"]["args"])
    assert BASE.service_account_name is None


def test_lora_adds_the_flags_the_launcher_and_the_service_account_only() -> None:
    base = render_inference_endpoint_config(BASE)["spec"]
    spec = render_inference_endpoint_config(WITH_LORA)["spec"]
    args = spec["worker"]["args"]
    assert args[: len(base["worker"]["args"])] == base["worker"]["args"]
    assert args[len(base["worker"]["args"]) :] == [
        "--enable-lora", "--max-loras", "2", "--max-lora-rank", "32", "--lora-modules",
        f"sql-lora={LAUNCHER_ADAPTER_DIR}/sql-lora", f"org/chat-lora={LAUNCHER_ADAPTER_DIR}/org--chat-lora",
    ]  # fmt: skip
    flags = listed(DATA_DIR / "disaggregated" / "vllm-serve-flags.txt")
    assert {a for a in args if a.startswith("--")} <= flags
    assert spec["worker"]["command"][:2] == ["python3", "-c"]
    assert spec["kubernetes"] == {"serviceAccountName": "qwen-lora"}
    assert {k: v for k, v in spec.items() if k not in ("worker", "kubernetes")} == {
        k: v for k, v in base.items() if k != "worker"
    }


@pytest.fixture
def s3_adapters(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        for bucket in ("adapters-bucket", "other-adapters"):
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        s3.put_object(Bucket="adapters-bucket", Key="tenants/sql-lora/adapter_config.json", Body=b'{"r": 8}')
        s3.put_object(Bucket="adapters-bucket", Key="tenants/sql-lora/adapter_model.safetensors", Body=b"w")
        s3.put_object(
            Bucket="adapters-bucket", Key="tenants/sql-lora-v2/adapter_model.safetensors", Body=b"v2"
        )
        s3.put_object(Bucket="other-adapters", Key="chat/adapter_model.safetensors", Body=b"chat")
        yield s3


def run_launcher(lora: LoraServing, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """Runs the rendered worker command in this process (under moto) with the rendered args; returns the
    program and argv it hands over to (os.execvp is recorded instead of replacing pytest)."""
    spec = render_inference_endpoint_config(replace(BASE, lora=lora))["spec"]["worker"]
    command = spec["command"]
    script = command[2].replace(LAUNCHER_ADAPTER_DIR, str(folder))
    handed_over: list[Any] = []
    monkeypatch.setattr(os, "execvp", lambda program, argv: handed_over.extend([program, argv]))
    monkeypatch.setattr(sys, "argv", ["-c", *spec["args"]])
    exec(compile(script, "<worker command>", "exec"), {"__name__": "__main__"})
    return handed_over[0], handed_over[1]


def test_the_launcher_fetches_each_adapter_folder_then_starts_vllm_serve(
    s3_adapters: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program, argv = run_launcher(LORA, tmp_path, monkeypatch)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    # sql-lora-v2/ shares the characters of the prefix but is another folder: never copied.
    assert files == [
        "org--chat-lora/adapter_model.safetensors",
        "sql-lora/adapter_config.json",
        "sql-lora/adapter_model.safetensors",
    ]
    assert (tmp_path / "sql-lora" / "adapter_config.json").read_bytes() == b'{"r": 8}'
    rendered_args = render_inference_endpoint_config(WITH_LORA)["spec"]["worker"]["args"]
    assert program == "vllm"
    assert argv == ["vllm", "serve", *rendered_args]


def test_the_launcher_stops_on_an_empty_adapter_folder(
    s3_adapters: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = LoraServing(
        adapters=(LoraAdapter("gone", "s3://adapters-bucket/tenants/gone"),), region="us-west-2"
    )
    with pytest.raises(SystemExit, match="no LoRA adapter files under s3://adapters-bucket/tenants/gone/"):
        run_launcher(missing, tmp_path, monkeypatch)


# ---- the construct: ServiceAccount, Pod Identity role, order ---------------------------------------------


@dataclass
class LoraStack:
    parts: Parts
    model: HyperPodModelEndpoint
    key: kms.Key

    @property
    def stack(self) -> cdk.Stack:
        return self.parts.stack

    def template(self) -> dict[str, Any]:
        return dict(self.parts.template())


@pytest.fixture(scope="module")
def lora_stack(tmp_path_factory: pytest.TempPathFactory) -> LoraStack:
    # spec.kubernetes.serviceAccountName needs an add-on build whose CRD has it (OPERATOR_FIELD_MINIMUMS).
    parts = Parts(
        write_minimal_chart(tmp_path_factory.mktemp("chart") / "HyperPodHelmChart"),
        operator_build="v2.0.0-eksbuild.2",
    )
    key = kms.Key(parts.stack, "AdapterKey", enable_key_rotation=True)
    model = HyperPodModelEndpoint(
        parts.stack,
        "Model",
        cluster=parts.cluster,
        hyperpod_cluster=parts.hyperpod,
        operator=parts.operator,
        endpoint=WITH_LORA,
        adapter_key=key,
    )
    return LoraStack(parts, model, key)


def lora_policy(template: dict[str, Any], lora: LoraStack) -> list[dict[str, Any]]:
    assert lora.model.lora_role is not None
    role = lora.stack.get_logical_id(lora.model.lora_role.node.default_child)
    (policy,) = [
        r for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"]["Roles"] == [{"Ref": role}]
    ]  # fmt: skip
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def flat(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_the_role_lists_and_reads_only_the_adapter_prefixes(lora_stack: LoraStack) -> None:
    statements = lora_policy(lora_stack.template(), lora_stack)
    rendered = sorted(
        (statement["Action"], arn_text(statement["Resource"]), flat(statement.get("Condition")))
        for statement in statements
    )
    key = lora_stack.stack.get_logical_id(lora_stack.key.node.default_child)
    assert rendered == sorted([
        ("kms:Decrypt", f"<{key}.Arn>", "null"),
        ("s3:GetObject", "arn:<P>:s3:::adapters-bucket/tenants/sql-lora/*", "null"),
        ("s3:GetObject", "arn:<P>:s3:::other-adapters/chat/*", "null"),
        ("s3:ListBucket", "arn:<P>:s3:::adapters-bucket", flat({"StringLike": {"s3:prefix": ["tenants/sql-lora/*"]}})),
        ("s3:ListBucket", "arn:<P>:s3:::other-adapters", flat({"StringLike": {"s3:prefix": ["chat/*"]}})),
    ])  # fmt: skip
    assert all(statement["Effect"] == "Allow" for statement in statements)


def arn_text(resource: Any) -> str:
    """One resource as text: ``Fn::Join`` parts with the partition as ``<P>``, ``Fn::GetAtt`` as ``<id.Arn>``."""
    if "Fn::GetAtt" in resource:
        return f"<{resource['Fn::GetAtt'][0]}.{resource['Fn::GetAtt'][1]}>"
    return "".join(part if isinstance(part, str) else "<P>" for part in resource["Fn::Join"][1])


def test_pod_identity_binds_the_labelled_service_account_with_confused_deputy_conditions(
    lora_stack: LoraStack,
) -> None:
    template = lora_stack.template()
    association = only(logical_ids(template, "AWS::EKS::PodIdentityAssociation", ServiceAccount="qwen-lora"))
    assert template["Resources"][association]["Properties"]["Namespace"] == "default"
    role = template["Resources"][template["Resources"][association]["Properties"]["RoleArn"]["Fn::GetAtt"][0]]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    assert "aws:SourceArn" in trust["Condition"]["ArnLike"]
    (account,) = [d for d in manifest_documents(template) if d["kind"] == "ServiceAccount"]
    assert (account["metadata"]["name"], account["metadata"]["namespace"]) == ("qwen-lora", "default")
    assert account["metadata"]["labels"]["sagemaker.amazonaws.com/user-assignable"] == "true"
    validate(account)
    (config,) = [d for d in manifest_documents(template) if d["kind"] == "InferenceEndpointConfig"]
    assert config["spec"]["kubernetes"]["serviceAccountName"] == "qwen-lora"


def test_the_endpoint_waits_for_its_service_account_and_role(lora_stack: LoraStack) -> None:
    template = lora_stack.template()
    stack = lora_stack.stack
    model = lora_stack.model
    endpoint = stack.get_logical_id(model.manifest.node.default_child)
    assert model.service_account_manifest is not None
    account = stack.get_logical_id(model.service_account_manifest.node.default_child)
    association = only(logical_ids(template, "AWS::EKS::PodIdentityAssociation", ServiceAccount="qwen-lora"))
    assert {account, association} <= depends_on(template, endpoint)


def test_the_lora_role_has_no_unacknowledged_findings(lora_stack: LoraStack) -> None:
    assert nag_findings(lora_stack.model, AwsSolutionsChecks()) == []
