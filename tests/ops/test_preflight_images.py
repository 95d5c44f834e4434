"""preflight's image check: ECR through botocore Stubbers (DescribeImages shapes validated by the service model),
public registries through a loopback registry server, and image assets that need nothing pushed."""

from __future__ import annotations

import dataclasses
import datetime
import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inference_tiers.config import ImageNeed
from inference_tiers.constructs.eks.cluster_exporters import exporter_images
from inference_tiers.k8s.inference_gateway import EPP_IMAGE
from inference_tiers.litellm.config import LITELLM_IMAGE
from inference_tiers.ops.images import check_image, check_images
from inference_tiers.ops.registry import (
    MANIFEST_TYPES,
    ImageReferenceError,
    parse_reference,
    registry_base_url,
)
from tests.harness import TierBuild, build_tier
from tests.ops.helpers import StubClients, client_error, tier_requirements
from tests.ops.registry_server import RegistryState, loopback_registry

ACCOUNT = "123456789012"
REPO_URI = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/team/vllm"
DIGEST = "sha256:" + "ab" * 32
PUSHED = datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC)


@pytest.fixture
def clients() -> StubClients:
    return StubClients()


@pytest.fixture(autouse=True)
def direct_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback registry is reached directly, whatever proxy the developer's shell sets."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _detail(repository: str, tag: str | None = "v1", digest: str = DIGEST) -> dict[str, object]:
    detail: dict[str, object] = {
        "registryId": ACCOUNT,
        "repositoryName": repository,
        "imageDigest": digest,
        "imageSizeInBytes": 9_876_543_210,
        "imagePushedAt": PUSHED,
        "imageManifestMediaType": "application/vnd.docker.distribution.manifest.v2+json",
    }
    if tag:
        detail["imageTags"] = [tag]
    return {"imageDetails": [detail]}


# --- Amazon ECR --------------------------------------------------------------------------------------------


def test_an_ecr_tag_that_exists_passes(clients: StubClients) -> None:
    clients.stub("ecr").add_response(
        "describe_images",
        _detail("team/vllm"),
        {"registryId": ACCOUNT, "repositoryName": "team/vllm", "imageIds": [{"imageTag": "v1"}]},
    )
    result = check_image(clients, ImageNeed(f"{REPO_URI}:v1", "sagemaker.image_uri"))
    assert result.check == f"image {REPO_URI}:v1" and result.status == "pass"
    assert result.detail == f"in ECR ({DIGEST}, pushed 2026-11-30)"
    clients.assert_done()


def test_an_ecr_digest_is_looked_up_by_digest_in_the_image_region(clients: StubClients) -> None:
    uri = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/team/vllm@{DIGEST}"
    clients.stub("ecr", "us-west-2").add_response(
        "describe_images",
        _detail("team/vllm", tag=None),
        {"registryId": ACCOUNT, "repositoryName": "team/vllm", "imageIds": [{"imageDigest": DIGEST}]},
    )
    assert check_image(clients, ImageNeed(uri, "disaggregated.image_uri")).status == "pass"
    clients.assert_done()


def test_a_missing_repository_fails_with_the_commands_that_create_and_push_it(clients: StubClients) -> None:
    client_error(clients.stub("ecr"), "describe_images", "RepositoryNotFoundException")
    result = check_image(clients, ImageNeed(f"{REPO_URI}:v1", "disaggregated.image_uri"))
    assert result.status == "fail"
    assert result.detail == f"no repository team/vllm in {ACCOUNT} (us-east-1)"
    assert result.fix == (
        "aws ecr create-repository --region us-east-1 --repository-name team/vllm "
        "--image-tag-mutability IMMUTABLE --image-scanning-configuration scanOnPush=true && "
        "aws ecr get-login-password --region us-east-1 | docker login --username AWS --password-stdin "
        f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com && docker push {REPO_URI}:v1"
    )


def test_a_missing_tag_fails_with_the_push_commands(clients: StubClients) -> None:
    client_error(clients.stub("ecr"), "describe_images", "ImageNotFoundException")
    result = check_image(clients, ImageNeed(f"{REPO_URI}:v2", "disaggregated.image_uri"))
    assert result.status == "fail" and result.detail == f"v2 is not in {ACCOUNT}/team/vllm"
    assert result.fix.startswith("aws ecr get-login-password") and result.fix.endswith(
        f"docker push {REPO_URI}:v2"
    )


def test_ecr_access_denied_names_the_permission_and_repository(clients: StubClients) -> None:
    client_error(clients.stub("ecr"), "describe_images", "AccessDeniedException", status=403)
    result = check_image(clients, ImageNeed(f"{REPO_URI}:v1", "sagemaker.image_uri"))
    assert result.status == "warn"
    assert result.fix == (
        f"allow ecr:DescribeImages on arn:aws:ecr:us-east-1:{ACCOUNT}:repository/team/vllm for this identity"
    )


# --- the SageMaker engines' pinned Deep Learning Containers ------------------------------------------------

# The defaults build no endpoint (no image to check) until the weights are in the stack's bucket.
ENDPOINT = "sagemaker.create_endpoint=true"


def test_sagemaker_checks_the_engine_dlc_in_the_regions_registry(clients: StubClients) -> None:
    req = tier_requirements("sagemaker", "sagemaker.engine=sglang", ENDPOINT)
    [need] = req.images
    assert (need.source, need.set_by) == ("aws-dlc", "sagemaker.image_uri")
    repository, _, tag = need.reference.partition(":")
    clients.stub("ecr").add_response(
        "describe_images",
        _detail(repository, tag),
        {"registryId": "763104351884", "repositoryName": "sglang", "imageIds": [{"imageTag": tag}]},
    )
    [result] = check_images(clients, req)
    assert result.status == "pass" and result.detail.startswith(
        f"Deep Learning Container in 763104351884 (us-east-1): in ECR ({DIGEST}, pushed 2026-11-30)"
    )
    clients.assert_done()


def test_a_dlc_tag_missing_in_the_region_fails_pointing_at_image_uri(clients: StubClients) -> None:
    client_error(clients.stub("ecr"), "describe_images", "ImageNotFoundException")
    [result] = check_images(clients, tier_requirements("sagemaker", ENDPOINT))
    assert result.status == "fail"
    assert (
        result.fix
        == "copy the image into your own ECR repository in us-east-1 and set sagemaker.image_uri to it"
    )


def test_a_region_without_a_known_dlc_registry_fails_without_a_call() -> None:
    clients = StubClients("il-central-1")
    clients.stub("ecr")
    [result] = check_images(clients, tier_requirements("sagemaker", ENDPOINT))
    assert result.status == "fail" and "no Deep Learning Containers registry in il-central-1" in result.detail
    clients.assert_done()


def test_sagemaker_image_uri_replaces_the_dlc(clients: StubClients) -> None:
    req = tier_requirements("sagemaker", f"sagemaker.image_uri={REPO_URI}:v1", ENDPOINT)
    assert req.images == (ImageNeed(f"{REPO_URI}:v1", "sagemaker.image_uri"),)
    assert tier_requirements("sagemaker", "sagemaker.create_endpoint=false").images == ()


# --- image assets ------------------------------------------------------------------------------------------


def test_disaggregated_default_images_are_built_by_the_deploy(clients: StubClients) -> None:
    clients.stub("ecr")
    req = tier_requirements("disaggregated")
    # the public exporter images after them are checked against their registries (tests below)
    assets = dataclasses.replace(req, images=tuple(n for n in req.images if n.source == "asset"))
    results = check_images(clients, assets)
    assert [r.check for r in results] == [
        "image inference_tiers/assets/disaggregated/vllm",
        "image inference_tiers/assets/disaggregated/router",
    ]
    for result, key in zip(
        results, ("disaggregated.image_uri", "disaggregated.router_image_uri"), strict=True
    ):
        assert result.status == "pass" and result.detail.startswith(
            f"{key} unset: built and pushed by cdk deploy"
        )
    clients.assert_done()  # nothing asked of ECR


def test_the_opt_in_inference_gateway_adds_its_endpoint_picker_image() -> None:
    gateway = json.dumps(
        {
            "pools": {
                "prefill": {"min_replicas": 1, "max_replicas": 1},
                "decode": {"min_replicas": 1, "max_replicas": 1},
            }
        }
    )
    images = tier_requirements("disaggregated", f"disaggregated.inference_gateway={gateway}").images
    assert images[2] == ImageNeed(EPP_IMAGE, "inference_tiers.k8s.inference_gateway:EPP_IMAGE")
    assert EPP_IMAGE not in {n.reference for n in tier_requirements("disaggregated").images}


def test_a_disaggregated_image_setting_is_checked_instead() -> None:
    req = tier_requirements("disaggregated", f"disaggregated.router_image_uri={REPO_URI}:router-1")
    assert req.images[1] == ImageNeed(f"{REPO_URI}:router-1", "disaggregated.router_image_uri")
    assert req.images[0].source == "asset"


# --- public registries, on a loopback registry -------------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[RegistryState]:
    with loopback_registry(RegistryState(manifests={("org/model-server", "v1"): DIGEST})) as state:
        yield state


def _need(registry: RegistryState, reference: str = "org/model-server:v1") -> ImageNeed:
    return ImageNeed(f"{registry.host}/{reference}", "hyperpod.vllm_image")


def test_a_public_image_passes_after_the_anonymous_token_flow(
    clients: StubClients, registry: RegistryState
) -> None:
    result = check_image(clients, _need(registry))
    assert result.status == "pass"
    assert (
        result.detail
        == f"manifest found ({DIGEST}); to pin by digest: {registry.host}/org/model-server:v1@{DIGEST}"
    )
    (first, _, first_headers), (token, token_path, _), (second, _, second_headers) = registry.requests
    assert (first, token, second) == ("HEAD", "GET", "HEAD") and "Authorization" not in first_headers
    assert token_path == "/token?scope=repository%3Aorg%2Fmodel-server%3Apull&service=loopback-registry"
    assert second_headers["Authorization"] == f"Bearer {registry.token}"
    assert second_headers["Accept"] == ", ".join(MANIFEST_TYPES)


def test_a_digest_reference_is_resolved_by_digest(clients: StubClients, registry: RegistryState) -> None:
    registry.manifests[("org/model-server", DIGEST)] = DIGEST
    result = check_image(clients, _need(registry, f"org/model-server:v1@{DIGEST}"))
    assert result.status == "pass" and result.detail == f"manifest found ({DIGEST})"
    assert registry.requests[-1][1] == f"/v2/org/model-server/manifests/{DIGEST}"


def test_a_registry_without_authentication_is_asked_once(
    clients: StubClients, registry: RegistryState
) -> None:
    registry.auth = "none"
    assert check_image(clients, _need(registry)).status == "pass"
    assert [method for method, _, _ in registry.requests] == ["HEAD"]


def test_a_redirect_is_followed_as_head_with_the_mirrors_own_token(
    clients: StubClients, registry: RegistryState
) -> None:
    with loopback_registry(RegistryState(auth="none", redirect_to=f"http://{registry.host}")) as front:
        result = check_image(clients, _need(front))
    assert result.status == "pass" and result.detail.startswith(f"manifest found ({DIGEST})")
    assert [method for method, _, _ in front.requests] == ["HEAD"]
    assert [method for method, _, _ in registry.requests] == ["HEAD", "GET", "HEAD"]


def test_a_redirect_loop_is_unchecked(clients: StubClients) -> None:
    loop = RegistryState(auth="none")
    with loopback_registry(loop):
        loop.redirect_to = f"http://{loop.host}"
        result = check_image(clients, _need(loop))
    assert result.status == "warn" and result.detail.endswith("(more than 5 redirects)")
    assert len(loop.requests) == 6


def test_a_missing_tag_fails_naming_the_setting(clients: StubClients, registry: RegistryState) -> None:
    result = check_image(clients, _need(registry, "org/model-server:v9"))
    assert result.status == "fail"
    assert result.detail == f"v9 not found in {registry.host}/org/model-server (HTTP 404)"
    assert result.fix == "set hyperpod.vllm_image to a tag or digest the registry has"


def test_a_private_repository_fails(clients: StubClients, registry: RegistryState) -> None:
    registry.auth = "basic"
    result = check_image(clients, _need(registry))
    assert (
        result.status == "fail"
        and "refused an anonymous pull of org/model-server (HTTP 401)" in result.detail
    )
    assert "copy the image into ECR and set hyperpod.vllm_image" in result.fix


def test_a_rate_limited_registry_leaves_the_image_unchecked(
    clients: StubClients, registry: RegistryState
) -> None:
    registry.status_override = 429
    result = check_image(clients, _need(registry))
    assert result.status == "warn" and result.detail == f"unchecked: {registry.host} answered HTTP 429"


def test_an_unreachable_registry_is_unchecked_not_a_crash(clients: StubClients) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens once the socket is closed
    result = check_image(clients, ImageNeed(f"{host}/org/model-server:v1", "hyperpod.vllm_image"), timeout=2)
    assert result.status == "warn" and result.detail.startswith(
        f"unchecked: {host} could not be reached from here"
    )
    assert "Connection refused" in result.detail


def test_a_refused_token_request_leaves_the_401(clients: StubClients, registry: RegistryState) -> None:
    registry.announced_service = "another-service"  # the token endpoint refuses it (HTTP 400)
    result = check_image(clients, _need(registry))
    assert result.status == "fail" and "(HTTP 401)" in result.detail
    assert [method for method, _, _ in registry.requests] == ["HEAD", "GET"]


# --- references ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "registry", "repository", "reference"),
    [
        ("vllm/vllm-openai:v0.10.1", "docker.io", "vllm/vllm-openai", "v0.10.1"),
        ("ubuntu:24.04", "docker.io", "library/ubuntu", "24.04"),
        (LITELLM_IMAGE, "ghcr.io", "berriai/litellm-database", LITELLM_IMAGE.rpartition("@")[2]),
        ("localhost/team/x:1", "localhost", "team/x", "1"),
        ("127.0.0.1:5000/team/x:1", "127.0.0.1:5000", "team/x", "1"),
        ("public.ecr.aws/neuron/vllm:0.1", "public.ecr.aws", "neuron/vllm", "0.1"),
    ],
)
def test_references_are_normalized_like_docker(
    text: str, registry: str, repository: str, reference: str
) -> None:
    image = parse_reference(text)
    assert (image.registry, image.repository, image.manifest_reference) == (registry, repository, reference)


@pytest.mark.parametrize("text", ["repo:", ":v1", "repo@sha256:1234", "host.io/repo:v1/x"])
def test_malformed_references_are_refused(text: str) -> None:
    with pytest.raises(ImageReferenceError, match="image"):
        parse_reference(text)


def test_registry_urls() -> None:
    assert registry_base_url("docker.io") == "https://registry-1.docker.io"
    assert registry_base_url("ghcr.io") == "https://ghcr.io"
    assert registry_base_url("127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert registry_base_url("localhost") == "http://localhost"


# --- the images preflight checks are the ones the templates reference --------------------------------------


@pytest.mark.parametrize(
    ("tier", "overrides"),
    # sagemaker's defaults build no endpoint (no image) until the weights are in the stack's bucket.
    [("sagemaker", {"sagemaker.create_endpoint": "true"}), ("hyperpod", {}), ("gateway", {})],
)
def test_every_checked_image_is_in_the_template(
    tier: str, overrides: dict[str, str], tier_build: Callable[[str], TierBuild]
) -> None:
    text = json.dumps((build_tier(tier, **overrides) if overrides else tier_build(tier)).templates())
    images = tier_requirements(tier, *(f"{key}={value}" for key, value in overrides.items())).images
    assert images
    for image in images:
        assert image.reference in text, image


def test_disaggregated_assets_are_the_stacks_image_assets(tier_build: Callable[[str], TierBuild]) -> None:
    [stack] = tier_build("disaggregated").stacks
    serving = stack.serving  # type: ignore[attr-defined]
    assets = {serving.vllm_image_asset, serving.router_image_asset}
    vllm, router, *exporters = tier_requirements("disaggregated").images  # no inference gateway: no EPP
    assert None not in assets and vllm.source == router.source == "asset"
    assert exporters == list(exporter_images(efa_exporter=True))


def test_disaggregated_checks_the_exporter_images_its_template_pulls(
    tier_build: Callable[[str], TierBuild],
) -> None:
    """The EFA exporter's python image is in its DaemonSet; kube-state-metrics' image is the chart values'
    registry/repository:tag (the chart joins them so)."""
    templates = tier_build("disaggregated").templates()
    ksm, python = exporter_images(efa_exporter=True)
    assert python.reference in json.dumps(templates)
    assert ksm.reference in _chart_images(templates)


def _chart_images(templates: dict[str, Any]) -> set[str]:
    """registry/repository:tag of every chart whose values name a registry (kube-state-metrics' layout)."""
    return {
        f"{image['registry']}/{image['repository']}:{image['tag']}"
        for template in templates.values()
        for resource in template["Resources"].values()
        if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart"
        and isinstance(resource["Properties"]["Values"], str)
        for image in [json.loads(resource["Properties"]["Values"]).get("image")]
        if image and "registry" in image
    }


def test_agent_sandbox_checks_the_images_its_chart_values_and_sandboxes_use(
    tier_build: Callable[[str], TierBuild],
) -> None:
    kata, controller, sandbox, kube_state_metrics = tier_requirements("agent-sandbox").images
    pinned_by_values = {
        f"{image['repository' if 'repository' in image else 'reference']}:{image['tag']}"
        for template in tier_build("agent-sandbox").templates().values()
        for resource in template["Resources"].values()
        if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart"
        and isinstance(resource["Properties"]["Values"], str)
        for image in [json.loads(resource["Properties"]["Values"]).get("image")]
        if image
    }
    assert {kata.reference, controller.reference} <= pinned_by_values
    assert sandbox.set_by == "agent-sandbox.sandbox_image"
    assert sandbox.reference in json.dumps(tier_build("agent-sandbox").templates())
    assert kube_state_metrics == exporter_images(efa_exporter=False)[0]
    assert kube_state_metrics.reference in _chart_images(tier_build("agent-sandbox").templates())


def test_a_tenant_with_its_own_image_adds_it() -> None:
    tenants = {"a": {"max_sandboxes": 2, "image": "ghcr.io/acme/agent:1.2"}, "b": {"max_sandboxes": 2}}
    images = tier_requirements("agent-sandbox", f"agent-sandbox.tenants={json.dumps(tenants)}").images
    assert images[4:] == (ImageNeed("ghcr.io/acme/agent:1.2", "agent-sandbox.tenants.a.image"),)
