"""LoRA in the disaggregated tier: every prefill and decode pod loads the same adapters, and vllm-router hands
the request's ``model`` to both halves of the pair.

Why this is sound with the pinned vLLM 0.33.0 (read from its wheel): the point-to-point ``MooncakeConnector``
moves KV blocks by transfer id and block ids only (``kv_connector/v1/mooncake/mooncake_connector.py`` has no
LoRA state), no config check refuses ``--enable-lora`` with ``--kv-transfer-config`` (``vllm/config/vllm.py``),
and the decode scheduler admits a remote-prefilled request under the same ``max_loras`` rule as any other
(``vllm/v1/core/sched/scheduler.py``). So the decode pod continues the KV cache its prefill computed with the
adapter, as long as both resolve the request's ``model`` to the same adapter: the same ``--lora-modules`` on
both roles, and the router passing ``model`` through, which the loopback test below shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import kubernetes_validate
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.config import ConfigError, parse_settings
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing
from inference_tiers.k8s.disaggregated import ROLES, render
from inference_tiers.k8s.inference_gateway import LoraAdapter
from inference_tiers.k8s.inference_gateway_lora import LORA_INIT_IMAGE, LoraServing
from inference_tiers.stacks.disaggregated import TIER, DisaggregatedSettings
from tests.disaggregated.helpers import MODEL, make_cluster
from tests.disaggregated.test_serving_manifests import VLLM_FLAGS, deployment, make_spec
from tests.harness import cdk_json_context, nag_findings
from tests.loopback import free_port, vllm_router
from tests.misuse import assert_refused

SQL = LoraAdapter("sql-lora", "s3://adapters-bucket/tenants/sql-lora")
CHAT = LoraAdapter("org/chat-lora", "s3://other-adapters/chat/")
LORA = LoraServing(adapters=(SQL, CHAT), region="us-east-1", max_lora_rank=64)
WITH_LORA = make_spec(lora=LORA)
BASE = make_spec()


def pod(spec: Any, role: str) -> dict[str, Any]:
    template: dict[str, Any] = deployment(spec, role)["spec"]["template"]["spec"]
    return template


# ---- rendering ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_both_roles_load_every_adapter_from_the_init_containers_volume(role: str) -> None:
    spec = pod(WITH_LORA, role)
    (init,) = spec["initContainers"]
    assert init["image"] == LORA_INIT_IMAGE
    assert init["env"] == [{"name": "AWS_REGION", "value": "us-east-1"}]
    assert init["command"][2] == (
        'aws s3 sync --only-show-errors "s3://adapters-bucket/tenants/sql-lora/" "/adapters/sql-lora" && '
        'aws s3 sync --only-show-errors "s3://other-adapters/chat/" "/adapters/org--chat-lora"'
    )
    assert init["volumeMounts"] == [{"name": "adapters", "mountPath": "/adapters"}]
    assert {"name": "adapters", "emptyDir": {}} in spec["volumes"]
    (vllm,) = spec["containers"]
    assert {"name": "adapters", "mountPath": "/adapters", "readOnly": True} in vllm["volumeMounts"]
    args = vllm["args"]
    assert args[args.index("--lora-modules") + 1 :][:2] == [
        "sql-lora=/adapters/sql-lora",
        "org/chat-lora=/adapters/org--chat-lora",
    ]
    assert (args[args.index("--max-loras") + 1], args[args.index("--max-lora-rank") + 1]) == ("2", "64")
    assert {a for a in args if a.startswith("--")} <= VLLM_FLAGS
    assert spec["serviceAccountName"] == "vllm-pd-vllm-lora"


def fake_aws(tmp_path: Path, fail_on: str | None = None) -> Path:
    """An ``aws`` on PATH that records its arguments (one line each call) and fails for ``fail_on``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "aws"
    fail = f'case "$*" in *{fail_on}*) exit 3;; esac\n' if fail_on else ""
    script.write_text(
        f'#!/bin/sh\nprintf "%s|" "$@" >> "{tmp_path}/calls"\necho >> "{tmp_path}/calls"\n{fail}'
    )
    script.chmod(0o755)
    return bin_dir


def run_init(tmp_path: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    (init,) = pod(WITH_LORA, "prefill")["initContainers"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(init["command"], env=env, capture_output=True, text=True, check=False)


def test_the_init_script_syncs_each_folder_in_turn(tmp_path: Path) -> None:
    assert run_init(tmp_path, fake_aws(tmp_path)).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [
        "s3|sync|--only-show-errors|s3://adapters-bucket/tenants/sql-lora/|/adapters/sql-lora|",
        "s3|sync|--only-show-errors|s3://other-adapters/chat/|/adapters/org--chat-lora|",
    ]


def test_a_failed_sync_fails_the_pod_start(tmp_path: Path) -> None:
    """sh -e: the first failing copy ends the init container, so vLLM never starts without an adapter."""
    result = run_init(tmp_path, fake_aws(tmp_path, fail_on="sql-lora"))
    assert result.returncode == 3
    assert len((tmp_path / "calls").read_text().splitlines()) == 1


def test_the_two_roles_differ_only_where_they_did_without_lora() -> None:
    """Same adapters, same flags, same init container on prefill and decode (any pair serves any adapter)."""
    lora_prefill, lora_decode = (pod(WITH_LORA, role) for role in ROLES)
    assert lora_prefill["initContainers"] == lora_decode["initContainers"]
    added = [
        a
        for a in lora_prefill["containers"][0]["args"]
        if a not in pod(BASE, "prefill")["containers"][0]["args"]
    ]
    assert added == [
        a
        for a in lora_decode["containers"][0]["args"]
        if a not in pod(BASE, "decode")["containers"][0]["args"]
    ]
    assert "--enable-lora" in added


def test_without_lora_the_pods_are_unchanged() -> None:
    for role in ROLES:
        spec = pod(BASE, role)
        assert "initContainers" not in spec and "serviceAccountName" not in spec
        assert all(v["name"] != "adapters" for v in spec["volumes"])
        assert not any("lora" in a for a in spec["containers"][0]["args"])
    assert all(m["kind"] != "ServiceAccount" or "lora" not in m["metadata"]["name"] for m in render(BASE))


def test_every_lora_manifest_validates_strict() -> None:
    manifests = render(WITH_LORA)
    (account,) = [
        m for m in manifests if m["kind"] == "ServiceAccount" and m["metadata"]["name"].endswith("lora")
    ]
    assert account["automountServiceAccountToken"] is False
    kinds = [m["kind"] for m in manifests]
    assert kinds.index("ServiceAccount") < kinds.index("Deployment")
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, "1.35", strict=True) == "1.35"


# ---- the construct: the pods' Pod Identity role reads only the adapter folders ---------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, DisaggregatedServing, kms.Key]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Test")
    key = kms.Key(stack, "AdapterKey", enable_key_rotation=True)
    serving = DisaggregatedServing(
        stack,
        "Serving",
        cluster=make_cluster(stack),
        model_id=MODEL,
        instance_type="p5.48xlarge",
        lora=LORA,
        adapter_key=key,
    )
    return stack, serving, key


def arn_text(resource: Any) -> str:
    if "Fn::GetAtt" in resource:
        return f"<{resource['Fn::GetAtt'][0]}.{resource['Fn::GetAtt'][1]}>"
    return "".join(part if isinstance(part, str) else "<P>" for part in resource["Fn::Join"][1])


def test_the_role_reads_only_the_adapter_folders(
    served: tuple[cdk.Stack, DisaggregatedServing, kms.Key],
) -> None:
    stack, serving, key = served
    template = Template.from_stack(stack).to_json()
    assert serving.lora_role is not None
    role = stack.get_logical_id(serving.lora_role.node.default_child)  # type: ignore[arg-type]
    (policy,) = [
        r for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"]["Roles"] == [{"Ref": role}]
    ]  # fmt: skip
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    rendered = sorted(
        (s["Action"], arn_text(s["Resource"]), json.dumps(s.get("Condition"))) for s in statements
    )
    key_id = stack.get_logical_id(key.node.default_child)  # type: ignore[arg-type]
    assert rendered == sorted([
        ("kms:Decrypt", f"<{key_id}.Arn>", "null"),
        ("s3:GetObject", "arn:<P>:s3:::adapters-bucket/tenants/sql-lora/*", "null"),
        ("s3:GetObject", "arn:<P>:s3:::other-adapters/chat/*", "null"),
        ("s3:ListBucket", "arn:<P>:s3:::adapters-bucket", json.dumps({"StringLike": {"s3:prefix": ["tenants/sql-lora/*"]}})),
        ("s3:ListBucket", "arn:<P>:s3:::other-adapters", json.dumps({"StringLike": {"s3:prefix": ["chat/*"]}})),
    ])  # fmt: skip
    (association,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    ]
    assert (association["Namespace"], association["ServiceAccount"]) == ("inference", "vllm-pd-vllm-lora")
    trust = template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}


def test_the_pods_wait_for_their_association(served: tuple[cdk.Stack, DisaggregatedServing, kms.Key]) -> None:
    stack, serving, _ = served
    template = Template.from_stack(stack).to_json()
    workload = stack.get_logical_id(serving.workload_manifest.node.default_child)  # type: ignore[arg-type]
    (association,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    ]
    assert association in template["Resources"][workload]["DependsOn"]


def test_no_unacknowledged_findings(served: tuple[cdk.Stack, DisaggregatedServing, kms.Key]) -> None:
    assert nag_findings(served[1], AwsSolutionsChecks()) == []


# ---- misuse and the tier setting --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "param", "match"),
    [
        ({"lora": {"adapters": [SQL]}}, "lora", r"a LoraServing"),
        ({"lora": LoraServing((LoraAdapter(MODEL, "s3://adapters/x"),), "us-east-1")}, "lora.adapters[0].name",
         r"other than model_id"),
        ({"lora": LORA, "lora_init_image": "amazon/aws-cli:latest"}, "lora_init_image", r"pinned"),
    ],
)  # fmt: skip
def test_spec_misuse(overrides: dict[str, Any], param: str, match: str) -> None:
    assert_refused(lambda: make_spec(**overrides), "DisaggregatedWorkloadSpec", param, match)


def test_construct_misuse(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path), context={"aws:cdk:bundling-stacks": []}), "Misuse")
    cluster = make_cluster(stack)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    common: dict[str, Any] = {"cluster": cluster, "model_id": MODEL, "instance_type": "p5.48xlarge"}
    assert_refused(
        lambda: DisaggregatedServing(stack, "A", **common, adapter_key=key),
        "DisaggregatedServing",
        "adapter_key",
        "no lora adapters",
    )
    assert_refused(
        lambda: DisaggregatedServing(stack, "B", **common, lora=LORA, adapter_key="alias/adapters"),
        "DisaggregatedServing",
        "adapter_key",
        "an IKey",
    )
    assert_refused(
        lambda: DisaggregatedServing(stack, "C", **common, lora=(SQL,)),
        "DisaggregatedServing",
        "lora",
        "a LoraServing",
    )


def settings(gateway: dict[str, Any]) -> DisaggregatedSettings:
    context = {**cdk_json_context(), "disaggregated.inference_gateway": gateway}
    result = parse_settings(TIER.spec, context)
    assert isinstance(result, DisaggregatedSettings)
    return result


POOLS = {"prefill": {"min_replicas": 1, "max_replicas": 1}, "decode": {"min_replicas": 1, "max_replicas": 1}}


def test_the_tier_setting_now_serves_lora_adapters() -> None:
    parsed = settings(
        {"pools": POOLS, "lora_adapters": {"sql-lora": "s3://adapters-bucket/sql"}, "max_lora_rank": 32}
    )
    assert parsed.lora is not None
    assert (parsed.lora.adapters, parsed.lora.max_lora_rank) == (
        (LoraAdapter("sql-lora", "s3://adapters-bucket/sql"),),
        32,
    )
    assert settings({"pools": POOLS}).lora is None


def test_an_adapter_without_a_folder_is_refused_by_key() -> None:
    with pytest.raises(ConfigError, match="with a prefix") as raised:
        settings({"pools": POOLS, "lora_adapters": {"sql-lora": "s3://adapters-bucket"}})
    assert raised.value.key == "disaggregated.inference_gateway.lora_adapters.sql-lora"


# ---- loopback: the real vllm-router 0.1.17 in the tier's P/D mode passes `model` to prefill and decode -----


class Recorder:
    """A stand-in for one vLLM pod (or the prefill's Mooncake bootstrap server): records what it is sent.

    The bootstrap answer has the shape of vLLM 0.33.0's ``MooncakeBootstrapServer.query``
    (``{dp_rank: {engine_id, worker_addr: {tp_rank: {pp_rank: addr}}}}``, ``mooncake_utils.py``).
    """

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _reply(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.startswith("/query"):
                    self._reply(
                        {"0": {"engine_id": "prefill-engine", "worker_addr": {"0": {"0": "127.0.0.1:1"}}}}
                    )
                elif self.path.startswith("/v1/models"):
                    self._reply({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:
                    self._reply({"model_path": MODEL})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path in ("/v1/completions", "/v1/chat/completions"):
                    recorder.posts.append((self.path, body))
                # One answer fits every call: a completion, and for /render a non-prompt body the router ignores.
                self._reply({
                    "id": "cmpl-stub", "object": "text_completion", "model": body.get("model"),
                    "choices": [{"index": 0, "text": "ok", "message": {"role": "assistant", "content": "ok"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def pd_router() -> Iterator[tuple[str, Recorder, list[Recorder]]]:
    """vllm-router as the tier runs it (--vllm-pd-disaggregation --kv-connector mooncake, cache_aware prefill,
    power_of_two decode, which needs two decode workers), with static workers instead of Kubernetes discovery."""
    prefill, bootstrap = Recorder(), Recorder()
    decodes = [Recorder(), Recorder()]
    port = free_port()
    args = [
        "--vllm-pd-disaggregation", "--kv-connector", "mooncake",
        "--prefill", f"http://127.0.0.1:{prefill.port}", str(bootstrap.port),
        *(arg for decode in decodes for arg in ("--decode", f"http://127.0.0.1:{decode.port}")),
        "--prefill-policy", "cache_aware", "--decode-policy", "power_of_two",
        "--host", "127.0.0.1", "--port", str(port),
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
    ]  # fmt: skip
    try:
        with vllm_router(args, port) as url:
            yield url, prefill, decodes
    finally:
        for recorder in (prefill, bootstrap, *decodes):
            recorder.close()


def post(router: str, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"{router}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=15) as response:
        assert response.status == 200


def test_the_router_hands_the_adapter_name_to_the_prefill_and_the_decode_pod() -> None:
    with pd_router() as (router, prefill, decodes):
        post(router, "/v1/completions", {"model": "sql-lora", "prompt": "SELECT", "max_tokens": 4})
        post(router, "/v1/chat/completions", {"model": "org/chat-lora", "max_tokens": 4,
                                              "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        post(router, "/v1/completions", {"model": MODEL, "prompt": "base", "max_tokens": 4})
    decoded = sorted(
        (body for decode in decodes for _, body in decode.posts),
        key=lambda body: [b["kv_transfer_params"]["transfer_id"] for _, b in prefill.posts].index(
            body["kv_transfer_params"]["transfer_id"]
        ),
    )
    assert [body["model"] for _, body in prefill.posts] == ["sql-lora", "org/chat-lora", MODEL]
    assert [body["model"] for body in decoded] == ["sql-lora", "org/chat-lora", MODEL]
    assert [path for path, _ in prefill.posts] == [
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/completions",
    ]
    for (_, first), second in zip(prefill.posts, decoded, strict=True):
        # The same transfer: prefill pushes the KV cache it computed with the adapter, decode continues it.
        assert first["kv_transfer_params"]["do_remote_decode"] is True
        assert second["kv_transfer_params"]["do_remote_prefill"] is True
        assert first["kv_transfer_params"]["transfer_id"] == second["kv_transfer_params"]["transfer_id"]
