"""Result types shared by ``preflight`` and ``smoke``, and the boto3 client source they both use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from botocore.config import Config
from botocore.exceptions import ClientError

Status = Literal["pass", "warn", "fail"]

# Standard retries with a bounded total so a throttled call cannot hang a preflight or smoke run.
_CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=10, read_timeout=120)


@dataclass(frozen=True)
class CheckResult:
    """One preflight check or smoke step: what was checked, the outcome, and how to fix a warn/fail."""

    check: str
    status: Status
    detail: str
    fix: str = ""
    ttft_ms: float | None = None
    total_ms: float | None = None


class Clients:
    """boto3 clients for one Region; tests replace ``client`` and ``with_credentials`` with stubbed ones."""

    def __init__(self, session: Any) -> None:
        self.session = session

    @property
    def region(self) -> str:
        return str(self.session.region_name)

    def client(self, service: str, region: str | None = None, config: Config | None = None) -> Any:
        """A client of ``service`` in this Region, or in ``region`` (an ECR image in another Region); ``config``
        overrides the default settings (bench's clients retry nothing)."""
        merged = _CLIENT_CONFIG.merge(config) if config else _CLIENT_CONFIG
        return self.session.client(service, region_name=region or self.region, config=merged)

    def with_credentials(self, credentials: dict[str, Any]) -> Clients:
        import boto3

        return Clients(
            boto3.session.Session(
                aws_access_key_id=credentials["AccessKeyId"],
                aws_secret_access_key=credentials["SecretAccessKey"],
                aws_session_token=credentials["SessionToken"],
                region_name=self.region,
            )
        )


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def is_access_denied(error: ClientError) -> bool:
    return error_code(error) in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}


def could_not_check(check: str, error: ClientError, permission: str) -> CheckResult:
    """An AWS error inside a check: access denied is a warning (unknown), anything else a failure."""
    code = error_code(error)
    detail = f"{code}: {error_message(error)}"
    if is_access_denied(error):
        return CheckResult(
            check, "warn", f"could not check ({detail})", f"allow {permission} for this identity"
        )
    return CheckResult(check, "fail", detail, f"retry; if it persists, check {permission} in this Region")
