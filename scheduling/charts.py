"""Plain data -> Plotly figures rendered as <div>s (plotly.js itself is served from static files).

Each figure is a JSON data block next to its <div>; static/js/charts.js draws them all, so pages carry no
inline script (the Content-Security-Policy allows none).

Figures are written as plain Plotly JSON (``{"data": [...], "layout": {...}}``) rather than through
``plotly.graph_objects``: the schema validation of graph objects costs milliseconds per trace, and a
page draws several charts on every request. Each chart carries a text summary for screen readers.
"""

import itertools
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

import msgspec

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
GUARANTEED_COLOUR = "#009E73"
BURST_COLOUR = "#D55E00"
CAPACITY_COLOUR = "#111827"
_ids = itertools.count(1)
# Nothing in a chart leads off the site (the charts carry team and user names): no plotly.com logo link, no
# "Share chart" button, whose plotlyServerURL default uploads the figure to Plotly Cloud.
CONFIG = {
    "displaylogo": False,
    "showSendToCloud": False,
    "plotlyServerURL": "",
    "responsive": True,
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}
# Inter is shipped with the static files (static/vendor/inter): charts.js measures text in it to start each
# chart with the margins its labels need, the same on every machine.
FONT = {"family": "Inter, system-ui, sans-serif", "size": 12, "color": "#1f2937"}


def _file_name(title: str) -> str:
    """The chart's title as a file name for its PNG (the modebar's camera) and CSV downloads."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "chart"


def _number(value: object) -> int | float:
    """numpy's numbers (a forecast's bands) as JSON numbers; anything else msgspec cannot write is an error."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"cannot chart {type(value).__name__}")


# msgspec writes a page's thousands of datetimes ~17x faster than json + isoformat (RFC 3339: "Z" for UTC, which
# plotly.js reads as it read "+00:00"), and NaN as null, which JSON.parse accepts (json's NaN broke the chart).
_ENCODER = msgspec.json.Encoder(enc_hook=_number)


def render(
    data: list[dict[str, Any]],
    layout: dict[str, Any],
    *,
    title: str,
    summary: str,
    height: int = 320,
    links: Sequence[str | None] | None = None,
    short_labels: Sequence[str] | None = None,
) -> str:
    """One chart: a titled <figure> whose plot Plotly draws, with a text alternative for screen readers.
    ``links``: where a click on the n-th x value goes (static/js/charts.js follows it; None: nowhere).
    ``short_labels``: the y labels to show instead where the full ones leave the plot no room (a phone)."""
    div_id = f"chart-{next(_ids)}"
    layout = {
        "margin": {"l": 55, "r": 15, "t": 10, "b": 40},
        "height": height,
        # Above the plot: below it, rotated tick labels and the x-axis title (a phone rotates them) ran into it.
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": dict(FONT),
        "xaxis": {"gridcolor": "#e5e7eb"},
        "yaxis": {"gridcolor": "#e5e7eb", "rangemode": "tozero"},
        "hovermode": "x unified",
        **layout,
    }
    for name, axis in layout.items():  # long tick labels and axis titles get room instead of being clipped
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            axis.setdefault("automargin", True)
    config = {**CONFIG, "toImageButtonOptions": {"format": "png", "filename": _file_name(title), "scale": 2}}
    figure: dict[str, Any] = {"data": data, "layout": layout, "config": config}
    if links:
        figure["links"] = list(links)
    if short_labels:
        figure["short_labels"] = list(short_labels)
    return (
        f'<figure class="chart-figure"><figcaption>{escape(title)}</figcaption>'
        f'<div id="{div_id}" class="plot" data-figure="{div_id}-figure" role="img" '
        f'aria-label="{escape(title)}. {escape(summary)}"></div>'
        f'<p class="sr-only">{escape(summary)}</p>'
        f'<script type="application/json" id="{div_id}-figure">{json_for_html(figure)}</script></figure>'
    )


def json_for_html(value: object) -> str:
    """JSON to embed in a ``<script type="application/json">`` data block (static/js/charts.js parses it).

    Escaped as Django's json_script does (this module stays free of Django): with no "<", ">" or "&" left, no
    data can end the <script> element or open an HTML comment in it ("<!--<script>" made the parser swallow the
    rest of the page), and JSON.parse reads the escapes back as the same characters."""
    text = _ENCODER.encode(value).decode()
    return text.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "gridcolor": "#e5e7eb", **extra}


def _line(x: list, y: list, name: str, colour: str, dash: str = "solid") -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "line": {"color": colour, "dash": dash}}


def pool_split_chart(series: Mapping[str, Sequence[Any]]) -> str:
    """Allocated GPUs per orchestrator, stacked, with the fleet's capacity as a line.

    Points are ``(time, capacity, allocated)`` tuples or objects with ``at``/``total``/``allocated``."""
    data: list[dict[str, Any]] = []
    capacity: dict[datetime, float] = {}
    last_allocated = 0.0
    for index, (name, points) in enumerate(sorted(series.items())):
        rows = [(p.at, p.total, p.allocated) if hasattr(p, "at") else tuple(p[:3]) for p in points]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [r[0] for r in rows],
                "y": [round(r[2], 1) for r in rows],
                "name": f"{name} allocated",
                "stackgroup": "allocated",
                "line": {"color": PALETTE[index % len(PALETTE)], "width": 1},
            }
        )
        for moment, total, _ in rows:
            capacity[moment] = capacity.get(moment, 0) + total
        last_allocated += rows[-1][2] if rows else 0.0
    if capacity:
        moments = sorted(capacity)
        data.append(_line(moments, [capacity[m] for m in moments], "capacity", CAPACITY_COLOUR, "dot"))
    summary = (
        f"{len(series)} orchestrators; latest allocation {last_allocated:.0f} GPUs"
        if series
        else "No samples in this window yet."
    )
    return render(
        data, {"yaxis": _axis("GPUs", rangemode="tozero")}, title="GPUs allocated per orchestrator", summary=summary
    )


def pending_chart(series: Mapping[str, Sequence[Any]]) -> str:
    """Pending GPUs per orchestrator over time (queue depth in GPUs)."""
    data = [
        _line([p.at for p in points], [round(p.pending, 1) for p in points], name, PALETTE[i % len(PALETTE)])
        for i, (name, points) in enumerate(sorted(series.items()))
    ]
    latest = ", ".join(f"{name} {points[-1].pending:.0f}" for name, points in sorted(series.items()) if points)
    return render(
        data,
        {"yaxis": _axis("GPUs pending", rangemode="tozero")},
        title="Pending GPUs by orchestrator",
        summary=f"Latest pending GPUs: {latest or 'none'}.",
        height=260,
    )


def team_standing_chart(teams: Sequence[tuple[str, float, float, float]]) -> str:
    """Per team: allocated GPUs as bars, guaranteed and burst limit as markers."""
    names = [t[0] for t in teams]
    marker = {"symbol": "line-ew-open", "size": 26}
    data = [
        {"type": "bar", "x": names, "y": [t[1] for t in teams], "name": "allocated", "marker": {"color": PALETTE[0]}},
        {
            "type": "scatter",
            "mode": "markers",
            "x": names,
            "y": [t[2] for t in teams],
            "name": "guaranteed",
            "marker": {**marker, "color": GUARANTEED_COLOUR, "line": {"width": 3, "color": GUARANTEED_COLOUR}},
        },
        {
            "type": "scatter",
            "mode": "markers",
            "x": names,
            "y": [t[3] for t in teams],
            "name": "burst limit",
            "marker": {**marker, "color": BURST_COLOUR, "line": {"width": 3, "color": BURST_COLOUR}},
        },
    ]
    over = [t[0] for t in teams if t[1] > t[2]]
    summary = f"{len(teams)} teams; above their guarantee: {', '.join(over) or 'none'}."
    return render(
        data,
        {"yaxis": _axis("GPUs", rangemode="tozero"), "hovermode": "closest"},
        title="Teams: allocated vs guaranteed vs burst",
        summary=summary,
    )


def team_area_chart(series: Mapping[str, Sequence[Any]], guaranteed: float, burst_limit: float, title: str) -> str:
    """Allocated GPUs stacked by sub-team (or user), with the team's guaranteed and burst lines."""
    data: list[dict[str, Any]] = []
    moments: set[datetime] = set()
    for index, (name, points) in enumerate(sorted(series.items())):
        moments.update(p.at for p in points)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [p.at for p in points],
                "y": [round(p.allocated, 1) for p in points],
                "name": name,
                "stackgroup": "team",
                "line": {"color": PALETTE[index % len(PALETTE)], "width": 1},
            }
        )
    if moments:
        ends = [min(moments), max(moments)]
        data.append(_line(ends, [guaranteed, guaranteed], f"guaranteed {guaranteed:g}", GUARANTEED_COLOUR, "dash"))
        data.append(_line(ends, [burst_limit, burst_limit], f"burst limit {burst_limit:g}", BURST_COLOUR, "dot"))
    summary = (
        f"{len(series)} series; guaranteed {guaranteed:g} GPUs, burst limit {burst_limit:g} GPUs."
        if series
        else "No usage recorded in this window."
    )
    return render(data, {"yaxis": _axis("GPUs allocated", rangemode="tozero")}, title=title, summary=summary)


def share_chart(rows: Sequence[Any]) -> str:
    """Target share (weight) vs actual share, now and over the window, per sub-team."""
    names = [r.name for r in rows]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [r.target_pct for r in rows],
            "name": "target %",
            "marker": {"color": "#6b7280"},
        },
        {
            "type": "bar",
            "x": names,
            "y": [round(r.actual_now_pct, 1) for r in rows],
            "name": "actual now %",
            "marker": {"color": PALETTE[0]},
        },
        {
            "type": "bar",
            "x": names,
            "y": [round(r.actual_window_pct, 1) for r in rows],
            "name": "actual in window %",
            "marker": {"color": PALETTE[1]},
        },
    ]
    summary = "; ".join(f"{r.name}: target {r.target_pct:g} %, now {r.actual_now_pct:.0f} %" for r in rows)
    return render(
        data,
        {
            "barmode": "group",
            "yaxis": _axis("% of the parent's allocation", rangemode="tozero"),
            "hovermode": "closest",
        },
        title="Target share vs actual share",
        summary=summary or "No sub-teams.",
        height=280,
    )


def occupancy_heatmap(nodes: Sequence[Any], links: Sequence[str] | None = None) -> str:
    """Node × GPU occupancy: 1 allocated, 0 free, -1 unschedulable; rows grouped by leaf switch and NVLink domain.
    ``links``: each row's node page (a click on a row opens it)."""
    width = max((n.gpu_total for n in nodes), default=8)
    z, labels = [], []
    for n in nodes:
        used = [1] * n.gpu_allocated + [0] * (n.gpu_total - n.gpu_allocated)
        row = used if n.schedulable else [-1] * n.gpu_total
        z.append(row + [None] * (width - n.gpu_total))
        labels.append(f"{n.leaf_switch} · {n.nvlink_domain or '-'} · {n.name} ({n.gpu_model}, {n.orchestrator})")
    data = [
        {
            "type": "heatmap",
            "z": z,
            "y": labels,
            "x": [f"GPU {i}" for i in range(width)],
            "hovertemplate": "%{y} %{x}: %{z}<extra>1 allocated · 0 free · -1 unschedulable</extra>",
            "zmin": -1,
            "zmax": 1,
            "colorscale": [
                [0, "#9ca3af"],
                [0.33, "#9ca3af"],
                [0.34, "#e0f2fe"],
                [0.66, "#e0f2fe"],
                [0.67, "#0072B2"],
                [1, "#0072B2"],
            ],
            "colorbar": {"tickvals": [-1, 0, 1], "ticktext": ["unschedulable", "free", "allocated"], "len": 0.5},
            "xgap": 1,
            "ygap": 0 if len(nodes) > 120 else 1,
        }
    ]
    allocated = sum(n.gpu_allocated for n in nodes)
    total = sum(n.gpu_total for n in nodes)
    height = min(max(260, (16 if len(nodes) <= 80 else 3) * len(nodes) + 80), 1600)
    boundaries = [i for i in range(1, len(nodes)) if nodes[i].leaf_switch != nodes[i - 1].leaf_switch]
    shapes = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": i - 0.5,
            "y1": i - 0.5,
            "line": {"color": "#111827", "width": 2},
        }
        for i in boundaries
    ]
    return render(
        data,
        {
            "yaxis": {"autorange": "reversed", "showticklabels": len(nodes) <= 80, "automargin": True, "dtick": 1},
            "xaxis": {"side": "top"},
            "shapes": shapes,
            "hovermode": "closest",
            "margin": {"l": 40, "r": 10, "t": 30, "b": 10},
        },
        title="GPU occupancy by node (grouped by leaf switch, then NVLink domain)",
        summary=f"{len(nodes)} nodes on {len(boundaries) + 1 if nodes else 0} leaf switches (thick lines "
        f"separate them), {allocated} of {total} GPUs allocated.",
        height=height,
        short_labels=[n.name for n in nodes],
        links=links,
    )


def placeable_chart(counts: Mapping[int, int]) -> str:
    sizes = list(counts)
    data = [
        {
            "type": "bar",
            "x": [f"{s} GPU" for s in sizes],
            "y": [counts[s] for s in sizes],
            "name": "could start now",
            "marker": {"color": PALETTE[2]},
            "text": [counts[s] for s in sizes],
            "textposition": "auto",
        }
    ]
    summary = "; ".join(f"{s}-GPU: {counts[s]}" for s in sizes)
    return render(
        data,
        {"yaxis": _axis("requests", rangemode="tozero"), "hovermode": "closest"},
        title="Requests of each size that could start now",
        summary=summary,
        height=260,
    )


def fragmentation_trend_chart(points: Sequence[Any]) -> str:
    x = [p.at for p in points]
    data = [
        _line(x, [p.free for p in points], "free GPUs", PALETTE[0]),
        _line(x, [round(p.fragmented, 1) for p in points], "free but unusable (FGD)", PALETTE[5]),
    ]
    for index, size in enumerate((8, 16, 64)):
        data.append(
            {
                **_line(
                    x,
                    [p.placeable.get(size, 0) * size for p in points],
                    f"GPUs in {size}-GPU gangs placeable",
                    PALETTE[(index + 2) % len(PALETTE)],
                    "dot",
                ),
                "visible": "legendonly" if size != 8 else True,
            }
        )
    last = points[-1] if points else None
    summary = (
        f"Latest: {last.free:.0f} free GPUs, {last.fragmented:.1f} unusable." if last else "No placements recorded."
    )
    return render(
        data, {"yaxis": _axis("GPUs", rangemode="tozero")}, title="Fragmentation trend", summary=summary, height=280
    )


def gpu_hours_chart(rows: Sequence[Any], title: str, links: Sequence[str | None] | None = None) -> str:
    names = [r.label for r in rows]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [round(r.allocated_h, 1) for r in rows],
            "name": "allocated GPU-h",
            "marker": {"color": PALETTE[0]},
        },
    ]
    if any(r.busy_h is not None for r in rows):
        data.append(
            {
                "type": "bar",
                "x": names,
                "y": [None if r.busy_h is None else round(r.busy_h, 1) for r in rows],
                "name": "busy GPU-h",
                "marker": {"color": PALETTE[1]},
            }
        )
    if any(r.capacity_h for r in rows):
        data.insert(
            0,
            {
                "type": "bar",
                "x": names,
                "y": [round(r.capacity_h or 0, 1) for r in rows],
                "name": "capacity GPU-h",
                "marker": {"color": "#d1d5db"},
            },
        )
    summary = "; ".join(f"{r.label}: {r.allocated_h:.0f} GPU-h allocated" for r in rows[:12])
    return render(
        data,
        {"barmode": "group", "yaxis": _axis("GPU-hours", rangemode="tozero"), "hovermode": "closest"},
        title=title,
        summary=summary or "No usage in this window.",
        links=links,
    )


def user_hours_chart(rows: Sequence[Any], title: str, links: Sequence[str | None]) -> str:
    """GPU-hours per user (the drill-down's second level); a bar opens that user's jobs."""
    data = [
        {
            "type": "bar",
            "x": [r.user for r in rows],
            "y": [round(r.gpu_hours, 1) for r in rows],
            "name": "GPU-hours",
            "marker": {"color": PALETTE[0]},
        }
    ]
    summary = "; ".join(f"{r.user}: {r.gpu_hours:.0f} GPU-h" for r in rows[:12])
    return render(
        data,
        {"yaxis": _axis("GPU-hours", rangemode="tozero"), "hovermode": "closest", "showlegend": False},
        title=title,
        summary=summary or "No usage in this window.",
        links=links,
    )


def wait_chart(rows: Iterable[Any]) -> str:
    rows = list(rows)
    names = [r.size for r in rows]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [round(getattr(r, key) / 60, 1) for r in rows],
            "name": label,
            "marker": {"color": colour},
        }
        for key, label, colour in (
            ("p50_s", "p50", PALETTE[0]),
            ("p90_s", "p90", PALETTE[1]),
            ("p99_s", "p99", PALETTE[5]),
        )
    ]
    summary = "; ".join(f"{r.size}: p50 {r.p50_s / 60:.0f} min, p99 {r.p99_s / 60:.0f} min" for r in rows)
    return render(
        data,
        {
            "barmode": "group",
            "yaxis": _axis("minutes waiting", rangemode="tozero"),
            "xaxis": _axis("request size"),
            "hovermode": "closest",
        },
        title="Queue wait by request size",
        summary=summary or "No work started in this window.",
    )


def entitlement_chart(rows: Sequence[Any]) -> str:
    names = [("· " * r.depth) + r.name for r in rows]
    data = [
        {
            "type": "bar",
            "y": names,
            "x": [round(r.before, 1) for r in rows],
            "name": "before",
            "orientation": "h",
            "marker": {"color": "#9ca3af"},
        },
        {
            "type": "bar",
            "y": names,
            "x": [round(r.after, 1) for r in rows],
            "name": "after",
            "orientation": "h",
            "marker": {"color": PALETTE[0]},
        },
    ]
    changed = [r for r in rows if abs(r.delta) >= 0.5]
    summary = "; ".join(f"{r.name}: {r.before:.0f} → {r.after:.0f} GPUs" for r in changed) or "No entitlement changes."
    return render(
        data,
        {
            "barmode": "group",
            "xaxis": _axis("GPUs entitled now"),
            "hovermode": "closest",
            "yaxis": {"autorange": "reversed"},
            "margin": {"l": 150, "r": 10, "t": 10, "b": 40},
        },
        title="Entitlements per team, before and after",
        summary=summary,
        height=max(240, 26 * len(rows) + 80),
    )


# --- capacity planning ----------------------------------------------------------------------------------


def forecast_chart(series: Any, guaranteed: float | None) -> str:
    """Recorded hourly demand, the fitted forecast and its interval band, and the guarantee if any.

    ``series`` has ``label``, ``history_hours``, ``history``, ``future_hours`` and ``forecast`` (mean,
    lower, upper, ok, message, coverage)."""
    fit = series.forecast
    data: list[dict[str, Any]] = [
        _line(series.history_hours, series.history, "recorded demand", PALETTE[0]),
    ]
    if fit.ok:
        future = series.future_hours
        band = f"{fit.coverage:.0%} interval"
        data += [
            {
                "type": "scatter",
                "mode": "lines",
                "x": future,
                "y": list(fit.upper),
                "name": band,
                "line": {"width": 0},
                "showlegend": False,
                "hoverinfo": "skip",
            },
            {
                "type": "scatter",
                "mode": "lines",
                "x": future,
                "y": list(fit.lower),
                "name": band,
                "fill": "tonexty",
                "fillcolor": "rgba(230,159,0,0.25)",
                "line": {"width": 0},
            },
            _line(future, list(fit.mean), "forecast", PALETTE[1]),
        ]
    ends = [*series.history_hours[:1], *(series.future_hours[-1:] or series.history_hours[-1:])]
    if guaranteed and len(ends) == 2:
        data.append(_line(ends, [guaranteed, guaranteed], f"guaranteed {guaranteed:g}", GUARANTEED_COLOUR, "dash"))
    if fit.ok:
        summary = (
            f"{series.label}: mean demand now {fit.level_now:.1f} GPUs, trend {fit.trend_per_day:+.2f} GPUs/day; "
            f"{' and '.join(fit.seasonality)} seasonality. {fit.message}"
        )
    else:
        summary = f"{series.label}: {fit.message}"
    return render(
        data,
        {"yaxis": _axis("GPUs wanted", rangemode="tozero")},
        title=f"{series.label}: demand and forecast",
        summary=summary,
        height=280,
    )


def whatif_allocation_chart(
    baseline: Mapping[str, Any], scenario: Mapping[str, Any], since: datetime | None = None
) -> str:
    """Hourly allocated and pending GPUs in the baseline and the scenario replay, on the dates of the replayed
    history when its start ``since`` is known (replay samples count hours from it)."""
    data = []
    for name, figures, colour in (("baseline", baseline, PALETTE[0]), ("scenario", scenario, PALETTE[1])):
        samples = figures.get("fragmentation", {})
        hours = samples.get("times_h", [])
        x = [since + timedelta(hours=h) for h in hours] if since else hours
        data.append(_line(x, samples.get("allocated_gpus", []), f"{name} allocated", colour))
        data.append(_line(x, samples.get("pending_gpus", []), f"{name} pending", colour, "dot"))
    summary = (
        f"Utilisation {baseline.get('utilisation', 0):.1%} in the baseline, {scenario.get('utilisation', 0):.1%} "
        "in the scenario."
    )
    xaxis = _axis("UTC", type="date") if since else _axis("hours since the start of the history")
    layout = {"xaxis": xaxis, "yaxis": _axis("GPUs", rangemode="tozero")}
    return render(data, layout, title="Allocated and pending GPUs, baseline vs scenario", summary=summary)


def whatif_wait_chart(team_rows: Sequence[Mapping[str, Any]]) -> str:
    """p95 queue wait per team, baseline vs scenario, as grouped bars."""
    teams = [row["team"] for row in team_rows]
    data = [
        {
            "type": "bar",
            "x": teams,
            "y": [row[side].get("p95") for row in team_rows],
            "name": f"{side} p95 wait",
            "marker": {"color": colour},
        }
        for side, colour in (("baseline", PALETTE[0]), ("scenario", PALETTE[1]))
    ]
    summary = "; ".join(
        f"{row['team']}: {row['baseline'].get('p95') or 0:.2f} h vs {row['scenario'].get('p95') or 0:.2f} h"
        for row in team_rows
    )
    layout = {"barmode": "group", "yaxis": _axis("p95 wait (hours)", rangemode="tozero"), "hovermode": "closest"}
    return render(data, layout, title="p95 queue wait per team", summary=summary or "No jobs.", height=280)


def ownership_timeline_chart(spans: Sequence[Any], since: datetime, until: datetime) -> str:
    """Per node, who could schedule there when: one bar per ownership interval (``node``, ``orchestrator``,
    ``start``, ``end``; ``end`` None = still open), one colour and lane per orchestrator, so that two
    owners at once show as two lit lanes in one row and a gap as white (owned by none)."""
    by_owner: dict[str, list[Any]] = {}
    for span in spans:
        by_owner.setdefault(span.orchestrator, []).append(span)
    nodes = sorted({s.node for s in spans})
    data = []
    for index, (owner, rows) in enumerate(sorted(by_owner.items())):
        starts = [max(r.start, since) for r in rows]
        ends = [min(r.end or until, until) for r in rows]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": owner,
                "y": [r.node for r in rows],
                "base": starts,
                "x": [max((e - s).total_seconds() * 1000, 1000) for s, e in zip(starts, ends, strict=True)],
                "marker": {"color": PALETTE[index % len(PALETTE)]},
                "customdata": [[s.isoformat(), e.isoformat()] for s, e in zip(starts, ends, strict=True)],
                "hovertemplate": "%{y}: " + escape(owner) + " %{customdata[0]} - %{customdata[1]}<extra></extra>",
            }
        )
    layout = {
        "barmode": "group",  # one lane per orchestrator in each node's row: two lanes lit at once = two owners
        "bargap": 0.25,
        "hovermode": "closest",
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        "xaxis": _axis("time", type="date", range=[since, until]),
        "yaxis": {"type": "category", "categoryorder": "category descending", "automargin": True},
        "margin": {"l": 90, "r": 15, "t": 30, "b": 40},
    }
    summary = (
        f"{len(nodes)} nodes, {len(spans)} ownership intervals from {len(by_owner)} orchestrators."
        if spans
        else "No ownership recorded in this window."
    )
    return render(data, layout, title="Who could schedule on each node", summary=summary, height=120 + 22 * len(nodes))
