"""Run the real LiteLLM proxy (from the tool venv) and a real PostgreSQL on loopback, or say what is missing.

``tools/gateway/setup.sh`` installs both: the proxy with ``pip install --require-hashes`` into
``tools/gateway/.venv`` (never into the package's environment), PostgreSQL from Debian's ``postgresql``
package. A missing tool fails the test with the command that installs it; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inference_tiers.litellm.config import LITELLM_VERSION, proxy_command, proxy_environment
from tests.loopback import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("INFERENCE_TIERS_LITELLM_VENV", ROOT / "tools" / "gateway" / ".venv"))
SETUP = "bash tools/gateway/setup.sh"
MASTER_SECRET = "test-master-key-0123456789"  # the container prefixes sk- (proxy_command)
MASTER_KEY = "sk-" + MASTER_SECRET


def missing(what: str) -> Any:
    """Fail (not skip) with what to install."""
    return pytest.fail(f"{what} is missing: run `{SETUP}` (what .ci/run does) and rerun", pytrace=False)


def litellm_bin() -> Path:
    """The tool venv's bin folder, holding exactly the LiteLLM release the image pins."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "litellm").exists() or not python.exists():
        missing(f"the LiteLLM tool venv ({VENV})")
    installed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if installed != LITELLM_VERSION:
        missing(f"litellm {LITELLM_VERSION} in {VENV} (found {installed or 'none'})")
    return VENV / "bin"


def migrations_dir() -> Path:
    """LiteLLM's own migrations, from the tool venv's litellm-proxy-extras."""
    found = sorted(VENV.glob("lib/python3*/site-packages/litellm_proxy_extras/migrations"))
    if not found:
        missing(f"litellm-proxy-extras in {VENV}")
    return found[0]


def postgres_bin() -> Path:
    """The folder with initdb, pg_ctl and psql (Debian installs them under /usr/lib/postgresql/<major>/bin)."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.insert(0, Path(on_path).resolve().parent)
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "psql")):
            return folder
    return missing("PostgreSQL (Debian package postgresql: initdb, pg_ctl, psql)")


def http(
    method: str, url: str, *, key: str | None = None, body: Any = None, timeout: float = 60
) -> tuple[int, Any]:
    """One request; returns (status, decoded JSON or text). The body goes out in one write (bytes)."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        raw, status = error.read(), error.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


@dataclass
class RunningProxy:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def run_proxy(
    config_text: str,
    folder: Path,
    *,
    extra_env: Mapping[str, str] = {},
    request_logging: bool = False,
    **command: Any,
) -> Iterator[RunningProxy]:
    """Start the proxy exactly as the container does (same shell command, with ``command``'s other
    ``proxy_command`` options, same environment, with ``request_logging`` as the construct's) on a free port,
    wait until it answers /health/liveliness, stop it (and its workers) afterwards."""
    bin_dir = litellm_bin()
    port = free_port()
    command = {"workers": 1, **command}
    command_line = proxy_command(port=port, config_path=str(folder / "litellm-config.yaml"), **command)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(folder),
        "TMPDIR": str(folder),
        **proxy_environment(config_text, request_logging=request_logging),
        "LITELLM_MASTER_KEY": MASTER_SECRET,
        "LITELLM_SALT_KEY": "test-salt-key",
        # The boto3 chain of an ECS task role, with dummy credentials: the stubs do not check signatures.
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example-secret",
        **extra_env,
    }
    log = folder / "proxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command_line],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = RunningProxy(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail(f"the proxy exited with {process.returncode}:\n{proxy.output()}", pytrace=False)
            with contextlib.suppress(OSError):
                if http("GET", f"{proxy.url}/health/liveliness", timeout=2)[0] == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"the proxy did not answer within 180 s:\n{proxy.output()}", pytrace=False)
            time.sleep(0.5)
        yield proxy
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class Postgres:
    bin: Path
    port: int
    superuser: str

    def psql(self, *args: str, user: str | None = None, database: str = "postgres", stdin: str = "") -> str:
        result = subprocess.run(
            [
                str(self.bin / "psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                user or self.superuser,
                "-d",
                database,
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(
                f"psql {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
            )
        return result.stdout


def _server_user(folder: Path) -> dict[str, Any]:
    """initdb and postgres refuse to run as root: as root, run them as Debian's ``postgres`` user, and let it
    through the (0700) test folders above ``folder``."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        return missing("the postgres system user (Debian package postgresql)")
    # Up to the first folder others may already pass through (/tmp, or the CI's own mktemp -d folder once opened).
    for parent in [folder, *folder.parents]:
        mode = parent.stat().st_mode
        if mode & 0o001:
            break
        parent.chmod(mode | 0o711)
    os.chown(folder, account.pw_uid, account.pw_gid)
    return {"user": account.pw_uid, "group": account.pw_gid}


@contextlib.contextmanager
def run_postgres(folder: Path) -> Iterator[Postgres]:
    """A throwaway cluster (initdb + pg_ctl) on a free loopback port; trust auth, since the tests check
    privileges, not passwords."""
    bin_dir = postgres_bin()
    as_server = _server_user(folder)
    data = folder / "data"
    superuser = "bootstrap"
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", superuser, "-A", "trust", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
        **as_server,
    )
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={folder} -c fsync=off"
    subprocess.run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(folder / "pg.log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
        **as_server,
    )
    try:
        yield Postgres(bin_dir, port, superuser)
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            check=False,
            **as_server,
        )
