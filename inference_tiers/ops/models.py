"""Model architectures for sizing: presets for common open models, or a Hugging Face ``config.json``.

Only what KV-cache and prefill sizing need: layers, attention heads, KV heads, head dimension, hidden size and
parameter counts. Preset values are the ones in each model's published ``config.json`` on Hugging Face; the
parameter counts are the ones on the model cards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


class ModelError(ValueError):
    """A model that cannot be sized: names what was given and what is accepted."""


@dataclass(frozen=True)
class ModelArchitecture:
    name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    params_b: float
    """Total parameters in billions: what the weights occupy in GPU memory."""
    active_params_b: float
    """Parameters used per token in billions (equal to ``params_b`` for dense models; smaller for MoE)."""
    max_context: int

    @property
    def attention_dim(self) -> int:
        """Width of the query projection (heads x head dim), which sets attention FLOPs."""
        return self.attention_heads * self.head_dim


def _dense(
    name: str, layers: int, hidden: int, heads: int, kv: int, head_dim: int, params_b: float, max_context: int
) -> ModelArchitecture:
    return ModelArchitecture(name, layers, hidden, heads, kv, head_dim, params_b, params_b, max_context)


_LLAMA_70B = _dense("llama-3.1-70b", 80, 8192, 64, 8, 128, 70.6, 131072)

PRESETS: dict[str, ModelArchitecture] = {
    "llama-3.1-8b": _dense("llama-3.1-8b", 32, 4096, 32, 8, 128, 8.03, 131072),
    "llama-3.1-70b": _LLAMA_70B,
    # Llama 3, 3.1 and 3.3 70B share the architecture (80 layers, 8 KV heads of 128); 3.1+ has 128K context.
    "llama-3-70b": _LLAMA_70B,
    "llama-3.3-70b": _LLAMA_70B,
    "llama-3.1-405b": _dense("llama-3.1-405b", 126, 16384, 128, 8, 128, 405.0, 131072),
    "mistral-7b": _dense("mistral-7b", 32, 4096, 32, 8, 128, 7.25, 32768),
    "qwen3-8b": _dense("qwen3-8b", 36, 4096, 32, 8, 128, 8.2, 40960),
    "qwen3-32b": _dense("qwen3-32b", 64, 5120, 64, 8, 128, 32.8, 40960),
    "qwen3-30b-a3b": ModelArchitecture("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 30.5, 3.3, 40960),
}


# Hugging Face ids of the presets' models. Their config.json's max_position_embeddings is the preset's max_context.
HUB_MODELS: dict[str, ModelArchitecture] = {
    "meta-llama/llama-3.1-8b": PRESETS["llama-3.1-8b"],
    "meta-llama/llama-3.1-8b-instruct": PRESETS["llama-3.1-8b"],
    "meta-llama/llama-3.1-70b": PRESETS["llama-3.1-70b"],
    "meta-llama/llama-3.1-70b-instruct": PRESETS["llama-3.1-70b"],
    "meta-llama/llama-3.3-70b-instruct": PRESETS["llama-3.3-70b"],
    "meta-llama/llama-3.1-405b-instruct": PRESETS["llama-3.1-405b"],
    "mistralai/mistral-7b-instruct-v0.3": PRESETS["mistral-7b"],
    "qwen/qwen3-8b": PRESETS["qwen3-8b"],
    "qwen/qwen3-32b": PRESETS["qwen3-32b"],
    "qwen/qwen3-30b-a3b": PRESETS["qwen3-30b-a3b"],
}


def context_limit(model_id: object, max_model_len: object) -> str | None:
    """None unless ``model_id`` is a model of :data:`HUB_MODELS` (Hugging Face ids ignore case) and
    ``max_model_len`` is above its maximum context; then what ``max_model_len`` accepts."""
    model = HUB_MODELS.get(model_id.lower()) if isinstance(model_id, str) else None
    if model is None or not isinstance(max_model_len, int) or max_model_len <= model.max_context:
        return None
    return f"at most {model.max_context}, the maximum context of {model_id} (max_position_embeddings)"


def preset(name: str) -> ModelArchitecture:
    try:
        return PRESETS[name]
    except KeyError:
        raise ModelError(
            f"model {name!r}: expected one of {', '.join(sorted(PRESETS))} "
            "(or pass --hf-config PATH to a Hugging Face config.json)"
        ) from None


def with_params(model: ModelArchitecture, params_b: float) -> ModelArchitecture:
    """``model`` with ``params_b`` billion parameters (a dense model's active parameters follow; an MoE
    model keeps its active count, which the total does not determine)."""
    dense = model.active_params_b == model.params_b
    return replace(
        model, params_b=params_b, active_params_b=params_b if dense else min(model.active_params_b, params_b)
    )


def _int(config: dict[str, Any], path: Path, *keys: str) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ModelError(f"{path}: needs a positive integer {' or '.join(keys)} (a Hugging Face config.json)")


def estimate_params_b(
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    vocab: int,
    experts: int = 1,
    tied_embeddings: bool = False,
) -> float:
    """Parameters of a Llama-style decoder: attention (Q, K, V, O), gated MLP (x experts), embeddings."""
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = 3 * hidden * intermediate * experts
    embeddings = vocab * hidden * (1 if tied_embeddings else 2)
    return (layers * (attention + mlp) + embeddings) / 1e9


def from_hf_config(path: Path, *, params_b: float | None = None) -> ModelArchitecture:
    """Read a Hugging Face ``config.json``; parameters are estimated unless ``params_b`` is given."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ModelError(f"{path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ModelError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(config, dict):
        raise ModelError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    layers = _int(config, path, "num_hidden_layers")
    hidden = _int(config, path, "hidden_size")
    heads = _int(config, path, "num_attention_heads")
    kv_heads = _int(config, path, "num_key_value_heads", "num_attention_heads")
    head_dim = _int(config, path, "head_dim") if "head_dim" in config else hidden // heads
    experts = next(
        (
            config[k]
            for k in ("num_local_experts", "num_experts", "n_routed_experts")
            if isinstance(config.get(k), int) and config[k] > 0
        ),
        1,
    )
    per_token_experts = config.get("num_experts_per_tok") if experts > 1 else 1
    intermediate = (
        _int(config, path, "moe_intermediate_size", "intermediate_size")
        if experts > 1
        else _int(config, path, "intermediate_size")
    )
    vocab = _int(config, path, "vocab_size")
    tied = bool(config.get("tie_word_embeddings", False))
    total = params_b or estimate_params_b(
        layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, experts, tied
    )
    active = total
    if experts > 1 and isinstance(per_token_experts, int) and per_token_experts > 0:
        active = estimate_params_b(
            layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, per_token_experts, tied
        )
    max_context = config.get("max_position_embeddings")
    return ModelArchitecture(
        name=path.name,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        params_b=round(total, 2),
        active_params_b=round(min(active, total), 2),
        max_context=max_context if isinstance(max_context, int) and max_context > 0 else 0,
    )
