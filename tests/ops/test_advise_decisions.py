"""advise, as a new user found it wrong: GPU memory in GB, every fitting instance compared by total cost, prefill
nodes sized by the request rate, intermittent traffic scaled to zero, impossible prompts and TP degrees refused,
and the HyperPod operator's routing, KV tiers and prefill/decode advised from AWS's published guidance."""

from __future__ import annotations

import math

import pytest

from inference_tiers.instance_types import GPU_INSTANCE_TYPES
from inference_tiers.ops.advise import advise, choose_instance
from inference_tiers.ops.cli import main
from inference_tiers.ops.kv_cache import GIB, size_kv
from inference_tiers.ops.models import ModelArchitecture, preset
from inference_tiers.ops.pricing import PriceTable, load_price_table
from tests.ops.test_advise import workload

PRICES = load_price_table()
LLAMA_70B = preset("llama-3.1-70b")


# --- GPU memory ---------------------------------------------------------------------------------------------------


def test_gpu_memory_is_the_vendors_decimal_gigabytes() -> None:
    l40s = GPU_INSTANCE_TYPES["g6e.xlarge"]
    assert l40s.gpu_memory_gb == 48
    assert l40s.gpu_memory_bytes / GIB == pytest.approx(44.7, abs=0.05)  # the "48 GB is 44.7 GiB"
    sizing = size_kv(preset("qwen3-8b"), kv_dtype="bf16", context_tokens=1000, instance=l40s)
    assert sizing.usable_bytes_per_gpu == int(48e9 * 0.9)


def test_a_70b_model_at_128k_is_sized_where_it_really_fits() -> None:
    advice = advise(
        workload(input_tokens=126976, output_tokens=4096, concurrency=4), LLAMA_70B, prices=PRICES
    )
    assert advice.sizing is not None and advice.sizing.fits
    instance = GPU_INSTANCE_TYPES[advice.sizing.instance_type]
    weights = math.ceil(70.6e9 * 2 / advice.sizing.tp)
    assert instance.gpu_memory_bytes * 0.9 - weights >= advice.sizing.bytes_per_request_per_gpu


# --- choosing the instance by total cost --------------------------------------------------------------------------


def test_every_fitting_type_is_compared_by_the_cost_of_the_whole_fleet() -> None:
    # The reported case: the cheapest instance per hour (g6e.12xlarge) needed 33 of them, $346/h; a fleet of
    # bigger instances costs less in all.
    best = choose_instance(
        LLAMA_70B, kv_dtype="bf16", weight_dtype="bf16", context_tokens=32000, concurrency=128, prices=PRICES
    )
    assert best is not None
    g6e = size_kv(
        LLAMA_70B, kv_dtype="bf16", context_tokens=32000, instance=GPU_INSTANCE_TYPES["g6e.12xlarge"]
    )
    g6e_fleet = math.ceil(128 / g6e.concurrent_requests_per_instance) * 10.49264
    p5 = size_kv(LLAMA_70B, kv_dtype="bf16", context_tokens=32000, instance=GPU_INSTANCE_TYPES["p5.48xlarge"])
    p5_fleet = math.ceil(128 / p5.concurrent_requests_per_instance) * 55.04
    assert best.hourly_usd <= min(g6e_fleet, p5_fleet) < g6e_fleet
    assert best.hourly_usd == pytest.approx(best.instances * PRICES.prices[best.instance.name])
    assert best.instances == math.ceil(128 / best.sizing.concurrent_requests_per_instance)


def test_the_search_covers_tp_degrees_below_the_gpu_count() -> None:
    # Qwen3-30B-A3B has 4 KV heads: at TP8 each head is held twice, so two TP4 replicas per p5 hold more
    # requests than one TP8 replica, and the search finds it.
    model = preset("qwen3-30b-a3b")
    only_p5 = PriceTable("2026-12-04", "us-east-1", "test", {"p5.48xlarge": 55.04})
    best = choose_instance(
        model, kv_dtype="bf16", weight_dtype="bf16", context_tokens=4096, concurrency=10_000, prices=only_p5
    )
    tp8 = size_kv(model, kv_dtype="bf16", context_tokens=4096, instance=GPU_INSTANCE_TYPES["p5.48xlarge"])
    assert best is not None and best.sizing.tp == 4 and best.sizing.replicas_per_instance == 2
    assert best.instances < math.ceil(10_000 / tp8.concurrent_requests_per_instance)


# --- refusals -----------------------------------------------------------------------------------------------------


def test_a_tp_degree_that_does_not_divide_the_heads_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"--tp 3: llama-3.1-70b has 64 attention heads.*1, 2, 4, 8, 16, 32, 64"
    ):
        advise(workload(), LLAMA_70B, prices=PRICES, tp=3)


def test_an_instance_whose_gpu_count_does_not_divide_the_heads_gets_a_valid_tp() -> None:
    # 28 heads (Qwen2.5-7B's shape): TP8 on p5 is invalid for vLLM, so the default is the largest valid one, 4.
    model = ModelArchitecture("twenty-eight-heads", 28, 3584, 28, 4, 128, 7.6, 7.6, 32768)
    advice = advise(workload(), model, prices=PRICES, instance_type="p5.48xlarge")
    assert advice.sizing is not None and advice.sizing.tp == 4


@pytest.mark.parametrize("value", ["1", "-0.1", "x"])
def test_prefix_reuse_outside_its_range_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["advise", "--model", "qwen3-8b", "--prefix-reuse", value])
    assert exit_info.value.code == 2
    assert f"--prefix-reuse: expected a share in [0, 1), got {value!r}" in capsys.readouterr().err


# --- traffic ------------------------------------------------------------------------------------------------------


def test_intermittent_traffic_scales_to_zero_even_where_disaggregation_would_pay() -> None:
    advice = advise(
        workload(traffic="intermittent", input_tokens=126976, output_tokens=4096, concurrency=20),
        LLAMA_70B,
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert advice.tier == "sagemaker"
    assert advice.deployment is not None and advice.deployment.min_instances == 0
    assert advice.disaggregation is not None and advice.disaggregation.pays
    assert any("intermittent traffic does not repay" in note for note in advice.notes)


def test_steady_traffic_keeps_its_instances() -> None:
    advice = advise(workload(traffic="steady"), preset("qwen3-8b"), prices=PRICES)
    assert advice.deployment is not None
    assert advice.deployment.min_instances == advice.deployment.instances >= 1


def test_prefill_nodes_grow_with_the_request_rate() -> None:
    def prefill_nodes(concurrency: int) -> int:
        advice = advise(
            workload(input_tokens=126976, output_tokens=4096, concurrency=concurrency),
            LLAMA_70B,
            prices=PRICES,
            instance_type="p5.48xlarge",
        )
        assert advice.tier == "disaggregated" and advice.deployment is not None
        return advice.deployment.prefill_instances

    assert prefill_nodes(4) == 1
    assert prefill_nodes(200) > prefill_nodes(20) > 1


def test_prefix_reuse_shortens_the_prefill_that_decides_disaggregation() -> None:
    fresh = advise(
        workload(input_tokens=16000, output_tokens=512), LLAMA_70B, prices=PRICES, instance_type="p5.48xlarge"
    )
    reused = advise(
        workload(input_tokens=16000, output_tokens=512, prefix_reuse=0.9),
        LLAMA_70B,
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert fresh.disaggregation is not None and reused.disaggregation is not None
    assert reused.disaggregation.context_tokens == 1600
    assert reused.disaggregation.prefill_seconds < fresh.disaggregation.prefill_seconds / 5
    assert fresh.tier == "disaggregated" and reused.tier == "sagemaker"


# --- HyperPod operator features -----------------------------------------------------------------------------------


def _hyperpod(**overrides: object) -> dict[str, tuple[bool, str]]:
    values: dict[str, object] = dict(runs_eks=True, traffic="steady")
    values.update(overrides)
    advice = advise(workload(**values), LLAMA_70B, prices=PRICES, instance_type="p5.48xlarge")
    assert advice.tier == "hyperpod", advice.reasons
    return {f.name: (f.enabled, f.setting) for f in advice.hyperpod_features}


def test_agentic_sessions_get_session_routing_and_both_kv_tiers() -> None:
    features = _hyperpod(shape="agentic", prefix_reuse=0.8)
    assert features["intelligent routing"] == (True, "hyperpod.routing_strategy=session")
    assert features["L1 KV cache (CPU offload)"][0] and features["L2 KV cache"][0]
    assert "tieredstorage" in features["L2 KV cache"][1]


def test_rag_gets_prefix_aware_routing() -> None:
    features = _hyperpod(shape="rag", prefix_reuse=0.6)
    assert features["intelligent routing"] == (True, "hyperpod.routing_strategy=prefixaware")


def test_chat_without_reuse_leaves_routing_and_l2_off() -> None:
    features = _hyperpod()
    assert features["intelligent routing"][0] is False
    assert features["L2 KV cache"][0] is False
    assert features["prefill/decode"][0] is False


def test_hyperpod_prefill_decode_when_awss_guidance_holds() -> None:
    # 70B dense, 16,000-token prompts, 1,024 outputs, 512 streams: well above 2 requests/s on p5.
    advice = advise(
        workload(runs_eks=True, traffic="steady", input_tokens=16000, output_tokens=1024, concurrency=512),
        LLAMA_70B,
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert advice.tier == "hyperpod"
    pd = advice.hyperpod_features[-1]
    assert pd.name == "prefill/decode" and pd.enabled and pd.setting == "hyperpod.prefill_decode=true"
    assert advice.requests_per_second is not None and advice.requests_per_second >= 2
    assert advice.deployment is not None and advice.deployment.prefill_instances >= 1


def test_below_two_requests_per_second_the_disaggregated_tier_fits_better() -> None:
    advice = advise(
        workload(runs_eks=True, traffic="steady", input_tokens=16000, output_tokens=1024, concurrency=32),
        LLAMA_70B,
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert advice.requests_per_second is not None and advice.requests_per_second < 2
    assert advice.tier == "disaggregated" and advice.hyperpod_features == []
    assert any("pdSpec does not fit" in reason and "(at least 2)" in reason for reason in advice.reasons)


def test_a_mixture_of_experts_model_is_not_advised_hyperpod_prefill_decode() -> None:
    advice = advise(
        workload(runs_eks=True, traffic="steady", input_tokens=16000, output_tokens=1024, concurrency=512),
        preset("qwen3-30b-a3b"),
        prices=PRICES,
        instance_type="p5.48xlarge",
    )
    assert all(not (f.name == "prefill/decode" and f.enabled) for f in advice.hyperpod_features)


def test_the_table_shows_the_operator_features(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "advise", "--model", "llama-3-70b", "--instance-type", "p5.48xlarge", "--runs-eks", "--traffic",
            "steady", "--shape", "agentic", "--prefix-reuse", "0.8",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "HyperPod operator feature" in out and "hyperpod.routing_strategy=session" in out
