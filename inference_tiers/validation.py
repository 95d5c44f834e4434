"""Argument checks for every public construct and props class: one small helper, used by all.

A construct imported into someone else's app must be as strict as a context key: a wrong argument is an
:class:`ArgumentError` (a ``ValueError``) naming the construct, the parameter, the value received and what is
accepted, raised before anything reaches jsii. Deploy-time values (CDK tokens) are accepted wherever a check
says ``allow_token=True`` and are then passed through unparsed.

Usage, at the top of a construct's ``__init__`` or a props dataclass's ``__post_init__``::

    args = Args("SageMakerLlmEndpoint")
    tp = args.integer("tensor_parallel_degree", tensor_parallel_degree, minimum=1, maximum=8)
    grantee = args.implements("grantee", grantee, iam.IGrantable)
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, TypeVar

from aws_cdk import Duration, Token
from jsii._reference_map import InterfaceDynamicProxy

T = TypeVar("T")
E = TypeVar("E", bound=Enum)
# An item check: (parameter name shown in the error, value) -> the checked value.
ItemCheck = Callable[[str, Any], T]

_MAX_SHOWN = 160


class ArgumentError(ValueError):
    """An argument a construct cannot use: names the construct, the parameter, the value and what is accepted."""

    def __init__(self, owner: str, param: str, value: Any, accepted: str) -> None:
        super().__init__(f"{owner}: parameter '{param}' got {describe(value)}; expected {accepted}")
        self.owner = owner
        self.param = param
        self.value = value
        self.accepted = accepted


_TOKEN_MARKER = "Token["


def is_token(value: Any) -> bool:
    """True for a value CDK resolves only at synth or deploy time (a token string, number or list)."""
    if isinstance(value, Duration):
        return bool(value.is_unresolved())
    # aws-cdk-lib answers False for a string without ``Token[`` before anything else (2.275.0,
    # core/lib/private/encoding.js, ``unresolved``), so such a string needs no round trip to the jsii kernel.
    if isinstance(value, str):
        return _TOKEN_MARKER in value and bool(Token.is_unresolved(value))
    # Number tokens are finite floats; ints and bools never are (and jsii cannot even send NaN or infinity).
    if isinstance(value, float) and math.isfinite(value):
        return bool(Token.is_unresolved(value))
    # A list token is a list of (encoded) strings; a list of anything else is never one, and jsii could not
    # even send it to Token.is_unresolved (a list of tuples raises).
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return any(_TOKEN_MARKER in item for item in value) and bool(Token.is_unresolved(value))
    return False


def describe(value: Any) -> str:
    """How an error message shows ``value``: its repr (shortened), its type for objects, tokens by name."""
    if is_token(value):
        return "a deploy-time token"
    if isinstance(value, Duration):
        return f"Duration {value.to_human_string()}"
    if value is None or isinstance(value, str | int | float | bool | Enum | list | tuple | dict | set):
        shown = repr(value)
        return shown if len(shown) <= _MAX_SHOWN else shown[: _MAX_SHOWN - 3] + "..."
    return f"a {_type_name(value)}"


def _type_name(value: Any) -> str:
    """The class name, or for an object jsii returns typed as interfaces (an imported resource) those names."""
    if isinstance(value, InterfaceDynamicProxy):
        delegates = vars(value).get("_delegates") or []
        return "+".join(type(d).__name__.strip("_").removesuffix("Proxy") for d in delegates) or "jsii object"
    return type(value).__name__


def interface_members(interface: type) -> frozenset[str]:
    """The public members a jsii interface (a typing Protocol) declares, its base interfaces included."""
    names: set[str] = set()
    for klass in interface.__mro__:
        if klass in (object, typing.Protocol, typing.Generic) or not getattr(klass, "_is_protocol", False):
            continue
        names.update(name for name in vars(klass) if not name.startswith("_"))
    return frozenset(names)


def declares(value: Any, interface: type) -> bool:
    """Whether the jsii object ``value`` says it implements ``interface`` (or an interface extending it).

    jsii records this on the class (``@jsii.implements``, which ``aws_eks_v2.Cluster`` uses) or, for an object
    jsii returns typed as an interface (``Cluster.from_cluster_attributes``), on the proxy classes it builds
    for it. Checking declarations, not members, matters: jsii's generated ``ICluster`` lists a member that
    ``Cluster`` does not have, and reading a member of an imported resource can raise.
    """
    jsii_type = vars(interface).get("__jsii_type__")
    delegates = vars(value).get("_delegates") if isinstance(value, InterfaceDynamicProxy) else None
    for candidate in delegates if isinstance(delegates, list) else [value]:
        for klass in type(candidate).__mro__:
            declared = vars(klass).get("__jsii_ifaces__", ())
            if any(interface in iface.__mro__ for iface in declared):
                return True
            if jsii_type is not None and vars(klass).get("__jsii_type__") == jsii_type:
                return True
    return False


def _has_members(value: Any, members: frozenset[str]) -> bool:
    """Whether ``value`` has every one of ``members`` (a member whose getter raises still counts as present)."""

    def has(name: str) -> bool:
        try:
            return hasattr(value, name)
        except Exception:  # a jsii getter that refuses to answer (an imported resource's unknown attribute)
            return True

    return bool(members) and all(has(m) for m in members)


class Args:
    """The checks of one construct or props class; ``owner`` is the name every message starts with."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def error(self, param: str, value: Any, accepted: str) -> ArgumentError:
        """An :class:`ArgumentError` for a check of the caller's own (consistency between parameters)."""
        return ArgumentError(self.owner, param, value, accepted)

    # -- scalars ------------------------------------------------------------------------------------------

    def integer(
        self,
        param: str,
        value: Any,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        allow_token: bool = False,
    ) -> int:
        """An ``int`` (not a bool, float or numeric string) in [minimum, maximum]."""
        accepted = _range_text("an integer", minimum, maximum)
        if allow_token and is_token(value):
            return typing.cast(int, value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(param, value, accepted + _token_hint(allow_token))
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise self.error(param, value, accepted)
        return value

    def number(
        self,
        param: str,
        value: Any,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: bool = False,
        allow_token: bool = False,
    ) -> float:
        """A finite ``int`` or ``float`` (not a bool or string) in its range; ``exclusive_minimum`` for > minimum."""
        low = "greater than" if exclusive_minimum else "at least"
        accepted = _range_text("a number", minimum, maximum, low_word=low)
        if allow_token and is_token(value):
            return typing.cast(float, value)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.error(param, value, accepted + _token_hint(allow_token))
        too_low = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
        if too_low or (maximum is not None and value > maximum):
            raise self.error(param, value, accepted)
        return value

    def boolean(self, param: str, value: Any) -> bool:
        """``True`` or ``False`` (not a truthy string or number)."""
        if not isinstance(value, bool):
            raise self.error(param, value, "True or False")
        return value

    def text(
        self,
        param: str,
        value: Any,
        *,
        pattern: str | None = None,
        min_length: int = 1,
        max_length: int | None = None,
        description: str | None = None,
        allow_token: bool = True,
    ) -> str:
        """A ``str`` of ``min_length`` to ``max_length`` characters matching ``pattern`` in full.

        A token string is accepted unparsed when ``allow_token`` (the default: most strings may be deploy-time
        values such as an ARN from another stack or a ``CfnParameter``).
        """
        accepted = description or (
            f"a string matching {pattern}" if pattern else "a non-empty string" if min_length else "a string"
        )
        if max_length is not None:
            accepted += f" of at most {max_length} characters"
        if isinstance(value, str) and is_token(value):
            if allow_token:
                return value
            raise self.error(param, value, accepted + " known at synth time (not a deploy-time token)")
        if not isinstance(value, str):
            raise self.error(param, value, accepted)
        if len(value) < min_length or (max_length is not None and len(value) > max_length):
            raise self.error(param, value, accepted)
        if pattern is not None and not re.fullmatch(pattern, value):
            raise self.error(param, value, accepted)
        return value

    def choice(self, param: str, value: Any, enum_type: type[E]) -> E:
        """A member of ``enum_type``, given as the member or as its value (``"BLOCK"`` for ``Action.BLOCK``)."""
        if isinstance(value, enum_type):
            return value
        for member in enum_type:
            if isinstance(value, str) and value == member.value:
                return member
        options = ", ".join(f"{enum_type.__name__}.{m.name}" for m in enum_type)
        raise self.error(param, value, f"one of {options}")

    def one_of(self, param: str, value: Any, options: Iterable[T]) -> T:
        """One of the literal ``options`` (strings or numbers, compared with ==, bools never match numbers)."""
        allowed = list(options)
        for option in allowed:
            if type(value) is type(option) and value == option:
                return option
        raise self.error(param, value, "one of " + ", ".join(repr(o) for o in allowed))

    def duration(
        self,
        param: str,
        value: Any,
        *,
        minimum: Duration | None = None,
        maximum: Duration | None = None,
        whole_seconds: bool = True,
    ) -> Duration:
        """An ``aws_cdk.Duration`` in [minimum, maximum]; a token duration is passed through unchecked."""
        accepted = "a Duration"
        if minimum is not None and maximum is not None:
            accepted += f" from {minimum.to_human_string()} to {maximum.to_human_string()}"
        elif minimum is not None:
            accepted += f" of at least {minimum.to_human_string()}"
        elif maximum is not None:
            accepted += f" of at most {maximum.to_human_string()}"
        if not isinstance(value, Duration):
            raise self.error(param, value, accepted + " (aws_cdk.Duration.seconds(...), .minutes(...))")
        if value.is_unresolved():
            return value
        millis = value.to_milliseconds()
        if (minimum is not None and millis < minimum.to_milliseconds()) or (
            maximum is not None and millis > maximum.to_milliseconds()
        ):
            raise self.error(param, value, accepted)
        if whole_seconds and millis % 1000:
            raise self.error(param, value, accepted + " in whole seconds")
        return value

    def seconds(
        self,
        param: str,
        value: Any,
        *,
        minimum: Duration | None = None,
        maximum: Duration | None = None,
    ) -> float:
        """A :meth:`duration` in whole seconds, as a CloudFormation property takes it.

        A deploy-time duration is returned as its (unparsed) number token when it was made with
        ``Duration.seconds(token)``; a token in another unit cannot be converted, so it is refused.
        """
        checked = self.duration(param, value, minimum=minimum, maximum=maximum)
        if not checked.is_unresolved():
            return int(checked.to_seconds())
        try:
            return float(checked.to_seconds())
        except RuntimeError as error:  # jsii: "Duration must be specified as 'Duration.seconds()' here"
            raise self.error(
                param, value, "a deploy-time Duration made with Duration.seconds(token)"
            ) from error

    # -- objects ------------------------------------------------------------------------------------------

    def instance(self, param: str, value: Any, kind: type[T], description: str | None = None) -> T:
        """An instance of the Python class ``kind`` (a props dataclass, an enum, ``Duration``)."""
        if not isinstance(value, kind):
            raise self.error(param, value, description or f"a {kind.__name__}")
        return value

    def implements(self, param: str, value: T, interface: type, description: str | None = None) -> T:
        """An object that implements the jsii interface ``interface`` (``iam.IGrantable``, ``eks.ICluster``...).

        Accepted: a jsii object whose class (or, for an imported resource, one of its proxies) declares the
        interface, or any other object with every member the interface declares (a Python class that only
        duck-types it). A string (an ARN where a construct is expected) never passes. ``interface`` is a plain
        ``type`` (mypy refuses a Protocol where ``type[T]`` is expected); the value keeps its declared type.
        """
        if isinstance(value, str | bytes | int | float) or not (
            declares(value, interface) or _has_members(value, interface_members(interface))
        ):
            raise self.error(
                param, value, description or f"an {interface.__name__} (a construct, not a string)"
            )
        return value

    # -- collections --------------------------------------------------------------------------------------

    def sequence(
        self,
        param: str,
        value: Any,
        item: ItemCheck[T] | None = None,
        *,
        min_items: int = 0,
        max_items: int | None = None,
        unique: bool = False,
    ) -> tuple[T, ...]:
        """A list or tuple (never a string, whose characters would become items) of checked items.

        ``item(name, value)`` checks each one, with ``name`` = ``param[index]``; its errors should come from
        this same ``Args`` (for example ``lambda name, v: args.text(name, v)``).
        """
        accepted = _count_text(min_items, max_items)
        if not isinstance(value, list | tuple):
            hint = " (a string is not a list: wrap one value in a list)" if isinstance(value, str) else ""
            raise self.error(param, value, accepted + hint)
        if len(value) < min_items or (max_items is not None and len(value) > max_items):
            raise self.error(param, value, accepted)
        checked = tuple(item(f"{param}[{index}]", v) if item else v for index, v in enumerate(value))
        if unique:
            seen: list[Any] = []
            for index, v in enumerate(checked):
                if v in seen:
                    raise self.error(f"{param}[{index}]", v, "each item at most once (this one repeats)")
                seen.append(v)
        return checked

    def mapping(
        self,
        param: str,
        value: Any,
        value_check: ItemCheck[T] | None = None,
        *,
        key_pattern: str | None = None,
        max_items: int | None = None,
    ) -> dict[str, T]:
        """A mapping of string keys (matching ``key_pattern``) to checked values."""
        accepted = "a mapping of strings" + (f" matching {key_pattern}" if key_pattern else "") + " to values"
        if max_items is not None:
            accepted += f", at most {max_items} entries"
        if not isinstance(value, Mapping) or (max_items is not None and len(value) > max_items):
            raise self.error(param, value, accepted)
        checked: dict[str, T] = {}
        for key, v in value.items():
            if not isinstance(key, str) or (key_pattern is not None and not re.fullmatch(key_pattern, key)):
                raise self.error(f"{param} key", key, accepted)
            checked[key] = value_check(f"{param}[{key!r}]", v) if value_check else v
        return checked


def _range_text(
    kind: str, minimum: float | None, maximum: float | None, *, low_word: str = "at least"
) -> str:
    if minimum is not None and maximum is not None and low_word == "at least":
        return f"{kind} from {_shown(minimum)} to {_shown(maximum)}"
    parts = [f"{low_word} {_shown(minimum)}"] if minimum is not None else []
    if maximum is not None:
        parts.append(f"at most {_shown(maximum)}")
    return f"{kind} " + " and ".join(parts) if parts else kind


def _shown(bound: float) -> str:
    """A bound as written: integers in full (``:g`` would round 16777216 to 1.67772e+07), floats short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _count_text(min_items: int, max_items: int | None) -> str:
    if max_items is None:
        return f"a list of at least {min_items} items" if min_items else "a list"
    return f"a list of {min_items} to {max_items} items"


def _token_hint(allow_token: bool) -> str:
    return " (or a deploy-time token)" if allow_token else ""
