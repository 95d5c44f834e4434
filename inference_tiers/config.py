"""Typed, validated configuration parsed from CDK context: the only place that reads context.

Every setting is a context key. Their defaults ship in the package (``inference_tiers/defaults.json``, read by
:func:`tier_defaults`), so any app and the ``inference-tiers`` command have them; an app's ``cdk.json`` context
and ``-c key=value`` override them. ``-c`` values always arrive as strings, while JSON keeps its type, so every
parser accepts both.

Keys are ``tier`` plus ``<tier>.<setting>`` (for example ``sagemaker.instance_type``). Each tier declares its
settings as a frozen dataclass whose fields carry a parser in their metadata (:func:`setting`); that dataclass
is the typed configuration its stack receives. Anything wrong raises :class:`ConfigError` (a ``ValueError``)
naming the key, the value received and what is accepted, before any construct is created.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
Parser = Callable[[str, Any], Any]

TIER_KEY = "tier"
# Package data beside this module: the default of every tier setting (one source for app.py, the tests and
# ``inference-tiers preflight``, installed or not).
DEFAULTS_FILE = "defaults.json"
ALL_TIERS = "all"
# The tiers this project defines, in the order they are built (and the order a user grows through them).
TIER_ORDER = (
    "bedrock",
    "sagemaker",
    "hyperpod",
    "disaggregated",
    "gateway",
    "agent-sandbox",
    "observability",
    "platform",
)

# Context the CDK toolkit and aws-cdk-lib own: feature flags ("@aws-cdk/..."), toolkit keys ("aws:cdk:..."),
# lookup caches ("availability-zones:account=...") and a few bare keys the CLI writes into cdk.json.
_CDK_OWNED_BARE_KEYS = frozenset({"acknowledged-issue-numbers", "cli-telemetry"})


class ConfigError(ValueError):
    """A context value that cannot be used: names the key, the value received and what is accepted."""

    def __init__(self, key: str, value: Any, accepted: str) -> None:
        super().__init__(f"context key '{key}': got {value!r}; expected {accepted}")
        self.key = key
        self.value = value
        self.accepted = accepted


# ---------------------------------------------------------------------------------------------------------
# Parsers: each takes (key, raw value) and returns the typed value or raises ConfigError.
# ---------------------------------------------------------------------------------------------------------


def text(pattern: str | None = None, *, description: str | None = None, max_length: int = 2048) -> Parser:
    """A string, optionally matching ``pattern`` in full."""
    regex = re.compile(pattern) if pattern else None
    accepted = description or (f"a string matching {pattern}" if pattern else "a non-empty string")
    accepted += f" (at most {max_length} characters)"

    def parse(key: str, raw: Any) -> str:
        if (
            not isinstance(raw, str)
            or not raw
            or len(raw) > max_length
            or (regex is not None and not regex.fullmatch(raw))
        ):
            raise ConfigError(key, raw, accepted)
        return raw

    return parse


def integer(minimum: int, maximum: int) -> Parser:
    """An integer in [minimum, maximum]; strings of decimal digits are accepted (``-c`` values)."""
    accepted = f"an integer from {minimum} to {maximum}"

    def parse(key: str, raw: Any) -> int:
        if isinstance(raw, bool):
            raise ConfigError(key, raw, accepted)
        if isinstance(raw, str) and re.fullmatch(r"-?[0-9]{1,12}", raw.strip()):
            value = int(raw.strip())
        elif isinstance(raw, int):
            value = raw
        else:
            raise ConfigError(key, raw, accepted)
        if not minimum <= value <= maximum:
            raise ConfigError(key, raw, accepted)
        return value

    return parse


def number(minimum: float, maximum: float) -> Parser:
    """A finite number in [minimum, maximum]."""
    accepted = f"a number from {minimum} to {maximum}"

    def parse(key: str, raw: Any) -> float:
        if isinstance(raw, bool):
            raise ConfigError(key, raw, accepted)
        if isinstance(raw, str) and re.fullmatch(r"-?[0-9]{1,12}(\.[0-9]{1,12})?", raw.strip()):
            value = float(raw.strip())
        elif isinstance(raw, int | float):
            value = float(raw)
        else:
            raise ConfigError(key, raw, accepted)
        if not minimum <= value <= maximum:
            raise ConfigError(key, raw, accepted)
        return value

    return parse


_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


def boolean() -> Parser:
    """true/false (JSON booleans, or the strings true/false/yes/no/1/0/on/off)."""
    accepted = "true or false"

    def parse(key: str, raw: Any) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ConfigError(key, raw, accepted)

    return parse


def choice(*options: str) -> Parser:
    """One of ``options`` (exact, case-sensitive)."""
    accepted = "one of " + ", ".join(options)

    def parse(key: str, raw: Any) -> str:
        if not isinstance(raw, str) or raw not in options:
            raise ConfigError(key, raw, accepted)
        return raw

    return parse


def ipv4_cidr(min_prefix: int = 0, max_prefix: int = 32, *, description: str | None = None) -> Parser:
    """An IPv4 CIDR block (network address, no host bits) whose prefix length is in [min_prefix, max_prefix];
    ``description`` replaces the generated "expected ..." text."""
    accepted = description or (
        "an IPv4 CIDR block such as 203.0.113.0/24"
        if (min_prefix, max_prefix) == (0, 32)
        else f"an IPv4 CIDR block from /{min_prefix} to /{max_prefix} such as 10.0.0.0/{min_prefix}"
    )

    def parse(key: str, raw: Any) -> str:
        try:
            network = ipaddress.IPv4Network(raw) if isinstance(raw, str) else None
        except ValueError:
            network = None
        if network is None or not min_prefix <= network.prefixlen <= max_prefix:
            raise ConfigError(key, raw, accepted)
        return str(raw)

    return parse


# A container image reference with an explicit tag other than ``latest``, or a sha256 digest (also used by
# the constructs that take image URIs, so a context key and a constructor argument accept the same images).
PINNED_IMAGE_PATTERN = r"([\w.-]+(:[0-9]+)?/)?[\w./-]+(:[\w.-]+(?<!:latest)|@sha256:[0-9a-f]{64})"
PINNED_IMAGE_DESCRIPTION = (
    "a container image with a pinned tag (not latest) or an @sha256 digest, such as vllm/vllm-openai:v0.10.1"
)


def pinned_image() -> Parser:
    """A container image reference with an explicit tag other than ``latest``, or a sha256 digest."""
    return text(PINNED_IMAGE_PATTERN, description=PINNED_IMAGE_DESCRIPTION, max_length=512)


def optional(inner: Parser) -> Parser:
    """``inner``, or None when the value is JSON null or the empty string."""

    def parse(key: str, raw: Any) -> Any:
        if raw is None or raw == "":
            return None
        return inner(key, raw)

    return parse


def items(inner: Parser, *, min_items: int = 0, max_items: int = 50) -> Parser:
    """A list of ``inner`` values: a JSON list, or (from ``-c``) a JSON array string or comma-separated text."""
    accepted = f"a list of {min_items} to {max_items} items (JSON array or comma-separated)"

    def parse(key: str, raw: Any) -> tuple[Any, ...]:
        values: Any = raw
        if isinstance(raw, str):
            stripped = raw.strip()
            if stripped.startswith("["):
                try:
                    values = json.loads(stripped)
                except json.JSONDecodeError:
                    raise ConfigError(key, raw, accepted) from None
            else:
                values = [part.strip() for part in stripped.split(",") if part.strip()]
        if not isinstance(values, list) or not min_items <= len(values) <= max_items:
            raise ConfigError(key, raw, accepted)
        return tuple(inner(f"{key}[{index}]", value) for index, value in enumerate(values))

    return parse


def mapping(
    value_parser: Parser, *, key_pattern: str = r"[A-Za-z0-9_.:/=+@ -]{1,128}", max_items: int = 50
) -> Parser:
    """A JSON object (or, from ``-c``, a JSON object string) of string keys to ``value_parser`` values."""
    key_regex = re.compile(key_pattern)
    accepted = f"a JSON object of at most {max_items} entries whose keys match {key_pattern}"

    def parse(key: str, raw: Any) -> dict[str, Any]:
        values: Any = raw
        if isinstance(raw, str):
            try:
                values = json.loads(raw)
            except json.JSONDecodeError:
                raise ConfigError(key, raw, accepted) from None
        if not isinstance(values, dict) or len(values) > max_items:
            raise ConfigError(key, raw, accepted)
        for name in values:
            if not key_regex.fullmatch(name):
                raise ConfigError(key, raw, accepted)
        return {name: value_parser(f"{key}.{name}", value) for name, value in values.items()}

    return parse


EMAIL_PATTERN = r"[^@\s]+@[^@\s]+\.[^@\s]+"
"""An email address, as the alert topics accept it (something@domain.tld, no spaces)."""


def email_address() -> Parser:
    """An optional email address (null or empty: none)."""
    return optional(text(EMAIL_PATTERN, description="an email address"))


def setting(parse: Parser, doc: str) -> Any:
    """Declare a dataclass field as a context setting parsed by ``parse``; ``doc`` explains it for users."""
    return field(metadata={"parse": parse, "doc": doc})


# ---------------------------------------------------------------------------------------------------------
# What a configured tier needs from an AWS account (read by `inference-tiers preflight`)
# ---------------------------------------------------------------------------------------------------------

InstanceService = Literal["ec2", "sagemaker-endpoint", "sagemaker-hyperpod"]


@dataclass(frozen=True)
class InstanceNeed:
    """``count`` instances of ``instance_type`` (``p5.48xlarge`` for EC2, ``ml.g6e.2xlarge`` for SageMaker)."""

    service: InstanceService
    instance_type: str
    count: int


@dataclass(frozen=True)
class AddonPin:
    """An EKS add-on version the tier's template pins, and the Python name that pins it
    (``module:ATTRIBUTE``, so that a preflight failure says where to change it)."""

    name: str
    version: str
    pinned_in: str


def addon_pins(versions: Mapping[str, str], pinned_in: str) -> tuple[AddonPin, ...]:
    """One :class:`AddonPin` per add-on name to version entry of ``versions``, the mapping at ``pinned_in``."""
    return tuple(AddonPin(name, version, pinned_in) for name, version in versions.items())


@dataclass(frozen=True)
class AddonFeature:
    """A feature the settings turn on (``set_by``), served by EKS add-on ``addon`` from build
    ``minimum_version``. ``source`` is the evidence for the minimum."""

    addon: str
    feature: str
    set_by: str
    minimum_version: str
    source: str


ImageSource = Literal["uri", "aws-dlc", "asset"]


@dataclass(frozen=True)
class ImageNeed:
    """A container image the tier's template references, and the context key or Python name that sets it.

    ``source`` says how to read ``reference``: ``uri``, a full image reference (ECR or a public registry);
    ``aws-dlc``, ``repository:tag`` in the Region's AWS Deep Learning Containers registry; ``asset``, the
    directory of a Dockerfile that ``cdk deploy`` builds and pushes itself (nothing to push beforehand).
    """

    reference: str
    set_by: str
    source: ImageSource = "uri"


@dataclass(frozen=True)
class WeightsNeed:
    """Model weights an endpoint loads from S3 when the deploy creates it: ``s3_uri``, or when the stack's own
    bucket holds them, the prefix that ``stack_name``'s output ``output_key`` names (from an earlier deploy)."""

    s3_uri: str | None = None
    stack_name: str = ""
    output_key: str = ""


@dataclass(frozen=True)
class AccountRequirements:
    """Everything a preflight check must find in an account before this tier's ``cdk deploy``."""

    instances: tuple[InstanceNeed, ...] = ()
    bedrock_model_id: str | None = None
    bedrock_inference_profile_id: str | None = None
    kubernetes_version: str | None = None
    capacity_reservation_ids: tuple[str, ...] = ()
    availability_zone_ids: tuple[str, ...] = ()
    eks_addons: tuple[AddonPin, ...] = ()
    addon_features: tuple[AddonFeature, ...] = ()
    images: tuple[ImageNeed, ...] = ()
    model_weights: WeightsNeed | None = None


class TierSettings(Protocol):
    """Every tier's settings dataclass implements this."""

    def account_requirements(self) -> AccountRequirements: ...


# ---------------------------------------------------------------------------------------------------------
# Tier registry and top-level parsing
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierSpec:
    """What a tier needs from the configuration layer: its name and its settings dataclass."""

    name: str
    settings: type[Any]

    def context_keys(self) -> dict[str, dataclasses.Field[Any]]:
        return {f"{self.name}.{f.name}": f for f in dataclasses.fields(self.settings)}


@dataclass(frozen=True)
class AppConfig:
    """The parsed configuration: the selected tiers, in build order, and each one's typed settings."""

    tiers: tuple[str, ...]
    settings: Mapping[str, Any]

    def for_tier(self, tier: str, settings_type: type[T]) -> T:
        value = self.settings[tier]
        assert isinstance(value, settings_type)
        return value


def is_cdk_owned_key(key: str) -> bool:
    return key.startswith("@") or ":" in key or key in _CDK_OWNED_BARE_KEYS


def parse_tier_selection(raw: Any, available: Sequence[str]) -> tuple[str, ...]:
    """``bedrock``, ``bedrock,sagemaker`` or ``all``; every name must be a tier this build provides."""
    accepted = f"a comma-separated list of {', '.join(available)}, or '{ALL_TIERS}'"
    missing = [t for t in TIER_ORDER if t not in available]
    if missing:
        accepted += f" (tiers this project defines but does not provide yet: {', '.join(missing)})"
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(TIER_KEY, raw, accepted)
    names = [name.strip() for name in raw.split(",")]
    if names == [ALL_TIERS]:
        return tuple(available)
    if any(name not in available for name in names) or len(set(names)) != len(names):
        raise ConfigError(TIER_KEY, raw, accepted)
    return tuple(sorted(names, key=TIER_ORDER.index))


def tier_defaults() -> dict[str, Any]:
    """Every tier setting's default, ``{"<tier>.<setting>": value}``: the package's ``defaults.json``."""
    defaults: dict[str, Any] = json.loads(
        resources.files("inference_tiers").joinpath(DEFAULTS_FILE).read_text(encoding="utf-8")
    )
    return defaults


def parse_settings(spec: TierSpec, context: Mapping[str, Any]) -> Any:
    """Build ``spec.settings`` from ``context``; every one of its keys must be present (see :func:`tier_defaults`)."""
    values: dict[str, Any] = {}
    for key, fld in spec.context_keys().items():
        if key not in context:
            raise ConfigError(
                key,
                None,
                f"a value (this setting has no default: add it to the package's {DEFAULTS_FILE} "
                f"or pass -c {key}=...; {fld.metadata['doc']})",
            )
        values[fld.name] = fld.metadata["parse"](key, context[key])
    return spec.settings(**values)


def parse_config(
    context: Mapping[str, Any], specs: Sequence[TierSpec], other_keys: Collection[str] = ()
) -> AppConfig:
    """Parse the whole context: reject unknown keys, parse the selected tiers' settings.

    Settings of tiers that are not selected are still checked for unknown keys but are not parsed, so a
    half-configured tier never blocks deploying another one. ``other_keys``: the keys of tiers whose specs are
    not given (not imported), known all the same.
    """
    by_name = {spec.name: spec for spec in specs}
    known = {TIER_KEY} | {key for spec in specs for key in spec.context_keys()} | set(other_keys)
    unknown = sorted(k for k in context if k not in known and not is_cdk_owned_key(k))
    for key in unknown:
        tier = key.split(".", 1)[0]
        choices = sorted(k for k in known if k.startswith(f"{tier}.")) or sorted(known)
        raise ConfigError(key, context[key], "a known key: " + ", ".join(choices))
    tiers = parse_tier_selection(context.get(TIER_KEY), [name for name in TIER_ORDER if name in by_name])
    return AppConfig(tiers=tiers, settings={name: parse_settings(by_name[name], context) for name in tiers})
