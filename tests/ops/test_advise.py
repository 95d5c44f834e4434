"""advise: KV-cache figures against published anchors, the disaggregation verdict, the decision path, prices."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.ops import disaggregation
from inference_tiers.ops.advise import Workload, advise, choose_instance
from inference_tiers.ops.cli import main
from inference_tiers.ops.kv_cache import GIB, kv_bytes_per_token, size_kv
from inference_tiers.ops.models import (
    ModelArchitecture,
    ModelError,
    estimate_params_b,
    from_hf_config,
    preset,
    with_params,
)
from inference_tiers.ops.pricing import PriceTableError, load_price_table

KIB = 1024
P5 = GPU_INSTANCE_TYPES["p5.48xlarge"]
LLAMA_70B = preset("llama-3-70b")
PRICES = load_price_table()


def workload(**overrides: object) -> Workload:
    values: dict[str, object] = dict(
        model_source="open",
        runs_eks=False,
        concurrency=8,
        traffic="spiky",
        input_tokens=2048,
        output_tokens=512,
    )
    values.update(overrides)
    return Workload(**values)  # type: ignore[arg-type]


# --- KV cache --------------------------------------------------------------------------------------------


def test_llama_3_70b_bf16_kv_is_320_kib_per_token_and_40_gib_at_128k() -> None:
    assert kv_bytes_per_token(LLAMA_70B, "bf16") == 320 * KIB
    sizing = size_kv(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5)
    assert sizing.bytes_per_request == 40 * GIB
    # TP8 over 8 KV heads: each GPU holds one head, 40 KiB per token, 5 GiB at 128K (reference §4.3).
    assert sizing.bytes_per_request_per_gpu == 5 * GIB


def test_qwen3_8b_at_32k_is_4_5_gib() -> None:
    sizing = size_kv(
        preset("qwen3-8b"), kv_dtype="bf16", context_tokens=32768, instance=GPU_INSTANCE_TYPES["g6e.xlarge"]
    )
    assert sizing.bytes_per_token == 144 * KIB
    assert sizing.bytes_per_request == int(4.5 * GIB)


def test_fp8_kv_halves_the_cache() -> None:
    assert kv_bytes_per_token(LLAMA_70B, "fp8") == 160 * KIB


def test_tp_beyond_kv_heads_replicates_heads() -> None:
    # Qwen3-30B-A3B has 4 KV heads: TP8 still leaves one whole head (1/4 of the cache) on every GPU.
    model = preset("qwen3-30b-a3b")
    sizing = size_kv(model, kv_dtype="bf16", context_tokens=1000, instance=P5, tp=8)
    assert sizing.bytes_per_request_per_gpu == sizing.bytes_per_request // 4


def test_concurrency_is_the_kv_budget_left_after_weights() -> None:
    sizing = size_kv(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5)
    usable = int(80e9 * 0.9)  # H100 "80 GB": decimal gigabytes, as NVIDIA states it
    weights = 70.6e9 * 2 / 8
    assert sizing.kv_budget_bytes_per_gpu == usable - int(-(-weights // 1))
    assert sizing.concurrent_requests_per_instance == int((usable - weights) // (5 * GIB))
    assert sizing.replicas_per_instance == 1


def test_model_that_does_not_fit_reports_zero_concurrency() -> None:
    sizing = size_kv(preset("llama-3.1-405b"), kv_dtype="bf16", context_tokens=8192, instance=P5)
    assert not sizing.fits
    assert sizing.concurrent_requests_per_instance == 0


def test_tp_larger_than_the_instance_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"--tp 2: expected 1 to 1 \(the GPUs of g6e.xlarge\)"):
        size_kv(
            LLAMA_70B, kv_dtype="bf16", context_tokens=10, instance=GPU_INSTANCE_TYPES["g6e.xlarge"], tp=2
        )


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(ModelError, match=r"model 'llama-9': expected one of .*qwen3-8b"):
        preset("llama-9")


# --- Hugging Face config.json ---------------------------------------------------------------------------------


def _write(tmp_path: Path, config: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_hf_config_matches_the_preset_and_estimates_parameters(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "num_hidden_layers": 80,
            "hidden_size": 8192,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 28672,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
        },
    )
    model = from_hf_config(path)
    assert kv_bytes_per_token(model, "bf16") == 320 * KIB
    assert model.params_b == pytest.approx(70.6, abs=0.1)  # Llama-3-70B's published 70.6B
    assert model.active_params_b == model.params_b


def test_hf_config_moe_counts_active_experts(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "num_hidden_layers": 48,
            "hidden_size": 2048,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "moe_intermediate_size": 768,
            "intermediate_size": 6144,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "vocab_size": 151936,
        },
    )
    model = from_hf_config(path)
    assert model.params_b == pytest.approx(30.5, abs=0.5)  # Qwen3-30B-A3B
    assert model.active_params_b == pytest.approx(3.3, abs=0.5)
    assert model.head_dim == 128


def test_hf_config_params_override(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "intermediate_size": 128,
            "vocab_size": 100,
        },
    )
    model = from_hf_config(path, params_b=1.5)
    assert model.params_b == 1.5
    assert model.kv_heads == 4  # no num_key_value_heads: multi-head attention


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", r"not JSON"),
        ("[1, 2]", r"expected a JSON object"),
        (json.dumps({"hidden_size": 64}), r"needs a positive integer num_hidden_layers"),
    ],
)
def test_bad_hf_config_names_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ModelError, match=message):
        from_hf_config(path)


def test_missing_hf_config_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"cannot read"):
        from_hf_config(tmp_path / "absent.json")


def test_parameter_estimate_formula() -> None:
    # One layer, no experts: attention h*d*(2H + 2KV) + MLP 3*h*i + embeddings 2*V*h.
    assert estimate_params_b(1, 10, 2, 1, 5, 20, 100) * 1e9 == pytest.approx(10 * 5 * 6 + 3 * 10 * 20 + 2000)


# --- disaggregation ----------------------------------------------------------------------------------------------


def test_llama_70b_prefill_at_128k_matches_the_reference_estimate() -> None:
    # reference §4.3: about 4.1e16 FLOPs (1.85e16 linear + 2.25e16 attention).
    assert disaggregation.prefill_flops(LLAMA_70B, 131072) == pytest.approx(4.1e16, rel=0.02)


def test_p5_transfer_uses_the_measured_mooncake_figure() -> None:
    result = disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5)
    assert result.bandwidth.bytes_per_s == 388.9e9
    assert result.transfer_seconds == pytest.approx(0.110, abs=0.002)  # reference: 110 ms at 389 GB/s


def test_verdict_flips_with_context_length() -> None:
    short = disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=1024, instance=P5)
    long = disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5)
    assert not short.pays and "too short" in short.reason
    assert long.pays and long.transfer_share < 0.02


def test_verdict_flips_with_the_network() -> None:
    efa = disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5, network="efa")
    tcp = disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=131072, instance=P5, network="tcp")
    assert efa.pays
    assert not tcp.pays
    assert tcp.bandwidth.bytes_per_s == 9.5e9 and "would add" in tcp.reason


def test_tcp_on_a_slow_instance_uses_its_line_rate() -> None:
    bandwidth = disaggregation.transfer_bandwidth(GPU_INSTANCE_TYPES["g6.xlarge"], "auto")
    assert bandwidth.network == "tcp" and bandwidth.bytes_per_s == 10e9 / 8


def test_efa_requested_on_an_instance_without_efa_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"--network efa: g6.xlarge has no EFA interface"):
        disaggregation.transfer_bandwidth(GPU_INSTANCE_TYPES["g6.xlarge"], "efa")


def test_other_efa_instances_scale_their_line_rate_by_the_measured_efficiency() -> None:
    bandwidth = disaggregation.transfer_bandwidth(GPU_INSTANCE_TYPES["g6e.48xlarge"], "efa")
    assert bandwidth.bytes_per_s == pytest.approx(400e9 / 8 * 388.9 / 400)


def test_mfu_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"--mfu 0: expected a fraction"):
        disaggregation.check(LLAMA_70B, kv_dtype="bf16", context_tokens=10, instance=P5, mfu=0)


# --- decision path --------------------------------------------------------------------------------------------------


def test_foundation_model_goes_to_bedrock_without_an_hourly_estimate() -> None:
    advice = advise(workload(model_source="foundation"), None, prices=PRICES)
    assert advice.tier == "bedrock" and advice.next_tier == "sagemaker"
    assert advice.deployment is None


def test_open_model_with_short_prompts_goes_to_sagemaker() -> None:
    advice = advise(workload(), preset("qwen3-8b"), prices=PRICES)
    assert advice.tier == "sagemaker" and advice.next_tier == "hyperpod"
    assert advice.deployment is not None and advice.deployment.instance_type.startswith("ml.")
    assert "SageMaker costs more" in advice.deployment.price_basis


def test_eks_team_with_steady_traffic_goes_to_hyperpod() -> None:
    advice = advise(workload(runs_eks=True, traffic="steady"), preset("qwen3-8b"), prices=PRICES)
    assert advice.tier == "hyperpod" and advice.next_tier == "disaggregated"
    assert advice.deployment is not None and advice.deployment.instance_type.startswith("ml.")


def test_steady_traffic_without_eks_stays_on_sagemaker_and_says_why() -> None:
    advice = advise(workload(traffic="steady"), preset("qwen3-8b"), prices=PRICES)
    assert advice.tier == "sagemaker"
    assert any("does not run EKS" in reason for reason in advice.reasons)


def test_long_prompts_over_efa_go_to_disaggregated_with_prefill_nodes_for_the_rate() -> None:
    advice = advise(
        workload(input_tokens=126976, output_tokens=4096, concurrency=20),
        LLAMA_70B,
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert advice.tier == "disaggregated" and advice.next_tier is None
    assert advice.sizing is not None and advice.deployment is not None and advice.disaggregation is not None
    decode_nodes = -(-20 // advice.sizing.concurrent_requests_per_instance)
    # Little's law by hand: 20 streams, each a prefill plus 4096 tokens at 50 ms; one TP8 replica per node.
    prefill = advice.disaggregation.prefill_seconds
    rate = 20 / (prefill + 4096 * 0.05)
    assert advice.requests_per_second == pytest.approx(rate)
    prefill_nodes = max(1, math.ceil(rate * prefill / 0.8))
    assert advice.deployment.prefill_instances == prefill_nodes
    assert advice.deployment.instances == decode_nodes + prefill_nodes
    assert advice.deployment.hourly_usd == pytest.approx(55.04 * (decode_nodes + prefill_nodes))
    assert not any("p5-family" in note for note in advice.notes)


def test_disaggregated_advice_on_a_non_p5_instance_says_what_the_tier_deploys() -> None:
    advice = advise(
        workload(input_tokens=8192, output_tokens=1024),
        LLAMA_70B,
        prices=PRICES,
        instance_type="g6e.48xlarge",
        kv_dtype="fp8",
    )
    assert advice.tier == "disaggregated"
    assert any("rerun with --instance-type p5.48xlarge" in note for note in advice.notes)


def test_model_larger_than_any_node_goes_to_disaggregated() -> None:
    giant = ModelArchitecture("giant-1t", 126, 16384, 128, 8, 128, 1000.0, 1000.0, 131072)
    advice = advise(workload(), giant, prices=PRICES)  # 2 TB of bf16 weights: more than any one node holds
    assert advice.tier == "disaggregated" and advice.deployment is None
    assert "does not fit any single instance type" in advice.reasons[0]


def test_cheapest_fitting_instance_is_chosen() -> None:
    best = choose_instance(
        preset("qwen3-8b"),
        kv_dtype="bf16",
        weight_dtype="bf16",
        context_tokens=4096,
        concurrency=1,
        prices=PRICES,
    )
    assert best is not None and best.instance.name == "g6.xlarge"  # $0.8048/h, the cheapest 24 GB GPU
    assert best.instances == 1 and best.hourly_usd == 0.8048


def test_the_chosen_instance_fits_at_the_requested_tp() -> None:
    # 141 GB of bf16 weights over 2 GPUs: the cheapest type at TP2 must hold 70 GB per GPU (not a 48 GB L40S).
    advice = advise(workload(), preset("llama-3.1-70b"), prices=PRICES, tp=2)
    assert advice.sizing is not None and advice.sizing.tp == 2 and advice.sizing.fits
    assert GPU_INSTANCE_TYPES[advice.sizing.instance_type].gpu_memory_gb >= 80
    assert not any("does not fit" in reason for reason in advice.reasons)


def test_own_model_needs_an_architecture() -> None:
    with pytest.raises(ValueError, match=r"--model or --hf-config"):
        advise(workload(model_source="own"), None, prices=PRICES)


# --- price table ------------------------------------------------------------------------------------------------------


def test_shipped_price_table_is_dated_and_sourced() -> None:
    assert PRICES.as_of == "2026-01-21" and PRICES.region == "us-east-1"
    assert "instances.vantage.sh" in PRICES.source
    assert PRICES.hourly("p5.48xlarge") == (55.04, "us-east-1 2026-01-21")
    assert PRICES.hourly("p5e.48xlarge") is None


def test_price_file_overrides_and_ml_names_win(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "as_of": "2026-12-01",
                "region": "eu-west-1",
                "source": "my quote",
                "prices": {"ml.g6.xlarge": 1.5},
            }
        ),
        encoding="utf-8",
    )
    prices = load_price_table(path)
    assert prices.hourly("ml.g6.xlarge") == (1.5, "eu-west-1 2026-12-01")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"prices": []}, r"expected \{\"as_of\""),
        (
            {"as_of": "x", "region": "r", "source": "s", "prices": {"g6.xlarge": -1}},
            r"price of 'g6.xlarge' is -1",
        ),
        ({"region": "r", "source": "s", "prices": {}}, r"missing 'as_of'"),
    ],
)
def test_bad_price_file_names_the_problem(tmp_path: Path, document: object, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(PriceTableError, match=message):
        load_price_table(path)


# --- the command ------------------------------------------------------------------------------------------------------


def test_advise_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "advise",
            "--model",
            "llama-3-70b",
            "--instance-type",
            "p5.48xlarge",
            "--input-tokens",
            "131071",
            "--output-tokens",
            "1",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["tier"] == "disaggregated"
    assert data["sizing"]["bytes_per_token"] == 327680
    assert data["disaggregation"]["pays"] is True
    assert data["deployment"]["instance_type"] == "p5.48xlarge"


def test_advise_table_shows_mib_for_mid_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--model", "qwen3-8b", "--input-tokens", "4096", "--output-tokens", "512"]) == 0
    assert re.search(r"KV cache per request \(4608 tokens\) +648 MiB\n", capsys.readouterr().out)


def test_advise_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--model", "qwen3-8b", "--input-tokens", "32768", "--output-tokens", "1"]) == 0
    out = capsys.readouterr().out
    assert "Recommended tier: sagemaker" in out
    assert "KV cache per request (32769 tokens)" in out and "4.50 GiB" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "nope"], "model 'nope': expected one of"),
        (["--model", "qwen3-8b", "--instance-type", "g6.xlarge", "--network", "efa"], "has no EFA interface"),
        (["--model", "qwen3-8b", "--instance-type", "x1.large"], "--instance-type 'x1.large'"),
        (["--model", "qwen3-8b", "--hf-config", "config.json"], "pass one of them"),
        (["--model", "qwen3-8b", "--prices", "/nonexistent/prices.json"], "cannot read"),
    ],
)
def test_advise_bad_input_exits_2_without_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["advise", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "0"], "expected a positive integer"),
        (["--params-b", "0"], "argument --params-b: expected a number > 0, got '0'"),
        (["--params-b", "-8"], "argument --params-b: expected a number > 0, got '-8'"),
        (["--params-b", "nan"], "argument --params-b: expected a number > 0, got 'nan'"),
    ],
)
def test_advise_bad_flag_value_is_an_argparse_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["advise", "--model", "qwen3-8b", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_params_b_overrides_a_preset(capsys: pytest.CaptureFixture[str]) -> None:
    # qwen3-8b's weights are 8.2B x 2 bytes; --params-b 4 halves them (and the dense active count follows).
    assert (
        main(["advise", "--model", "qwen3-8b", "--params-b", "4", "--instance-type", "g6e.xlarge", "--json"])
        == 0
    )
    sizing = json.loads(capsys.readouterr().out)["sizing"]
    assert sizing["weights_bytes_per_gpu"] == 8_000_000_000


def test_params_b_on_an_moe_preset_keeps_the_active_parameters() -> None:
    model = with_params(preset("qwen3-30b-a3b"), 20)
    assert (model.params_b, model.active_params_b) == (20, 3.3)
    dense = with_params(preset("qwen3-8b"), 4)
    assert (dense.params_b, dense.active_params_b) == (4, 4)


def test_context_beyond_the_model_maximum_is_refused() -> None:
    with pytest.raises(
        ValueError,
        match=r"--input-tokens 40000 \+ --output-tokens 2000 = 42000 tokens: qwen3-8b has 40960 positions; "
        r"expected at most 40960",
    ):
        advise(workload(input_tokens=40000, output_tokens=2000), preset("qwen3-8b"), prices=PRICES)
