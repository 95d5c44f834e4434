"""The workload spec: what `inference-tiers bench` sends, at which loads, and the SLOs it is judged by.

A YAML (or JSON) document; every key but ``shape`` is optional and defaults to the shape's values::

    shape: agentic                  # chat | rag | reasoning | agentic
    model: my-model                 # model name sent in OpenAI-style requests (default: the target's)
    input_tokens: {mean: 300, stddev: 50}    # per request; agentic: the tool output each turn appends
    output_tokens: {mean: 200, stddev: 0}
    prefix_tokens: 4000             # rag: one shared document prefix before every question
    turns: {mean: 5, stddev: 1}     # agentic: turns per session, each resending the whole growing context
    think_time_ms: 2000             # agentic: pause between a turn's answer and the next turn
    load: {mode: concurrency, levels: [1, 4, 16], requests_per_level: 100}   # or mode: rate (requests/s)
    slo: {ttft_p90_ms: 1000, itl_p90_ms: 50, e2e_p90_ms: 20000}

Token counts are in the unit of the tokenizer bench runs with (tools/bench/make_tokenizer.py: one word, about 1.3
tokens of a BPE model's vocabulary) unless ``--tokenizer`` points at the model's own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

SHAPES = ("chat", "rag", "reasoning", "agentic")
LOAD_MODES = ("concurrency", "rate")
_TOP_KEYS = (
    "shape",
    "model",
    "input_tokens",
    "output_tokens",
    "prefix_tokens",
    "turns",
    "think_time_ms",
    "load",
    "slo",
)
_MAX_TOKENS = 1 << 20


@dataclass(frozen=True)
class Distribution:
    mean: int
    stddev: int = 0


@dataclass(frozen=True)
class Load:
    mode: str
    levels: tuple[float, ...]
    requests_per_level: int


@dataclass(frozen=True)
class Slo:
    ttft_p90_ms: float
    itl_p90_ms: float
    e2e_p90_ms: float

    def met_by(self, ttft_ms: float, itl_ms: float, e2e_ms: float) -> bool:
        return ttft_ms <= self.ttft_p90_ms and itl_ms <= self.itl_p90_ms and e2e_ms <= self.e2e_p90_ms


@dataclass(frozen=True)
class WorkloadSpec:
    shape: str
    input_tokens: Distribution
    output_tokens: Distribution
    load: Load
    slo: Slo
    model: str | None = None
    prefix_tokens: int = 0
    turns: Distribution = Distribution(1)
    think_time_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "model": self.model,
            "input_tokens": vars(self.input_tokens),
            "output_tokens": vars(self.output_tokens),
            "prefix_tokens": self.prefix_tokens,
            "turns": vars(self.turns),
            "think_time_ms": self.think_time_ms,
            "load": {**vars(self.load), "levels": list(self.load.levels)},
            "slo": vars(self.slo),
        }


_DEFAULT_LOAD = Load("concurrency", (1, 4, 16), 100)
_DEFAULT_SLO = Slo(ttft_p90_ms=1000, itl_p90_ms=50, e2e_p90_ms=20000)
# Each shape's defaults: what distinguishes it (long shared prefix, long outputs, growing multi-turn context).
SHAPE_DEFAULTS = {
    "chat": WorkloadSpec("chat", Distribution(550, 150), Distribution(150, 50), _DEFAULT_LOAD, _DEFAULT_SLO),
    "rag": WorkloadSpec(
        "rag", Distribution(200, 50), Distribution(200, 50), _DEFAULT_LOAD, _DEFAULT_SLO, prefix_tokens=4000
    ),
    "reasoning": WorkloadSpec(
        "reasoning",
        Distribution(500, 100),
        Distribution(2000, 500),
        _DEFAULT_LOAD,
        replace(_DEFAULT_SLO, e2e_p90_ms=120000),
    ),
    "agentic": WorkloadSpec(
        "agentic",
        Distribution(300, 50),
        Distribution(200, 50),
        _DEFAULT_LOAD,
        _DEFAULT_SLO,
        turns=Distribution(5, 1),
        think_time_ms=2000,
    ),
}


def parse_workload(document: Any, source: str = "workload spec") -> WorkloadSpec:
    """A validated spec from a parsed document; every error names ``source``, the key, the value and what fits."""
    # The constructs' argument checks; imported here because they load aws-cdk-lib, which the rest of bench
    # (and every other command whose parser imports this package) does not need.
    from inference_tiers.validation import Args

    args = Args(source)
    top: dict[str, Any] = args.mapping("(document)", document)
    for key in top:
        args.one_of("(document) key", key, _TOP_KEYS)
    base = SHAPE_DEFAULTS[args.one_of("shape", top.get("shape"), SHAPES)]

    def distribution(key: str, default: Distribution, minimum: int = 1) -> Distribution:
        if key not in top:
            return default
        raw: dict[str, Any] = args.mapping(key, top[key])
        for name in raw:
            args.one_of(f"{key} key", name, ("mean", "stddev"))
        return Distribution(
            args.integer(f"{key}.mean", raw.get("mean", default.mean), minimum=minimum, maximum=_MAX_TOKENS),
            args.integer(f"{key}.stddev", raw.get("stddev", 0), minimum=0, maximum=_MAX_TOKENS),
        )

    load_raw: dict[str, Any] = args.mapping("load", top.get("load", {}))
    for name in load_raw:
        args.one_of("load key", name, ("mode", "levels", "requests_per_level"))
    mode = args.one_of("load.mode", load_raw.get("mode", base.load.mode), LOAD_MODES)
    levels = args.sequence(
        "load.levels",
        load_raw.get("levels", list(base.load.levels)),
        lambda name, v: args.number(name, v, minimum=0, exclusive_minimum=True),
        min_items=1,
        max_items=32,
        unique=True,
    )
    if mode == "concurrency":
        levels = tuple(float(args.integer(f"load.levels[{i}]", v, minimum=1)) for i, v in enumerate(levels))
    requests = args.integer(
        "load.requests_per_level", load_raw.get("requests_per_level", base.load.requests_per_level), minimum=1
    )
    slo_raw: dict[str, Any] = args.mapping("slo", top.get("slo", {}))
    slo_values = {}
    for name in slo_raw:
        args.one_of("slo key", name, tuple(vars(base.slo)))
    for name, default in vars(base.slo).items():
        slo_values[name] = float(
            args.number(f"slo.{name}", slo_raw.get(name, default), minimum=0, exclusive_minimum=True)
        )
    turns = distribution("turns", base.turns)
    if turns.mean > 1 and base.shape != "agentic":
        raise args.error("turns.mean", turns.mean, "1 unless shape is 'agentic' (the multi-turn shape)")
    sessions = math.ceil(requests / turns.mean)
    if mode == "concurrency" and max(levels) > sessions:
        # A level above it never has that many requests in flight, yet would be reported (and advised) as if.
        raise args.error(
            "load.levels",
            max(levels),
            f"concurrency levels up to the {sessions} sessions a level runs (load.requests_per_level {requests}"
            f" / turns.mean {turns.mean}); raise load.requests_per_level",
        )
    return replace(
        base,
        model=args.text("model", top["model"], allow_token=False) if "model" in top else None,
        input_tokens=distribution("input_tokens", base.input_tokens),
        output_tokens=distribution("output_tokens", base.output_tokens),
        prefix_tokens=args.integer(
            "prefix_tokens", top.get("prefix_tokens", base.prefix_tokens), minimum=0, maximum=_MAX_TOKENS
        ),
        turns=turns,
        think_time_ms=float(
            args.number("think_time_ms", top.get("think_time_ms", base.think_time_ms), minimum=0)
        ),
        load=Load(mode, tuple(float(v) for v in levels), requests),
        slo=Slo(**slo_values),
    )


def load_workload(path: Path) -> WorkloadSpec:
    """Read and validate a spec file (YAML or JSON)."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"workload spec {path}: cannot read ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ValueError(f"workload spec {path}: not YAML ({error})") from None
    return parse_workload(document, f"workload spec {path}")


def sagemaker_workload_document(spec: WorkloadSpec) -> str:
    """The spec as the inline document of a SageMaker AI workload config (``benchmark.type: aiperf``).

    Parameter names as in the SageMaker developer guide, "Set up a workload configuration for generative AI
    inference recommendations" (generative-ai-inference-recommendations-workload-config): the inline example's
    ``prompt_input_tokens_mean/stddev`` and ``output_tokens_mean/stddev``. A shared prefix counts as input.
    """
    return json.dumps(
        {
            "benchmark": {"type": "aiperf"},
            "parameters": {
                "prompt_input_tokens_mean": spec.input_tokens.mean + spec.prefix_tokens,
                "prompt_input_tokens_stddev": spec.input_tokens.stddev,
                "output_tokens_mean": spec.output_tokens.mean,
                "output_tokens_stddev": spec.output_tokens.stddev,
            },
        },
        sort_keys=True,
    )
