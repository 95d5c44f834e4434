"""The tenant ValidatingAdmissionPolicy, evaluated: its CEL expressions run (cel-python, standard CEL) against the
pods and claims the tier renders, and against each kind of pod or claim it must refuse.

The API server evaluates the same expressions with the same inputs (``object``, ``request``, ``variables``);
Kubernetes' CEL extension libraries are not used by the policy, so standard CEL evaluates it completely.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import celpy
import pytest

from inference_tiers.k8s import sandbox_tenancy as tenancy_k8s
from inference_tiers.k8s.sandbox_tenancy import TenancySpec, TenantSpec

RUNTIME = "kata-qemu-runtime-rs"
TENANT = TenantSpec(name="team-a")
TENANCY = TenancySpec(runtime_class_name=RUNTIME, overhead_cpu_millicores=250, overhead_memory_mib=320)
POLICY = tenancy_k8s.admission_policy(RUNTIME)[0]["spec"]
_ENV = celpy.Environment()


def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


VARIABLES = {v["name"]: _program(v["expression"]) for v in POLICY["variables"]}
VALIDATIONS = [(_program(v["expression"]), v["message"]) for v in POLICY["validations"]]


def refusals(obj: dict[str, Any], kind: str) -> list[str]:
    """The messages of every validation ``obj`` fails (an evaluation error fails it too, as failurePolicy Fail)."""
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "request": celpy.json_to_cel({"kind": {"group": "", "version": "v1", "kind": kind}}),
    }
    activation["variables"] = celpy.json_to_cel(
        {n: bool(p.evaluate(activation)) for n, p in VARIABLES.items()}
    )
    failed = []
    for program, message in VALIDATIONS:
        try:
            allowed = program.evaluate(activation)
        except celpy.CELEvalError:
            allowed = False
        if allowed is not True and not (isinstance(allowed, celpy.celtypes.BoolType) and bool(allowed)):
            failed.append(message)
    return failed


def sandbox_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sandbox-1", "namespace": TENANT.namespace},
        "spec": tenancy_k8s.sandbox_pod_spec(TENANT, TENANCY),
    }


def test_the_rendered_sandbox_pod_and_claim_are_admitted() -> None:
    assert refusals(sandbox_pod(), "Pod") == []
    assert refusals(tenancy_k8s.sandbox_claim(TENANT, "2026-12-03T18:00:00Z"), "SandboxClaim") == []


def _without(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        node = pod
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return change


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        node = pod
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


PLAIN_INIT = [{"name": "setup", "image": "busybox:1.37.0"}]


@pytest.mark.parametrize(
    ("change", "refused_for"),
    [
        (_without(("spec", "runtimeClassName")), "Kata runtime class"),
        (_set(("spec", "runtimeClassName"), "runc"), "Kata runtime class"),
        (_set(("spec", "automountServiceAccountToken"), True), "automountServiceAccountToken"),
        (_without(("spec", "automountServiceAccountToken")), "automountServiceAccountToken"),
        (
            _set(("spec", "containers", 0, "securityContext", "allowPrivilegeEscalation"), True),
            "PrivilegeEscalation",
        ),
        (_without(("spec", "containers", 0, "securityContext")), "PrivilegeEscalation"),
        (_set(("spec", "initContainers"), PLAIN_INIT), "PrivilegeEscalation"),
    ],
)
def test_pods_without_kata_with_a_token_or_with_privilege_escalation_are_refused(
    change: Callable[[dict[str, Any]], None], refused_for: str
) -> None:
    pod = sandbox_pod()
    change(pod)
    failed = refusals(pod, "Pod")
    assert len(failed) == 1 and refused_for in failed[0], failed


def test_a_second_container_without_a_security_context_is_refused() -> None:
    pod = sandbox_pod()
    pod["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1.37.0"})
    assert refusals(pod, "Pod") == ["sandbox containers must set allowPrivilegeEscalation: false"]


@pytest.mark.parametrize(
    "change",
    [
        _without(("spec", "lifecycle")),
        _without(("spec", "lifecycle", "shutdownTime")),
        _without(("spec", "lifecycle", "shutdownPolicy")),
        _set(("spec", "lifecycle", "shutdownPolicy"), "Retain"),
    ],
)
def test_claims_that_would_outlive_their_use_are_refused(change: Callable[[dict[str, Any]], None]) -> None:
    claim = copy.deepcopy(tenancy_k8s.sandbox_claim(TENANT, "2026-12-03T18:00:00Z"))
    change(claim)
    failed = refusals(claim, "SandboxClaim")
    assert len(failed) == 1 and "shutdownTime" in failed[0], failed
