"""Seam: every hardened container's writes land on writable volumes, and it declares the ports it binds.

A container with a read-only root file system fails on its first write outside a writable volume (audit W2: the
agent-sandbox controller crash-looped on its webhook certificates). For every container the project hardens in
the default build of every tier and in the opted-in configurations (``OPTED_IN``), ``tests/data/hardened_containers.yaml`` records from the pinned upstream source
the paths it writes and the ports it binds (each with its evidence); these tests check the rendered pod against
that record, and fail for a hardened container the record does not cover.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_tiers.app_factory import TIERS
from tests.disaggregated.test_lora_tier import SETTING as DISAGGREGATED_GATEWAY_WITH_LORA
from tests.harness import DATA_DIR, PROJECT_ROOT, TierBuild, build_tier
from tests.inference_gateway.test_hyperpod import GATEWAY_ON as HYPERPOD_GATEWAY
from tests.sandbox.helpers import apply_patch, chart_template_skeleton, helm_charts, manifests

RECORD: dict[str, dict[str, Any]] = yaml.safe_load((DATA_DIR / "hardened_containers.yaml").read_text())
# Configurations whose extra containers the default builds lack (the endpoint picker, the LoRA init container).
OPTED_IN = {
    "disaggregated+gateway+lora": (
        "disaggregated",
        {"disaggregated.inference_gateway": DISAGGREGATED_GATEWAY_WITH_LORA},
    ),
    "hyperpod+gateway": ("hyperpod", HYPERPOD_GATEWAY),
}


def _hardened(security_context: Any) -> bool:
    return isinstance(security_context, dict) and (
        security_context.get("readOnlyRootFilesystem") is True
        or security_context.get("runAsNonRoot") is True
        or "ALL" in security_context.get("capabilities", {}).get("drop", [])
    )


def _pods(value: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec (a mapping with ``containers``) anywhere in a manifest."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield value
        for child in value.values():
            yield from _pods(child)
    elif isinstance(value, list):
        for child in value:
            yield from _pods(child)


def _security_contexts(values: Any) -> Iterator[Any]:
    if isinstance(values, dict):
        for key, child in values.items():
            if key.lower().endswith("securitycontext"):
                yield child
            yield from _security_contexts(child)


def _entry_for(match: dict[str, str]) -> str | None:
    return next((name for name, entry in RECORD.items() if entry["match"] == match), None)


def _chart_pod(entry: dict[str, Any], tmp_path: Path) -> Any:
    """The chart's pod spec as the project installs it: the vendored template with the project's patch applied."""
    template = DATA_DIR / entry["chart_pod"]["template"]
    patch = PROJECT_ROOT / entry["chart_pod"]["patch"]
    # The patch names the file by its path in the chart repository (helm/templates/...).
    target = tmp_path / next(
        line.removeprefix("+++ b/") for line in patch.read_text().splitlines() if line.startswith("+++ b/")
    )
    target.parent.mkdir(parents=True)
    shutil.copyfile(template, target)
    apply_patch(tmp_path, patch)
    return chart_template_skeleton(target.read_text())["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def hardened(tier_build: Callable[[str], TierBuild]) -> list[dict[str, Any]]:
    """Every hardened container of every tier (default and opted-in configurations): where it was found, its
    record entry (None without), its pod or chart values."""
    builds = {tier: tier_build(tier) for tier in sorted(TIERS)}
    builds.update({name: build_tier(tier, **overrides) for name, (tier, overrides) in OPTED_IN.items()})
    found = []
    for tier, build in builds.items():
        for stack in build.stacks:
            template = build.template(stack.stack_name)
            for manifest in manifests(template):
                for pod in _pods(manifest):
                    for container in pod["containers"] + pod.get("initContainers", []):
                        if _hardened(container.get("securityContext")) or _hardened(
                            pod.get("securityContext")
                        ):
                            match = {"kind": manifest["kind"], "container": container["name"]}
                            found.append(
                                {
                                    "where": f"{tier}: {match}",
                                    "entry": _entry_for(match),
                                    "pod": pod,
                                    "container": container,
                                }
                            )
            for release, chart in helm_charts(template).items():
                if any(_hardened(context) for context in _security_contexts(chart["Values"])):
                    match = {"helm_release": release}
                    found.append(
                        {"where": f"{tier}: {match}", "entry": _entry_for(match), "values": chart["Values"]}
                    )
    return found


def test_every_hardened_container_is_recorded_and_every_record_is_used(
    hardened: list[dict[str, Any]],
) -> None:
    assert [h["where"] for h in hardened if h["entry"] is None] == []
    assert sorted(set(RECORD) - {h["entry"] for h in hardened}) == []
    # The agent-sandbox controller, kube-state-metrics, the EFA exporter, the router, the sandboxes, the endpoint
    # picker, the LoRA init container and the platform's tenant key provisioner at least.
    assert len(hardened) >= len(RECORD) == 8


def _pod_and_container(found: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    entry = RECORD[found["entry"]]
    if "pod" in found:
        return found["pod"], found["container"]
    pod = _chart_pod(entry, tmp_path)
    (container,) = pod["containers"]
    return pod, container


def test_every_written_path_is_on_a_writable_emptydir(hardened: list[dict[str, Any]], tmp_path: Path) -> None:
    checked = 0
    for found in hardened:
        writes = RECORD[found["entry"]]["writes"]
        if not writes:
            continue
        pod, container = _pod_and_container(found, tmp_path / str(checked))
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for write in writes:
            mounts = [
                m
                for m in container.get("volumeMounts") or []
                if write["path"] == m["mountPath"]
                or write["path"].startswith(m["mountPath"].rstrip("/") + "/")
            ]
            assert mounts, f"{found['where']}: nothing is mounted at {write['path']} ({write['evidence']})"
            mount = max(
                mounts, key=lambda m: len(m["mountPath"])
            )  # the innermost mount is the one written to
            assert not mount.get("readOnly"), f"{found['where']}: {mount} is read-only"
            assert "emptyDir" in volumes[mount["name"]], f"{found['where']}: {volumes[mount['name']]}"
            checked += 1
    assert (
        checked >= 9
    )  # the controller's certificates, the sandboxes' folders (two tenants), the LoRA adapters


def _bound(entry: dict[str, Any], args: list[str]) -> set[int]:
    ports = set()
    for bind in entry["binds"]:
        flag = bind.get("flag")
        ports.add(int(args[args.index(flag) + 1]) if flag in args else bind["default"])
    return ports


def test_declared_container_ports_are_the_bound_ones(hardened: list[dict[str, Any]], tmp_path: Path) -> None:
    for index, found in enumerate(hardened):
        entry = RECORD[found["entry"]]
        if "chart_ports" in entry:
            record = json.loads((DATA_DIR / entry["chart_ports"]["file"]).read_text())
            declared = set(record[entry["chart_ports"]["key"]].values())
            args: list[str] = []
        else:
            _, container = _pod_and_container(found, tmp_path / str(index))
            declared = {p["containerPort"] for p in container.get("ports") or []}
            args = [str(a) for a in container.get("args") or []]
        assert declared == _bound(entry, args), found["where"]
