"""The ``inference-tiers`` console script: ``advise``, ``preflight``, ``smoke``, ``bench``, ``gateway keys``, ``dashboards``.

Exit codes (stable, for scripts):

- 0: done; every check passed (warnings allowed)
- 1: a preflight check or smoke step failed, or the stack to smoke-test is missing
- 2: usage or configuration error (bad flag value, unknown tier or context key, unreadable file)
- 3: no AWS credentials or Region, or an AWS error outside a check (expired token, endpoint unreachable)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from inference_tiers.config import TIER_ORDER, AccountRequirements
from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.ops import report
from inference_tiers.ops.advise import (
    DEFAULT_ITL_SECONDS,
    MODEL_SOURCES,
    SHAPES,
    TRAFFIC_SHAPES,
    Workload,
    advise,
)
from inference_tiers.ops.checks import CheckResult, Clients
from inference_tiers.ops.disaggregation import DEFAULT_MFU, NETWORKS
from inference_tiers.ops.kv_cache import KV_DTYPES, WEIGHT_DTYPES
from inference_tiers.ops.models import PRESETS, from_hf_config, preset, with_params
from inference_tiers.ops.pricing import load_price_table
from inference_tiers.ops.smoke import BLOCKED_PROMPT, STACK_NAMES, StackError, run_smoke

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_AWS = 0, 1, 2, 3


class UsageError(ValueError):
    """A flag or file the user gave that cannot be used."""


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


# --- advise -----------------------------------------------------------------------------------------------


def _advise(args: argparse.Namespace) -> int:
    if args.measured:
        from inference_tiers.ops.bench.measured import advise_measured, load_results, render_measured

        if args.load is None:
            raise UsageError("--measured: also pass --load, the target load in the spec's unit")
        measured = advise_measured(load_results(args.measured), args.load)
        print(report.dumps(measured) if args.json else render_measured(measured))
        # No target meets the SLOs at this load: a failed check, so that a script stops there.
        return EXIT_OK if measured["choice"] else EXIT_CHECK_FAILED
    if args.model and args.hf_config:
        raise UsageError("--model and --hf-config: pass one of them, not both")
    model = None
    if args.hf_config:
        model = from_hf_config(args.hf_config, params_b=args.params_b)
    elif args.model:
        model = preset(args.model)
        if args.params_b is not None:
            model = with_params(model, args.params_b)
    workload = Workload(
        args.model_source,
        args.runs_eks,
        args.concurrency,
        args.traffic,
        args.input_tokens,
        args.output_tokens,
        args.shape,
        args.prefix_reuse,
        args.itl_ms / 1000,
    )
    advice = advise(
        workload,
        model,
        prices=load_price_table(args.prices),
        instance_type=args.instance_type,
        tp=args.tp,
        kv_dtype=args.kv_dtype,
        weight_dtype=args.weight_dtype,
        network=args.network,
        mfu=args.mfu,
    )
    print(report.dumps(advice) if args.json else report.render_advice(advice))
    return EXIT_OK


# --- preflight ----------------------------------------------------------------------------------------------


def load_context(cdk_json: Path | None, overrides: Sequence[str], tier: str) -> dict[str, Any]:
    """The CDK context the app would see: the app's cdk.json ``context`` (``./cdk.json`` when there is one), then
    ``-c key=value`` overrides; the tier settings it leaves out take the package's defaults."""
    path = cdk_json or Path("cdk.json")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if cdk_json is not None:
            raise UsageError(
                f"{path}: not found; run in the CDK app's directory or pass --cdk-json PATH"
            ) from None
        document = {}
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: cannot read as JSON ({error})") from None
    context = document.get("context", {}) if isinstance(document, dict) else None
    if not isinstance(context, dict):
        raise UsageError(f'{path}: expected a JSON object with a "context" object')
    context = dict(context)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"-c {item!r}: expected key=value")
        context[key] = value
    context["tier"] = tier
    return context


def tier_requirements(context: dict[str, Any], tier: str) -> AccountRequirements:
    # Imported here: the tier registry loads aws-cdk-lib, which advise and smoke do not need.
    from inference_tiers.app_factory import parse_app_config

    settings = parse_app_config(context).settings[tier]
    requirements = settings.account_requirements()
    if not isinstance(requirements, AccountRequirements):
        raise UsageError(f"tier {tier}: account_requirements() returned {type(requirements).__name__}")
    return requirements


def _session(args: argparse.Namespace) -> Clients:
    import boto3

    session = boto3.session.Session(profile_name=args.profile, region_name=args.region)
    if not session.region_name:
        raise NoRegionError()
    return Clients(session)


def _account(clients: Clients) -> str:
    return str(clients.client("sts").get_caller_identity()["Account"])


def _print_results(
    args: argparse.Namespace, header: dict[str, Any], results: list[CheckResult], *, latency: bool
) -> int:
    code = EXIT_CHECK_FAILED if any(r.status == "fail" for r in results) else EXIT_OK
    if args.json:
        print(report.dumps({**header, "results": results, "exit_code": code}))
    else:
        print(", ".join(f"{k}: {v}" for k, v in header.items() if isinstance(v, str)))
        if isinstance(header.get("requirements"), AccountRequirements):
            print("needs: " + report.describe_requirements(header["requirements"]))
        print()
        print(report.render_checks(results, latency=latency))
    return code


def _preflight(args: argparse.Namespace) -> int:
    from inference_tiers.ops.preflight import run_preflight

    if args.templates:
        return _preflight_templates(args)
    requirements = tier_requirements(load_context(args.cdk_json, args.context, args.tier), args.tier)
    clients = _session(args)
    account = _account(clients)
    results = run_preflight(clients, requirements, account)
    header = {"tier": args.tier, "region": clients.region, "account": account, "requirements": requirements}
    return _print_results(args, header, results, latency=False)


def _preflight_templates(args: argparse.Namespace) -> int:
    from inference_tiers.ops.templates import requirements_from_templates, run_template_preflight

    if args.cdk_json or args.context:
        raise UsageError("--templates reads the synthesized templates: --cdk-json and -c do not apply to it")
    found = requirements_from_templates(args.templates)
    clients = _session(args)
    account = _account(clients)
    results = run_template_preflight(clients, found, account)
    header = {
        "templates": str(args.templates),
        "region": clients.region,
        "account": account,
        "requirements": found.requirements[0],
    }
    return _print_results(args, header, results, latency=False)


# --- smoke ---------------------------------------------------------------------------------------------------


def _smoke(args: argparse.Namespace) -> int:
    clients = _session(args)
    stack = args.stack or STACK_NAMES[args.tier]
    results = run_smoke(clients, args.tier, stack, timeout=args.timeout, blocked_prompt=args.blocked_prompt)
    return _print_results(
        args, {"tier": args.tier, "stack": stack, "region": clients.region}, results, latency=True
    )


# --- bench ---------------------------------------------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    # The workload spec is validated with the constructs' argument checks, which load aws-cdk-lib.
    from inference_tiers.ops.bench.command import bench

    try:
        document, text = bench(args, lambda: _session(args))
    except RuntimeError as error:  # the engine failed (aiperf's exit and last lines): a failed run, not usage
        print(f"error: {error}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    print(report.dumps(document) if args.json else text)
    return EXIT_OK


# --- gateway keys -------------------------------------------------------------------------------------------


def _gateway_keys(args: argparse.Namespace) -> int:
    from inference_tiers.ops.gateway import KeyRequest, create_keys

    spec = KeyRequest(
        team=args.team,
        budget=args.budget,
        budget_duration=args.budget_duration,
        models=tuple(m.strip() for m in args.models.split(",") if m.strip()),
        key_alias=args.key_alias or f"{args.team}-key",
        rpm_limit=args.rpm_limit,
        tpm_limit=args.tpm_limit,
    )
    created = create_keys(
        _session(args),
        args.stack,
        spec,
        admin_url=args.admin_url,
        timeout=args.timeout,
        ca_bundle=args.ca_bundle,
    )
    print(report.dumps(created) if args.json else "\n".join(f"{k}: {v}" for k, v in created.items()))
    return EXIT_OK


# --- dashboards ---------------------------------------------------------------------------------------------


def _dashboards_push(args: argparse.Namespace) -> int:
    from inference_tiers.ops import dashboards

    if bool(args.grafana_url) == bool(args.grafana_workspace):
        raise ValueError("dashboards push: pass exactly one of --grafana-url or --grafana-workspace")
    if args.grafana_url:
        pushed = dashboards.push(
            args.grafana_url,
            os.environ.get("GRAFANA_TOKEN", ""),
            folder_uid=args.folder_uid,
            timeout=args.timeout,
            ca_bundle=args.ca_bundle,
        )
    else:
        with dashboards.workspace_token(_session(args), args.grafana_workspace) as (url, token):
            pushed = dashboards.push(url, token, folder_uid=args.folder_uid, timeout=args.timeout)
    print(report.dumps(pushed) if args.json else "\n".join(f"{p['file']}: {p['url']}" for p in pushed))
    return EXIT_OK


def _dashboards_export(args: argparse.Namespace) -> int:
    from inference_tiers.ops import dashboards

    for path in dashboards.export(args.out):
        print(path)
    return EXIT_OK


# --- parser -------------------------------------------------------------------------------------------------


def _add_aws_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that calls AWS: Region, profile, and JSON output."""
    parser.add_argument("--region", help="AWS Region (default: the profile's or AWS_REGION)")
    parser.add_argument("--profile", help="AWS named profile")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inference-tiers",
        description=__doc__.split("\n", 1)[0],
        epilog="Exit codes: 0 ok, 1 a check failed, 2 usage/config error, 3 credentials/Region/AWS error.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "advise", help="recommend a tier, size the KV cache, check disaggregation, estimate cost"
    )
    a.add_argument(
        "--model-source",
        choices=MODEL_SOURCES,
        default="open",
        help="foundation (Bedrock-hosted), own / fine-tuned weights, or an open model (default open)",
    )
    a.add_argument("--model", help=f"architecture preset: {', '.join(PRESETS)}")
    a.add_argument("--hf-config", type=Path, help="a Hugging Face config.json instead of a preset")
    a.add_argument(
        "--params-b",
        type=_positive_number,
        help="parameters in billions (default: the preset's, or estimated from --hf-config)",
    )
    a.add_argument("--runs-eks", action="store_true", help="the team already operates EKS")
    a.add_argument(
        "--concurrency", type=_positive_int, default=16, help="peak concurrent requests (default 16)"
    )
    a.add_argument("--traffic", choices=TRAFFIC_SHAPES, default="spiky", help="traffic shape (default spiky)")
    a.add_argument("--input-tokens", type=_positive_int, default=2048, help="prompt tokens (default 2048)")
    a.add_argument("--output-tokens", type=_positive_int, default=512, help="generated tokens (default 512)")
    a.add_argument(
        "--shape",
        choices=SHAPES,
        default="chat",
        help="traffic shape: chat, rag (a shared document), reasoning (long outputs), agentic (multi-turn "
        "sessions that append tool output to a growing context); sets the HyperPod routing advice",
    )
    a.add_argument(
        "--prefix-reuse",
        type=_share,
        default=0.0,
        help="share of each prompt already cached (earlier turns, a shared document), in [0, 1) (default 0)",
    )
    a.add_argument(
        "--itl-ms",
        type=_positive_number,
        default=DEFAULT_ITL_SECONDS * 1000,
        help=f"time per output token each stream gets, ms (default {DEFAULT_ITL_SECONDS * 1000:g}); with the "
        "prefill it sets the request rate the concurrency carries",
    )
    a.add_argument(
        "--instance-type",
        help=f"size on this type (default: cheapest that fits; known: {', '.join(GPU_INSTANCE_TYPES)})",
    )
    a.add_argument(
        "--tp", type=_positive_int, help="tensor-parallel degree (default: all GPUs of the instance)"
    )
    a.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16")
    a.add_argument("--weight-dtype", choices=WEIGHT_DTYPES, default="bf16")
    a.add_argument(
        "--network",
        choices=NETWORKS,
        default="auto",
        help="KV transfer network: efa, tcp, or auto (EFA when the instance has it)",
    )
    a.add_argument("--mfu", type=_fraction, default=DEFAULT_MFU, help="prefill model FLOPs utilization (0.4)")
    a.add_argument("--prices", type=Path, help="price file overriding the shipped us-east-1 table")
    a.add_argument(
        "--measured",
        type=Path,
        help="decide from bench's results.json instead of the formula (docs/bench.md)",
    )
    a.add_argument(
        "--load", type=_positive_number, help="with --measured: the target load, in the spec's unit"
    )
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.set_defaults(handler=_advise)

    for name, handler, text in (
        ("preflight", _preflight, "read-only account checks before cdk deploy"),
        ("smoke", _smoke, "exercise a deployed tier through its stack outputs"),
    ):
        p = sub.add_parser(name, help=text)
        if name == "preflight":
            what = p.add_mutually_exclusive_group(required=True)
            what.add_argument("--tier", choices=TIER_ORDER)
            what.add_argument(
                "--templates",
                type=Path,
                metavar="DIR",
                help="check what any app's synthesized templates need instead (the cdk synth output, cdk.out)",
            )
        else:
            p.add_argument("--tier", choices=TIER_ORDER, required=True)
        _add_aws_options(p)
        p.set_defaults(handler=handler)
        if name == "preflight":
            p.add_argument(
                "--cdk-json",
                type=Path,
                help="the app's cdk.json (default: ./cdk.json if any; defaults: the package's)",
            )
            p.add_argument(
                "-c",
                "--context",
                action="append",
                default=[],
                metavar="KEY=VALUE",
                help="context override, as with cdk synth -c",
            )
        else:
            p.add_argument("--stack", help="stack name (default: InferenceTiers-<Tier>)")
            p.add_argument("--timeout", type=float, default=60.0, help="HTTP timeout in seconds (EKS tiers)")
            p.add_argument(
                "--blocked-prompt", default=BLOCKED_PROMPT, help="bedrock: a prompt the guardrail must block"
            )
    from inference_tiers.ops.bench.command import add_bench_arguments

    b = sub.add_parser("bench", help="measure a workload spec on a deployed tier or endpoint (docs/bench.md)")
    add_bench_arguments(b, TIER_ORDER)
    _add_aws_options(b)
    b.set_defaults(handler=_bench)
    g = sub.add_parser("gateway", help="administer a deployed gateway tier")
    gsub = g.add_subparsers(dest="gateway_command", required=True)
    k = gsub.add_parser("keys", help="create a team and a virtual key with a budget (admin API)")
    k.add_argument("--team", required=True, help="team alias")
    k.add_argument("--budget", type=_positive_number, required=True, help="USD per budget period")
    k.add_argument("--budget-duration", default="30d", help="budget period: 30d, 24h, 60m (default 30d)")
    k.add_argument("--models", required=True, help="comma-separated model names the team may call")
    k.add_argument("--key-alias", help="alias of the key (default <team>-key)")
    k.add_argument("--rpm-limit", type=_positive_int, help="requests per minute for the team")
    k.add_argument("--tpm-limit", type=_positive_int, help="tokens per minute for the team")
    k.add_argument(
        "--stack", default=STACK_NAMES["gateway"], help="stack name (default InferenceTiers-Gateway)"
    )
    k.add_argument("--admin-url", help="admin API URL instead of the stack's AdminUrl (a tunnel)")
    k.add_argument("--ca-bundle", help="CA bundle to verify the admin listener's certificate")
    k.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    _add_aws_options(k)
    k.set_defaults(handler=_gateway_keys)
    d = sub.add_parser("dashboards", help="the Grafana dashboards of every tier")
    dsub = d.add_subparsers(dest="dashboards_command", required=True)
    push = dsub.add_parser(
        "push", help="import them into a Grafana (token in GRAFANA_TOKEN) or an AMG workspace"
    )
    push.add_argument(
        "--grafana-url", help="any Grafana, e.g. https://grafana.example (token: GRAFANA_TOKEN)"
    )
    push.add_argument("--grafana-workspace", help="an Amazon Managed Grafana workspace id (g-...)")
    push.add_argument("--folder-uid", help="Grafana folder to put them in (default: General)")
    push.add_argument("--ca-bundle", help="CA bundle to verify the Grafana certificate")
    push.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    _add_aws_options(push)
    push.set_defaults(handler=_dashboards_push)
    exp = dsub.add_parser("export", help="write them as JSON files to import by hand")
    exp.add_argument("--out", type=Path, required=True, help="folder to write <uid>.json files into")
    exp.set_defaults(handler=_dashboards_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except StackError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    except NoCredentialsError:
        print(
            "error: no AWS credentials found: configure a profile (aws configure / aws sso login) or set "
            "AWS_PROFILE",
            file=sys.stderr,
        )
        return EXIT_AWS
    except NoRegionError:
        print("error: no AWS Region: pass --region or set AWS_REGION", file=sys.stderr)
        return EXIT_AWS
    except ClientError as error:
        info = error.response.get("Error", {})
        print(
            f"error: AWS {error.operation_name}: {info.get('Code')}: {info.get('Message')}", file=sys.stderr
        )
        return EXIT_AWS
    except BotoCoreError as error:
        print(f"error: AWS: {error}", file=sys.stderr)
        return EXIT_AWS
    except ValueError as error:  # ConfigError, ModelError, PriceTableError, UsageError and sizing limits
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader closed the pipe early (| head): it has what it wanted. Point stdout at /dev/null so the
        # interpreter's final flush does not print a second error, and leave without a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
