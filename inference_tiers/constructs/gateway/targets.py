"""The models a gateway fronts, as CDK props: each renders its LiteLLM entry and knows what IAM it needs.

- :class:`BedrockTarget`: a tier-1 model source (``ModelSource``) and the guardrail every call must carry;
  the task role gets ``ModelInvokeAccess`` with that guardrail enforced (Allow with, Deny without).
- :class:`SageMakerTarget`: one SageMaker endpoint (tier 2, or a HyperPod model registered as one); the task
  role may invoke exactly that endpoint.
- :class:`OpenAICompatibleTarget`: a server by URL (vLLM on EKS, tiers 3-4); no IAM, network only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from inference_tiers.constructs.bedrock.guardrail import Guardrail, IGuardrail
from inference_tiers.constructs.bedrock.model_access import (
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
    ModelInvokeAccess,
    ModelSource,
)
from inference_tiers.litellm.config import (
    MODEL_NAME_PATTERN,
    BedrockModel,
    GuardrailConfig,
    ModelTarget,
    OpenAICompatibleModel,
    SageMakerModel,
)
from inference_tiers.validation import Args, is_token


class IVersionedGuardrail(IGuardrail, Protocol):
    """A guardrail with the numbered version callers pass (``Guardrail`` and ``ImportedGuardrail`` both are)."""

    @property
    def guardrail_version(self) -> str:
        """The numbered version every call passes (``guardrailVersion``; not DRAFT)."""


def _name(args: Args, value: Any) -> str:
    return args.text("name", value, pattern=MODEL_NAME_PATTERN, allow_token=False)


@dataclass(frozen=True)
class BedrockTarget:
    """A Bedrock model the gateway serves as ``name``, only ever with ``guardrail``.

    :param model: a ``FoundationModel``, ``CrossRegionProfile`` or ``ApplicationProfile`` (tier 1's
        ``ApplicationInferenceProfile.model_source``).
    :param guardrail: the guardrail sent on every call and required by the task role's policy.
    :param base_model_id: the model id LiteLLM prices calls by. Default: the profile or model id (for an
        application profile, the id of the model or system profile it copies).
    """

    name: str
    """The model name clients send to the gateway (letters, digits and ``._:/-``, at most 128 characters)."""
    model: ModelSource
    """The Bedrock model or inference profile the gateway invokes: a ``FoundationModel``,
    ``CrossRegionProfile`` or ``ApplicationProfile``."""
    guardrail: IVersionedGuardrail
    """The guardrail sent on every call; the task role may invoke ``model`` only with it."""
    base_model_id: str | None = None
    """The model id LiteLLM prices calls by; ``None``: the profile or model id (for an application profile,
    the id of the model or system profile it copies)."""

    def __post_init__(self) -> None:
        args = Args("BedrockTarget")
        _name(args, self.name)
        args.instance(
            "model",
            self.model,
            FoundationModel | CrossRegionProfile | ApplicationProfile,  # type: ignore[arg-type]
            "a FoundationModel, CrossRegionProfile or ApplicationProfile",
        )
        args.implements("guardrail", self.guardrail, IVersionedGuardrail)
        if self.base_model_id is not None:
            args.text("base_model_id", self.base_model_id, allow_token=False)

    def render(self, scope: Construct) -> ModelTarget:
        """The LiteLLM model entry for this target, in the Region of ``scope``'s stack.

        A :class:`Guardrail` of another stack is used through :meth:`Guardrail.for_consumer` (the guardrail
        contract): the version comes from its SSM parameter, resolved by CloudFormation at each deploy of
        ``scope``'s stack, never from an export that the guardrail's next policy change would have to delete."""
        base = self.base_model_id
        if base is None and isinstance(self.model, ApplicationProfile):
            base = self.model.source.invoke_id(scope)
        guardrail = self.guardrail
        if isinstance(guardrail, Guardrail):
            guardrail = guardrail.for_consumer(scope)
        return BedrockModel(
            name=self.name,
            model_id=self.model.invoke_id(scope),
            base_model_id=base,
            guardrail=GuardrailConfig(guardrail.guardrail_arn, guardrail.guardrail_version),
            region=Stack.of(scope).region,
        )

    def grant(self, scope: Construct, construct_id: str, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` invoke the model only with the guardrail (a ``ModelInvokeAccess`` named ``construct_id``)."""
        # ModelInvokeAccess acknowledges the cross-Region profile's one wildcard (bedrock:*::) itself.
        ModelInvokeAccess(scope, construct_id, grantee=grantee, model=self.model, guardrail=self.guardrail)


@dataclass(frozen=True)
class SageMakerTarget:
    """A SageMaker endpoint in the gateway's account and Region, served as ``name``.

    :param endpoint_name: the endpoint (tier 2's ``SageMakerLlmEndpoint.endpoint_name``; a token is accepted).
    :param inference_component: route to this inference component. Default: none (single-model endpoint).
    :param served_model: the model name the container expects. Default: the container's own.
    """

    name: str
    """The model name clients send to the gateway (letters, digits and ``._:/-``, at most 128 characters)."""
    endpoint_name: str
    """The SageMaker endpoint's name (a token is accepted); the task role may invoke only this endpoint."""
    inference_component: str | None = None
    """The inference component calls are routed to; ``None`` for a single-model endpoint."""
    served_model: str | None = None
    """The model name the container expects in the request body; ``None``: the container's own."""

    def __post_init__(self) -> None:
        args = Args("SageMakerTarget")
        _name(args, self.name)
        # SageMakerModel checks the rest when rendered; check here too, so the error names this class.
        SageMakerModel(
            self.name, self.endpoint_name, "us-east-1", self.inference_component, self.served_model
        )

    def render(self, scope: Construct) -> ModelTarget:
        """The LiteLLM model entry for this endpoint, in the Region of ``scope``'s stack."""
        return SageMakerModel(
            self.name, self.endpoint_name, Stack.of(scope).region, self.inference_component, self.served_model
        )

    def endpoint_arn(self, scope: Construct) -> str:
        """The endpoint's ARN in the Region and account of ``scope``'s stack."""
        # SageMaker lower-cases endpoint names in ARNs.
        name = self.endpoint_name if is_token(self.endpoint_name) else self.endpoint_name.lower()
        return Stack.of(scope).format_arn(service="sagemaker", resource="endpoint", resource_name=name)

    def grant(self, scope: Construct, construct_id: str, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` invoke the endpoint (``sagemaker:InvokeEndpoint``, streaming included)."""
        # InvokeEndpointWithResponseStream is authorized by sagemaker:InvokeEndpoint (API reference).
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=[self.endpoint_arn(scope)]
        )


@dataclass(frozen=True)
class OpenAICompatibleTarget:
    """An OpenAI-compatible server reachable from the gateway's subnets (vllm-router on EKS, tier 4).

    :param name: the model name clients send to the gateway.
    :param base_url: its ``/v1`` base URL, such as ``http://router.internal:30000/v1``.
    :param served_model: the model it serves.
    """

    name: str
    """The model name clients send to the gateway (letters, digits and ``._:/-``, at most 128 characters)."""
    base_url: str
    """The server's ``/v1`` base URL, reachable from the gateway's subnets, such as
    ``http://router.internal:30000/v1``."""
    served_model: str
    """The model name the server serves, sent in the request body."""

    def __post_init__(self) -> None:
        args = Args("OpenAICompatibleTarget")
        _name(args, self.name)
        OpenAICompatibleModel(self.name, self.base_url, self.served_model)

    def render(self, scope: Construct) -> ModelTarget:
        """The LiteLLM model entry for this server."""
        return OpenAICompatibleModel(self.name, self.base_url, self.served_model)

    def grant(self, scope: Construct, construct_id: str, grantee: iam.IGrantable) -> None:
        """Nothing to grant: the server is reached over the network with the upstream API key."""


GatewayTarget = BedrockTarget | SageMakerTarget | OpenAICompatibleTarget
GATEWAY_TARGETS = (BedrockTarget, SageMakerTarget, OpenAICompatibleTarget)
