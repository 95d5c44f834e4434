"""Pure renderers of the observability layer: Prometheus rules, Alertmanager configuration, scrape and collector
configurations, Grafana dashboards. No CDK here: each function returns plain data (or text) that tests check
with the real tools (promtool, amtool, a Prometheus server) and the constructs embed in templates.
"""
