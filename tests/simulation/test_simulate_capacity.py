"""``manage.py simulate --mode capacity``: the capacity search from the command line, on a trace whose
answers are known by construction (skipped when Django settings are not configured)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

# Team "steady": three 5-GPU jobs of 10 h at t=0 (two never share an 8-GPU node, so each takes a node of its
# own and leaves 3 GPUs free) and seventeen 1-GPU jobs of 6 min, one an hour from t=30 min. Team "burst": one
# 8-GPU job of 1 h at t=60 s, which needs a whole free node.
#   1 node:  two 5-GPU jobs wait 10 h and more                      -> fleet misses, every team misses
#   2 nodes: the third 5-GPU job and the burst job wait ~10 h       -> fleet misses (2 of 21 at the p95)
#   3 nodes: only the burst job waits (10 h - 60 s); the small jobs fit beside the long ones
#            -> fleet p95 0 (21 waits: the p95 is exactly the second largest) meets; burst's p95 9.98 h misses
#   4 nodes: nobody waits                                            -> every team meets
# So with a 1 h target: fleet needs 24 GPUs, every team 32.
TRACE = (
    "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\n"
    + "".join(f"long{i},0,36000,1,5,,steady,training\n" for i in range(3))
    + "burst1,60,3600,1,8,,burst,training\n"
    + "".join(f"short{i},{1800 + 3600 * i},360,1,1,,steady,batch\n" for i in range(17))
)
BURST_WAIT_H = round((36000 - 60) / 3600, 3)
BRACKET = {"low": 8, "high": 64}


@pytest.fixture
def trace(tmp_path: Path) -> str:
    path = tmp_path / "two_teams.csv"
    path.write_text(TRACE, encoding="utf-8")
    return str(path)


def search(call_command: Any, trace: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    arguments = {"mode": "capacity", "policy": "best-fit", "target_hours": 1.0, **options}
    call_command("simulate", trace=trace, stdout=out, stderr=err, **arguments)
    return out.getvalue(), err.getvalue()


def search_json(call_command: Any, trace: str, **options: Any) -> dict[str, Any]:
    out, _ = search(call_command, trace, json_out="-", **options)
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("target", "answer", "below"), [("fleet", 24, 16), ("every-team", 32, 24)])
def test_the_answer_is_the_capacity_the_trace_was_built_for(  # type: ignore[no-untyped-def]
    call_command, trace: str, target: str, answer: int, below: int
) -> None:
    report = search_json(call_command, trace, target=target, **BRACKET)

    assert (report["capacity_gpus"], report["largest_failing_gpus"], report["met"]) == (answer, below, True)
    assert report["error"] is None
    # low misses, high meets, then halving the bracket: 8 | 64 | 32 | 16 | 24
    assert [p["capacity_gpus"] for p in report["probes"]] == [8, 64, 32, 16, 24]
    assert [p["round"] for p in report["probes"]] == [1, 2, 3, 4, 5]
    met = {p["capacity_gpus"]: p["met"] for p in report["probes"]}
    assert met == {8: False, 16: False, 24: target == "fleet", 32: True, 64: True}


def test_fleet_and_every_team_differ_because_one_team_waits(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    fleet = search_json(call_command, trace, target="fleet", **BRACKET)
    every_team = search_json(call_command, trace, target="every-team", **BRACKET)

    assert fleet["capacity_gpus"] < every_team["capacity_gpus"]
    # at the fleet's answer the fleet p95 is 0 while burst waits ~10 h: what every-team refuses
    assert fleet["team_p95_wait_hours"] == {"burst": BURST_WAIT_H, "steady": 0.0}
    at_24 = next(p for p in fleet["probes"] if p["capacity_gpus"] == 24)
    assert (at_24["fleet_p95_wait_hours"], at_24["worst_team"], at_24["worst_team_p95_wait_hours"]) == (
        0.0, "burst", BURST_WAIT_H,
    )
    assert every_team["team_p95_wait_hours"] == {"burst": 0.0, "steady": 0.0}


def test_the_json_report_has_its_documented_keys(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    report = search_json(call_command, trace, **BRACKET)

    assert set(report) == {
        "mode", "trace", "policy", "seed", "target", "target_hours", "low_gpus", "high_gpus", "step_gpus", "width",
        "gpus_per_node", "bracket_defaulted", "early_stop", "capacity_gpus", "largest_failing_gpus", "met",
        "probes", "team_p95_wait_hours", "best_probe", "error", "wall_time_s", "fleet", "trace_reports", "skipped",
    }
    assert set(report["probes"][0]) == {
        "round", "capacity_gpus", "nodes", "met", "stopped_early", "stopped_early_hours", "fleet_p95_wait_hours",
        "worst_team", "worst_team_p95_wait_hours",
    }
    assert (report["mode"], report["target"], report["step_gpus"], report["width"]) == ("capacity", "fleet", 8, 1)
    assert report["bracket_defaulted"] == []
    assert report["fleet"] == {"source": "synthetic 8-GPU nodes"}
    assert report["probes"][0]["stopped_early"] is True  # 8 GPUs gave up once it certainly missed
    assert report["probes"][0]["fleet_p95_wait_hours"] is None


def test_the_json_file_and_the_text_report(call_command, trace: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    written = tmp_path / "search.json"

    text, progress = search(call_command, trace, json_out=str(written), **BRACKET)

    assert json.loads(written.read_text())["capacity_gpus"] == 24
    assert "answer: 24 GPUs (3 nodes); 16 GPUs misses the target" in text
    assert "    5     24         0.00  burst                      9.98  met" in text
    assert "p95 wait per team at the answer, 24 GPUs" in text
    assert "  burst       9.98 h" in text
    assert "round 5: 24 GPUs met: fleet p95 0.00 h, worst team burst 9.98 h" in progress


def test_without_a_bracket_the_defaults_come_from_the_trace(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    report = search_json(call_command, trace, target="every-team")

    assert report["bracket_defaulted"] == ["--low", "--high"]
    assert (report["low_gpus"], report["high_gpus"]) == (8, 96)  # mean demand ~5 GPUs -> one node; 8x -> 12 nodes
    assert report["capacity_gpus"] == 32


def test_exact_probes_run_to_the_end_and_find_the_same_answer(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    report = search_json(call_command, trace, target="every-team", exact_probes=True, width=2, **BRACKET)

    assert report["capacity_gpus"] == 32
    assert not any(p["stopped_early"] for p in report["probes"])
    at_8 = next(p for p in report["probes"] if p["capacity_gpus"] == 8)
    assert at_8["fleet_p95_wait_hours"] is not None and at_8["fleet_p95_wait_hours"] > 1
    assert max(p["round"] for p in report["probes"]) < len(report["probes"])  # two probes per round


def test_an_unreachable_target_names_high_and_the_best_probe(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    out = StringIO()
    with pytest.raises(CommandError, match=r"no capacity up to --high 24 GPUs meets the target.*best probe: 24 GPUs"):
        call_command("simulate", trace=trace, mode="capacity", policy="best-fit", target="every-team",
                     target_hours=1.0, low=8, high=24, json_out="-", stdout=out, stderr=StringIO())

    report = json.loads(out.getvalue())
    assert (report["capacity_gpus"], report["met"], report["team_p95_wait_hours"]) == (None, False, None)
    assert max(p["capacity_gpus"] for p in report["probes"]) == 24  # --high is a hard bound
    best = report["best_probe"]
    assert (best["capacity_gpus"], best["worst_team"], best["worst_team_p95_wait_hours"]) == (24, "burst", BURST_WAIT_H)
    assert best["replayed_to_the_end"] is True  # the probe had given up; its figures come from a full replay
    assert best["team_p95_wait_hours"] == {"burst": BURST_WAIT_H, "steady": 0.0}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"target_hours": 0.0}, r"--target-hours must be a finite number of hours > 0, got 0"),
        ({"target_hours": -2.0}, r"--target-hours must be a finite number of hours > 0, got -2"),
        ({"target_hours": None}, r"--mode capacity needs --target-hours X"),
        ({"low": 64, "high": 32}, r"--low 64 is above --high 32: need --low <= --high"),
        ({"step": 12}, r"--step 12 is not a whole number of 8-GPU nodes"),
        ({"step": 0}, r"--step 0 is not a whole number of 8-GPU nodes"),
        ({"low": 20}, r"--low 20 is not a positive multiple of --step 8 GPUs"),
        ({"step": 16, "high": 40}, r"--high 40 is not a positive multiple of --step 16 GPUs"),
        ({"width": 0}, r"--width 0: probes per round must be at least 1"),
        ({"fleet": "nodes.csv"}, r"--mode capacity does not take --fleet: a node list fixes the fleet's GPUs"),
        ({"pools": "pools.toml"}, r"--mode capacity does not take --pools: a pool file splits a fixed --fleet"),
        ({"capacity": 64}, r"--mode capacity does not take --capacity: the search chooses the capacity"),
        ({"html_out": "x.html"}, r"--mode capacity does not take --html"),
        ({"policy": None}, r"--mode capacity needs --policy"),
    ],
)
def test_bad_input_is_a_command_error_naming_the_option_and_the_rule(  # type: ignore[no-untyped-def]
    call_command, trace: str, options: dict[str, Any], message: str
) -> None:
    from django.core.management.base import CommandError

    arguments = {"mode": "capacity", "policy": "best-fit", "target_hours": 1.0, **options}
    with pytest.raises(CommandError, match=message):
        call_command("simulate", trace=trace, stdout=StringIO(), stderr=StringIO(), **arguments)


def test_capacity_options_are_refused_in_replay_mode(call_command, trace: str) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"--target-hours, --high only apply to --mode capacity"):
        call_command("simulate", trace=trace, mode="replay", policy="best-fit", target_hours=1.0, high=64)


def test_a_high_below_the_default_low_says_which_is_the_default(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    busy = tmp_path / "busy.csv"  # 6 x 40 GPUs x 10 min over a 50-min arrival window: mean demand 48 GPUs
    busy.write_text(
        "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\n"
        + "".join(f"j{i},{600 * i},600,5,8,,a,training\n" for i in range(6)),
        encoding="utf-8",
    )
    with pytest.raises(CommandError, match=r"--low 48 \(the default: the trace's mean GPU demand\) is above --high 8"):
        call_command("simulate", trace=str(busy), mode="capacity", policy="best-fit", target_hours=1.0, high=8,
                     stdout=StringIO(), stderr=StringIO())
