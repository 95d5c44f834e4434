"""A loopback OCI registry for the image checks: the distribution API's manifest HEAD and the anonymous
bearer-token flow public registries use (401 + ``WWW-Authenticate: Bearer realm=...``, token, retry)."""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

Auth = Literal["anonymous-token", "none", "basic"]


@dataclass
class RegistryState:
    """What the registry holds and how it authenticates; ``requests`` records (method, path, headers)."""

    manifests: dict[tuple[str, str], str] = field(default_factory=dict)
    auth: Auth = "anonymous-token"
    status_override: int | None = None
    redirect_to: str | None = (
        None  # base URL every manifest request is sent on to (307), like registry.k8s.io
    )
    service: str = "loopback-registry"
    announced_service: str | None = None  # what the challenge names; default: service
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


def _handler(state: RegistryState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # keep pytest output clean
            pass

        def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:  # the token endpoint
            state.requests.append(("GET", self.path, dict(self.headers)))
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path != "/token" or query.get("service") != [state.service]:
                self._send(400, {})
                return
            body = json.dumps({"token": state.token, "expires_in": 300}).encode()
            self._send(200, {"Content-Type": "application/json"}, body)

        def do_HEAD(self) -> None:  # the manifest
            state.requests.append(("HEAD", self.path, dict(self.headers)))
            repository, _, reference = self.path.removeprefix("/v2/").partition("/manifests/")
            if state.redirect_to is not None:
                self._send(307, {"Location": f"{state.redirect_to}{self.path}"})
                return
            if state.auth == "basic":
                self._send(401, {"WWW-Authenticate": 'Basic realm="private"'})
                return
            if (
                state.auth == "anonymous-token"
                and self.headers.get("Authorization") != f"Bearer {state.token}"
            ):
                realm = f"http://{state.host}/token"
                challenge = (
                    f'Bearer realm="{realm}",service="{state.announced_service or state.service}",'
                    f'scope="repository:{repository}:pull"'
                )
                self._send(401, {"WWW-Authenticate": challenge})
                return
            if state.status_override is not None:
                self._send(state.status_override, {})
                return
            digest = state.manifests.get((repository, reference))
            if digest is None:
                self._send(404, {})
                return
            self._send(
                200,
                {
                    "Docker-Content-Digest": digest,
                    "Content-Type": "application/vnd.oci.image.index.v1+json",
                },
            )

    return Handler


@contextmanager
def loopback_registry(state: RegistryState) -> Iterator[RegistryState]:
    """Serve ``state`` on 127.0.0.1 (a free port) for the duration of the block, then shut the server down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
