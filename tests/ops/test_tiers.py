"""preflight against the real tier registry: every registered tier's cdk.json defaults give requirements
that every check can take (valid AWS request parameters, known services and instance types), without network:
AWS calls end in AccessDenied before they are sent, and registry requests go to a proxy that refuses them.
"""

from __future__ import annotations

import socket
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from inference_tiers import app_factory
from inference_tiers.config import TIER_ORDER, AccountRequirements
from inference_tiers.instance_types import find_gpu_instance_type
from inference_tiers.ops import preflight
from inference_tiers.ops.checks import CheckResult, Clients
from tests.ops.helpers import tier_requirements

ACCOUNT = "123456789012"


class DeniedClients(Clients):
    """Real boto3 clients (botocore validates every request against the service model) whose calls all end
    in AccessDenied before anything is sent, so each check reports the permission it would need."""

    def __init__(self) -> None:
        super().__init__(
            boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
        )
        self.calls: list[str] = []

    def client(self, service: str, region: str | None = None) -> Any:
        client = self.session.client(service, region_name=region)
        client.meta.events.register("before-call.*.*", self._deny)
        return client

    def _deny(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls.append(f"{model.service_model.service_name}:{model.name}")
        error = {"Code": "AccessDeniedException", "Message": "denied by the test"}
        return AWSResponse("https://test", 403, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }


def _expected_checks(req: AccountRequirements) -> set[str]:
    """The check names the requirements must produce: one per kind of thing the tier needs from the account."""
    names = {"CDK bootstrap"}
    if any(n.service != "sagemaker-endpoint" for n in req.instances):
        names.add("instance type offerings")
    if any(n.service == "ec2" for n in req.instances):
        names.add("capacity reservations")
    if any(n.service.startswith("sagemaker-") for n in req.instances):
        names.add("SageMaker quotas")
    for need in req.instances:
        gpu = find_gpu_instance_type(need.instance_type)
        if need.service == "ec2" and gpu is not None:
            code, quota_name = preflight.EC2_VCPU_QUOTAS[gpu.name[0]]
            names.add(f"quota {quota_name} ({code})")
    if req.bedrock_model_id:
        names.add(f"Bedrock model {req.bedrock_model_id}")
    if req.bedrock_inference_profile_id:
        names.add(f"inference profile {req.bedrock_inference_profile_id}")
    if req.kubernetes_version:
        names.add(f"EKS Kubernetes {req.kubernetes_version}")
        names.update(f"EKS add-on {pin.name}" for pin in req.eks_addons)
    names.update(f"image {image.reference}" for image in req.images)
    return names


@pytest.fixture(autouse=True)
def no_registry_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTP(S) request goes through a proxy on a loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, closed)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_every_tier_is_registered() -> None:
    assert tuple(app_factory.TIERS) == TIER_ORDER


@pytest.mark.parametrize("tier", TIER_ORDER)
def test_default_requirements_reach_every_check_that_applies(tier: str) -> None:
    req = tier_requirements(tier)
    assert req != AccountRequirements(), f"{tier} needs nothing from the account?"
    for need in req.instances:
        assert need.service in ("ec2", "sagemaker-endpoint", "sagemaker-hyperpod") and need.count >= 1
        if need.service != "ec2":
            # SageMaker quotas are looked up by the ml. name; an unknown type would find no quota.
            assert need.instance_type.startswith("ml.") and find_gpu_instance_type(need.instance_type)
    clients = DeniedClients()
    results = preflight.run_preflight(clients, req, ACCOUNT)
    assert {r.check for r in results} == _expected_checks(req)
    # Every check got as far as an AWS call (parameters valid for the service model) and reports the
    # permission it lacked; nothing failed on the requirements themselves.
    assert clients.calls
    _assert_all_denied(results)


def test_sagemaker_training_plan_goes_to_the_training_plan_check() -> None:
    arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/p5-week"
    req = tier_requirements(
        "sagemaker",
        f"sagemaker.capacity_reservation_arn={arn}",
        'sagemaker.instance_types=["ml.p5.48xlarge"]',
    )
    assert req.capacity_reservation_ids == (arn,)
    clients = DeniedClients()
    results = preflight.run_preflight(clients, req, ACCOUNT)
    assert "sagemaker:DescribeTrainingPlan" in clients.calls
    assert "ec2:DescribeCapacityReservations" not in clients.calls
    assert "training plan p5-week" in {r.check for r in results}
    _assert_all_denied(results)


def _assert_all_denied(results: list[CheckResult]) -> None:
    for result in results:
        if "built and pushed by cdk deploy" in result.detail:  # an image asset: nothing to look up
            assert result.status == "pass" and result.check.startswith("image "), result
            continue
        assert result.status == "warn", result
        if result.detail.startswith("unchecked: "):  # a public registry, behind the refusing proxy
            assert result.check.startswith("image ") and "could not be reached" in result.detail
            continue
        assert "could not check (AccessDeniedException" in result.detail and result.fix.startswith("allow ")
