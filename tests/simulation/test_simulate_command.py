"""``manage.py simulate`` through call_command (skipped when Django settings are not configured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PHILLY_SLICE = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "philly_slice.csv"


def test_it_writes_replay_figures_and_an_offline_html_report(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, page = tmp_path / "run.json", tmp_path / "run.html"

    call_command(
        "simulate",
        trace=str(PHILLY_SLICE),
        mode="replay",
        policy="federated",
        capacity=64,
        json_out=str(out),
        html_out=str(page),
    )

    figures = json.loads(out.read_text())
    assert (figures["policy"], figures["capacity_gpus"], figures["jobs"]["arrived"]) == ("federated", 64, 184)
    assert figures["trace_reports"][0]["rows_read"] == 184
    text = page.read_text()
    assert '<script src="http' not in text  # plotly.js is inlined, the page works offline
    assert "Plotly.newPlot" in text


def test_an_unknown_trace_is_a_command_error(call_command) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="known names"):
        call_command("simulate", trace="nope", mode="replay", policy="siloed")
