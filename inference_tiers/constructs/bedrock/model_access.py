"""Least-privilege Bedrock invoke access that can enforce a guardrail.

A model is reached in one of three ways, each needing different IAM resources (Bedrock user guide,
"Prerequisites for inference profiles" and the cross-Region inference pages):

- :class:`FoundationModel`: the model in this Region, ``arn:<p>:bedrock:<region>::foundation-model/<id>``.
- :class:`CrossRegionProfile`: a system inference profile (``us.<id>``, ``global.<id>``...). IAM checks the
  profile *and* the model in whichever destination Region serves the request: geographic profiles need
  ``arn:<p>:bedrock:*::foundation-model/<id>``, global ones the source-Region and the empty-Region
  ``arn:<p>:bedrock:::foundation-model/<id>``. Those model grants are pinned to the profile with the
  ``bedrock:InferenceProfileArn`` condition, so they do not allow calling the model directly.
- :class:`ApplicationProfile`: an application inference profile (cost attribution) on either of the above.

``bedrock:InvokeModel`` also authorizes Converse and ``bedrock:InvokeModelWithResponseStream`` ConverseStream.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aws_cdk import Annotations, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from inference_tiers.constructs.bedrock.guardrail import Guardrail, IGuardrail
from inference_tiers.constructs.common.nag import acknowledge_granted_resource
from inference_tiers.validation import Args

INVOKE_ACTIONS = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")

# A foundation-model id as Bedrock spells it (provider.model[-version][:n[:m]]), from the CloudFormation schema.
MODEL_ID_PATTERN = r"[a-z0-9-]{1,63}\.([a-z0-9-]{1,63}\.){0,2}[a-z0-9-]{1,63}(:[a-z0-9-]{1,63}){0,2}"
APPLICATION_PROFILE_ARN = (
    r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:application-inference-profile/[a-z0-9]+"
)


class Geography(StrEnum):
    """The prefix of a system (cross-Region) inference profile: where requests may be served."""

    US = "us"
    EU = "eu"
    APAC = "apac"
    JP = "jp"
    AU = "au"
    CA = "ca"
    US_GOV = "us-gov"
    GLOBAL = "global"


def has_geography_prefix(model_id: str) -> bool:
    """``us.amazon.nova...`` is an inference-profile id, not a model id."""
    return model_id.split(".", 1)[0] in {g.value for g in Geography}


def _model_id(args: Args, model_id: Any) -> str:
    """A foundation-model id known at synth time: the cross-Region ARNs, the application profile's name and
    the acknowledged cdk-nag findings are derived from it."""
    checked = args.text(
        "model_id",
        model_id,
        pattern=MODEL_ID_PATTERN,
        description="a Bedrock foundation-model id such as 'amazon.nova-2-lite-v1:0'",
        allow_token=False,
    )
    if has_geography_prefix(checked):
        raise args.error(
            "model_id", model_id, "a foundation-model id without a geography prefix (pass that as geography)"
        )
    return checked


def _foundation_model_arn(scope: Construct, region: str, model_id: str) -> str:
    return f"arn:{Stack.of(scope).partition}:bedrock:{region}::foundation-model/{model_id}"


@dataclass(frozen=True)
class FoundationModel:
    """A foundation model invoked in this stack's Region (on-demand).

    :param model_id: the foundation-model id, e.g. ``amazon.nova-2-lite-v1:0``, without a geography prefix.
    """

    model_id: str
    """The foundation-model id, e.g. ``amazon.nova-2-lite-v1:0``, without a geography prefix."""

    def __post_init__(self) -> None:
        _model_id(Args("FoundationModel"), self.model_id)

    def invoke_id(self, scope: Construct) -> str:
        """The ``modelId`` to call."""
        return self.model_id

    def arn(self, scope: Construct) -> str:
        """The model's ARN in the Region of ``scope``'s stack."""
        return _foundation_model_arn(scope, Stack.of(scope).region, self.model_id)

    def _targets(self, scope: Construct) -> list[_Target]:
        return [_Target(resources=[self.arn(scope)])]


@dataclass(frozen=True)
class CrossRegionProfile:
    """A system-defined cross-Region inference profile, ``<geography>.<model_id>``, in this stack's Region.

    :param model_id: the foundation-model id, without a geography prefix.
    :param geography: the :class:`Geography` whose Regions the profile routes to.
    """

    model_id: str
    """The foundation-model id the profile serves, without a geography prefix."""
    geography: Geography
    """The :class:`Geography` whose Regions may serve the requests; the prefix of :attr:`profile_id`."""

    def __post_init__(self) -> None:
        args = Args("CrossRegionProfile")
        _model_id(args, self.model_id)
        object.__setattr__(self, "geography", args.choice("geography", self.geography, Geography))

    @property
    def profile_id(self) -> str:
        """``<geography>.<model_id>``: the system profile's id, which callers pass as ``modelId``."""
        return f"{self.geography.value}.{self.model_id}"

    def invoke_id(self, scope: Construct) -> str:
        """The ``modelId`` to call: the profile id."""
        return self.profile_id

    def arn(self, scope: Construct) -> str:
        """The profile's ARN in the Region and account of ``scope``'s stack."""
        stack = Stack.of(scope)
        return f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/{self.profile_id}"

    def model_arns(self, scope: Construct) -> list[str]:
        """The foundation model in every Region this profile may route to."""
        if self.geography is Geography.GLOBAL:
            # Global profiles authorize the source-Region model and the Region-less "global" model ARN.
            return [
                _foundation_model_arn(scope, Stack.of(scope).region, self.model_id),
                _foundation_model_arn(scope, "", self.model_id),
            ]
        return [_foundation_model_arn(scope, "*", self.model_id)]

    def _targets(self, scope: Construct) -> list[_Target]:
        profile = self.arn(scope)
        return [_Target(resources=[profile]), _Target(resources=self.model_arns(scope), profiles=[profile])]


@dataclass(frozen=True)
class ApplicationProfile:
    """An application inference profile (``profile_arn``) that copies ``source``.

    ``ApplicationInferenceProfile.model_source`` builds this for a profile created in the same app.
    """

    profile_arn: str
    """The application inference profile's ARN
    (``arn:aws:bedrock:<region>:<account>:application-inference-profile/<id>``), which callers pass as
    ``modelId``."""
    source: FoundationModel | CrossRegionProfile
    """The foundation model or cross-Region profile the application profile copies: access to it is granted
    only through the application profile."""

    def __post_init__(self) -> None:
        args = Args("ApplicationProfile")
        args.text(
            "profile_arn",
            self.profile_arn,
            pattern=APPLICATION_PROFILE_ARN,
            description="arn:aws:bedrock:<region>:<account>:application-inference-profile/<id>",
        )
        _system_source(args, "source", self.source)

    def invoke_id(self, scope: Construct) -> str:
        """The ``modelId`` to call: the application profile's ARN."""
        return self.profile_arn

    def _targets(self, scope: Construct) -> list[_Target]:
        targets = [_Target(resources=[self.profile_arn])]
        if isinstance(self.source, FoundationModel):
            return [*targets, _Target(resources=[self.source.arn(scope)], profiles=[self.profile_arn])]
        system = self.source.arn(scope)
        return [
            *targets,
            _Target(resources=[system], profiles=[self.profile_arn]),
            # Which profile ARN Bedrock puts in the request context at the model check (the application
            # profile or the system one it copies) is not documented: allow either, nothing else.
            _Target(resources=self.source.model_arns(scope), profiles=[self.profile_arn, system]),
        ]


ModelSource = FoundationModel | CrossRegionProfile | ApplicationProfile


def _system_source(args: Args, param: str, value: Any) -> FoundationModel | CrossRegionProfile:
    return args.instance(
        param,
        value,
        FoundationModel | CrossRegionProfile,  # type: ignore[arg-type]
        "a FoundationModel or CrossRegionProfile",
    )


def _model_source(args: Args, value: Any) -> ModelSource:
    checked: ModelSource = args.instance(
        "model",
        value,
        FoundationModel | CrossRegionProfile | ApplicationProfile,  # type: ignore[arg-type]
        "a FoundationModel, CrossRegionProfile or ApplicationProfile",
    )
    return checked


def _guardrail(args: Args, value: Any) -> IGuardrail | None:
    if value is None:
        return None
    checked: IGuardrail = args.implements(
        "guardrail", value, IGuardrail, "a Guardrail or ImportedGuardrail (an IGuardrail, not a string)"
    )
    return checked


@dataclass(frozen=True)
class _Target:
    """Resources to invoke, optionally only through the inference profiles in ``profiles``."""

    resources: list[str]
    profiles: list[str] | None = None


def invoke_statements(
    scope: Construct, model: ModelSource, guardrail: IGuardrail | None = None
) -> list[iam.PolicyStatement]:
    """The IAM statements that let a principal invoke ``model``, and only with ``guardrail`` if one is given.

    With a guardrail, every Allow requires ``bedrock:GuardrailIdentifier`` to equal the guardrail's versioned
    ARN, and an explicit Deny covers the same actions and resources with ``StringNotEquals``. A negated
    condition operator is true when the key is absent, so the Deny also matches requests that name no
    guardrail (no ``IfExists`` or ``Null`` operator needed; an ``IfExists`` variant would be equivalent here).
    The Deny overrides any other Allow the principal may hold for these resources. A :class:`Guardrail` of
    another stack is used through :meth:`Guardrail.for_consumer` (the guardrail contract).
    """
    args = Args("invoke_statements")
    args.implements("scope", scope, IConstruct, "a construct in the stack of the policy (not a string)")
    model = _model_source(args, model)
    guardrail = _guardrail(args, guardrail)
    if isinstance(guardrail, Guardrail):
        guardrail = guardrail.for_consumer(scope)
    statements: list[iam.PolicyStatement] = []
    resources: list[str] = []
    for target in model._targets(scope):
        string_equals: dict[str, object] = {}
        if target.profiles:
            string_equals["bedrock:InferenceProfileArn"] = (
                target.profiles[0] if len(target.profiles) == 1 else target.profiles
            )
        if guardrail is not None:
            string_equals["bedrock:GuardrailIdentifier"] = guardrail.versioned_arn
        statements.append(
            iam.PolicyStatement(
                actions=list(INVOKE_ACTIONS),
                resources=target.resources,
                conditions={"StringEquals": string_equals} if string_equals else None,
            )
        )
        resources.extend(target.resources)
    if guardrail is not None:
        statements.append(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=list(INVOKE_ACTIONS),
                resources=resources,
                conditions={"StringNotEquals": {"bedrock:GuardrailIdentifier": guardrail.versioned_arn}},
            )
        )
    return statements


class ModelInvokeAccess(Construct):
    """Grants ``grantee`` invoke (streaming included) on ``model``, enforcing ``guardrail`` when given.

    :param grantee: the principal (a role, a function...) that calls Bedrock.
    :param model: a :class:`FoundationModel`, :class:`CrossRegionProfile` or :class:`ApplicationProfile`.
    :param guardrail: the guardrail every call must carry (its numbered version), plus ApplyGuardrail on it.
        Default: none, which adds a synth warning because calls are then unguarded.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        grantee: iam.IGrantable,
        model: ModelSource,
        guardrail: IGuardrail | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("ModelInvokeAccess")
        args.implements("grantee", grantee, iam.IGrantable)
        model = _model_source(args, model)
        guardrail = _guardrail(args, guardrail)
        self.model_id = model.invoke_id(self)
        """The ``modelId`` the grantee calls: the foundation-model id, the cross-Region profile id or the
        application profile's ARN."""
        # The statements land in the grantee's policy: they are built for its stack (the ARNs, and the guardrail
        # version read there when the guardrail is another stack's).
        principal = grantee.grant_principal
        policy_scope = principal if isinstance(principal, Construct) else self
        self.statements = invoke_statements(policy_scope, model, guardrail)
        """The IAM statements added to the grantee's policy (see :func:`invoke_statements`): the Allows and,
        with a guardrail, the Deny of calls that do not carry it."""
        for statement in self.statements:
            if not grantee.grant_principal.add_to_principal_policy(statement).statement_added:
                raise args.error(
                    "grantee",
                    grantee,
                    "a principal that can hold an identity policy (a role, user or group created or imported "
                    "in this app)",
                )
        _acknowledge_cross_region_models(policy_scope, grantee, model)
        if guardrail is None:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:bedrock-invoke-without-guardrail",
                f"{grantee.grant_principal} may invoke {self.model_id} without a guardrail; pass guardrail= to "
                "require one on every call",
            )
        else:
            guardrail.grant_apply(grantee)


def _acknowledge_cross_region_models(scope: Construct, grantee: iam.IGrantable, model: ModelSource) -> None:
    """A geographic cross-Region profile needs its model in every Region (``bedrock:*::``): the one wildcard
    of these grants, acknowledged here for each such ARN so that the user has nothing to acknowledge."""
    system = model.source if isinstance(model, ApplicationProfile) else model
    if not isinstance(system, CrossRegionProfile) or system.geography is Geography.GLOBAL:
        return  # a global profile is granted the source-Region and Region-less model ARNs: no wildcard
    for arn in system.model_arns(scope):
        acknowledge_granted_resource(
            grantee,
            arn,
            f"The {system.profile_id} cross-Region profile serves requests from the model in any Region of "
            "its geography; the grant names this one model, only through bedrock:InferenceProfileArn.",
        )
