"""Test doubles for the ops tooling: boto3 clients behind botocore Stubbers, and raw event-stream bodies."""

from __future__ import annotations

import binascii
from collections.abc import Iterator
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.stub import Stubber

from inference_tiers.config import AccountRequirements
from inference_tiers.ops import cli
from inference_tiers.ops.checks import Clients
from tests.harness import PROJECT_ROOT


def tier_requirements(tier: str, *overrides: str) -> AccountRequirements:
    """What ``preflight --tier tier -c override...`` checks, from the project's cdk.json."""
    return cli.tier_requirements(cli.load_context(PROJECT_ROOT / "cdk.json", overrides, tier), tier)


class StubClients(Clients):
    """Clients whose every boto3 client is wrapped in an active Stubber (no network)."""

    def __init__(self, region: str = "us-east-1", *, unstubbed: tuple[str, ...] = ()) -> None:
        super().__init__(
            boto3.session.Session(
                aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
            )
        )
        self._clients: dict[str, Any] = {}
        self.stubbers: dict[str, Stubber] = {}
        self.unstubbed = unstubbed
        self.assumed: StubClients | None = None
        self.assumed_with: dict[str, Any] | None = None

    def client(self, service: str, region: str | None = None, config: Config | None = None) -> Any:
        """The service's client in this Region (or ``region``): the Stubber of another Region is ``service@region``;
        ``config`` applies to the client's first creation."""
        key = service if region in (None, self.region) else f"{service}@{region}"
        if key not in self._clients:
            client = self.session.client(service, region_name=region or self.region, config=config)
            if service not in self.unstubbed:
                self.stubbers[key] = Stubber(client)
                self.stubbers[key].activate()
            self._clients[key] = client
        return self._clients[key]

    def stub(self, service: str, region: str | None = None) -> Stubber:
        self.client(service, region)
        return self.stubbers[service if region in (None, self.region) else f"{service}@{region}"]

    def with_credentials(self, credentials: dict[str, Any]) -> Clients:
        self.assumed_with = credentials
        assert self.assumed is not None, "the test must set .assumed before the code assumes a role"
        return self.assumed

    def assert_done(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()
        if self.assumed is not None:
            self.assumed.assert_done()


def client_error(
    stubber: Stubber,
    method: str,
    code: str,
    message: str = "test",
    status: int = 400,
    expected_params: dict[str, Any] | None = None,
) -> None:
    stubber.add_client_error(
        method,
        service_error_code=code,
        service_message=message,
        http_status_code=status,
        expected_params=expected_params,
    )


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + bytes([7]) + len(raw_value).to_bytes(2, "big") + raw_value


def event_stream_message(
    event_type: str,
    payload: bytes,
    content_type: str = "application/octet-stream",
    *,
    exception: bool = False,
) -> bytes:
    """One message in the AWS event-stream binary format (prelude, headers, payload, CRC32s); with
    ``exception`` an exception event named ``event_type``, which botocore raises as an EventStreamError."""
    kind = ("exception", ":exception-type") if exception else ("event", ":event-type")
    headers = b"".join(
        _header(k, v)
        for k, v in (
            (":message-type", kind[0]),
            (kind[1], event_type),
            (":content-type", content_type),
        )
    )
    total = 12 + len(headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    message = prelude + binascii.crc32(prelude).to_bytes(4, "big") + headers + payload
    return message + binascii.crc32(message).to_bytes(4, "big")


class _RawBody:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        # Odd-sized chunks so that messages arrive split, as they do over the network.
        for start in range(0, len(self.data), 7):
            yield self.data[start : start + 7]

    def read(self, *_: Any, **__: Any) -> bytes:
        return self.data

    def close(self) -> None:
        pass


RawResponse = tuple[int, dict[str, str], bytes]
"""HTTP status, headers and body bytes."""


def respond_raw(
    client: Any, operation: str, *responses: RawResponse, sent: list[Any] | None = None
) -> list[Any]:
    """Answer the next calls of ``operation`` on ``client`` with ``responses``, in order, as raw HTTP.

    botocore parses them as it would real ones (JSON, errors, event streams). Returns the list the sent
    requests are appended to (``sent`` if given).
    """
    sent = [] if sent is None else sent
    queue = list(responses)

    def handler(request: Any, **_: Any) -> AWSResponse:
        assert queue, f"unexpected extra {operation} call"
        sent.append(request)
        status, headers, body = queue.pop(0)
        return AWSResponse(request.url, status, headers, _RawBody(body))

    client.meta.events.register(
        f"before-send.{client.meta.service_model.service_id.hyphenize()}.{operation}", handler
    )
    return sent
