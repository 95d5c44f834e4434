"""Print the Prometheus series names the pinned LiteLLM proxy exports (tests/data/observability allow-list).

Run with the gateway's tool venv, which holds exactly the release the gateway image pins (tools/gateway/setup.sh):

    LITELLM_LOCAL_MODEL_COST_MAP=True tools/gateway/.venv/bin/python tools/observability/litellm_metric_names.py \
        > tests/data/observability/litellm-metrics.txt

It instantiates LiteLLM's own PrometheusLogger (the `prometheus` callback the gateway enables) and reads the metric
families it registers, so the list is what that release really exports, not what its docs say.
"""

from __future__ import annotations

import importlib.metadata

# Series a family of each type produces on /metrics (prometheus_client; *_created lines are not scraped as
# separate metrics by the AMP scraper's default config and are not listed).
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def main() -> None:
    from litellm.integrations.prometheus import PrometheusLogger
    from prometheus_client import REGISTRY

    PrometheusLogger()
    families = sorted((m.name, m.type) for m in REGISTRY.collect() if m.name.startswith("litellm_"))
    version = importlib.metadata.version("litellm")
    print(
        f"# Series names LiteLLM {version} exports on the proxy's /metrics with the prometheus callback. Source: "
        "litellm.integrations.prometheus.PrometheusLogger of the PyPI release, instantiated by "
        "tools/observability/litellm_metric_names.py (families read from prometheus_client's registry: counter "
        "-> <name>_total, gauge -> <name>, histogram -> <name>_bucket/_count/_sum). Budget gauges appear for idle "
        "keys/teams only with prometheus_initialize_budget_metrics."
    )
    for name, kind in families:
        for suffix in _SUFFIXES[kind]:
            print(name + suffix)


if __name__ == "__main__":
    main()
