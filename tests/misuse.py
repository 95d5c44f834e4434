"""What every construct misuse suite shares: one value of each wrong kind, and the rule a swept parameter obeys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk

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
