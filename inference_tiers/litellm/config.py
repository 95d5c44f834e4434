"""LiteLLM's ``config.yaml``, rendered by a pure function from typed model targets.

LiteLLM publishes no schema for its config (litellm#23022), and a misspelt key is silently ignored, so the
project generates the file here and the tests load the result into the real proxy (``tests/gateway``).

Every Bedrock model carries the tier-1 guardrail in ``litellm_params.guardrailConfig``: LiteLLM sends it on
every Converse call, which is what an IAM policy with the ``bedrock:GuardrailIdentifier`` condition
(``ModelInvokeAccess``) requires. LiteLLM's ``guardrails:`` section would call ApplyGuardrail and then invoke
the model *without* a guardrail, which that policy denies; it is deliberately not used.

Secrets never appear in the file: it names environment variables (``os.environ/NAME``) that ECS fills from
Secrets Manager. The text is JSON (a subset of YAML) so that deploy-time values (CDK tokens such as a guardrail
version from another stack) stay quoted strings once CloudFormation substitutes them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inference_tiers.validation import Args, is_token

# The LiteLLM release this project is built and tested against. The tool venv installs exactly this version
# (tools/gateway/requirements.txt) and the image is the same release, pinned by digest (docs/gateway.md).
LITELLM_VERSION = "1.104.0"
LITELLM_IMAGE = (
    f"ghcr.io/berriai/litellm-database:v{LITELLM_VERSION}"
    "@sha256:fbe28229d2d02181c0a7d9df9599de614b491f3d897d2d7da18404f088310218"
)
PORT = 4000
# Where the container writes the file it receives in CONFIG_ENV (Fargate has no config-file mount).
CONFIG_PATH = "/tmp/litellm-config.yaml"
CONFIG_ENV = "LITELLM_CONFIG_YAML"
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
MASTER_KEY_PREFIX = "sk-"
SALT_KEY_ENV = "LITELLM_SALT_KEY"
REDIS_ENV = ("REDIS_HOST", "REDIS_PORT", "REDIS_PASSWORD")
# The OTLP/HTTP receiver of the observability tier's ADOT sidecar (same task, loopback only).
SIDECAR_OTLP_HTTP = "http://127.0.0.1:4318"
# Paths the proxy answers without a key: load balancer and container health checks only.
HEALTH_PATHS = ("/health/liveliness", "/health/readiness")

MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}"
_ENV_NAME = r"[A-Z_][A-Z0-9_]{0,127}"
_GUARDRAIL_ARN = r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+"
_REGION = r"[a-z]{2}(-[a-z]+)+-[0-9]"
_BEDROCK_ID = r"[a-z0-9-]{1,63}\.[a-z0-9.:-]{1,200}|arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]+:[0-9]{12}:[a-z-]+/[A-Za-z0-9.:-]+"
_ENDPOINT_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
_URL = r"https?://[^\s/?#]+(/[^\s?#]*)?"


def _region(args: Args, value: Any) -> str:
    return args.text("region", value, pattern=_REGION, description="an AWS Region such as us-east-1")


def _optional_url(args: Args, param: str, value: Any) -> str | None:
    if value is None:
        return None
    return args.text(param, value, pattern=_URL, description="an http(s) URL such as http://10.0.0.5:8080")


@dataclass(frozen=True)
class GuardrailConfig:
    """The guardrail every call to a Bedrock model carries: its ARN and numbered version (not DRAFT).

    The full ARN is sent, not the short id: IAM compares ``bedrock:GuardrailIdentifier`` with
    ``<ARN>:<version>``, and whether a short id in the request matches is not documented.
    """

    guardrail_arn: str
    version: str

    def __post_init__(self) -> None:
        args = Args("GuardrailConfig")
        args.text("guardrail_arn", self.guardrail_arn, pattern=_GUARDRAIL_ARN, description="a guardrail ARN")
        args.text("version", self.version, pattern=r"[1-9][0-9]{0,7}", description="a numbered version")

    def render(self) -> dict[str, str]:
        return {
            "guardrailIdentifier": self.guardrail_arn,
            "guardrailVersion": self.version,
            "trace": "disabled",
        }


@dataclass(frozen=True)
class BedrockModel:
    """A Bedrock model through the Converse API, always with ``guardrail``.

    :param name: the model name clients send (``model``).
    :param model_id: what the proxy calls: a cross-Region profile id (``us.amazon.nova-2-lite-v1:0``) or an
        application inference profile ARN (a token is accepted).
    :param guardrail: the guardrail sent on every call.
    :param region: the Region of the Bedrock runtime endpoint.
    :param base_model_id: the model id LiteLLM's cost map knows (required when ``model_id`` is an ARN or a
        token; default: ``model_id``).
    :param runtime_endpoint: another Bedrock runtime URL (a VPC endpoint's DNS name, a test stub). Default:
        the Region's public endpoint (private through an interface endpoint with private DNS).
    """

    name: str
    model_id: str
    guardrail: GuardrailConfig
    region: str
    base_model_id: str | None = None
    runtime_endpoint: str | None = None

    def __post_init__(self) -> None:
        args = Args("BedrockModel")
        args.text("name", self.name, pattern=MODEL_NAME_PATTERN, allow_token=False)
        args.text("model_id", self.model_id, pattern=_BEDROCK_ID, description="a model, profile id or ARN")
        args.instance("guardrail", self.guardrail, GuardrailConfig)
        _region(args, self.region)
        if self.base_model_id is not None:
            args.text("base_model_id", self.base_model_id, pattern=_BEDROCK_ID, allow_token=False)
        elif is_token(self.model_id) or self.model_id.startswith("arn:"):
            raise args.error(
                "base_model_id",
                None,
                "the model id LiteLLM prices calls by (such as amazon.nova-2-lite-v1:0) when model_id is an "
                "ARN or a deploy-time value",
            )
        _optional_url(args, "runtime_endpoint", self.runtime_endpoint)

    def litellm_params(self) -> dict[str, Any]:
        base = self.base_model_id or self.model_id
        params: dict[str, Any] = {"model": f"bedrock/converse/{base}", "aws_region_name": self.region}
        if base != self.model_id:
            params["model_id"] = self.model_id
        params["guardrailConfig"] = self.guardrail.render()
        if self.runtime_endpoint is not None:
            params["aws_bedrock_runtime_endpoint"] = self.runtime_endpoint
        return params


@dataclass(frozen=True)
class SageMakerModel:
    """A SageMaker real-time endpoint serving an OpenAI messages container (vLLM, SGLang, LMI), through
    LiteLLM's ``sagemaker_chat`` provider.

    :param endpoint_name: the endpoint (a token is accepted).
    :param inference_component: the inference component to route to (sent as the
        ``X-Amzn-SageMaker-Inference-Component`` header). Default: none (single-model endpoint).
    :param served_model: the model name the container expects in the body. Default: the container's own.
    :param runtime_url: the full invocation URL instead of the Region's runtime endpoint (a test stub).
    """

    name: str
    endpoint_name: str
    region: str
    inference_component: str | None = None
    served_model: str | None = None
    runtime_url: str | None = None

    def __post_init__(self) -> None:
        args = Args("SageMakerModel")
        args.text("name", self.name, pattern=MODEL_NAME_PATTERN, allow_token=False)
        args.text("endpoint_name", self.endpoint_name, pattern=_ENDPOINT_NAME, description="an endpoint name")
        _region(args, self.region)
        if self.inference_component is not None:
            args.text("inference_component", self.inference_component, pattern=_ENDPOINT_NAME)
        if self.served_model is not None:
            args.text("served_model", self.served_model, max_length=256)
        _optional_url(args, "runtime_url", self.runtime_url)

    def litellm_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": f"sagemaker_chat/{self.endpoint_name}",
            "aws_region_name": self.region,
        }
        if self.inference_component is not None:
            params["model_id"] = self.inference_component
        if self.served_model is not None:
            params["hf_model_name"] = self.served_model
        if self.runtime_url is not None:
            params["sagemaker_base_url"] = self.runtime_url
        return params


@dataclass(frozen=True)
class OpenAICompatibleModel:
    """An OpenAI-compatible server by URL (vLLM or vllm-router on EKS, tiers 3-4), through ``hosted_vllm/``.

    :param base_url: the server's ``/v1`` base URL, reachable from the proxy's subnets.
    :param served_model: the model name the server serves.
    :param api_key_env: the environment variable holding the server's API key. Always sent: with no key,
        LiteLLM's ``openai/`` route has sent other environment keys as the bearer token (litellm#50218).
    """

    name: str
    base_url: str
    served_model: str
    api_key_env: str = "GATEWAY_UPSTREAM_API_KEY"

    def __post_init__(self) -> None:
        args = Args("OpenAICompatibleModel")
        args.text("name", self.name, pattern=MODEL_NAME_PATTERN, allow_token=False)
        args.text(
            "base_url",
            self.base_url,
            pattern=_URL,
            description="an http(s) URL such as http://10.0.0.5:8000/v1",
        )
        args.text("served_model", self.served_model, max_length=256)
        args.text("api_key_env", self.api_key_env, pattern=_ENV_NAME, allow_token=False)

    def litellm_params(self) -> dict[str, Any]:
        return {
            "model": f"hosted_vllm/{self.served_model}",
            "api_base": self.base_url,
            "api_key": f"os.environ/{self.api_key_env}",
        }


ModelTarget = BedrockModel | SageMakerModel | OpenAICompatibleModel
MODEL_TARGETS = (BedrockModel, SageMakerModel, OpenAICompatibleModel)


MAX_REQUESTS_PER_MINUTE = 1_000_000
# A model's requests_per_minute becomes its deployment's litellm_params.rpm, which LiteLLM 1.104.0 enforces only
# under this routing strategy: LowestTPMLoggingHandler_v2.async_pre_call_check (router_strategy/
# lowest_tpm_rpm_v2.py:137-211) counts each call in the key "<id>:<model>:rpm:<UTC minute>" and raises a 429
# RateLimitError past the limit; it runs before every call (router.py:8494-8543, from _deployment_slot at
# :8545-8560). The count is kept in memory and pushed to the router's Redis every 0.1 s, which returns the sum of
# every proxy's calls (router_strategy/base_routing_strategy.py:78-100, 189-245). simple-shuffle never reads rpm
# for a limit (router.py:12343-12352 compares it with a per-process count, and only with enable_pre_call_checks).
RATE_LIMITED_ROUTING = "usage-based-routing-v2"
# A call refused by the limit is not retried: 1.104.0 would first sleep the 429's retry-after of 60 s per retry
# (router.py:7907-7948, utils.py:7184-7197); RetryPolicy field, types/router.py:114-130.
NO_RATE_LIMIT_RETRIES = {"RateLimitErrorRetries": 0}


@dataclass(frozen=True)
class RouterOptions:
    """How the proxy retries, times out and falls back.

    :param request_timeout_seconds: a call's whole time limit (default 600; the load balancer's idle timeout
        must be longer).
    :param num_retries: retries of a failed call on the same model group (default 2).
    :param allowed_fails: failures per minute before a deployment cools down (default 3).
    :param cooldown_seconds: how long a failing deployment is skipped (default 30).
    :param fallbacks: model name -> model names tried in order when it fails (default none). Each fallback is
        rendered as one more deployment of the model's group, tried after it (``order``), so that a cooled-down
        deployment is skipped without an error; a fallback with its own ``requests_per_minute`` is refused.
    :param allow_unguarded_fallbacks: let a Bedrock model (always guarded) fall back to a model without its
        guardrail (default False: such a fallback is refused, since it would answer the call unguarded).
    :param requests_per_minute: model name -> the most calls it accepts per UTC minute, counted across every
        worker and task through Redis; a call past it is refused with 429 or goes to the model's fallback
        (default none).
    """

    request_timeout_seconds: int = 600
    num_retries: int = 2
    allowed_fails: int = 3
    cooldown_seconds: int = 30
    fallbacks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    allow_unguarded_fallbacks: bool = False
    requests_per_minute: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        args = Args("RouterOptions")
        args.boolean("allow_unguarded_fallbacks", self.allow_unguarded_fallbacks)
        args.integer("request_timeout_seconds", self.request_timeout_seconds, minimum=5, maximum=3600)
        args.integer("num_retries", self.num_retries, minimum=0, maximum=10)
        args.integer("allowed_fails", self.allowed_fails, minimum=1, maximum=100)
        args.integer("cooldown_seconds", self.cooldown_seconds, minimum=1, maximum=3600)
        args.mapping(
            "fallbacks",
            self.fallbacks,
            lambda name, v: args.sequence(
                name, v, lambda n, m: args.text(n, m, pattern=MODEL_NAME_PATTERN), min_items=1, unique=True
            ),
            key_pattern=MODEL_NAME_PATTERN,
        )
        args.mapping(
            "requests_per_minute",
            self.requests_per_minute,
            lambda name, v: args.integer(name, v, minimum=1, maximum=MAX_REQUESTS_PER_MINUTE),
            key_pattern=MODEL_NAME_PATTERN,
        )


@dataclass(frozen=True)
class ProxyFeatures:
    """Which backing services the proxy uses (each adds its settings and environment variables).

    :param database: PostgreSQL for virtual keys, teams, budgets and spend logs (default True).
    :param redis: Redis for limits, cooldowns and the spend-write buffer shared by every task (default True;
        required with more than one task).
    :param tracing: a trace collector runs beside the proxy (default False): the ``otel`` callback exports the
        proxy's spans (children of the client's ``traceparent``) and the client's ``traceparent`` is forwarded
        to the backends. Its environment: :func:`tracing_environment`.
    :param models_in_database: models may also be added at run time through ``/model/new`` and are kept in the
        database, where every proxy replica loads them from (``general_settings.store_model_in_db``; default
        False). The platform's elastic pool is added this way, so that adding it changes no deployed setting.
    """

    database: bool = True
    redis: bool = True
    tracing: bool = False
    models_in_database: bool = False

    def __post_init__(self) -> None:
        args = Args("ProxyFeatures")
        args.boolean("database", self.database)
        args.boolean("redis", self.redis)
        args.boolean("tracing", self.tracing)
        args.boolean("models_in_database", self.models_in_database)
        if self.models_in_database and not self.database:
            raise args.error("models_in_database", True, "False without a database (database=False)")


# Connections each proxy worker's Prisma pool may open (general_settings.database_connection_pool_limit): the
# whole gateway opens this x workers x tasks (LiteLLM's production guide); LiteLLMGateway checks it against the
# database's capacity at synth.
DATABASE_POOL_PER_WORKER = 10
# Retries per error class for a model with a fallback: none, the fallback answers instead. Every field of LiteLLM
# 1.104.0's RetryPolicy (types/router.py:114-130) is 0, read by router_utils/get_retry_from_policy.py:52-66 (an
# error of no listed class, such as APIConnectionError or BadGatewayError, takes DefaultRetries; a 404 answer
# NotFoundErrorRetries): a field left out would fall back to num_retries with back-off if DefaultRetries went.
FAILOVER_RETRY_POLICY = {
    "BadRequestErrorRetries": 0,
    "AuthenticationErrorRetries": 0,
    "TimeoutErrorRetries": 0,
    "RateLimitErrorRetries": 0,
    "ContentPolicyViolationErrorRetries": 0,
    "InternalServerErrorRetries": 0,
    "ServiceUnavailableErrorRetries": 0,
    "NotFoundErrorRetries": 0,
    "DefaultRetries": 0,
}
# Errors that cool a deployment of a model with fallbacks down (AllowedFailsPolicy, types/router.py:742-759): more
# than allowed_fails of one class within cooldown_time and the router skips it for cooldown_time, straight to the
# next deployment of the group (router_utils/cooldown_handlers.py:141-189). A refused
# connection counts: the aiohttp transport reports it as InternalServerError ("Cannot connect to host",
# tools/gateway/failover.py shows it); only an error that reaches the router as APIConnectionError never cools
# a deployment down (cooldown_handlers.py:235-240).
COOLDOWN_ERROR_CLASSES = ("Timeout", "RateLimit", "InternalServer", "ServiceUnavailable", "BadGateway")


def _deployment(
    model: ModelTarget, router: RouterOptions, group: str, order: int | None, priced_by_id: bool
) -> dict[str, Any]:
    """``model``'s deployment in the model group ``group`` (its own, or, as a fallback, another model's), tried
    at ``order`` among the group's deployments; ``priced_by_id``: see :func:`_model_list`."""
    entry: dict[str, Any] = {"model_name": group, "litellm_params": model.litellm_params()}
    if model.name in router.requests_per_minute:
        entry["litellm_params"]["rpm"] = router.requests_per_minute[model.name]
    model_info: dict[str, Any] = {}
    if order is not None:
        entry["litellm_params"]["order"] = order
        model_info["allowed_fails_policy"] = {
            f"{error}ErrorAllowedFails": router.allowed_fails for error in COOLDOWN_ERROR_CLASSES
        }
        model_info["cooldown_time"] = router.cooldown_seconds
    if priced_by_id:
        # "#" is in no model name (MODEL_NAME_PATTERN) nor LiteLLM cost-map key: unique, and no built-in price.
        deployment_id = f"{group}#{order or 1}"
        model_info.update(id=deployment_id, base_model=deployment_id)
    if model_info:
        entry["model_info"] = model_info
    return entry


def _model_list(models: Sequence[ModelTarget], router: RouterOptions) -> list[dict[str, Any]]:
    """One deployment per model in its own group; a model with fallbacks gets each of them as one more
    deployment of its group, in order after it (``litellm_params.order``).

    LiteLLM 1.104.0 drops cooled-down deployments before it keeps the lowest order among the rest
    (router.py:12864-12882, then :12925-12929, utils.py:5179-5195): once the primary cools down, its calls go
    straight to the next order with no error raised. Before that, a failed call moves on to the next order
    level in the same request (router.py:7214-7267, order-based fallbacks), as cross-group fallbacks did.

    A self-hosted model (no price in LiteLLM's cost map) that is also a fallback is priced by each of its
    deployments' own cost-map entry (``model_info.base_model`` = its ``model_info.id``), which has no rate.
    1.104.0 also registers every deployment under ``<provider>/<model>`` (router.py:9886-9959): registered twice
    (the model in two groups), that entry takes every field ``get_model_info`` returns, each rate None
    (utils.py:3341-3402), and every $0 call would walk its 146 keys in the zero-cost diagnostic, about 2 ms
    (litellm_logging.py:1964-2027, litellm_core_utils/llm_cost_calc/zero_cost_diagnostic.py:77-98). The cost
    calculator reads ``base_model`` first (cost_calculator.py:848-849, :2095-2111). No price is declared, so
    budgets still apply (proxy/auth/auth_checks.py:493-530, :580-599); explicit zero prices would waive them."""
    by_name = {m.name: m for m in models}
    fallback_targets = {target for targets in router.fallbacks.values() for target in targets}

    def deployment(model: ModelTarget, group: str, order: int | None) -> dict[str, Any]:
        priced_by_id = model.name in fallback_targets and not isinstance(model, BedrockModel)
        return _deployment(model, router, group, order, priced_by_id)

    entries = []
    for model in models:
        targets = router.fallbacks.get(model.name, [])
        entries.append(deployment(model, model.name, 1 if targets else None))
        entries += [
            deployment(by_name[target], model.name, order) for order, target in enumerate(targets, start=2)
        ]
    return entries


def render_config(
    models: Sequence[ModelTarget],
    *,
    router: RouterOptions | None = None,
    features: ProxyFeatures | None = None,
) -> dict[str, Any]:
    """The proxy's configuration as a dictionary (see :func:`render_text` for the file)."""
    args = Args("render_config")

    def model(name: str, value: Any) -> ModelTarget:
        if not isinstance(value, MODEL_TARGETS):
            raise args.error(name, value, "a BedrockModel, SageMakerModel or OpenAICompatibleModel")
        return value

    checked = args.sequence("models", models, model, min_items=1)
    names = [m.name for m in checked]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise args.error(f"models[{index}].name", name, "a model name not used by another model")
    router = args.instance("router", router or RouterOptions(), RouterOptions)
    features = args.instance("features", features or ProxyFeatures(), ProxyFeatures)
    for source, targets in router.fallbacks.items():
        for target in [source, *targets]:
            if target not in names:
                raise args.error("router.fallbacks", dict(router.fallbacks), f"model names among {names}")
        if source in targets:
            raise args.error("router.fallbacks", dict(router.fallbacks), "fallbacks that name other models")
        guarded = {m.name for m in checked if isinstance(m, BedrockModel)}
        unguarded = sorted(set(targets) - guarded)
        if source in guarded and unguarded and not router.allow_unguarded_fallbacks:
            raise args.error(
                f"router.fallbacks.{source}",
                list(targets),
                f"guarded Bedrock models only (not {unguarded}), unless router.allow_unguarded_fallbacks=True",
            )
    for source, targets in router.fallbacks.items():
        limited = sorted(set(targets) & set(router.requests_per_minute))
        if limited:
            raise args.error(
                f"router.fallbacks.{source}",
                list(targets),
                f"fallbacks without their own requests_per_minute (not {limited}): a fallback answers as one "
                "more deployment of this model, and LiteLLM counts a limit per deployment, so its calls "
                "would not count against that model's limit",
            )
    if not set(router.requests_per_minute) <= set(names):
        raise args.error(
            "router.requests_per_minute", dict(router.requests_per_minute), f"model names among {names}"
        )

    router_settings: dict[str, Any] = {
        "routing_strategy": RATE_LIMITED_ROUTING if router.requests_per_minute else "simple-shuffle",
        "num_retries": router.num_retries,
        "timeout": router.request_timeout_seconds,
        "allowed_fails": router.allowed_fails,
        "cooldown_time": router.cooldown_seconds,
    }
    # A model with a fallback fails over at once instead of retrying itself: 1.104.0 sleeps an exponential
    # back-off between retries (router.py:7924-7948, before each retry at :7689 and :7758), seconds per request
    # while its backend is dead.
    retry_policies = {
        name: FAILOVER_RETRY_POLICY if name in router.fallbacks else NO_RATE_LIMIT_RETRIES
        for name in [*router.fallbacks, *router.requests_per_minute]
    }
    if retry_policies:
        router_settings["model_group_retry_policy"] = retry_policies
    if features.redis:
        router_settings.update({key.lower(): f"os.environ/{key}" for key in REDIS_ENV})
    general_settings: dict[str, Any] = {
        "master_key": f"os.environ/{MASTER_KEY_ENV}",
        # The config file (infrastructure as code) is the only source of models and their guardrails.
        "store_model_in_db": features.models_in_database,
        # /health calls every model (real, billed calls): never in the background.
        "background_health_checks": False,
        "store_prompts_in_spend_logs": False,
    }
    if features.database:
        general_settings.update(
            {
                "database_connection_pool_limit": DATABASE_POOL_PER_WORKER,
                "proxy_batch_write_at": 10,
                "maximum_spend_logs_retention_period": "90d",
                "allow_requests_on_db_unavailable": False,
            }
        )
    if features.database and features.redis:
        # Spend updates from every task go through Redis, then one writer: no deadlocks at high request rates.
        general_settings["use_redis_transaction_buffer"] = True
    litellm_settings: dict[str, Any] = {
        "request_timeout": router.request_timeout_seconds,
        "drop_params": False,
        "json_logs": True,
        "callbacks": ["prometheus", "otel"] if features.tracing else ["prometheus"],
        "require_auth_for_metrics_endpoint": True,
        "cache": False,
    }
    if features.tracing:
        # LiteLLM 1.104.0 adds the client's traceparent to the backend request only when this is true and the
        # otel callback is on (proxy/litellm_pre_call_utils.py, _add_otel_traceparent_to_data).
        litellm_settings["forward_traceparent_to_llm_provider"] = True
    return {
        "model_list": _model_list(checked, router),
        "router_settings": router_settings,
        "litellm_settings": litellm_settings,
        "general_settings": general_settings,
    }


def render_text(config: Mapping[str, Any]) -> str:
    """The file's text: JSON, which LiteLLM's YAML loader reads, with every string quoted."""
    return json.dumps(config, indent=1)


def referenced_environment(config: Mapping[str, Any]) -> set[str]:
    """Every environment variable the configuration names (``os.environ/NAME``): each must be set in the
    container (a typo would silently leave a setting unset)."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            match = re.fullmatch(r"os\.environ/(.+)", value)
            if match:
                yield match.group(1)
        elif isinstance(value, Mapping):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return set(walk(config))


def proxy_environment(config_text: str, *, request_logging: bool = False) -> dict[str, str]:
    """The container's plain environment for any deployment: the configuration and how the proxy behaves.

    The log level is WARNING unless ``request_logging``: at INFO, uvicorn's access logger writes one line per
    request, formatted as JSON with ``json_logs`` (LiteLLM 1.104.0 ``proxy/proxy_cli.py:309-311`` hands uvicorn
    ``_logging.py:_get_uvicorn_json_log_config``, whose loggers take the level of ``LITELLM_LOG``,
    ``_logging.py:656`` and ``:1011``), which costs every request its formatting (docs/gateway.md, "Proxy
    overhead"). The per-request audit is the spend log in PostgreSQL (key, team, model, tokens, cost), not these
    lines; warnings and errors are still logged.

    Secrets and connection details (database, Redis) come on top, from the construct."""
    return {
        CONFIG_ENV: config_text,
        # The cost map ships in the image: no fetch from GitHub at start (1.104.0-1.104.6 exit when it fails).
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MODE": "PRODUCTION",
        "LITELLM_LOG": "INFO" if request_logging else "WARNING",
        "DISABLE_ADMIN_UI": "True",
        "NO_DOCS": "True",
        "NO_REDOC": "True",
    }


def tracing_environment(endpoint: str = SIDECAR_OTLP_HTTP) -> dict[str, str]:
    """The environment of a proxy with ``ProxyFeatures(tracing=True)``: export spans over OTLP/HTTP to
    ``endpoint`` (LiteLLM 1.104.0's OpenTelemetry integration reads ``OTEL_EXPORTER`` and
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` and appends ``/v1/traces``). HTTP, not gRPC: the image's OTLP/HTTP exporter
    needs no grpcio at run time."""
    args = Args("tracing_environment")
    args.text("endpoint", endpoint, pattern=_URL, description="an http(s) URL such as http://127.0.0.1:4318")
    return {"OTEL_EXPORTER": "otlp_http", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}


# Requests one worker holds at once (open connections count too) before uvicorn answers 503 "Exceeded
# concurrency limit" at once instead of queueing without bound: LiteLLM 1.104.0's --limit_concurrency
# (proxy/proxy_cli.py:952-964, given to uvicorn at :1516-1518; uvicorn 0.55.0 protocols/http/h11_impl.py:226-232).
CONCURRENCY_PER_WORKER = 256
# A worker restarts after this many requests plus a random 0-jitter more, so that the workers of a task do not
# restart together: --max_requests_before_restart and --max_requests_before_restart_jitter (proxy_cli.py:933-951,
# uvicorn's limit_max_requests at :1513-1515 and its jitter at :1519-1525). uvicorn 0.55.0's supervisor starts a
# new worker when one exits (supervisors/multiprocess.py:214-240); with one worker the container exits and ECS
# replaces the task. It bounds the proxy's memory growth (litellm#12685, #27954, #15128): a new worker starts
# from a fresh heap.
RECYCLE_AFTER_REQUESTS = 10_000
RECYCLE_JITTER = 1_000


def proxy_command(
    *,
    workers: int,
    port: int = PORT,
    config_path: str = CONFIG_PATH,
    migrate_only: bool = False,
    concurrency_per_worker: int = CONCURRENCY_PER_WORKER,
    recycle_after_requests: int = RECYCLE_AFTER_REQUESTS,
) -> str:
    """The container's shell command: write the configuration from ``$LITELLM_CONFIG_YAML`` to a file and
    start the proxy on ``port`` (or, with ``migrate_only``, apply the database migrations and exit).

    Each worker refuses with 503 past ``concurrency_per_worker`` requests and connections, and is replaced
    after about ``recycle_after_requests`` requests.

    The master key is ``sk-`` followed by the generated secret (Secrets Manager cannot generate a prefix, and
    LiteLLM keys start with ``sk-``)."""
    args = Args("proxy_command")
    args.integer("workers", workers, minimum=1, maximum=64)
    args.integer("port", port, minimum=1024, maximum=65535)
    args.text("config_path", config_path, pattern=r"/[A-Za-z0-9._/-]+", allow_token=False)
    args.integer("concurrency_per_worker", concurrency_per_worker, minimum=1, maximum=100_000)
    args.integer("recycle_after_requests", recycle_after_requests, minimum=RECYCLE_JITTER, maximum=10_000_000)
    flags = ["--config", config_path, "--port", str(port), "--num_workers", str(workers)]
    if migrate_only:
        flags.append("--skip_server_startup")
    else:
        flags += [
            "--limit_concurrency",
            str(concurrency_per_worker),
            "--max_requests_before_restart",
            str(recycle_after_requests),
            "--max_requests_before_restart_jitter",
            str(RECYCLE_JITTER),
        ]
    path = shlex.quote(config_path)
    return (
        f'printf %s "${CONFIG_ENV}" > {path} && export {MASTER_KEY_ENV}="{MASTER_KEY_PREFIX}${MASTER_KEY_ENV}" '
        f"&& exec litellm {shlex.join(flags)}"
    )
