"""What every construct misuse suite shares: one value of each wrong kind, and the rule a swept parameter obeys."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest

from inference_tiers.validation import ArgumentError

JUNK: list[Any] = [
    None,
    "",
    "x",
    0,
    -1,
    1.5,
    True,
    [],
    ["x"],
    {},
    {"k": 1},
    object(),
    cdk.Duration.minutes(1),
]
# Parametrize ids that are the same in every pytest-xdist worker (repr() of object() or a jsii object holds an
# address, and workers that collect different ids refuse to run).
JUNK_IDS = [f"{index}-{type(junk).__name__}" for index, junk in enumerate(JUNK)]


def assert_refused(build: Callable[[], Any], owner: str, param: str, match: str) -> None:
    """``build()`` raises an ArgumentError naming ``owner`` and ``param``, whose message matches ``match``."""
    with pytest.raises(ArgumentError) as raised:
        build()
    error = raised.value
    assert (error.owner, error.param) == (owner, param), str(error)
    assert str(error).startswith(f"{owner}: parameter '{param}' got ")
    assert re.search(match, str(error)), str(error)


def assert_junk_refused_by_name_or_accepted(
    build: Callable[..., Any], owner: str, param: str, *, also_named: tuple[str, ...] = ()
) -> None:
    """``build(param=junk)`` for every junk value either builds or raises an ArgumentError naming ``owner`` and
    ``param`` (or one of ``also_named``, for a field checked inside a nested props object): never an
    AttributeError, TypeError, ZeroDivisionError or a jsii error."""
    for junk in JUNK:
        try:
            build(**{param: junk})
        except ArgumentError as error:
            assert error.owner == owner and error.param.startswith((param, *also_named)), str(error)
