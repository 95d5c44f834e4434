"""``inference-tiers bench``: measure a workload spec on a deployed tier or any endpoint (docs/bench.md)."""
