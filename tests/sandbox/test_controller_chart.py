"""W2 of the audit: the agent-sandbox controller must have a writable volume where it writes its certificates.

kubernetes-sigs/agent-sandbox v0.5.6 (211b7579) writes its webhook serving certificate and key at start
(``--manage-webhook-certs`` and ``--enable-webhook`` default true, ``--webhook-cert-dir`` defaults to
``/tmp/k8s-webhook-server/serving-certs``: cmd/agent-sandbox-controller/main.go:103,108-109; written by
``writeCertFiles``, cmd/agent-sandbox-controller/tls.go:214-230) and exits when it cannot (main.go:394-398). The
chart mounts only a read-only ConfigMap (helm/templates/deployment.yaml:69-72,85-89) and the tier runs it with a
read-only root file system, so the fetch script patches the chart with ``writable-tmp.patch`` and the construct
refuses a chart without it. Which paths must be writable is checked for every hardened container by
``tests/common/test_hardened_containers.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.sandbox.controller import (
    FETCH_SCRIPT,
    WRITABLE_TMP_PATCH,
    AgentSandboxController,
    _check_chart_directory,
)
from inference_tiers.validation import Args, ArgumentError
from tests.harness import cdk_json_context
from tests.sandbox.helpers import DATA, chart_template_skeleton, fetched_agent_sandbox_chart

UPSTREAM_DEPLOYMENT = DATA / "agent-sandbox" / "helm" / "templates" / "deployment.yaml"


def _controller_pod(deployment: Path) -> Any:
    return chart_template_skeleton(deployment.read_text())["spec"]["template"]["spec"]


def test_the_patch_applies_to_the_pinned_chart_and_mounts_an_emptydir_at_tmp(tmp_path: Path) -> None:
    pod = _controller_pod(fetched_agent_sandbox_chart(tmp_path) / "templates" / "deployment.yaml")
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert not mount.get("readOnly")
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["emptyDir"] == {
        "medium": "Memory",
        "sizeLimit": "16Mi",
    }  # two small PEM files; never on disk


def test_the_upstream_chart_alone_mounts_nothing_writable() -> None:
    (container,) = _controller_pod(UPSTREAM_DEPLOYMENT)["containers"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/etc/sandbox-config"]
    assert all(m["readOnly"] for m in container["volumeMounts"])


def test_the_controller_refuses_a_chart_without_the_patch(tmp_path: Path) -> None:
    args = Args("AgentSandboxController")
    chart = fetched_agent_sandbox_chart(tmp_path)
    _check_chart_directory(args, chart)
    shutil.copyfile(UPSTREAM_DEPLOYMENT, chart / "templates" / "deployment.yaml")
    with pytest.raises(
        ArgumentError,
        match=r"parameter 'chart_directory' got .*with writable-tmp.patch applied, a writable /tmp",
    ):
        _check_chart_directory(args, chart)


def test_the_fetch_script_patches_the_chart_before_copying_it() -> None:
    script = FETCH_SCRIPT.read_text()
    assert f'/{WRITABLE_TMP_PATCH.name}"' in script
    assert script.index('git -C "$work" apply "$PATCH"') < script.index('cp -R "$work/helm" "$DEST"')


def test_a_fetched_chart_is_installed_without_warning_or_deploy_rule(tmp_path: Path) -> None:
    app = cdk.App(
        outdir=str(tmp_path / "cdk.out"), context={**cdk_json_context(), "aws:cdk:bundling-stacks": []}
    )
    stack = cdk.Stack(app, "Fetched")
    eks = EksCluster(stack, "Eks")
    AgentSandboxController(
        stack, "Controller", cluster=eks.cluster, chart_directory=fetched_agent_sandbox_chart(tmp_path)
    )
    assert Annotations.from_stack(stack).find_warning("/Fetched/Controller", Match.any_value()) == []
    rules = Template.from_stack(stack).to_json().get("Rules", {})
    assert not [name for name in rules if name.startswith("ControllerChartFetched")]
