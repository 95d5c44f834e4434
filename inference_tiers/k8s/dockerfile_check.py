"""Check the build file of a vLLM image for the disaggregated tier's EFA traps, before anyone builds it.

1. Mooncake's default wheels (``mooncake-transfer-engine``, ``-cuda13``) are built without EFA: asked for the
   ``efa`` protocol they fall back to ``rdma``, which fails on EFA with EOPNOTSUPP (Mooncake#2070). The image
   must remove any default wheel the base image brought, then install the pinned EFA build
   ``mooncake-transfer-engine-efa-cuda13==<MOONCAKE_VERSION>``, and install no other Mooncake wheel.
2. Two libfabric copies in one process leave NCCL or Mooncake without an EFA provider: the final
   ``LD_LIBRARY_PATH`` must start with the EFA installer's ``/opt/amazon/efa/lib``.
3. The EFA installer is the pinned ``EFA_INSTALLER_VERSION`` (``ARG EFA_INSTALLER_VERSION``), whose libfabric is
   new enough for the host's EFA driver.

It reads the Dockerfile the way the builder does (line continuations, ``ARG`` and ``ENV`` values, both ``ENV``
forms, stages built ``FROM`` an earlier stage) and the ``pip``/``python -m pip`` commands of every ``RUN``.
Usage::

    python -m inference_tiers.k8s.dockerfile_check [DOCKERFILE ...]   # default: the packaged vLLM Dockerfile
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inference_tiers import ASSETS_DIR

VLLM_DOCKERFILE = ASSETS_DIR / "disaggregated" / "vllm" / "Dockerfile"
MOONCAKE_EFA_WHEEL = "mooncake-transfer-engine-efa-cuda13"
# Pinned: Mooncake's EFA transport changed every week through mid-2026 (docs/disaggregated.md, "Images").
MOONCAKE_VERSION = "0.3.13.post1"
DEFAULT_MOONCAKE_WHEELS = ("mooncake-transfer-engine", "mooncake-transfer-engine-cuda13")
EFA_LIBRARY_DIR = "/opt/amazon/efa/lib"
# Pinned: the installer's libfabric must be at least as new as the host's EFA driver on the AL2023 NVIDIA AMI
# (an older one fails fi_ep_bind with "Function not implemented"); 1.50.0 is the installer vLLM pins for its
# Mooncake EFA image (vllm#55783).
EFA_INSTALLER_VERSION = "1.50.0"

_VARIABLE = re.compile(r"\$\{(\w+)(?:(:?[-+])([^}]*))?\}|\$(\w+)")
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?(.*)")
_COMMAND_SEPARATORS = {"&&", "||", ";", "|", "&"}
# pip options that take a value (the value is not a package name).
_PIP_VALUE_OPTIONS = {
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
    "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--platform", "--python-version",
    "--implementation", "--abi", "--progress-bar", "--cache-dir", "--log", "--timeout", "--retries",
    "--trusted-host", "--proxy", "--upgrade-strategy", "-e", "--editable", "--only-binary", "--no-binary",
}  # fmt: skip


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    arguments: str


@dataclass(frozen=True)
class PipCommand:
    line: int
    action: str
    """``install`` or ``uninstall``."""
    requirements: tuple[tuple[str, str], ...]
    """(normalized package name, version specifier such as ``==0.3.13.post1`` or ``""``)."""


@dataclass
class _Stage:
    variables: dict[str, str] = field(default_factory=dict)
    env: dict[str, tuple[int, str]] = field(default_factory=dict)
    pip: list[PipCommand] = field(default_factory=list)

    def copy(self) -> _Stage:
        return _Stage(dict(self.variables), dict(self.env), list(self.pip))


def instructions(text: str) -> Iterator[Instruction]:
    """The instructions of a Dockerfile: comments dropped, ``\\`` continuation lines joined."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and (not stripped or stripped.startswith("#")):
            continue  # blank and comment lines inside a continued instruction are skipped by the builder
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].rstrip())
            continue
        pending.append(stripped)
        keyword, _, arguments = " ".join(pending).partition(" ")
        yield Instruction(start, keyword.upper(), arguments.strip())
        pending = []
    if pending:
        keyword, _, arguments = " ".join(pending).partition(" ")
        yield Instruction(start, keyword.upper(), arguments.strip())


def expand(value: str, variables: dict[str, str]) -> str:
    """``$NAME``, ``${NAME}``, ``${NAME:-default}`` and ``${NAME:+alternative}`` as the builder expands them
    (a variable the file does not set, such as one inherited from the base image, is empty)."""

    def replace(match: re.Match[str]) -> str:
        name, operator, word, bare = match.groups()
        if bare:
            return variables.get(bare, "")
        current = variables.get(name)
        present = bool(current) if operator and operator.startswith(":") else current is not None
        if operator in (":-", "-"):
            return current if present and current is not None else expand(word, variables)
        if operator in (":+", "+"):
            return expand(word, variables) if present else ""
        return current or ""

    return _VARIABLE.sub(replace, value)


def _assignments(arguments: str) -> list[tuple[str, str]]:
    """``KEY=VALUE ...`` pairs of ``ENV``/``ARG``, or the legacy ``ENV KEY value`` form."""
    words = shlex.split(arguments, posix=True)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [(w.partition("=")[0], w.partition("=")[2]) for w in words]


def _commands(arguments: str) -> Iterator[list[str]]:
    """The simple commands of a ``RUN`` (shell form split at ``&&``, ``||``, ``;``, ``|``; or the exec form)."""
    if arguments.startswith("["):
        try:
            yield [str(word) for word in json.loads(arguments)]
            return
        except ValueError:
            pass
    lexer = shlex.shlex(arguments, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    command: list[str] = []
    for token in lexer:
        if token in _COMMAND_SEPARATORS:
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(line: int, words: list[str]) -> PipCommand | None:
    """The ``pip install|uninstall`` of one command, if it is one (``pip``, ``pip3``, ``python3 -m pip``)."""
    if words and Path(words[0]).name in ("pip", "pip3"):
        rest = words[1:]
    elif len(words) > 2 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "pip"]:
        rest = words[3:]
    else:
        return None
    while rest and rest[0].startswith("-"):  # pip's global options before the subcommand
        rest = rest[1:]
    if not rest or rest[0] not in ("install", "uninstall"):
        return None
    requirements = []
    skip = False
    for word in rest[1:]:
        if skip:
            skip = False
        elif word in _PIP_VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            match = _REQUIREMENT.fullmatch(word)
            if match:
                requirements.append((_normalize(match.group(1)), match.group(3).strip()))
    return PipCommand(line, rest[0], tuple(requirements))


def _final_stage(text: str) -> _Stage:
    """Replay the Dockerfile: variables, ENV values and pip commands of the stage the build ends with."""
    global_args: dict[str, str] = {}
    stages: dict[str, _Stage] = {}
    stage: _Stage | None = None
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            words = expand(instruction.arguments, global_args).split()
            image = next((w for w in words if not w.startswith("--")), "")
            stage = stages[image].copy() if image in stages else _Stage()
            if len(words) >= 3 and words[-2].upper() == "AS":
                stages[words[-1]] = stage
            continue
        if stage is None:  # ARG before the first FROM: only visible to FROM lines (and re-declared ARGs)
            if instruction.keyword == "ARG":
                global_args.update(
                    (k, expand(v, global_args)) for k, v in _assignments(instruction.arguments)
                )
            continue
        if instruction.keyword == "ARG":
            for key, value in _assignments(instruction.arguments):
                stage.variables[key] = expand(value, stage.variables) if value else global_args.get(key, "")
        elif instruction.keyword == "ENV":
            for key, value in _assignments(instruction.arguments):
                expanded = expand(value, stage.variables)
                stage.variables[key] = expanded
                stage.env[key] = (instruction.line, expanded)
        elif instruction.keyword == "RUN":
            for words in _commands(instruction.arguments):
                command = _pip(instruction.line, [expand(w, stage.variables) for w in words])
                if command is not None:
                    stage.pip.append(command)
    return stage or _Stage()


def check(text: str, *, version: str = MOONCAKE_VERSION) -> list[str]:
    """What is wrong with a vLLM image's Dockerfile ``text`` (empty: both traps avoided)."""
    stage = _final_stage(text)
    problems = []
    efa_installs = [
        (index, c, spec)
        for index, c in enumerate(stage.pip)
        if c.action == "install"
        for name, spec in c.requirements
        if name == MOONCAKE_EFA_WHEEL
    ]
    if not efa_installs:
        problems.append(f"no pip install of {MOONCAKE_EFA_WHEEL}=={version} (Mooncake's EFA build)")
    for _, command, spec in efa_installs:
        if spec != f"=={version}":
            problems.append(f"line {command.line}: {MOONCAKE_EFA_WHEEL}{spec} is not pinned to =={version}")
    for command in stage.pip:
        for name, spec in command.requirements:
            if (
                command.action == "install"
                and name.startswith("mooncake-transfer-engine")
                and (name != MOONCAKE_EFA_WHEEL)
            ):
                problems.append(
                    f"line {command.line}: pip installs {name}{spec}, which is not {MOONCAKE_EFA_WHEEL} "
                    "(the default wheels are built without EFA and fall back to rdma)"
                )
    if efa_installs:
        first_install = efa_installs[0][0]
        removed = {
            name for c in stage.pip[:first_install] if c.action == "uninstall" for name, _ in c.requirements
        }
        missing = [w for w in DEFAULT_MOONCAKE_WHEELS if w not in removed]
        if missing:
            problems.append(
                f"line {efa_installs[0][1].line}: no pip uninstall of {', '.join(missing)} before "
                f"{MOONCAKE_EFA_WHEEL} is installed (a default wheel from the base image would shadow it)"
            )
    installer = stage.variables.get("EFA_INSTALLER_VERSION")
    if installer != EFA_INSTALLER_VERSION:
        problems.append(
            f"ARG EFA_INSTALLER_VERSION is {installer!r}; it must be {EFA_INSTALLER_VERSION!r} (an older "
            "installer's libfabric can be older than the host's EFA driver)"
        )
    if "LD_LIBRARY_PATH" not in stage.env:
        problems.append(f"no ENV LD_LIBRARY_PATH starting with {EFA_LIBRARY_DIR} (one libfabric only)")
    else:
        line, value = stage.env["LD_LIBRARY_PATH"]
        if value.split(":")[0] != EFA_LIBRARY_DIR:
            problems.append(
                f"line {line}: LD_LIBRARY_PATH is {value!r}; it must start with {EFA_LIBRARY_DIR} "
                "(another libfabric first leaves NCCL or Mooncake without the EFA provider)"
            )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)] or [VLLM_DOCKERFILE]
    failed = False
    for path in paths:
        problems = check(path.read_text())
        failed = failed or bool(problems)
        print(f"{path}: " + ("OK" if not problems else f"{len(problems)} problem(s)"))
        for problem in problems:
            print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
