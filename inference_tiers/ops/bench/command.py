"""``inference-tiers bench``: from the parsed flags to a target, a run (or a SageMaker job) and the report."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from inference_tiers.ops.bench.metrics import Pricing
from inference_tiers.ops.bench.report import merge_results, render_table, write_report
from inference_tiers.ops.bench.run import Engine, Target, run_bench, target_from_stack
from inference_tiers.ops.bench.sagemaker_job import (
    GOALS,
    NAME_PATTERN,
    start_benchmark_job,
    start_recommendation_job,
)
from inference_tiers.ops.bench.workload import load_workload
from inference_tiers.ops.checks import Clients, error_code
from inference_tiers.ops.pricing import BEDROCK_PRICE_FILE, load_price_table, load_token_price_table
from inference_tiers.ops.smoke import STACK_NAMES

# The checkout's tool venv (tools/bench/setup.sh), wherever bench is run from, not relative to the working folder.
TOOL_VENV = Path(__file__).resolve().parents[3] / "tools" / "bench" / ".venv"


def pricing_from_args(args: argparse.Namespace) -> Pricing | None:
    """Instances from the price table (``--instance-type``, ``--instance-count``) or per-token prices."""
    if args.instance_type and args.token_prices:
        raise ValueError("bench: pass --instance-type or --token-prices, not both")
    if args.token_prices:
        match = re.fullmatch(r"\s*([0-9.]+)\s*,\s*([0-9.]+)\s*", args.token_prices)
        if not match or not args.price_source:
            raise ValueError(
                f"--token-prices {args.token_prices!r}: expected 'INPUT,OUTPUT' in USD per 1M tokens "
                "(e.g. 0.72,0.72) with --price-source 'where and when the prices were read'"
            )
        return Pricing(
            f"per token: {args.price_source}",
            usd_per_1m_input=float(match[1]),
            usd_per_1m_output=float(match[2]),
        )
    if not args.instance_type:
        return None
    if args.instance_count < 1:
        raise ValueError(f"--instance-count {args.instance_count}: expected a positive integer")
    hourly = load_price_table(args.prices).hourly(args.instance_type)
    if hourly is None:
        raise ValueError(
            f"--instance-type {args.instance_type!r}: not in the price table; pass --prices FILE"
        )
    price, basis = hourly
    return Pricing(
        f"{args.instance_count} x {args.instance_type}, {basis}", usd_per_hour=price * args.instance_count
    )


def _application_profile_model(clients: Clients, arn: str) -> tuple[str | None, str]:
    """The model id an application inference profile is priced as (the ``us.`` profile of its model when it
    routes only to US Regions), or None and why."""
    try:
        profile = clients.client("bedrock").get_inference_profile(inferenceProfileIdentifier=arn)
    except ClientError as error:
        return None, f"bedrock:GetInferenceProfile on it failed ({error_code(error)})"
    arns = [model["modelArn"] for model in profile.get("models", [])]
    models = {model_arn.split("/", 1)[-1] for model_arn in arns}
    regions = {model_arn.split(":")[3] for model_arn in arns}
    if len(models) != 1:
        return None, f"it routes to {len(models)} models"
    (model,) = models
    # The model in the Region called, or a copy of a us. profile: both are billed as the us. profile is.
    if all(region.startswith("us-") for region in regions):
        return f"us.{model}", ""
    return None, f"it routes {model} to {', '.join(sorted(regions))}, outside the US geography"


def bedrock_table_pricing(model_id: str, clients: Clients) -> tuple[Pricing | None, str]:
    """A Bedrock target without ``--token-prices``: its model's prices from the dated Bedrock price table, and
    the line that says where they came from (or why there are none)."""
    table = load_token_price_table()
    if clients.region != table.region:
        # Bedrock bills a request at the prices of the Region it is made in (aws.amazon.com/bedrock/pricing).
        why = f"bench calls Bedrock in {clients.region}"
        prices = None
    elif ":application-inference-profile/" in model_id:
        model, why = _application_profile_model(clients, model_id)
        prices = table.per_1m_tokens(model) if model else None
        why = why or f"its model {model} is not in it"
    else:
        prices = table.per_1m_tokens(model_id)
        why = f"the table has {', '.join(sorted(table.prices))} and their us. profiles"
    if prices is None:
        return None, (
            f"cost: Bedrock model {model_id!r} is not priced by {BEDROCK_PRICE_FILE.name} ({table.region} "
            f"{table.as_of}): {why}; pass --token-prices INPUT,OUTPUT with --price-source to get cost figures"
        )
    basis = (
        f"per token: {model_id} {prices[0]:g}/{prices[1]:g} USD per 1M input/output tokens from "
        f"{BEDROCK_PRICE_FILE.name}, {table.region} {table.as_of}: {table.source}"
    )
    return Pricing(basis, usd_per_1m_input=prices[0], usd_per_1m_output=prices[1]), basis


def _explicit_target(args: argparse.Namespace, pricing: Pricing | None) -> Target:
    given = [flag for flag in ("url", "sagemaker_endpoint", "bedrock_model") if getattr(args, flag)]
    if len(given) + bool(args.tier) != 1:
        raise ValueError("bench: pass exactly one of --tier, --url, --sagemaker-endpoint or --bedrock-model")
    if args.url:
        return Target(args.name or "openai", "openai", url=args.url, pricing=pricing)
    if args.sagemaker_endpoint:
        return Target(
            args.name or args.sagemaker_endpoint,
            "sagemaker",
            endpoint=args.sagemaker_endpoint,
            component=args.inference_component,
            pricing=pricing,
        )
    return Target(args.name or args.bedrock_model, "bedrock", model_id=args.bedrock_model, pricing=pricing)


def bench(args: argparse.Namespace, session: Callable[[], Clients]) -> tuple[dict[str, Any], str]:
    """Run the command; returns (the JSON document to print, the text to print)."""
    spec = load_workload(args.workload)
    if args.sagemaker_recommendation:
        return _recommendation_job(args, spec, session)
    pricing = pricing_from_args(args)
    if args.tier:
        if args.url or args.sagemaker_endpoint or args.bedrock_model:
            raise ValueError(
                "bench: pass exactly one of --tier, --url, --sagemaker-endpoint or --bedrock-model"
            )
        stack_clients = session()
        clients: Clients | None = stack_clients
        target = target_from_stack(stack_clients, args.tier, args.stack or STACK_NAMES[args.tier], pricing)
        if args.name:
            target = Target(**{**vars(target), "name": args.name})
    else:
        target = _explicit_target(args, pricing)
        clients = session() if target.kind != "openai" else None
    price_note = ""
    if target.kind == "bedrock" and target.pricing is None and clients is not None:
        table_pricing, price_note = bedrock_table_pricing(str(target.model_id), clients)
        target = Target(**{**vars(target), "pricing": table_pricing})
    if args.sagemaker_job:
        return _sagemaker_job(args, spec, target, clients)
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        raise ValueError(f"--api-key-env {args.api_key_env}: that environment variable is empty or unset")
    engine = Engine(
        aiperf=args.aiperf or TOOL_VENV / "bin" / "aiperf",
        tokenizer=args.tokenizer or TOOL_VENV / "tokenizer",
        api_key=api_key,
    )
    if target.kind == "openai" and not engine.tokenizer.is_dir():
        raise ValueError(
            f"tokenizer {engine.tokenizer}: not found; run `bash tools/bench/setup.sh` or pass --tokenizer"
        )
    entry = run_bench(target, spec, work_dir=args.out, engine=engine, clients=clients, model=args.model)
    results = merge_results(args.out, spec.as_dict(), entry)
    files = write_report(args.out, results)
    text = render_table(results) + "\n\n" + "\n".join(str(f) for f in files)
    return results, f"{text}\n\n{price_note}" if price_note else text


def _check_job(flag: str, name: str, args: argparse.Namespace) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(
            f"{flag} {name!r}: expected lowercase letters, digits and hyphens, at most 63 characters"
        )
    if not args.role_arn or not args.s3_output:
        raise ValueError(f"{flag}: also pass --role-arn (the job's execution role) and --s3-output s3://...")


def _printed(started: dict[str, str]) -> tuple[dict[str, Any], str]:
    return started, "\n".join(f"{k}: {v}" for k, v in started.items())


def _recommendation_job(
    args: argparse.Namespace, spec: Any, session: Callable[[], Clients]
) -> tuple[dict[str, Any], str]:
    _check_job("--sagemaker-recommendation", args.sagemaker_recommendation, args)
    if not (args.model_s3_uri or "").startswith("s3://"):
        raise ValueError(
            f"--model-s3-uri {args.model_s3_uri!r}: expected the s3:// prefix of the model's Hugging Face "
            "safetensors weights"
        )
    types = tuple(t.strip() for t in (args.instance_types or "").split(",") if t.strip())
    if len(types) > 3 or any(not t.startswith("ml.") for t in types):
        raise ValueError(
            f"--instance-types {args.instance_types!r}: expected at most 3 comma-separated ml. types"
        )
    started = start_recommendation_job(
        session().client("sagemaker"),
        spec,
        job_name=args.sagemaker_recommendation,
        model_s3_uri=args.model_s3_uri,
        goal=args.goal,
        instance_types=types,
        role_arn=args.role_arn,
        s3_output=args.s3_output,
        workload_config=args.workload_config,
    )
    return _printed(started)


def _sagemaker_job(
    args: argparse.Namespace, spec: Any, target: Target, clients: Clients | None
) -> tuple[dict[str, Any], str]:
    if target.kind != "sagemaker" or clients is None:
        raise ValueError(
            "--sagemaker-job: needs a SageMaker target (--tier sagemaker or --sagemaker-endpoint)"
        )
    _check_job("--sagemaker-job", args.sagemaker_job, args)
    started = start_benchmark_job(
        clients.client("sagemaker"),
        spec,
        job_name=args.sagemaker_job,
        endpoint=str(target.endpoint),
        component=target.component,
        role_arn=args.role_arn,
        s3_output=args.s3_output,
        workload_config=args.workload_config,
    )
    return _printed(started)


def add_bench_arguments(parser: argparse.ArgumentParser, tiers: tuple[str, ...]) -> None:
    parser.add_argument("--workload", type=Path, required=True, help="workload spec (YAML, docs/bench.md)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="report folder (default bench-results)"
    )
    where = parser.add_argument_group("target (exactly one)")
    where.add_argument("--tier", choices=tiers, help="a deployed tier, from its stack outputs")
    where.add_argument("--url", help="any OpenAI-compatible base URL (gateway, vLLM, vllm-router)")
    where.add_argument("--sagemaker-endpoint", help="a SageMaker endpoint name")
    where.add_argument("--bedrock-model", help="a Bedrock model or inference profile id (ConverseStream)")
    parser.add_argument("--stack", help="with --tier: stack name (default: InferenceTiers-<Tier>)")
    parser.add_argument("--inference-component", help="with --sagemaker-endpoint: the inference component")
    parser.add_argument("--name", help="the target's name in the report (default: the tier or endpoint)")
    parser.add_argument("--model", help="model name in OpenAI-style requests (default: the spec's)")
    parser.add_argument("--api-key-env", help="environment variable holding the API key (the gateway's key)")
    cost = parser.add_argument_group("cost")
    cost.add_argument("--instance-type", help="instance type of the target, priced from the price table")
    cost.add_argument("--instance-count", type=int, default=1, help="instances behind the target (default 1)")
    cost.add_argument("--prices", type=Path, help="price file overriding the shipped us-east-1 table")
    cost.add_argument("--token-prices", help="per-token target: 'INPUT,OUTPUT' USD per 1M tokens")
    cost.add_argument("--price-source", help="with --token-prices: where and when the prices were read")
    engine = parser.add_argument_group("engine")
    engine.add_argument(
        "--aiperf", type=Path, help="aiperf executable (default tools/bench/.venv/bin/aiperf)"
    )
    engine.add_argument(
        "--tokenizer", type=Path, help="tokenizer folder (default tools/bench/.venv/tokenizer)"
    )
    job = parser.add_argument_group("let SageMaker measure instead (AI benchmark job)")
    job.add_argument(
        "--sagemaker-job", help="start an AI benchmark job with this name on the SageMaker target"
    )
    job.add_argument("--role-arn", help="the job's execution role")
    job.add_argument("--s3-output", help="s3:// folder for the job's results")
    job.add_argument(
        "--workload-config", help="a deployed AI workload config (default: create one from the spec)"
    )
    job.add_argument(
        "--sagemaker-recommendation",
        help="start an AI recommendation job with this name instead: SageMaker deploys the model itself",
    )
    job.add_argument("--model-s3-uri", help="with --sagemaker-recommendation: s3:// prefix of the weights")
    job.add_argument(
        "--goal", choices=GOALS, default="cost", help="with --sagemaker-recommendation (default cost)"
    )
    job.add_argument(
        "--instance-types", help="with --sagemaker-recommendation: up to 3 ml. types, comma-separated"
    )
