"""Tier 4 constructs: vLLM prefill/decode pools joined by Mooncake over EFA, behind vllm-router, and their monitoring."""

from inference_tiers.constructs.disaggregated.monitoring import DisaggregatedMonitoring
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing

__all__ = [
    "DisaggregatedMonitoring",
    "DisaggregatedServing",
]
