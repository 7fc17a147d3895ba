"""A self-contained HTML report (plotly.js inlined, works offline) from a run's JSON figures.

Kept out of the simulator core: it takes plain data (the ``as_dict`` of a result) and is the only
simulation module that imports plotly.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.io import to_html


def write_html_report(figures: dict[str, Any], path: str | Path) -> Path:
    parts = [_summary_table(figures)]
    include = True  # inline plotly.js once, with the first chart
    for chart in _charts(figures):
        parts.append(to_html(chart, include_plotlyjs=include, full_html=False))
        include = False
    title = f"gpuportal simulation: {figures.get('trace', '')} / {figures.get('policy', '')}"
    document = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif'><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>"
    )
    target = Path(path)
    target.write_text(document, encoding="utf-8")
    return target


def _summary_table(figures: dict[str, Any]) -> str:
    keys = (
        "mode",
        "policy",
        "seed",
        "capacity_gpus",
        "allocation",
        "utilisation",
        "allocation_at_100_pct",
        "jain_fairness",
        "preemptions",
        "node_moves",
        "wall_time_s",
    )
    rows = "".join(
        f"<tr><th style='text-align:left'>{key}</th><td>{html.escape(json.dumps(figures[key]))}</td></tr>"
        for key in keys
        if key in figures
    )
    return f"<table>{rows}</table>"


def _charts(figures: dict[str, Any]) -> list[go.Figure]:
    if figures.get("mode") == "packing":
        arrived = list(range(len(figures["allocation_pct"])))
        chart = go.Figure()
        chart.add_scatter(x=arrived, y=figures["allocation_pct"], name="GPU allocation %")
        chart.add_scatter(x=arrived, y=figures["fragmentation_pct"], name="fragmented GPUs %")
        chart.update_layout(
            title="Packing: allocation vs arrived GPU requests (% of capacity)",
            xaxis_title="arrived %",
            yaxis_title="% of GPU capacity",
        )
        return [chart]
    series = figures["fragmentation"]
    timeline = go.Figure()
    for key in ("allocated_gpus", "pending_gpus", "fragmented_gpus"):
        timeline.add_scatter(x=series["times_h"], y=series[key], name=key.replace("_", " "))
    timeline.update_layout(title="Fleet over time", xaxis_title="hours", yaxis_title="GPUs")
    waits = go.Figure()
    buckets = [name for name in figures["wait_hours"] if name != "all"]
    for q in ("p50", "p95", "p99"):
        waits.add_bar(x=buckets, y=[figures["wait_hours"][b][q] for b in buckets], name=q)
    waits.update_layout(title="Queue wait by job size (GPUs)", yaxis_title="hours", barmode="group")
    return [timeline, waits]
