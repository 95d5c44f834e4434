"""An Amazon Bedrock guardrail with typed policies, a CMK, and a version that only changes when the policy does.

Built on the ``aws_bedrock`` L1s (``CfnGuardrail``, ``CfnGuardrailVersion``): the Bedrock L2s exist only in the
alpha module, whose ``createVersion()`` derives the version's logical id from unresolved tokens and so replaces
the version on no-op deploys (aws/aws-cdk#38674). Here the version's logical id is a hash of the *resolved*
policy: plain Python values, never tokens.

The guardrail contract with other stacks: the version changes with the policy, and CloudFormation neither
deletes nor updates an export that another stack imports, so the version never crosses stacks as an export.
The guardrail publishes it in an SSM parameter with a stable name (:attr:`Guardrail.version_parameter_name`),
and :meth:`Guardrail.for_consumer` gives another stack a guardrail that reads it at each of its deploys. The ARN
and the key ARN stay exports: their names and values live as long as the guardrail.

Property names and limits follow the CloudFormation schema of ``AWS::Bedrock::Guardrail`` (cfn-lint's copy).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum, StrEnum
from typing import Any, Protocol, TypeVar

from aws_cdk import Arn, ArnFormat, Duration, Fn, Names, RemovalPolicy, Stack
from aws_cdk import aws_bedrock as bedrock
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from inference_tiers.constructs.common.encryption import retained_key
from inference_tiers.constructs.common.nag import acknowledge_granted_resource
from inference_tiers.validation import Args

E = TypeVar("E", bound=Enum)
T = TypeVar("T")


class FilterStrength(StrEnum):
    """How strongly a content filter blocks: NONE turns it off, HIGH blocks the most."""

    NONE = "NONE"
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class ContentFilterType(StrEnum):
    """A Bedrock Guardrails content-filter category; PROMPT_ATTACK inspects prompts only."""

    SEXUAL = "SEXUAL"
    VIOLENCE = "VIOLENCE"
    HATE = "HATE"
    INSULTS = "INSULTS"
    MISCONDUCT = "MISCONDUCT"
    PROMPT_ATTACK = "PROMPT_ATTACK"


class GuardrailAction(StrEnum):
    """What a content, topic, word or grounding filter does on a match (NONE: detect and report only)."""

    BLOCK = "BLOCK"
    NONE = "NONE"


class Modality(StrEnum):
    """What a content filter inspects: text, images, or both."""

    TEXT = "TEXT"
    IMAGE = "IMAGE"


class PiiAction(StrEnum):
    """What a PII or regex filter does on a match: block, mask the match (ANONYMIZE), or detect only (NONE)."""

    BLOCK = "BLOCK"
    ANONYMIZE = "ANONYMIZE"
    NONE = "NONE"


class PiiEntityType(StrEnum):
    """A kind of personally identifiable information Bedrock Guardrails detects."""

    ADDRESS = "ADDRESS"
    AGE = "AGE"
    AWS_ACCESS_KEY = "AWS_ACCESS_KEY"
    AWS_SECRET_KEY = "AWS_SECRET_KEY"
    CA_HEALTH_NUMBER = "CA_HEALTH_NUMBER"
    CA_SOCIAL_INSURANCE_NUMBER = "CA_SOCIAL_INSURANCE_NUMBER"
    CREDIT_DEBIT_CARD_CVV = "CREDIT_DEBIT_CARD_CVV"
    CREDIT_DEBIT_CARD_EXPIRY = "CREDIT_DEBIT_CARD_EXPIRY"
    CREDIT_DEBIT_CARD_NUMBER = "CREDIT_DEBIT_CARD_NUMBER"
    DRIVER_ID = "DRIVER_ID"
    EMAIL = "EMAIL"
    INTERNATIONAL_BANK_ACCOUNT_NUMBER = "INTERNATIONAL_BANK_ACCOUNT_NUMBER"
    IP_ADDRESS = "IP_ADDRESS"
    LICENSE_PLATE = "LICENSE_PLATE"
    MAC_ADDRESS = "MAC_ADDRESS"
    NAME = "NAME"
    PASSWORD = "PASSWORD"
    PHONE = "PHONE"
    PIN = "PIN"
    SWIFT_CODE = "SWIFT_CODE"
    UK_NATIONAL_HEALTH_SERVICE_NUMBER = "UK_NATIONAL_HEALTH_SERVICE_NUMBER"
    UK_NATIONAL_INSURANCE_NUMBER = "UK_NATIONAL_INSURANCE_NUMBER"
    UK_UNIQUE_TAXPAYER_REFERENCE_NUMBER = "UK_UNIQUE_TAXPAYER_REFERENCE_NUMBER"
    URL = "URL"
    USERNAME = "USERNAME"
    US_BANK_ACCOUNT_NUMBER = "US_BANK_ACCOUNT_NUMBER"
    US_BANK_ROUTING_NUMBER = "US_BANK_ROUTING_NUMBER"
    US_INDIVIDUAL_TAX_IDENTIFICATION_NUMBER = "US_INDIVIDUAL_TAX_IDENTIFICATION_NUMBER"
    US_PASSPORT_NUMBER = "US_PASSPORT_NUMBER"
    US_SOCIAL_SECURITY_NUMBER = "US_SOCIAL_SECURITY_NUMBER"
    VEHICLE_IDENTIFICATION_NUMBER = "VEHICLE_IDENTIFICATION_NUMBER"


class GuardrailTier(StrEnum):
    """CLASSIC (English, French, Spanish) or STANDARD (more languages; needs a cross-Region guardrail profile)."""

    CLASSIC = "CLASSIC"
    STANDARD = "STANDARD"


# Every policy value is part of the hash that names the guardrail version, so it must be known at synth time:
# a deploy-time value could change the policy without changing the hash (and so without a new version).
def _text(args: Args, param: str, value: Any, max_length: int, pattern: str | None = None) -> str:
    return args.text(param, value, max_length=max_length, pattern=pattern, allow_token=False)


def _choices(args: Args, param: str, value: Any, kind: type[E], max_items: int) -> tuple[E, ...]:
    """1 to ``max_items`` distinct members of ``kind`` (members or their string values)."""
    return args.sequence(
        param,
        value,
        lambda name, v: args.choice(name, v, kind),
        min_items=1,
        max_items=max_items,
        unique=True,
    )


def _instances(args: Args, param: str, value: Any, kind: type[T], max_items: int) -> tuple[T, ...]:
    return args.sequence(param, value, lambda name, v: args.instance(name, v, kind), max_items=max_items)


def _distinct(args: Args, param: str, items: Sequence[Any], key: Callable[[Any], str], what: str) -> None:
    """Bedrock refuses two entries with the same ``what`` (a type, a name, a word)."""
    seen: set[str] = set()
    for index, item in enumerate(items):
        if key(item) in seen:
            raise args.error(f"{param}[{index}]", item, f"each {what} at most once ({key(item)!r} repeats)")
        seen.add(key(item))


# ---------------------------------------------------------------------------------------------------------
# Typed policies. Each dataclass validates itself and renders the CloudFormation shape (``_cfn``).
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContentFilter:
    """One content-filter category. Strengths and actions apply separately to prompts (input) and responses.

    ``output_strength`` defaults to MEDIUM, and to NONE for ``PROMPT_ATTACK``, which only inspects prompts
    (an explicit other strength for it is an error).

    :param type: the :class:`ContentFilterType` category.
    :param input_strength: the :class:`FilterStrength` for prompts. Default: MEDIUM.
    :param output_strength: the :class:`FilterStrength` for responses. Default: see above.
    :param input_action: the :class:`GuardrailAction` on a prompt match. Default: BLOCK.
    :param output_action: the :class:`GuardrailAction` on a response match. Default: BLOCK.
    :param input_enabled: whether prompts are evaluated. Default: True.
    :param output_enabled: whether responses are evaluated. Default: True.
    :param input_modalities: the :class:`Modality` values inspected in prompts. Default: text only.
    :param output_modalities: the :class:`Modality` values inspected in responses. Default: text only.
    """

    type: ContentFilterType
    """The content category this filter applies to."""
    input_strength: FilterStrength = FilterStrength.MEDIUM
    """How strongly prompts are filtered in this category (NONE: not at all)."""
    output_strength: FilterStrength | None = None
    """How strongly responses are filtered in this category. ``None`` is resolved when the filter is created
    (NONE for ``PROMPT_ATTACK``, else MEDIUM), so the attribute itself is never ``None``."""
    input_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a prompt matches: block it, or detect and report only (NONE)."""
    output_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a response matches: block it, or detect and report only (NONE)."""
    input_enabled: bool = True
    """Whether prompts are evaluated against this filter; False skips them."""
    output_enabled: bool = True
    """Whether responses are evaluated against this filter; False skips them."""
    input_modalities: tuple[Modality, ...] = (Modality.TEXT,)
    """What is inspected in prompts: text, images or both (distinct :class:`Modality` values)."""
    output_modalities: tuple[Modality, ...] = (Modality.TEXT,)
    """What is inspected in responses: text, images or both (distinct :class:`Modality` values)."""

    def __post_init__(self) -> None:
        args = Args("ContentFilter")
        _set(self, "type", args.choice("type", self.type, ContentFilterType))
        if self.output_strength is None:
            prompt_only = self.type is ContentFilterType.PROMPT_ATTACK
            _set(self, "output_strength", FilterStrength.NONE if prompt_only else FilterStrength.MEDIUM)
        for name, kind in (
            ("input_strength", FilterStrength),
            ("output_strength", FilterStrength),
            ("input_action", GuardrailAction),
            ("output_action", GuardrailAction),
        ):
            _set(self, name, args.choice(name, getattr(self, name), kind))
        for name in ("input_enabled", "output_enabled"):
            args.boolean(name, getattr(self, name))
        for name in ("input_modalities", "output_modalities"):
            _set(self, name, _choices(args, name, getattr(self, name), Modality, max_items=2))
        output = self._output_strength
        if self.type is ContentFilterType.PROMPT_ATTACK and output is not FilterStrength.NONE:
            raise args.error(
                "output_strength",
                output.value,
                "FilterStrength.NONE for PROMPT_ATTACK (prompt attacks are detected in prompts only)",
            )

    @property
    def _output_strength(self) -> FilterStrength:
        assert self.output_strength is not None, "resolved in __post_init__"
        return self.output_strength

    def _cfn(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "input_strength": self.input_strength.value,
            "output_strength": self._output_strength.value,
            "input_action": self.input_action.value,
            "output_action": self.output_action.value,
            "input_enabled": self.input_enabled,
            "output_enabled": self.output_enabled,
            "input_modalities": [m.value for m in self.input_modalities],
            "output_modalities": [m.value for m in self.output_modalities],
        }


@dataclass(frozen=True)
class DeniedTopic:
    """A topic the guardrail refuses, described in natural language (``definition``) with example phrases.

    :param name: 1-100 letters, digits, spaces and ``-_!?.``.
    :param definition: what the topic covers, 1-1000 characters.
    :param examples: up to 5 example phrases of at most 100 characters. Default: none.
    :param input_action: the :class:`GuardrailAction` on a prompt match. Default: BLOCK.
    :param output_action: the :class:`GuardrailAction` on a response match. Default: BLOCK.
    :param input_enabled: whether prompts are evaluated. Default: True.
    :param output_enabled: whether responses are evaluated. Default: True.
    """

    name: str
    """The topic's name (1-100 letters, digits, spaces and ``-_!?.``), unique among the guardrail's denied
    topics."""
    definition: str
    """What the topic covers, in natural language (1-1000 characters): what prompts and responses are matched
    against."""
    examples: tuple[str, ...] = ()
    """Up to 5 example phrases of the topic, at most 100 characters each; empty for none."""
    input_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a prompt is on this topic: block it, or detect and report only (NONE)."""
    output_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a response is on this topic: block it, or detect and report only
    (NONE)."""
    input_enabled: bool = True
    """Whether prompts are checked for this topic; False skips them."""
    output_enabled: bool = True
    """Whether responses are checked for this topic; False skips them."""

    def __post_init__(self) -> None:
        args = Args("DeniedTopic")
        _text(args, "name", self.name, 100, r"[0-9a-zA-Z\-_ !?.]+")
        _text(args, "definition", self.definition, 1000)
        examples = args.sequence(
            "examples", self.examples, lambda name, v: _text(args, name, v, 100), max_items=5
        )
        _set(self, "examples", examples)
        for name in ("input_action", "output_action"):
            _set(self, name, args.choice(name, getattr(self, name), GuardrailAction))
        for name in ("input_enabled", "output_enabled"):
            args.boolean(name, getattr(self, name))

    def _cfn(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "definition": self.definition,
            "examples": list(self.examples),
            "type": "DENY",
            "input_action": self.input_action.value,
            "output_action": self.output_action.value,
            "input_enabled": self.input_enabled,
            "output_enabled": self.output_enabled,
        }


@dataclass(frozen=True)
class WordFilter:
    """An exact word or phrase to block.

    :param text: the word or phrase, 1-100 characters.
    :param input_action: the :class:`GuardrailAction` on a prompt match. Default: BLOCK.
    :param output_action: the :class:`GuardrailAction` on a response match. Default: BLOCK.
    """

    text: str
    """The exact word or phrase (1-100 characters), unique among the guardrail's word filters."""
    input_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a prompt contains it: block it, or detect and report only (NONE)."""
    output_action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does when a response contains it: block it, or detect and report only (NONE)."""

    def __post_init__(self) -> None:
        args = Args("WordFilter")
        _text(args, "text", self.text, 100)
        for name in ("input_action", "output_action"):
            _set(self, name, args.choice(name, getattr(self, name), GuardrailAction))

    def _cfn(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "input_action": self.input_action.value,
            "output_action": self.output_action.value,
        }


@dataclass(frozen=True)
class PiiEntity:
    """A PII type to block or anonymize, separately in prompts and responses (NONE: detect only).

    :param type: the :class:`PiiEntityType`.
    :param input_action: the :class:`PiiAction` in prompts. Default: NONE.
    :param output_action: the :class:`PiiAction` in responses. Default: ANONYMIZE.
    """

    type: PiiEntityType
    """The kind of PII detected; each type appears at most once in a guardrail."""
    input_action: PiiAction = PiiAction.NONE
    """What the guardrail does with this PII in prompts: block, mask it (ANONYMIZE) or detect only (NONE)."""
    output_action: PiiAction = PiiAction.ANONYMIZE
    """What the guardrail does with this PII in responses: block, mask it (ANONYMIZE) or detect only
    (NONE)."""

    def __post_init__(self) -> None:
        args = Args("PiiEntity")
        _set(self, "type", args.choice("type", self.type, PiiEntityType))
        for name in ("input_action", "output_action"):
            _set(self, name, args.choice(name, getattr(self, name), PiiAction))

    def _cfn(self) -> dict[str, Any]:
        # ``Action`` is required by the schema; the per-direction actions are what the service applies.
        return {
            "type": self.type.value,
            "action": self.output_action.value,
            "input_action": self.input_action.value,
            "output_action": self.output_action.value,
            "input_enabled": True,
            "output_enabled": True,
        }


@dataclass(frozen=True)
class RegexFilter:
    """Sensitive information matched by a regular expression (for example internal account numbers).

    :param name: 1-100 characters.
    :param pattern: the regular expression, 1-500 characters.
    :param description: 1-1000 characters. Default: none.
    :param input_action: the :class:`PiiAction` in prompts. Default: BLOCK.
    :param output_action: the :class:`PiiAction` in responses. Default: BLOCK.
    """

    name: str
    """The filter's name (1-100 characters), unique among the guardrail's regex filters."""
    pattern: str
    """The regular expression that matches the sensitive information (1-500 characters)."""
    description: str | None = None
    """What the pattern matches (1-1000 characters); ``None`` for no description."""
    input_action: PiiAction = PiiAction.BLOCK
    """What the guardrail does with a match in prompts: block, mask it (ANONYMIZE) or detect only (NONE)."""
    output_action: PiiAction = PiiAction.BLOCK
    """What the guardrail does with a match in responses: block, mask it (ANONYMIZE) or detect only (NONE)."""

    def __post_init__(self) -> None:
        args = Args("RegexFilter")
        _text(args, "name", self.name, 100)
        _text(args, "pattern", self.pattern, 500)
        if self.description is not None:
            _text(args, "description", self.description, 1000)
        for name in ("input_action", "output_action"):
            _set(self, name, args.choice(name, getattr(self, name), PiiAction))

    def _cfn(self) -> dict[str, Any]:
        rendered = {
            "name": self.name,
            "pattern": self.pattern,
            "action": self.output_action.value,
            "input_action": self.input_action.value,
            "output_action": self.output_action.value,
        }
        if self.description is not None:
            rendered["description"] = self.description
        return rendered


@dataclass(frozen=True)
class ContextualGrounding:
    """Contextual grounding checks for RAG answers: block responses scoring below a threshold (0 to 0.99).

    ``grounding_threshold``: how well the answer is supported by the source; ``relevance_threshold``: how
    relevant it is to the query. ``None`` leaves that check off; at least one must be set. Defaults: 0.75 each.

    :param action: the :class:`GuardrailAction` below a threshold. Default: BLOCK.
    """

    grounding_threshold: float | None = 0.75
    """The lowest grounding score (0 to 0.99) a response may have, i.e. how well the source supports it;
    ``None`` turns the grounding check off."""
    relevance_threshold: float | None = 0.75
    """The lowest relevance score (0 to 0.99) a response may have for the query; ``None`` turns the relevance
    check off."""
    action: GuardrailAction = GuardrailAction.BLOCK
    """What the guardrail does with a response below a threshold: block it, or detect and report only
    (NONE)."""

    def __post_init__(self) -> None:
        args = Args("ContextualGrounding")
        for name in ("grounding_threshold", "relevance_threshold"):
            value = getattr(self, name)
            if value is not None:
                args.number(name, value, minimum=0, maximum=0.99)
        if self.grounding_threshold is None and self.relevance_threshold is None:
            raise args.error(
                "grounding_threshold", None, "a threshold here and/or in relevance_threshold (both are None)"
            )
        _set(self, "action", args.choice("action", self.action, GuardrailAction))

    def _cfn(self) -> list[dict[str, Any]]:
        filters = []
        for kind, threshold in (
            ("GROUNDING", self.grounding_threshold),
            ("RELEVANCE", self.relevance_threshold),
        ):
            if threshold is not None:
                filters.append(
                    {"type": kind, "threshold": threshold, "action": self.action.value, "enabled": True}
                )
        return filters


_AR_POLICY_ARN = r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:automated-reasoning-policy/[a-z0-9]{12}(:[1-9][0-9]{0,11})?"


@dataclass(frozen=True)
class AutomatedReasoning:
    """Automated-reasoning checks: one or two policy ARNs (versioned), and the confidence threshold (0 to 1).

    :param policy_arns: one or two distinct versioned automated-reasoning policy ARNs.
    :param confidence_threshold: 0 to 1. Default: the service's.
    """

    policy_arns: tuple[str, ...]
    """The one or two distinct, versioned automated-reasoning policy ARNs the guardrail checks with."""
    confidence_threshold: float | None = None
    """The confidence threshold of the checks, 0 to 1; ``None`` leaves the service's default."""

    def __post_init__(self) -> None:
        args = Args("AutomatedReasoning")
        arns = args.sequence(
            "policy_arns",
            self.policy_arns,
            lambda name, v: _text(args, name, v, 2048, _AR_POLICY_ARN),
            min_items=1,
            max_items=2,
            unique=True,
        )
        _set(self, "policy_arns", arns)
        if self.confidence_threshold is not None:
            args.number("confidence_threshold", self.confidence_threshold, minimum=0, maximum=1)

    def _cfn(self) -> dict[str, Any]:
        rendered: dict[str, Any] = {"policies": list(self.policy_arns)}
        if self.confidence_threshold is not None:
            rendered["confidence_threshold"] = self.confidence_threshold
        return rendered


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass in __post_init__


# Safe defaults: every harm category blocked at MEDIUM both ways (a balance between recall and false positives
# that teams tune later), prompt attacks at HIGH on prompts (responses are not inspected for them).
DEFAULT_CONTENT_FILTERS: tuple[ContentFilter, ...] = (
    *(
        ContentFilter(type=kind)
        for kind in (
            ContentFilterType.SEXUAL,
            ContentFilterType.VIOLENCE,
            ContentFilterType.HATE,
            ContentFilterType.INSULTS,
            ContentFilterType.MISCONDUCT,
        )
    ),
    ContentFilter(
        type=ContentFilterType.PROMPT_ATTACK,
        input_strength=FilterStrength.HIGH,
        output_strength=FilterStrength.NONE,
        output_action=GuardrailAction.NONE,
        output_enabled=False,
    ),
)

# Credentials are blocked outright; contact details and identity numbers are masked in responses and only
# detected (reported, not altered) in prompts, so users can still talk about their own data.
DEFAULT_PII_ENTITIES: tuple[PiiEntity, ...] = (
    PiiEntity(type=PiiEntityType.AWS_ACCESS_KEY, input_action=PiiAction.BLOCK, output_action=PiiAction.BLOCK),
    PiiEntity(type=PiiEntityType.AWS_SECRET_KEY, input_action=PiiAction.BLOCK, output_action=PiiAction.BLOCK),
    PiiEntity(type=PiiEntityType.PASSWORD, input_action=PiiAction.BLOCK, output_action=PiiAction.BLOCK),
    PiiEntity(type=PiiEntityType.EMAIL),
    PiiEntity(type=PiiEntityType.PHONE),
    PiiEntity(type=PiiEntityType.US_SOCIAL_SECURITY_NUMBER),
    PiiEntity(type=PiiEntityType.CREDIT_DEBIT_CARD_NUMBER),
)

DEFAULT_BLOCKED_INPUT_MESSAGE = "Sorry, this request is not allowed by our usage policy."
DEFAULT_BLOCKED_OUTPUT_MESSAGE = "Sorry, I can't provide that answer because of our usage policy."

_FIVE_MINUTES = Duration.minutes(5)
# SSM parameter names: letters, digits and _.-/ (at most 1011 characters below the account's namespace).
_PARAMETER_NAME = r"/[a-zA-Z0-9_.\-/]{1,1010}"
_PROFILE_ID = r"[a-z0-9-]+\.guardrail\.v[0-9:]+"


class IGuardrail(Protocol):
    """What invoke access needs from a guardrail (ours, or one imported with your own class)."""

    @property
    def guardrail_arn(self) -> str:
        """The guardrail's ARN, without a version (what ApplyGuardrail is granted on)."""

    @property
    def versioned_arn(self) -> str:
        """``<guardrail ARN>:<version>``: the value IAM's ``bedrock:GuardrailIdentifier`` key must carry in
        the invoke policies of ``ModelInvokeAccess``."""

    def grant_apply(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` apply the guardrail (ApplyGuardrail) and decrypt it; returns the grant."""
        ...


def _version_parameter_name(args: Args, guardrail: Construct, given: str | None) -> str:
    if given is not None:
        return args.text("version_parameter_name", given, pattern=_PARAMETER_NAME, allow_token=False)
    stack = Stack.of(guardrail)
    path = guardrail.node.path[len(stack.node.path) :].strip("/")
    name = f"/inference-tiers/{stack.stack_name}/{path}/GuardrailVersion"
    if not re.fullmatch(_PARAMETER_NAME, name):
        raise args.error(
            "version_parameter_name",
            name,
            f"a name matching {_PARAMETER_NAME} (the default is built from the stack name and construct path; "
            "pass version_parameter_name explicitly)",
        )
    return name


@dataclass(frozen=True)
class _Policy:
    """The resolved guardrail policy: plain values only, so its hash is stable across synths."""

    content: list[dict[str, Any]] = field(default_factory=list)
    topics: list[dict[str, Any]] = field(default_factory=list)
    words: list[dict[str, Any]] = field(default_factory=list)
    profanity: bool = False
    pii: list[dict[str, Any]] = field(default_factory=list)
    regexes: list[dict[str, Any]] = field(default_factory=list)
    grounding: list[dict[str, Any]] = field(default_factory=list)
    automated_reasoning: dict[str, Any] | None = None
    tier: str = GuardrailTier.CLASSIC.value
    cross_region_profile: str | None = None
    blocked_input_message: str = ""
    blocked_output_message: str = ""
    description: str | None = None

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


class Guardrail(Construct):
    """An Amazon Bedrock guardrail, encrypted with a customer-managed key, plus an immutable version of it.

    With no policy arguments it blocks the six content-filter categories (prompt attacks at HIGH), the
    managed profanity list, credentials, and masks common PII in responses. Callers pin
    :attr:`guardrail_version`; IAM can require it through :attr:`versioned_arn` (see ``ModelInvokeAccess``).

    :param guardrail_name: physical name (1-50 of ``[0-9a-zA-Z-_]``). Default: generated from the path.
    :param description: 1-200 characters. Default: none.
    :param content_filters: default :data:`DEFAULT_CONTENT_FILTERS`; ``()`` for none.
    :param denied_topics: default none.
    :param word_filters: exact words or phrases to block (``str`` or :class:`WordFilter`). Default none.
    :param profanity_filter: block AWS's managed profanity list. Default True.
    :param pii_entities: default :data:`DEFAULT_PII_ENTITIES`; ``()`` for none.
    :param regex_filters: default none.
    :param contextual_grounding: grounding/relevance checks for RAG. Default off.
    :param automated_reasoning: automated-reasoning policies. Default off.
    :param tier: safeguard tier of content filters and denied topics. Default CLASSIC.
    :param cross_region_guardrail_profile: system guardrail profile id (``us.guardrail.v1:0``) that lets the
        guardrail run in other Regions of that geography. Required for STANDARD. Default none.
    :param blocked_input_message: returned when a prompt is blocked (1-500 characters).
    :param blocked_output_message: returned when a response is blocked (1-500 characters).
    :param kms_key: key that encrypts the guardrail. Default: a new key with rotation, retained.
    :param version_parameter_name: the SSM parameter that publishes the current version to other stacks.
        Default: ``/inference-tiers/<stack name>/<construct path in the stack>/GuardrailVersion``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        guardrail_name: str | None = None,
        description: str | None = None,
        content_filters: Sequence[ContentFilter] | None = None,
        denied_topics: Sequence[DeniedTopic] = (),
        word_filters: Sequence[WordFilter | str] = (),
        profanity_filter: bool = True,
        pii_entities: Sequence[PiiEntity] | None = None,
        regex_filters: Sequence[RegexFilter] = (),
        contextual_grounding: ContextualGrounding | None = None,
        automated_reasoning: AutomatedReasoning | None = None,
        tier: GuardrailTier | str = GuardrailTier.CLASSIC,
        cross_region_guardrail_profile: str | None = None,
        blocked_input_message: str = DEFAULT_BLOCKED_INPUT_MESSAGE,
        blocked_output_message: str = DEFAULT_BLOCKED_OUTPUT_MESSAGE,
        kms_key: kms.IKey | None = None,
        version_parameter_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("Guardrail")
        self.tier = args.choice("tier", tier, GuardrailTier)
        """The safeguard tier of the content filters and denied topics."""
        if cross_region_guardrail_profile is not None:
            _text(args, "cross_region_guardrail_profile", cross_region_guardrail_profile, 64, _PROFILE_ID)
        self.cross_region_guardrail_profile = cross_region_guardrail_profile
        """The system guardrail profile id (such as ``us.guardrail.v1:0``) that lets the guardrail run in
        other Regions of its geography; ``None`` for a guardrail that runs in its own Region only."""
        policy = _resolve_policy(
            args,
            content_filters=DEFAULT_CONTENT_FILTERS if content_filters is None else content_filters,
            denied_topics=denied_topics,
            word_filters=word_filters,
            profanity_filter=profanity_filter,
            pii_entities=DEFAULT_PII_ENTITIES if pii_entities is None else pii_entities,
            regex_filters=regex_filters,
            contextual_grounding=contextual_grounding,
            automated_reasoning=automated_reasoning,
            tier=self.tier,
            cross_region_guardrail_profile=cross_region_guardrail_profile,
            blocked_input_message=blocked_input_message,
            blocked_output_message=blocked_output_message,
            description=description,
        )
        # The name is not part of the policy hash (renaming updates the guardrail in place): a token is fine.
        if guardrail_name is not None:
            args.text("guardrail_name", guardrail_name, max_length=50, pattern=r"[0-9a-zA-Z\-_]+")
        if kms_key is not None:
            args.implements("kms_key", kms_key, kms.IKey)
        name = guardrail_name or Names.unique_resource_name(self, max_length=50, separator="-")

        self.kms_key: kms.IKey = kms_key or retained_key(
            self, "Key", "Encrypts an Amazon Bedrock guardrail's configuration"
        )
        """The customer-managed key that encrypts the guardrail (``kms_key``, or a new retained key);
        :meth:`grant_apply` grants ``kms:Decrypt`` on it."""
        self.resource = bedrock.CfnGuardrail(
            self,
            "Resource",
            name=name,
            description=description,
            blocked_input_messaging=blocked_input_message,
            blocked_outputs_messaging=blocked_output_message,
            kms_key_arn=self.kms_key.key_arn,
            **_cfn_policy_props(policy, Stack.of(self)),
        )
        """The ``bedrock.CfnGuardrail`` itself, for properties this construct does not set."""
        # The version's logical id (and description) carry the policy hash: an unchanged policy keeps the same
        # version across deploys, a changed one makes CloudFormation create a new version after the update.
        self.policy_hash = policy.digest()[:16]
        """The first 16 hex digits of the SHA-256 of the resolved policy. It is part of the version's logical
        id and description, so a new version is created only when the policy changes."""
        self.version = bedrock.CfnGuardrailVersion(
            self,
            f"Version{self.policy_hash}",
            guardrail_identifier=self.resource.attr_guardrail_id,
            description=f"inference-tiers guardrail policy {self.policy_hash}",
        )
        """The ``bedrock.CfnGuardrailVersion`` of the current policy (its number is
        :attr:`guardrail_version`); retained when a policy change replaces it, so callers still pinning it
        keep working."""
        # A replaced version stays until deleted by hand: a stack that reads the version parameter keeps
        # calling the old version until its own next deploy reads the new one.
        self.version.apply_removal_policy(RemovalPolicy.RETAIN)
        self.version_parameter_name = _version_parameter_name(args, self, version_parameter_name)
        """The name of the SSM parameter that publishes :attr:`guardrail_version` to other stacks
        (``version_parameter_name``; by default
        ``/inference-tiers/<stack name>/<construct path in the stack>/GuardrailVersion``)."""
        self.version_parameter = ssm.StringParameter(
            self,
            "VersionParameter",
            parameter_name=self.version_parameter_name,
            string_value=self.guardrail_version,
            description="inference-tiers: the guardrail version callers pass (the guardrail contract)",
        )
        """The ``ssm.StringParameter`` named :attr:`version_parameter_name` that holds the current version;
        other stacks read it through :meth:`for_consumer`."""

    @property
    def guardrail_id(self) -> str:
        """The guardrail's id (a deploy-time string)."""
        return self.resource.attr_guardrail_id

    @property
    def guardrail_arn(self) -> str:
        """The guardrail's ARN, without a version (a deploy-time string)."""
        return self.resource.attr_guardrail_arn

    @property
    def guardrail_version(self) -> str:
        """The numbered version that callers should pass (``guardrailVersion``)."""
        return self.version.attr_version

    @property
    def versioned_arn(self) -> str:
        """``<guardrail ARN>:<version>``: the value IAM's ``bedrock:GuardrailIdentifier`` key carries."""
        return Fn.join(":", [self.guardrail_arn, self.guardrail_version])

    def for_consumer(self, scope: Construct) -> Guardrail | PublishedGuardrail:
        """This guardrail as ``scope``'s stack uses it: itself in its own stack; in another stack, the same
        guardrail with its version read from :attr:`version_parameter_name` at each deploy of that stack (an
        ``AWS::SSM::Parameter::Value<String>`` parameter), so a policy change renames or changes nothing that
        stack imports. That stack then depends on this one (the parameter must exist first)."""
        consumer = Stack.of(scope)
        producer = Stack.of(self)
        if consumer is producer:
            return self
        consumer.add_stack_dependency(producer, "reads the guardrail version parameter")
        version = ssm.StringParameter.value_for_string_parameter(scope, self.version_parameter_name)
        return PublishedGuardrail(self, version)

    def guardrail_profile_arns(self) -> list[str]:
        """The cross-Region guardrail profile in every Region it may route to (empty without a profile)."""
        if self.cross_region_guardrail_profile is None:
            return []
        stack = Stack.of(self)
        return [
            f"arn:{stack.partition}:bedrock:*:{stack.account}:guardrail-profile/{self.cross_region_guardrail_profile}"
        ]

    def grant_apply(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` apply this guardrail (ApplyGuardrail, inline or standalone) and decrypt it."""
        profiles = self.guardrail_profile_arns()
        grant = _grant_apply("Guardrail", grantee, self.guardrail_arn, profiles[0] if profiles else None)
        self.kms_key.grant(grantee, "kms:Decrypt")
        return grant

    # Metrics (AWS/Bedrock/Guardrails, per guardrail version).

    def metric(self, metric_name: str, **props: Any) -> cloudwatch.Metric:
        """An ``AWS/Bedrock/Guardrails`` metric of this version; ``props``: ``cloudwatch.MetricOptions`` but
        ``dimensions_map`` (Sum over 5 minutes unless overridden)."""
        args = Args("Guardrail.metric")
        args.text("metric_name", metric_name, allow_token=False)
        return cloudwatch.Metric(
            namespace="AWS/Bedrock/Guardrails",
            metric_name=metric_name,
            dimensions_map={"GuardrailArn": self.guardrail_arn, "GuardrailVersion": self.guardrail_version},
            **{"statistic": "Sum", "period": _FIVE_MINUTES, **metric_options(args, props)},
        )

    def metric_invocations(self, **props: Any) -> cloudwatch.Metric:
        """``Invocations``: evaluations of this version (Sum over 5 minutes; ``props`` as in :meth:`metric`)."""
        return self.metric("Invocations", **props)

    def metric_invocations_intervened(self, **props: Any) -> cloudwatch.Metric:
        """``InvocationsIntervened``: evaluations in which the guardrail intervened (Sum)."""
        return self.metric("InvocationsIntervened", **props)

    def metric_invocation_latency(self, **props: Any) -> cloudwatch.Metric:
        """``InvocationLatency``: evaluation latency in milliseconds (p90 unless ``props`` says otherwise)."""
        return self.metric("InvocationLatency", **{"statistic": "p90", **props})

    def metric_invocation_client_errors(self, **props: Any) -> cloudwatch.Metric:
        """``InvocationClientErrors``: evaluations that failed on the caller's request (Sum)."""
        return self.metric("InvocationClientErrors", **props)

    def metric_invocation_server_errors(self, **props: Any) -> cloudwatch.Metric:
        """``InvocationServerErrors``: evaluations that failed in the service (Sum)."""
        return self.metric("InvocationServerErrors", **props)

    def metric_invocation_throttles(self, **props: Any) -> cloudwatch.Metric:
        """``InvocationThrottles``: throttled evaluations (Sum)."""
        return self.metric("InvocationThrottles", **props)

    def metric_text_unit_count(self, **props: Any) -> cloudwatch.Metric:
        """``TextUnitCount``: text units evaluated, the unit the guardrail is billed by (Sum)."""
        return self.metric("TextUnitCount", **props)

    def metric_intervention_rate(self, period: Duration = _FIVE_MINUTES) -> cloudwatch.MathExpression:
        """Percentage of guardrail evaluations that intervened (a spike: attack or bad change; 0: detached)."""
        metric_options(Args("Guardrail.metric_intervention_rate"), {"period": period})
        return cloudwatch.MathExpression(
            expression="IF(invocations > 0, 100 * intervened / invocations, 0)",
            using_metrics={
                "intervened": self.metric_invocations_intervened(period=period),
                "invocations": self.metric_invocations(period=period),
            },
            label="Guardrail intervention rate (%)",
            period=period,
        )


class PublishedGuardrail:
    """A :class:`Guardrail` seen from another stack (see :meth:`Guardrail.for_consumer`): the same ARN, key and
    grants, with ``guardrail_version`` read from the guardrail's version parameter."""

    def __init__(self, guardrail: Guardrail, guardrail_version: str) -> None:
        self.guardrail = guardrail
        self.guardrail_version = guardrail_version

    @property
    def guardrail_arn(self) -> str:
        return self.guardrail.guardrail_arn

    @property
    def versioned_arn(self) -> str:
        return Fn.join(":", [self.guardrail_arn, self.guardrail_version])

    def grant_apply(self, grantee: iam.IGrantable) -> iam.Grant:
        return self.guardrail.grant_apply(grantee)


# Each MetricOptions property that a metric helper passes on (dimensions are the helper's own), and its check.
_METRIC_OPTIONS: dict[str, Callable[[Args, str, Any], Any]] = {
    "account": lambda args, name, v: args.text(name, v, pattern=r"[0-9]{12}", description="an account id"),
    "region": lambda args, name, v: args.text(
        name, v, pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", description="a Region"
    ),
    "color": lambda args, name, v: args.text(
        name, v, pattern=r"#[0-9a-fA-F]{6}", description="a color #rrggbb"
    ),
    "label": lambda args, name, v: args.text(name, v, min_length=0),
    "statistic": lambda args, name, v: args.text(name, v, allow_token=False),
    "unit": lambda args, name, v: args.instance(name, v, cloudwatch.Unit),
    "visible": lambda args, name, v: args.boolean(name, v),
    "period": lambda args, name, v: _metric_period(args, name, v),
}


def _metric_period(args: Args, name: str, value: Any) -> Duration:
    """CloudWatch periods: 1, 5, 10, 30 seconds, or a multiple of 60 (what aws-cdk otherwise rejects in JS)."""
    period = args.duration(name, value, minimum=Duration.seconds(1), maximum=Duration.days(1))
    if period.is_unresolved():
        return period
    seconds = period.to_seconds()
    if seconds not in (1, 5, 10, 30) and seconds % 60:
        raise args.error(name, value, "a Duration of 1, 5, 10, 30 seconds or a multiple of 60 seconds")
    return period


def metric_options(args: Args, props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` of a ``metric*()`` helper, each checked (unknown names refused, by name)."""
    for name, value in props.items():
        check = _METRIC_OPTIONS.get(name)
        if check is None:
            options = ", ".join(_METRIC_OPTIONS)
            raise args.error(name, value, f"a metric option ({options}; the helper sets the dimensions)")
        check(args, name, value)
    return dict(props)


_GUARDRAIL_ARN = r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+"


class ImportedGuardrail:
    """A guardrail created elsewhere (another stack, team or tool), to enforce with ``ModelInvokeAccess``.

    :param guardrail_arn: ``arn:aws:bedrock:<region>:<account>:guardrail/<id>``.
    :param guardrail_version: the numbered version callers must pass (``1``, ``2``...; not DRAFT, which can
        change under the callers).
    :param kms_key_arn: the guardrail's customer-managed key, if any (callers need ``kms:Decrypt`` on it).
    :param cross_region_guardrail_profile: its guardrail profile id (``us.guardrail.v1:0``), if any.
    """

    def __init__(
        self,
        *,
        guardrail_arn: str,
        guardrail_version: str,
        kms_key_arn: str | None = None,
        cross_region_guardrail_profile: str | None = None,
    ) -> None:
        args = Args("ImportedGuardrail")
        args.text("guardrail_arn", guardrail_arn, max_length=2048, pattern=_GUARDRAIL_ARN)
        args.text("guardrail_version", guardrail_version, max_length=8, pattern=r"[1-9][0-9]{0,7}")
        if kms_key_arn is not None:
            args.text(
                "kms_key_arn",
                kms_key_arn,
                max_length=2048,
                pattern=r"arn:aws(-[^:]+)?:kms:[a-zA-Z0-9-]*:[0-9]{12}:key/[a-zA-Z0-9-]{36}",
            )
        if cross_region_guardrail_profile is not None:
            args.text(
                "cross_region_guardrail_profile",
                cross_region_guardrail_profile,
                max_length=64,
                pattern=_PROFILE_ID,
            )
        self._guardrail_arn = guardrail_arn
        self.guardrail_version = guardrail_version
        """The numbered version callers must pass (``1``, ``2``...), as given."""
        self.kms_key_arn = kms_key_arn
        """The ARN of the guardrail's customer-managed key, on which :meth:`grant_apply` grants
        ``kms:Decrypt``; ``None``: no key was given, and no ``kms:Decrypt`` is granted."""
        self.cross_region_guardrail_profile = cross_region_guardrail_profile
        """The guardrail's profile id (such as ``us.guardrail.v1:0``), on which :meth:`grant_apply` grants
        ApplyGuardrail in every Region; ``None`` for a guardrail without cross-Region inference."""

    @property
    def guardrail_arn(self) -> str:
        """The guardrail's ARN, as given (without a version)."""
        return self._guardrail_arn

    @property
    def versioned_arn(self) -> str:
        """``<guardrail ARN>:<version>``: the value IAM's ``bedrock:GuardrailIdentifier`` key carries."""
        return f"{self._guardrail_arn}:{self.guardrail_version}"

    def grant_apply(self, grantee: iam.IGrantable) -> iam.Grant:
        """ApplyGuardrail on the guardrail (and its profile in every Region), and decrypt with its key."""
        profile = None
        if self.cross_region_guardrail_profile is not None:
            arn = Arn.split(self._guardrail_arn, ArnFormat.SLASH_RESOURCE_NAME)
            profile = f"arn:{arn.partition}:bedrock:*:{arn.account}:guardrail-profile/{self.cross_region_guardrail_profile}"
        grant = _grant_apply("ImportedGuardrail", grantee, self._guardrail_arn, profile)
        if self.kms_key_arn is not None:
            iam.Grant.add_to_principal(
                grantee=grantee, actions=["kms:Decrypt"], resource_arns=[self.kms_key_arn]
            )
        return grant


def _grant_apply(owner: str, grantee: Any, guardrail_arn: str, profile_arn: str | None) -> iam.Grant:
    """ApplyGuardrail on the guardrail and, for a cross-Region guardrail, its profile in every Region: that
    wildcard is acknowledged on the grantee for this one ARN, since the library knows why it is needed."""
    Args(f"{owner}.grant_apply").implements("grantee", grantee, iam.IGrantable)
    grant = iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["bedrock:ApplyGuardrail"],
        resource_arns=[guardrail_arn, *([profile_arn] if profile_arn else [])],
    )
    if profile_arn is not None:
        acknowledge_granted_resource(
            grantee,
            profile_arn,
            "A cross-Region guardrail evaluates in whichever Region of its guardrail profile serves the "
            "request, so ApplyGuardrail needs that one guardrail profile in every Region of this account.",
        )
    return grant


def _resolve_policy(
    args: Args,
    *,
    content_filters: Any,
    denied_topics: Any,
    word_filters: Any,
    profanity_filter: Any,
    pii_entities: Any,
    regex_filters: Any,
    contextual_grounding: Any,
    automated_reasoning: Any,
    tier: GuardrailTier,
    cross_region_guardrail_profile: str | None,
    blocked_input_message: Any,
    blocked_output_message: Any,
    description: Any,
) -> _Policy:
    """Check the whole guardrail (limits from the CloudFormation schema) and return its plain-value policy."""
    _text(args, "blocked_input_message", blocked_input_message, 500)
    _text(args, "blocked_output_message", blocked_output_message, 500)
    if description is not None:
        _text(args, "description", description, 200)
    contents = _instances(args, "content_filters", content_filters, ContentFilter, 6)
    _distinct(args, "content_filters", contents, lambda f: f.type.value, "type")
    topics = _instances(args, "denied_topics", denied_topics, DeniedTopic, 30)
    _distinct(args, "denied_topics", topics, lambda t: t.name, "name")
    words = args.sequence(
        "word_filters",
        word_filters,
        lambda name, w: w if isinstance(w, WordFilter) else WordFilter(text=_text(args, name, w, 100)),
        max_items=10000,
    )
    _distinct(args, "word_filters", words, lambda w: w.text, "word")
    pii = _instances(args, "pii_entities", pii_entities, PiiEntity, len(PiiEntityType))
    _distinct(args, "pii_entities", pii, lambda e: e.type.value, "type")
    regexes = _instances(args, "regex_filters", regex_filters, RegexFilter, 30)
    _distinct(args, "regex_filters", regexes, lambda r: r.name, "name")
    profanity = args.boolean("profanity_filter", profanity_filter)
    if contextual_grounding is not None:
        args.instance("contextual_grounding", contextual_grounding, ContextualGrounding)
    if automated_reasoning is not None:
        args.instance("automated_reasoning", automated_reasoning, AutomatedReasoning)
    if tier is GuardrailTier.STANDARD and cross_region_guardrail_profile is None:
        raise args.error(
            "tier",
            tier.value,
            "GuardrailTier.CLASSIC, or STANDARD with a cross_region_guardrail_profile such as "
            "'us.guardrail.v1:0' (the STANDARD tier runs only with cross-Region inference)",
        )
    policy = _Policy(
        content=[f._cfn() for f in contents],
        topics=[t._cfn() for t in topics],
        words=[w._cfn() for w in words],
        profanity=profanity,
        pii=[p._cfn() for p in pii],
        regexes=[r._cfn() for r in regexes],
        grounding=contextual_grounding._cfn() if contextual_grounding else [],
        automated_reasoning=automated_reasoning._cfn() if automated_reasoning else None,
        tier=tier.value,
        cross_region_profile=cross_region_guardrail_profile,
        blocked_input_message=blocked_input_message,
        blocked_output_message=blocked_output_message,
        description=description,
    )
    if not any(
        (
            policy.content,
            policy.topics,
            policy.words,
            policy.profanity,
            policy.pii,
            policy.regexes,
            policy.grounding,
            policy.automated_reasoning,
        )
    ):
        raise args.error(
            "content_filters",
            (),
            "at least one policy: content_filters, denied_topics, word_filters, profanity_filter, "
            "pii_entities, regex_filters, contextual_grounding or automated_reasoning (every one is empty)",
        )
    return policy


def _cfn_policy_props(policy: _Policy, stack: Stack) -> dict[str, Any]:
    """The CfnGuardrail keyword arguments for ``policy``, as the L1's typed property classes."""
    g = bedrock.CfnGuardrail
    props: dict[str, Any] = {}
    if policy.content:
        props["content_policy_config"] = g.ContentPolicyConfigProperty(
            filters_config=[g.ContentFilterConfigProperty(**f) for f in policy.content],
            content_filters_tier_config=g.ContentFiltersTierConfigProperty(tier_name=policy.tier),
        )
    if policy.topics:
        props["topic_policy_config"] = g.TopicPolicyConfigProperty(
            topics_config=[g.TopicConfigProperty(**t) for t in policy.topics],
            topics_tier_config=g.TopicsTierConfigProperty(tier_name=policy.tier),
        )
    if policy.words or policy.profanity:
        profanity = g.ManagedWordsConfigProperty(
            type="PROFANITY", input_action="BLOCK", output_action="BLOCK"
        )
        props["word_policy_config"] = g.WordPolicyConfigProperty(
            words_config=[g.WordConfigProperty(**w) for w in policy.words] or None,
            managed_word_lists_config=[profanity] if policy.profanity else None,
        )
    if policy.pii or policy.regexes:
        props["sensitive_information_policy_config"] = g.SensitiveInformationPolicyConfigProperty(
            pii_entities_config=[g.PiiEntityConfigProperty(**e) for e in policy.pii] or None,
            regexes_config=[g.RegexConfigProperty(**r) for r in policy.regexes] or None,
        )
    if policy.grounding:
        props["contextual_grounding_policy_config"] = g.ContextualGroundingPolicyConfigProperty(
            filters_config=[g.ContextualGroundingFilterConfigProperty(**f) for f in policy.grounding]
        )
    if policy.automated_reasoning:
        props["automated_reasoning_policy_config"] = g.AutomatedReasoningPolicyConfigProperty(
            **policy.automated_reasoning
        )
    if policy.cross_region_profile:
        props["cross_region_config"] = g.GuardrailCrossRegionConfigProperty(
            guardrail_profile_arn=(
                f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:guardrail-profile/"
                f"{policy.cross_region_profile}"
            )
        )
    return props
