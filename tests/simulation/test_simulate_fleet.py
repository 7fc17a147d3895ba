"""``manage.py simulate --fleet``: the user's own node list; --capacity never silently rounded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

GENERIC = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "generic_jobs.csv"
FLEET = "name,gpus,gpu_model\n" + "".join(f"dgx{i:02d},8,H100\n" for i in range(1, 5)) + "l4-01,4,L4\nl4-02,4,A10\n"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.csv"
    path.write_text(FLEET, encoding="utf-8")
    return path


def test_a_replay_runs_on_the_fleet_file(call_command, fleet: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run.json"

    call_command("simulate", trace=str(GENERIC), mode="replay", policy="best-fit", fleet=str(fleet), json_out=str(out))

    figures = json.loads(out.read_text())
    assert figures["capacity_gpus"] == 40
    assert figures["fleet"] == {"source": str(fleet)}
    assert figures["trace_reports"][0]["path"] == str(fleet)
    assert figures["jobs"]["arrived"] == figures["jobs"]["completed"] + figures["jobs"]["rejected"]


def test_packing_a_generic_csv_uses_the_fleet(call_command, fleet: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run.json"

    call_command("simulate", trace=str(GENERIC), mode="packing", policy="best-fit", fleet=str(fleet), json_out=str(out))

    assert json.loads(out.read_text())["capacity_gpus"] == 40


def test_packing_a_generic_csv_without_nodes_is_a_message_not_a_traceback(call_command) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="node list"):
        call_command("simulate", trace=str(GENERIC), mode="packing", policy="best-fit")


def test_a_capacity_that_is_not_whole_nodes_is_refused_not_rounded(call_command) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"--capacity 100 is not a whole number of 8-GPU nodes.*96 or 104"):
        call_command("simulate", trace=str(GENERIC), mode="replay", policy="best-fit", capacity=100)


def test_capacity_and_fleet_together_are_refused(call_command, fleet: Path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="exclude each other"):
        call_command("simulate", trace=str(GENERIC), mode="replay", policy="best-fit", capacity=64, fleet=str(fleet))


def test_a_bad_fleet_row_names_file_line_and_column(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    bad = tmp_path / "bad.csv"
    bad.write_text("name,gpus,gpu_model\na,8,H100\nb,8x,H100\n", encoding="utf-8")

    with pytest.raises(CommandError, match=re.escape(f"{bad}:3:2: column 'gpus'")):
        call_command("simulate", trace=str(GENERIC), mode="replay", policy="best-fit", fleet=str(bad))


def test_a_siloed_split_too_small_for_its_jobs_is_a_message(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    tiny = tmp_path / "tiny.csv"
    tiny.write_text("name,gpus,gpu_model\na,8,H100\n", encoding="utf-8")

    with pytest.raises(CommandError, match="cannot satisfy the pool minimums"):
        call_command("simulate", trace=str(GENERIC), mode="replay", policy="siloed", fleet=str(tiny))


def test_on_error_skip_counts_what_it_left_out_per_reason(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\n"
        "0,100,1,1,,a,training\n1,x,1,1,,a,training\n2,100,1,1,,zz,training\n3,100,1,1,,a,nope\n",
        encoding="utf-8",
    )
    fleet = tmp_path / "f.csv"
    fleet.write_text("name,gpus,gpu_model\ng1,8,H100\n", encoding="utf-8")
    pools = tmp_path / "p.toml"
    pools.write_text('[[pool]]\nname = "a"\nnodes = "g1"\nteams = ["a"]\n', encoding="utf-8")
    out = tmp_path / "run.json"

    call_command(
        "simulate", trace=str(trace), mode="replay", fleet=str(fleet), pools=str(pools), on_error="skip",
        json_out=str(out),
    )  # fmt: skip

    figures = json.loads(out.read_text())
    assert figures["skipped"] == {"malformed": 2, "no pool takes the job": 1}
    assert figures["trace_reports"][1]["malformed_by_column"] == {"duration": 1, "kind": 1}
    assert figures["jobs"]["arrived"] == 1


@pytest.mark.parametrize(
    "how",
    [dict(mode="replay", policy="siloed"), dict(mode="replay", policy="federated"), dict(mode="packing", policy="fgd")],
)
def test_a_fleet_without_a_gpu_is_a_clear_error(call_command, tmp_path: Path, how: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    cpu_only = tmp_path / "cpu.csv"
    cpu_only.write_text("name,gpus,gpu_model\nc1,0,none\nc2,0,none\n", encoding="utf-8")

    with pytest.raises(CommandError, match="the fleet has no GPU: its 2 nodes are all CPU-only"):
        call_command("simulate", trace=str(GENERIC), fleet=str(cpu_only), **how)


def test_packing_a_generic_csv_without_a_fleet_asks_for_one(call_command) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=re.escape("give --fleet FILE.csv")):
        call_command("simulate", trace=str(GENERIC), mode="packing", policy="fgd")
