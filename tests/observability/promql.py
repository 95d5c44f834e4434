"""PromQL checks shared by the rule and dashboard tests: parse with promql-parser, collect metric names."""

from __future__ import annotations

import promql_parser


def metric_names(expr: str) -> set[str]:
    """Every metric an expression selects (raises ValueError when it does not parse)."""
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            # A selector without a name ({__name__=~"..."}) hides which metrics it reads: never allowed.
            names.add(node.name or "<selector without a metric name>")

    promql_parser.walk(promql_parser.parse(expr), visit)  # type: ignore[no-untyped-call]
    return names
