"""``--pools FILE.toml``: partitions with their own nodes, teams and queue rules."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from scheduling.engine.types import Node
from scheduling.simulation.pool_file import PoolFileError, plan_pools
from scheduling.simulation.runner import simulate_pool_file
from scheduling.traces.records import Trace, TraceJob
from tests.simulation.test_simulator import job as simulator_job

FLEET = tuple(Node(name=f"dgx{i:02d}", gpu_total=8, gpu_model="H100") for i in range(1, 17))

ISSUE_EXAMPLE = """
[[pool]]
name = "A"
nodes = "dgx[01-08]"
teams = ["A"]
queue = "fifo"
backfill = "easy"
backfill_depth = 2000
nodes_shared = true
preemption = false

[[pool]]
name = "B"
nodes = "dgx[09-12]"
teams = ["B"]
queue = "priority"
backfill = "none"
nodes_shared = false

[[pool]]
name = "C"
count = 4
teams = ["C"]
queue = "fairshare"
"""


def write(tmp_path: Path, text: str, name: str = "pools.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def job(index: int, team: str, gpus: int, submit: float, duration: float, priority: int = 0) -> TraceJob:
    made = simulator_job(f"j{index}", team, submit, duration, gpus)
    return replace(made, request=replace(made.request, priority=priority))


def test_the_issue_example_gives_8_4_4_node_pools_with_their_rules(tmp_path: Path) -> None:
    plan = plan_pools(write(tmp_path, ISSUE_EXAMPLE), FLEET)

    specs = {spec.name: spec for spec in plan.specs}
    assert {name: len(spec.nodes) for name, spec in specs.items()} == {"A": 8, "B": 4, "C": 4}
    assert [n.name for n in specs["C"].nodes] == [f"dgx{i}" for i in range(13, 17)]  # the nodes left
    assert (specs["A"].discipline, specs["A"].max_tests, specs["A"].exclusive) == ("easy", 2000, False)
    assert (specs["B"].discipline, specs["B"].queue, specs["B"].exclusive) == ("fcfs", "priority", True)
    assert specs["C"].queue == "fairshare" and plan.needs_fair_share
    assert [plan.route(t, "slurm") for t in ("A", "B", "C", "D")] == ["A", "B", "C", None]


def test_a_replay_reports_figures_per_pool_and_per_team(tmp_path: Path) -> None:
    jobs = tuple(job(i, "ABC"[i % 3], 8, 600.0 * i, 3600.0) for i in range(30))
    trace = Trace("t", jobs, nodes=FLEET)

    figures = simulate_pool_file(trace, write(tmp_path, ISSUE_EXAMPLE)).as_dict()

    for key in ("allocation", "utilisation", "wait_hours", "jobs"):
        assert key in figures
    pools = figures["pools"]
    assert {name: pools[name]["jobs"] for name in "ABC"} == {"A": 10, "B": 10, "C": 10}
    assert pools["A"]["gpus"] == 64 and pools["B"]["queue"] == "priority"
    assert set(pools["A"]) >= {"allocation", "utilisation", "wait_hours"}
    teams = figures["teams"]
    assert set(teams) == {"A", "B", "C"}
    assert sum(team["share_of_gpu_hours"] for team in teams.values()) == pytest.approx(1.0)
    assert teams["A"]["wait_hours"]["all"]["count"] == 10
    json.dumps(figures)


def test_priority_queues_serve_higher_priority_first(tmp_path: Path) -> None:
    pools = write(tmp_path, '[[pool]]\nname = "P"\ncount = 1\nqueue = "priority"\nbackfill = "none"\n')
    jobs = (job(0, "x", 8, 0, 100), job(1, "x", 8, 1, 100, priority=0), job(2, "x", 8, 2, 100, priority=9))
    trace = Trace("t", jobs, nodes=FLEET[:1])

    figures = simulate_pool_file(trace, pools).as_dict()

    assert figures["jobs"]["completed"] == 3
    waits = figures["teams"]["x"]["wait_hours"]["all"]
    assert waits["count"] == 3
    # j2 (priority 9) waited for j0 only: (100 - 2) s; j1 for both: (200 - 1) s
    assert waits["mean"] == pytest.approx((0 + 98 + 199) / 3 / 3600)


def test_a_job_matching_no_pool_is_an_error_not_the_first_pool(tmp_path: Path) -> None:
    pools = write(tmp_path, '[[pool]]\nname = "A"\ncount = 2\nteams = ["A"]\n')
    trace = Trace("t", (job(0, "A", 8, 0, 10), job(1, "zz", 1, 1, 10)), nodes=FLEET)

    with pytest.raises(PoolFileError, match=r"1 job matches no pool, first 'j1' \(team 'zz'"):
        simulate_pool_file(trace, pools)
    skipped = simulate_pool_file(trace, pools, skip_unrouted=True).as_dict()
    assert skipped["jobs"]["skipped_no_pool"] == 1 and skipped["jobs"]["arrived"] == 1


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[[pool]]\nname = "A"\ncount = 2\nqueue = "lifo"\n', ":4: pool 'A': key 'queue'"),
        ('[[pool]]\nname = "A"\n\nnodes = "dgx[01-20]"\n', ":4: pool 'A': key 'nodes': 4 nodes not in the fleet"),
        ('[[pool]]\nname = "A"\nnodes = "dgx[01-02]"\n[[pool]]\nname = "B"\nnodes = "dgx02"\n', ":6: pool 'B'"),
        ('[[pool]]\nname = "A"\ncount = 17\n', ":3: pool 'A': key 'count': asks for 17 nodes, 16 left"),
        ('[[pool]]\nname = "A"\ncount = 1\nkinds = ["lsf"]\n', ":4: pool 'A': key 'kinds'"),
        ('[[pool]]\nname = "A"\ncount = 1\nbackfill_depth = 0\n', ":4: pool 'A': key 'backfill_depth'"),
        ('[[pool]]\nname = "A"\ncount = 1\nnodes_shared = "yes"\n', ":4: pool 'A': key 'nodes_shared'"),
        ('[[pool]]\nname = "A"\ncount = 1\nreservation = "latest"\n', ":4: pool 'A': key 'reservation'"),
        ('[[pool]]\nname = "A"\ncount = 1\nspeed = 3\n', ":4: pool 'A': key 'speed': unknown key"),
        ('[[pool]]\nname = "A"\n', ":1: pool 'A': key 'nodes': give either"),
        ('[[pool]]\nname = "A"\ncount = 1\ngpu_model = "B200"\n', ":3: pool 'A': key 'count': asks for 1 B200"),
        ('[[pool]]\nname = "A"\n\nnodes = 17\n', ":4: pool 'A': key 'nodes': asks for 17 nodes, 16 left"),
        ('[[pool]]\nname = "A"\ncount = 1\n[[pool]]\nname = "A"\ncount = 1\n', ":5: pool 'A': key 'name': duplicate"),
        ("[[pool]\n", ": not valid TOML"),
        ('name = "A"\n', ":1: unknown top-level key"),
    ],
)
def test_bad_pool_files_name_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, text)

    with pytest.raises(PoolFileError, match=re.escape(f"{path}{where}")):
        plan_pools(path, FLEET)


# -- through the command ------------------------------------------------------------------------------
GENERIC = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "generic_jobs.csv"


def test_the_command_replays_a_pool_file_without_a_policy(call_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fleet = write(tmp_path, "name,gpus,gpu_model\n" + "".join(f"g{i},8,H100\n" for i in range(6)), "f.csv")
    fleet_text = fleet.read_text() + "s1,4,A10\ns2,4,L4\n"
    fleet.write_text(fleet_text)
    pools = write(tmp_path, '[[pool]]\nname = "all"\nnodes = "g[0-5],s[1-2]"\nqueue = "fairshare"\npreemption = true\n')
    out = tmp_path / "run.json"

    call_command("simulate", trace=str(GENERIC), mode="replay", fleet=str(fleet), pools=str(pools), json_out=str(out))

    figures = json.loads(out.read_text())
    assert figures["policy"] == "pools" and figures["capacity_gpus"] == 56
    assert figures["pools"]["all"]["preemption"] is True
    assert figures["teams"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"policy": "federated"}, "drop --policy"),
        ({}, "needs a fleet"),
    ],
)
def test_the_command_explains_pool_mistakes(call_command, tmp_path: Path, extra: dict, message: str) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    pools = write(tmp_path, '[[pool]]\nname = "all"\ncount = 1\n')
    with pytest.raises(CommandError, match=message):
        call_command("simulate", trace=str(GENERIC), mode="replay", pools=str(pools), **extra)


def test_a_policy_or_pools_is_required(call_command) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--policy is required"):
        call_command("simulate", trace=str(GENERIC), mode="replay")


TWO_PARTITIONS = """
[[pool]]
name = "A"
nodes = "dgx[01-02]"
teams = ["A", "A2"]
backfill = "easy"
reservation = "{rule}"

[[pool]]
name = "B"
nodes = "dgx03"
teams = ["B"]
reservation = "{rule}"
"""


@pytest.mark.parametrize(
    ("rule", "head_wait_s", "small_wait_s"), [("earliest", 61.0, 160.0), ("slurm-22.05", 151.0, 0.0)]
)
def test_the_slurm_2205_reservation_reads_the_other_pools_ends(
    tmp_path: Path, rule: str, head_wait_s: float, small_wait_s: float
) -> None:
    """Pool A: one node full until 300, the other half busy until 62; pool B's job ends at 63. The 8-GPU head
    (t=1) fits at 62. Slurm 22.05's will-run walk reads B's end at 63 inside its window, skips it and takes
    A's next end (300): the head is reserved at 300, so the 4-GPU job of t=2 (ends 152) backfills onto the
    head's node and the head starts when it ends. The earliest fit holds that job back instead."""
    jobs = (
        job(0, "A", 8, 0.0, 300.0),
        job(1, "A", 4, 0.0, 62.0),
        job(2, "B", 8, 0.0, 63.0),
        job(3, "A", 8, 1.0, 100.0),
        job(4, "A2", 4, 2.0, 150.0),
    )
    fleet = FLEET[:3]
    figures = simulate_pool_file(Trace("t", jobs, nodes=fleet), write(tmp_path, TWO_PARTITIONS.format(rule=rule)))
    teams = figures["teams"]
    assert isinstance(teams, dict)
    assert teams["A"]["wait_hours"]["all"]["max"] * 3600 == pytest.approx(head_wait_s)
    assert teams["A2"]["wait_hours"]["all"]["max"] * 3600 == pytest.approx(small_wait_s)
    assert figures["pools"]["A"]["reservation"] == rule  # type: ignore[index]
