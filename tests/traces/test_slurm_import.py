"""``sacct -P`` and ``slurm.conf`` as simulator inputs (``manage.py import_slurm``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduling.simulation.pool_file import plan_pools
from scheduling.traces import load_trace
from scheduling.traces.errors import TraceFormatError
from scheduling.traces.slurm import parse_time_limit, read_sacct, read_slurm_conf
from tests.support import require

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "orchestrator-samples" / "slurm"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60", 3600.0), ("05:30", 330.0), ("04:00:00", 14400.0), ("1-00:00:00", 86400.0), ("2-3", 183600.0),
     ("1-02:03", 93780.0), ("UNLIMITED", None), ("Partition_Limit", None)],
)  # fmt: skip
def test_slurm_time_limits(text: str, seconds: float | None) -> None:
    assert parse_time_limit(text) == seconds


def test_sacct_rows_become_jobs_with_their_limits() -> None:
    trace = read_sacct(FIXTURES / "sacct_p.txt")

    jobs = {job.id: job for job in trace.jobs}
    assert list(jobs) == ["101", "102", "103"]  # the step is not a job; 104 never started
    gang = jobs["101"]
    assert (gang.request.members, gang.request.gpus_per_member, gang.request.team) == (2, 8, "vision")
    assert (gang.submit_s, gang.duration_s, gang.request.duration_estimate_s) == (0.0, 7200.0, 14400.0)
    assert (gang.request.cpu_milli, gang.request.memory_mib) == (8000, 32000)
    assert (jobs["102"].submit_s, jobs["102"].request.gpus, jobs["102"].request.memory_mib) == (60.0, 1, 8192)
    assert jobs["103"].request.gpus == 0 and jobs["103"].request.team == "carl"  # no account: the user
    assert jobs["103"].request.duration_estimate_s == 600.0  # UNLIMITED: by duration
    assert trace.reports[0].skipped == {"never started": 1}


def test_a_bad_sacct_row_names_file_line_and_column(tmp_path: Path) -> None:
    text = (FIXTURES / "sacct_p.txt").read_text().replace("|1-00:00:00|", "|soon|")
    path = tmp_path / "sacct.txt"
    path.write_text(text)

    with pytest.raises(TraceFormatError, match=re.escape(f"{path}:4:10: column 'Timelimit'")):
        read_sacct(path)
    assert read_sacct(path, on_error="skip").reports[0].malformed_by_column == {"Timelimit": 1}


def test_slurm_conf_gives_nodes_partitions_and_scheduler_settings() -> None:
    require(SAMPLES.is_dir(), f"real Slurm samples not present at {SAMPLES}")

    conf = read_slurm_conf(SAMPLES / "slurm.conf")

    assert [n.name for n in conf.nodes] == [f"dgx{i:02d}" for i in range(1, 9)]
    node = conf.nodes[0]
    assert (node.gpu_total, node.gpu_model, node.cpu_milli_total, node.memory_mib_total) == (8, "h100", 224000, 2000000)
    assert [(p.name, len(p.nodes), p.default) for p in conf.partitions] == [("gpu", 8, True), ("debug", 2, False)]
    assert (conf.backfill, conf.backfill_depth, conf.queue) == ("easy", 500, "fifo")


def test_import_slurm_writes_inputs_simulate_accepts(tmp_path: Path) -> None:
    require(SAMPLES.is_dir(), f"real Slurm samples not present at {SAMPLES}")
    django = pytest.importorskip("django")
    from django.conf import settings

    if not settings.configured:
        pytest.skip("Django settings not configured")
    django.setup()
    from django.core.management import call_command

    jobs, fleet, pools = tmp_path / "jobs.csv", tmp_path / "fleet.csv", tmp_path / "pools.toml"
    call_command(
        "import_slurm", sacct=str(FIXTURES / "sacct_p.txt"), jobs_out=str(jobs), conf=str(SAMPLES / "slurm.conf"),
        fleet_out=str(fleet), pools_out=str(pools),
    )  # fmt: skip

    trace = load_trace(str(jobs), fleet=fleet)
    assert [job.request.duration_estimate_s for job in trace.jobs] == [14400.0, 86400.0, 600.0]
    plan = plan_pools(pools, trace.nodes)
    assert [(spec.name, len(spec.nodes)) for spec in plan.specs] == [("gpu", 8)]  # debug's nodes are in gpu
    assert plan.route("vision", "slurm") == "gpu"
    assert "# partition debug: every node is in an earlier pool" in pools.read_text()


def test_slurm_conf_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "slurm.conf"
    path.write_text("NodeName=a[1-2] Gres=gpu:x:eight\n")

    with pytest.raises(TraceFormatError, match=re.escape(f"{path}:1: column 'Gres'")):
        read_slurm_conf(path)


def test_sacct_json_reads_like_sacct_p() -> None:
    trace = read_sacct(FIXTURES / "sacct.json")

    jobs = {job.id: job for job in trace.jobs}
    assert list(jobs) == ["201", "202"]
    gang = jobs["201"].request
    assert (gang.members, gang.gpus_per_member, gang.cpu_milli, gang.memory_mib) == (2, 8, 8000, 32000)
    assert (jobs["201"].duration_s, gang.duration_estimate_s) == (7200.0, 14400.0)
    assert (jobs["202"].submit_s, jobs["202"].request.gpus, jobs["202"].request.team) == (60.0, 2, "bob")
    assert jobs["202"].request.duration_estimate_s == 3600.0  # Slurm 23+ {"set", "number"} limit
    assert trace.reports[0].skipped == {"never started": 1}


def test_a_bad_sacct_json_job_names_its_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "sacct.json"
    text = (FIXTURES / "sacct.json").read_text().replace('"count": 2}]', '"count": 3}]')
    bob = '"user": "bob",\n      "allocation_nodes": '
    path.write_text(text.replace(bob + "1", bob + "2"))  # 3 GPUs over 2 nodes

    with pytest.raises(TraceFormatError, match=re.escape(f"{path}:18: column 'jobs[1].tres.allocated'")):
        read_sacct(path)


CONF_WITH_ACCOUNTS = """\
PriorityType=priority/multifactor
PriorityWeightFairshare={weight}
SchedulerParameters=bf_interval=1,bf_max_job_test=2000
NodeName=DEFAULT CPUs=64 RealMemory=512000 Gres=gpu:h100:8
NodeName=dgx[01-04]
PartitionName=vision Nodes=dgx[01-02] AllowAccounts=cv,robotics OverSubscribe=EXCLUSIVE
PartitionName=llm Nodes=dgx[03-04] AllowAccounts=ALL Default=YES
"""


@pytest.mark.parametrize(("weight", "queue"), [("0", "fifo"), ("10000", "fairshare")])
def test_slurm_conf_partitions_route_by_allowed_accounts(tmp_path: Path, weight: str, queue: str) -> None:
    from scheduling.management.commands.import_slurm import pools_toml

    conf_path = tmp_path / "slurm.conf"
    conf_path.write_text(CONF_WITH_ACCOUNTS.format(weight=weight))
    conf = read_slurm_conf(conf_path)
    pools = tmp_path / "pools.toml"
    pools.write_text(pools_toml(conf, str(conf_path)))

    vision, llm = conf.partitions
    assert (vision.accounts, vision.exclusive, llm.accounts, llm.exclusive) == (("cv", "robotics"), True, (), False)
    plan = plan_pools(pools, conf.nodes)
    assert [(s.name, len(s.nodes), s.exclusive, s.queue, s.max_tests) for s in plan.specs] == [
        ("vision", 2, True, queue, 2000), ("llm", 2, False, queue, 2000),
    ]  # fmt: skip
    # multifactor priority with no fair-share weight orders by age: first come, first served
    assert [plan.route(team, "slurm") for team in ("cv", "robotics", "anyone")] == ["vision", "vision", "llm"]
