"""Capacity report documents: plain report content (a JSON dict) -> HTML, PDF, CSV, text and SVG charts.

No ORM here: the content was composed by ``scheduling.reports.capacity``. Charts are small SVGs
drawn on the server because a PDF runs no JavaScript (Plotly's static export needs kaleido, which drives
a Chrome at run time: every worker would need a browser). ``scope`` says whose per-user rows a reader may see: None
for all teams, else a set of team slugs.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
from datetime import datetime
from html import escape

from django.template.loader import render_to_string

PALETTE = {"allocated": "#2b6cb0", "idle": "#c3dafe", "unavailable": "#c53030", "planned": "#d69e2e"}


# --- what a reader may see ------------------------------------------------------------------------


def visible_content(content: dict, scope: frozenset[str] | None) -> dict:
    """The content with the top-users rows of teams outside ``scope`` removed (a copy)."""
    teams = content.get("sections", {}).get("teams", {})
    if scope is None or not teams:
        return content
    rows = [{**row, "top_users": row["top_users"] if row["slug"] in scope else []} for row in teams["teams"]]
    sections = {**content["sections"], "teams": {**teams, "teams": rows}}
    return {**content, "sections": sections}


# --- SVG charts -----------------------------------------------------------------------------------


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _legend(items: list[tuple[str, str]], x: int, y: int) -> list[str]:
    parts, left = [], float(x)
    for label, colour in items:
        parts.append(f'<rect x="{left:.0f}" y="{y}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{left + 14:.0f}" y="{y + 9}">{escape(label)}</text>')
        left += 34 + 6.5 * len(label)  # about one character width of 11 px sans-serif per letter
    return parts


def capacity_chart(pools: list[dict]) -> str:
    """Stacked bars per pool: allocated, idle, down/drained and planned GPU-hours."""
    keys = (
        ("allocated_h", "allocated"),
        ("idle_h", "idle"),
        ("unavailable_h", "unavailable"),
        ("planned_h", "planned"),
    )
    width, label_w, bar_h = 640, 110, 22
    height = 40 + len(pools) * (bar_h + 10)
    top = max((p["capacity_h"] for p in pools), default=0) or 1
    body = _legend(
        [
            ("allocated", PALETTE["allocated"]),
            ("idle", PALETTE["idle"]),
            ("down/drained", PALETTE["unavailable"]),
            ("planned", PALETTE["planned"]),
        ],
        label_w,
        6,
    )
    for i, pool in enumerate(pools):
        y, x = 30 + i * (bar_h + 10), float(label_w)
        body.append(f'<text x="4" y="{y + 15}">{escape(pool["name"])}</text>')
        for key, colour in keys:
            w = (width - label_w - 110) * (pool[key] or 0) / top
            if w > 0:
                body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{PALETTE[colour]}"/>')
            x += w
        body.append(f'<text x="{x + 4:.1f}" y="{y + 15}">{pool["capacity_h"]:,.0f} GPU-h</text>')
    return _svg(width, height, body, "GPU-hours per pool: allocated, idle, down/drained, planned")


def share_chart(teams: list[dict]) -> str:
    """Target vs actual share of the top-level teams, in percent."""
    rows = [t for t in teams if t["depth"] == 0]
    width, label_w, bar_h = 640, 110, 9
    height = 40 + len(rows) * (2 * bar_h + 12)
    body = _legend([("target share", "#718096"), ("actual share", PALETTE["allocated"])], label_w, 6)
    scale = (width - label_w - 60) / 100
    for i, team in enumerate(rows):
        y = 30 + i * (2 * bar_h + 12)
        body.append(f'<text x="4" y="{y + 13}">{escape(team["name"])}</text>')
        target, actual = team["target_pct"] or 0, team["actual_pct"] or 0
        body.append(f'<rect x="{label_w}" y="{y}" width="{target * scale:.1f}" height="{bar_h}" fill="#718096"/>')
        body.append(
            f'<rect x="{label_w}" y="{y + bar_h + 1}" width="{actual * scale:.1f}" height="{bar_h}" '
            f'fill="{PALETTE["allocated"]}"/>'
        )
        body.append(
            f'<text x="{label_w + max(target, actual) * scale + 4:.1f}" y="{y + 13}">'
            f"{target:.0f} % / {actual:.0f} %</text>"
        )
    return _svg(width, height, body, "Target vs actual share of GPU-hours per top-level team")


def line_chart(points: list[dict], series: list[tuple[str, str, str]], title: str) -> str:
    """A small multi-series line chart over time; ``series`` is (key, label, colour)."""
    width, height, left, bottom = 640, 200, 40, 30
    right = 40  # room for the last time label
    if not points:
        return _svg(width, 40, ['<text x="4" y="20">No data in this period.</text>'], title)
    top = max((p[key] or 0) for p in points for key, _l, _c in series) or 1
    step = (width - left - right) / max(len(points) - 1, 1)
    body = _legend([(label, colour) for _k, label, colour in series], left, 4)
    body.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#999"/>')
    body.append(f'<text x="2" y="30">{top:,.0f}</text><text x="2" y="{height - bottom}">0</text>')
    for key, _label, colour in series:
        coords = " ".join(
            f"{left + i * step:.1f},{height - bottom - (height - bottom - 24) * (p[key] or 0) / top:.1f}"
            for i, p in enumerate(points)
        )
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
    for i in range(0, len(points), max(len(points) // 7, 1)):
        label = datetime.fromisoformat(points[i]["at"]).strftime("%a %H:%M")
        body.append(f'<text x="{left + i * step - 20:.1f}" y="{height - 10}">{label}</text>')
    return _svg(width, height, body, title)


def charts(content: dict) -> dict[str, str]:
    sections = content.get("sections", {})
    frag = sections.get("fragmentation", {}).get("points", [])
    return {
        "capacity": capacity_chart(sections.get("capacity", {}).get("pools", [])),
        "shares": share_chart(sections.get("teams", {}).get("teams", [])),
        "fragmentation": line_chart(
            frag,
            [
                ("fragmented", "free but unusable GPUs", PALETTE["unavailable"]),
                ("largest_gang", "largest gang placeable (GPUs)", PALETTE["allocated"]),
            ],
            "Fragmentation over the week",
        ),
    }


# --- documents ------------------------------------------------------------------------------------


def _context(content: dict, scope, links: dict[str, str] | None) -> dict:
    shown = visible_content(content, scope)
    return {
        "c": shown,
        "period_label": period_label(shown.get("period", {})),
        "s": shown.get("sections", {}),
        "titles": shown.get("titles", {}),
        "charts": charts(shown),
        "links": links or {},
        "full_users": scope is None,
    }


def period_label(period: dict) -> str:
    if not period:
        return ""
    start, end = datetime.fromisoformat(period["start"]), datetime.fromisoformat(period["end"])
    return f"{start:%a %Y-%m-%d %H:%M} – {end:%a %Y-%m-%d %H:%M}"


def render_body(content: dict, scope, links: dict[str, str] | None = None) -> str:
    """The report's sections as an HTML fragment (the detail page embeds it)."""
    return render_to_string("scheduling/report/_body.html", _context(content, scope, links))


def render_html(content: dict, scope, links: dict[str, str] | None = None) -> str:
    """A standalone HTML document (styles inline): the download, the email's HTML part, the PDF's source."""
    return render_to_string("scheduling/report/document.html", _context(content, scope, links))


_STYLE = re.compile(r"<style>(.*?)</style>", re.DOTALL)


def style_hashes(html: str) -> list[str]:
    """CSP sources for exactly the <style> elements of ``html`` (a downloaded report is one file, no stylesheet)."""
    return [
        f"'sha256-{base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()}'" for css in _STYLE.findall(html)
    ]


def render_pdf(content: dict, scope, links: dict[str, str] | None = None) -> bytes:
    return pdf_of(render_html(content, scope, links))


def pdf_of(html: str) -> bytes:
    from weasyprint import HTML  # imported here: loading Pango costs ~0.3 s, pages never need it

    return HTML(string=html).write_pdf()


def render_text(content: dict, scope, links: dict[str, str] | None = None) -> str:
    return render_to_string("scheduling/report/email.txt", _context(content, scope, links))


CSV_HEADER = ("section", "row", "metric", "value", "unit")


def csv_rows(content: dict, scope) -> list[tuple]:
    """Tidy rows (section, row, metric, value, unit): one figure per line, easy to pivot in a spreadsheet."""
    s = visible_content(content, scope).get("sections", {})
    rows: list[tuple] = []

    def add(section: str, row: str, data: dict, units: dict[str, str]) -> None:
        for key, unit in units.items():
            rows.append((section, row, key, data.get(key), unit))

    for src in s.get("completeness", {}).get("sources", []):
        add(
            "completeness",
            src["name"],
            src,
            {
                "runs": "runs",
                "failures": "runs",
                "stale_h": "hours",
                "longest_stale_h": "hours",
                "fresh_pct": "%",
                "judged_h": "hours",
                "registered_on": "date",
            },
        )
    pool_units = {
        k: "GPU-hours"
        for k in ("capacity_h", "allocated_h", "idle_h", "unavailable_h", "planned_h", "pending_h", "busy_h")
    } | {"allocation_pct": "%", "coverage_pct": "%"}
    cap = s.get("capacity", {})
    for pool in [*cap.get("pools", []), *([cap["fleet"]] if cap.get("fleet") else [])]:
        add("capacity", pool["name"], pool, pool_units)
    for team in s.get("teams", {}).get("teams", []):
        add(
            "teams",
            team["slug"],
            team,
            {
                "target_pct": "%",
                "actual_pct": "%",
                "guaranteed_h": "GPU-hours",
                "used_h": "GPU-hours",
                "burst_h": "GPU-hours",
                "busy_h": "GPU-hours",
                "busy_pct": "%",
            },
        )
        for user in team["top_users"]:
            rows.append(("top_users", f"{team['slug']}/{user['user']}", "gpu_h", user["gpu_h"], "GPU-hours"))
    for wait in s.get("waits", {}).get("by_orchestrator", []):
        add(
            "waits",
            f"{wait['orchestrator']}/{wait['size']}",
            wait,
            {"jobs": "jobs", "p50_s": "seconds", "p90_s": "seconds", "p99_s": "seconds"},
        )
    for reason in s.get("waits", {}).get("pending_reasons", []):
        add("pending_reasons", reason["reason"], reason, {"workloads": "workloads", "gpus": "GPUs"})
    frag = s.get("fragmentation", {})
    add(
        "fragmentation",
        "week",
        frag,
        {"average_fragmented": "GPUs", "average_free": "GPUs", "largest_gang_min": "GPUs", "largest_gang_max": "GPUs"},
    )
    reb = s.get("rebalancing", {})
    add("rebalancing", "week", reb, {"moves": "nodes", "gpus_moved": "GPUs"})
    for floor in reb.get("floors", []):
        add(
            "floors",
            floor["orchestrator"],
            floor,
            {
                "floor_max": "GPUs",
                "hours_with_floor": "hours",
                "hours_breached": "hours",
                "worst_shortfall_gpus": "GPUs",
            },
        )
    add("quota", "week", s.get("quota", {}), {"filed": "requests", "approved": "requests", "denied": "requests"})
    for kind in s.get("ledger", {}).get("kinds", []):
        add("ledger", kind["kind"], kind, {"findings": "findings", "open_h": "hours", "open_at_end": "findings"})
    for row in s.get("outlook", {}).get("teams", []):
        rows.append(("outlook", row["team"], "days_until_guarantee_exhausted", row["days_left"], "days"))
    for row in s.get("trend", {}).get("rows", []):
        rows.append(("trend", row["key"], "current", row["current"], ""))
        rows.append(("trend", row["key"], "previous", row["previous"], ""))
    return rows


def render_csv(content: dict, scope) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_rows(content, scope))
    return buffer.getvalue()
