"""Container image references, and whether a registry has a manifest for one (OCI distribution API, anonymous).

``parse_reference`` follows Docker's normalization: a first path component with a dot or a colon (or
``localhost``) is the registry host, anything else is Docker Hub (``vllm/vllm-openai``), where a single name is
an official image under ``library/``.

``head_manifest`` asks ``HEAD /v2/<repository>/manifests/<tag or digest>`` the way a node's container runtime
resolves the image before pulling it. Public registries (Docker Hub, ghcr.io, public.ecr.aws, nvcr.io, quay.io)
answer the anonymous request with ``401`` and a ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``
challenge; the anonymous token from that realm then opens the repository for pulling. HEAD requests do not count
against Docker Hub's pull rate limit. Registries on a loopback host are spoken to over plain HTTP, as Docker does.
"""

from __future__ import annotations

import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message

DOCKER_HUB = "docker.io"
# Docker Hub's registry API is served from this host, not from docker.io.
DOCKER_HUB_API = "registry-1.docker.io"
# Every manifest kind a runtime accepts: multi-platform indexes first (vLLM images are published as lists).
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_REDIRECTS = 5


class ImageReferenceError(ValueError):
    """An image reference that cannot name a manifest."""


@dataclass(frozen=True)
class ImageReference:
    """``registry/repository[:tag][@digest]``, normalized (Docker Hub spelled ``docker.io``)."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def manifest_reference(self) -> str:
        """What the runtime resolves: the digest when pinned by one (a tag next to it is not consulted)."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(text: str) -> ImageReference:
    """``vllm/vllm-openai:v0.10.1`` -> docker.io, vllm/vllm-openai, tag v0.10.1; ImageReferenceError if malformed."""
    name, _, digest = text.partition("@")
    if digest and not _DIGEST.fullmatch(digest):
        raise ImageReferenceError(f"image {text!r}: the digest must be sha256:<64 hex digits>")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, name
    repository, colon, tag = path.rpartition(":")
    if not colon:
        repository, tag = path, ""
    if "/" in tag or not repository or (colon and not tag):
        raise ImageReferenceError(f"image {text!r}: expected [registry/]repository[:tag][@sha256:digest]")
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return ImageReference(registry, repository, tag or None, digest or None)


@dataclass(frozen=True)
class RegistryAnswer:
    """The registry's final HTTP status for the manifest, and the digest it reported (``Docker-Content-Digest``).

    ``status`` is None when the registry could not be reached (``error`` says why).
    """

    status: int | None
    digest: str | None = None
    error: str = ""


def _is_loopback(host: str) -> bool:
    hostname = urllib.parse.urlsplit(f"//{host}").hostname or ""
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def registry_base_url(registry: str) -> str:
    host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
    return f"{'http' if _is_loopback(host) else 'https'}://{host}"


class _KeepRedirects(urllib.request.HTTPRedirectHandler):
    """Hand 3xx answers back: urllib would turn a redirected HEAD into a GET (a counted pull on Docker Hub) and
    carry one host's token to another. ``head_manifest`` follows them itself."""

    def redirect_request(self, *_: object, **__: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_KeepRedirects)


def _request(url: str, method: str, headers: dict[str, str], timeout: float) -> tuple[int, Message, bytes]:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, b""


def _anonymous_token(challenge: str, repository: str, timeout: float) -> str | None:
    """The bearer token a ``WWW-Authenticate: Bearer`` challenge hands to anyone, or None if it has none."""
    scheme, _, params_text = challenge.partition(" ")
    if scheme.lower() != "bearer":
        return None
    params = dict(_CHALLENGE_PARAM.findall(params_text))
    realm = params.get("realm", "")
    if urllib.parse.urlsplit(realm).scheme not in ("http", "https"):
        return None
    query = {"scope": params.get("scope", f"repository:{repository}:pull")}
    if "service" in params:
        query["service"] = params["service"]
    separator = "&" if "?" in realm else "?"
    status, _, body = _request(f"{realm}{separator}{urllib.parse.urlencode(query)}", "GET", {}, timeout)
    if status != 200:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    token = (answer.get("token") or answer.get("access_token")) if isinstance(answer, dict) else None
    return token if isinstance(token, str) and token else None


def _head_with_token(url: str, repository: str, timeout: float) -> tuple[int, Message]:
    """HEAD ``url``; on a bearer challenge, once more with the anonymous token it leads to."""
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    status, answer_headers, _ = _request(url, "HEAD", headers, timeout)
    challenge = answer_headers.get("WWW-Authenticate", "") if status == 401 else ""
    token = _anonymous_token(challenge, repository, timeout) if challenge else None
    if token is not None:
        status, answer_headers, _ = _request(
            url, "HEAD", {**headers, "Authorization": f"Bearer {token}"}, timeout
        )
    return status, answer_headers


def head_manifest(image: ImageReference, *, timeout: float = 10.0) -> RegistryAnswer:
    """Whether ``image``'s registry has its manifest, asked anonymously (token flow where it needs one).

    Redirects (registry.k8s.io sends every request to a regional mirror) are followed as HEAD requests, and each
    host's challenge is answered with that host's token.
    """
    url = f"{registry_base_url(image.registry)}/v2/{image.repository}/manifests/{image.manifest_reference}"
    try:
        for _ in range(_MAX_REDIRECTS + 1):
            status, headers = _head_with_token(url, image.repository, timeout)
            location = headers.get("Location")
            if status not in _REDIRECTS or not location:
                return RegistryAnswer(status, headers.get("Docker-Content-Digest"))
            url = urllib.parse.urljoin(url, location)
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return RegistryAnswer(None, error=f"{type(error).__name__}: {reason}")
    return RegistryAnswer(None, error=f"more than {_MAX_REDIRECTS} redirects")
