"""The bench report: ``results.json`` for scripts, a table for people, and ``report.html`` / ``chart.svg``.

The chart plots each target's output tokens/s (x) against its TTFT p90 (y), one point per load level and one
line per target, with the TTFT SLO as a dashed line: a tier's curve bends up where it saturates, and the points
under the line are the loads it serves within the SLO. Several runs written to the same folder share the
results file, so two tiers measured on the same workload land on one chart.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from inference_tiers.ops.report import table

RESULTS_FILE, HTML_FILE, SVG_FILE = "results.json", "report.html", "chart.svg"
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_W, _H, _PAD = 720, 420, 60


def merge_results(out: Path, workload: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """Add (or replace, by name) ``target`` in ``out/results.json``; another workload's results are refused."""
    path = out / RESULTS_FILE
    results: dict[str, Any] = {"workload": workload, "targets": []}
    if path.exists():
        results = json.loads(path.read_text(encoding="utf-8"))
        if results.get("workload") != workload:
            raise ValueError(
                f"{path} holds results of another workload spec: compare targets on one workload, or pass "
                "another --out folder"
            )
    results["targets"] = [t for t in results["targets"] if t["name"] != target["name"]] + [target]
    check_token_units(results["targets"])
    return results


def check_token_units(targets: list[dict[str, Any]]) -> None:
    """Refuse targets whose tokens were counted in different units (server usage, a tokenizer, or a mix): their
    tokens/s, ITL and $/1M tokens are not comparable, so no chart or advice may rank them together."""
    units = {str(t.get("token_unit")): t["name"] for t in targets}
    if len(units) > 1:
        listed = "; ".join(f"{name}: {unit}" for unit, name in sorted(units.items()))
        raise ValueError(
            f"targets counted tokens in different units ({listed}): they cannot be ranked together; measure "
            "them again so every one counts by the server's usage or the same --tokenizer, or pass another --out"
        )


def render_table(results: dict[str, Any]) -> str:
    """One row per target and load level."""
    headers = [
        "target", "level", "TTFT p50/p90/p99 ms", "ITL p50/p90/p99 ms", "e2e p50/p90/p99 ms", "out tok/s",
        "req/s", "errors", "goodput req/s", "$/1M out", "$/1M good", "SLO",
    ]  # fmt: skip
    rows = []
    for target in results["targets"]:
        for f in target["levels"]:
            rows.append(
                [
                    target["name"],
                    f"{f['level']:g}",
                    *(_triple(f[key]) for key in ("ttft_ms", "itl_ms", "e2e_ms")),
                    _num(f["output_tokens_per_s"]),
                    _num(f["requests_per_s"]),
                    f"{f['error_rate']:.1%}",
                    _num(f["goodput_requests_per_s"]),
                    _num(f["usd_per_1m_output_tokens"]),
                    _num(f["usd_per_1m_good_tokens"]),
                    "met" if f["meets_slo"] else "missed",
                ]
            )
    return table(headers, rows)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _triple(stats: dict[str, float | None]) -> str:
    return "/".join("-" if stats[k] is None else f"{stats[k]:.0f}" for k in ("p50", "p90", "p99"))


def render_svg(results: dict[str, Any]) -> str:
    """The latency-throughput chart: output tokens/s against TTFT p90, one line per target."""
    points = {
        t["name"]: [
            (f["output_tokens_per_s"] or 0.0, f["ttft_ms"]["p90"] or 0.0, f["level"]) for f in t["levels"]
        ]
        for t in results["targets"]
    }
    slo = float(results["workload"]["slo"]["ttft_p90_ms"])
    max_x = max((x for series in points.values() for x, _, _ in series), default=1.0) * 1.1 or 1.0
    max_y = max([slo, *(y for series in points.values() for _, y, _ in series)]) * 1.15

    def sx(x: float) -> float:
        return _PAD + x / max_x * (_W - 2 * _PAD)

    def sy(y: float) -> float:
        return _H - _PAD - y / max_y * (_H - 2 * _PAD)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="black"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="black"/>',
        f'<text x="{_W / 2}" y="{_H - 15}" text-anchor="middle">output tokens/s</text>',
        f'<text x="15" y="{_H / 2}" transform="rotate(-90 15 {_H / 2})" text-anchor="middle">TTFT p90 (ms)</text>',
        f'<line x1="{_PAD}" y1="{sy(slo):.1f}" x2="{_W - _PAD}" y2="{sy(slo):.1f}" stroke="grey" '
        'stroke-dasharray="6 4"/>',
        f'<text x="{_W - _PAD}" y="{sy(slo) - 5:.1f}" text-anchor="end" fill="grey">TTFT SLO {slo:g} ms</text>',
    ]
    for tick in range(5):
        x, y = max_x * tick / 4, max_y * tick / 4
        parts.append(f'<text x="{sx(x):.1f}" y="{_H - _PAD + 16}" text-anchor="middle">{x:,.0f}</text>')
        parts.append(f'<text x="{_PAD - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:,.0f}</text>')
    for index, (name, series) in enumerate(points.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in sorted(series))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y, level in series:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}"/>')
            parts.append(f'<text x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}" fill="{colour}">{level:g}</text>')
        parts.append(
            f'<text x="{_PAD + 10}" y="{_PAD + 16 * index}" fill="{colour}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(results: dict[str, Any]) -> str:
    workload = html.escape(json.dumps(results["workload"], indent=2))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>inference-tiers bench</title></head><body>"
        "<h1>inference-tiers bench</h1><p>Output tokens/s against TTFT p90 at each load level (labels: the "
        "level); the dashed line is the TTFT SLO.</p>"
        f"{render_svg(results)}<h2>Figures</h2><pre>{html.escape(render_table(results))}</pre>"
        f"<h2>Workload</h2><pre>{workload}</pre></body></html>\n"
    )


def write_report(out: Path, results: dict[str, Any]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        RESULTS_FILE: json.dumps(results, indent=2) + "\n",
        HTML_FILE: render_html(results),
        SVG_FILE: render_svg(results) + "\n",
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return [out / name for name in files]
