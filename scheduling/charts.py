"""Plain data -> Plotly figures rendered as <div>s (plotly.js itself is served from static files)."""

from collections.abc import Mapping, Sequence
from datetime import datetime

import plotly.graph_objects as go
import plotly.io as pio

PALETTE = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2")


def _div(figure: go.Figure, title: str) -> str:
    figure.update_layout(
        title={"text": title, "x": 0.01},
        margin={"l": 50, "r": 20, "t": 40, "b": 40},
        height=320,
        legend={"orientation": "h", "y": -0.2},
        template="plotly_white",
    )
    return pio.to_html(
        figure, include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True}
    )


def pool_split_chart(series: Mapping[str, Sequence[tuple[datetime, float, float]]]) -> str:
    """Allocated GPUs per orchestrator, stacked, with the fleet's capacity as a line."""
    figure = go.Figure()
    capacity: dict[datetime, float] = {}
    for index, (name, points) in enumerate(sorted(series.items())):
        figure.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[2] for p in points],
                name=f"{name} allocated",
                stackgroup="allocated",
                line={"color": PALETTE[index % len(PALETTE)]},
            )
        )
        for moment, total, _ in points:
            capacity[moment] = capacity.get(moment, 0) + total
    if capacity:
        moments = sorted(capacity)
        figure.add_trace(
            go.Scatter(
                x=moments, y=[capacity[m] for m in moments], name="capacity", line={"color": "#111827", "dash": "dot"}
            )
        )
    figure.update_yaxes(title_text="GPUs", rangemode="tozero")
    return _div(figure, "GPUs allocated per orchestrator")


def team_standing_chart(teams: Sequence[tuple[str, float, float, float]]) -> str:
    """Per team: allocated GPUs as bars, guaranteed and burst limit as markers."""
    names = [t[0] for t in teams]
    figure = go.Figure()
    figure.add_trace(go.Bar(x=names, y=[t[1] for t in teams], name="allocated", marker_color=PALETTE[0]))
    figure.add_trace(
        go.Scatter(
            x=names,
            y=[t[2] for t in teams],
            name="guaranteed",
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 28, "line": {"width": 3, "color": PALETTE[1]}},
        )
    )
    figure.add_trace(
        go.Scatter(
            x=names,
            y=[t[3] for t in teams],
            name="burst limit",
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 28, "line": {"width": 3, "color": PALETTE[4]}},
        )
    )
    figure.update_yaxes(title_text="GPUs", rangemode="tozero")
    return _div(figure, "Teams: allocated vs guaranteed vs burst")
