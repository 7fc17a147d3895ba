"""Against a real Slurm 22.05 fleet started by scripts/slurm/start.sh (8 nodes x 8 fake H100 GPUs,
slurmrestd with JWT). Nothing is mocked: numbers are compared with what sinfo/scontrol/squeue say."""

from __future__ import annotations

import httpx
import pytest

from scheduling.collectors import SlurmActuator, SlurmCollector, SourceUnavailable, parse_topology
from scheduling.collectors.actuators import parse_scontrol_node
from scheduling.collectors.hostlist import count_index_list
from scheduling.collectors.reliability import NO_RETRY
from scheduling.collectors.slurm import gpu_count
from scheduling.collectors.snapshot import WorkloadState

from .conftest import wait_for

pytestmark = pytest.mark.live


@pytest.fixture
def collector(slurm_fleet):
    topology = parse_topology(slurm_fleet.run("scontrol", "show", "topology"))
    return SlurmCollector(slurm_fleet.url, slurm_fleet.token, slurm_fleet.user, topology=topology)


@pytest.fixture
def actuator(slurm_fleet):
    return SlurmActuator(dry_run=False, env={"SLURM_CONF": slurm_fleet.env["SLURM_CONF"]})


def _sinfo_gpus(fleet) -> dict[str, tuple[int, int]]:
    out = fleet.run("sinfo", "-h", "-N", "-O", "NodeList:20,Gres:40,GresUsed:60")
    return {
        name: (gpu_count(gres), gpu_count(used)) for name, gres, used in (line.split() for line in out.splitlines())
    }


def test_the_fleet_has_eight_idle_or_busy_nodes(slurm_fleet, record_property):
    record_property("slurm_start_seconds", round(slurm_fleet.start_seconds, 1))  # reported, never asserted
    assert len(slurm_fleet.run("sinfo", "-h", "-N", "-p", "gpu", "-o", "%N").split()) == 8


def test_gpus_total_and_allocated_per_node_equal_sinfo_and_scontrol(slurm_fleet, slurm_jobs, collector):
    snapshot = collector.collect()
    observed = {n.name: (n.gpu_total, n.gpu_allocated) for n in snapshot.nodes}
    assert observed == _sinfo_gpus(slurm_fleet)
    for node in snapshot.nodes:
        line = slurm_fleet.run("scontrol", "show", "node", node.name, "-o")
        assert f"Gres=gpu:h100:{node.gpu_total}" in line
    assert snapshot.gpu_allocated == 3 + 2 * 8
    assert {n.leaf_switch for n in snapshot.nodes} == {"leaf1", "leaf2"}


def test_pending_gpus_equal_squeue_pending_requests(slurm_fleet, slurm_jobs, collector):
    snapshot = collector.collect()
    expected = 0
    for line in slurm_fleet.run("squeue", "-h", "-t", "PD", "-o", "%i|%D|%b").splitlines():
        job_id, nodes, gres = line.split("|")
        tasks = count_index_list(job_id.split("[")[1].rstrip("]")) if "[" in job_id else 1
        expected += tasks * int(nodes) * gpu_count(gres.replace("gres/", "gres:"))
    assert expected == 8 * 8 + 4 * 2
    assert snapshot.pending_gpus == expected


def test_the_gang_and_the_blocked_gang_are_seen_with_their_reason(slurm_jobs, collector):
    workloads = {w.external_id: w for w in collector.collect().workloads}
    gang = workloads[slurm_jobs.gang]
    assert (gang.state, gang.gang_size, gang.gpus_per_member, len(gang.nodes), gang.team) == (
        WorkloadState.RUNNING,
        2,
        8.0,
        2,
        "llm",
    )
    blocked = workloads[slurm_jobs.too_big]
    assert (blocked.state, blocked.gang_size, blocked.gpus, blocked.pending_reason) == (
        WorkloadState.PENDING,
        8,
        64.0,
        "Resources",
    )
    assert workloads[slurm_jobs.single].gpus == 3.0 and workloads[slurm_jobs.single].team == "vision"


def test_drain_and_resume_really_change_the_node_state_and_are_idempotent(slurm_fleet, collector, actuator):
    first = actuator.drain("dgx08", "portal live test")
    assert first.changed and not first.dry_run and first.command_or_request.startswith("scontrol update")
    _base, flags, reason = parse_scontrol_node(slurm_fleet.run("scontrol", "show", "node", "dgx08", "-o"))
    assert "DRAIN" in flags and reason == "portal live test"
    assert not actuator.drain("dgx08", "portal live test").changed
    node = collector.collect().node("dgx08")
    assert node.cordoned and not node.schedulable and node.state == "drained"

    assert actuator.resume("dgx08").changed
    _base, flags, _reason = parse_scontrol_node(slurm_fleet.run("scontrol", "show", "node", "dgx08", "-o"))
    assert "DRAIN" not in flags
    assert not actuator.resume("dgx08").changed
    # A resumed node is NOT_RESPONDING until its slurmd answers the ping that resume triggers.
    wait_for(lambda: collector.collect().node("dgx08").schedulable, what="dgx08 to be schedulable again")


def test_draining_a_busy_node_leaves_its_job_running(slurm_fleet, slurm_jobs, collector, actuator):
    busy = slurm_fleet.run("squeue", "-h", "-j", slurm_jobs.single, "-o", "%N").strip()
    before = collector.collect().node(busy).gpu_allocated
    try:
        assert actuator.drain(busy, "portal: drain busy node").changed
        node = collector.collect().node(busy)
        assert node.state == "draining" and node.gpu_allocated == before >= 3
        assert slurm_fleet.squeue()[slurm_jobs.single][0] == "RUNNING"
    finally:
        actuator.resume(busy)


def test_a_dry_run_drain_changes_nothing(slurm_fleet):
    result = SlurmActuator(env={"SLURM_CONF": slurm_fleet.env["SLURM_CONF"]}).drain("dgx07", "maybe")
    assert result.dry_run and not result.changed
    assert "DRAIN" not in parse_scontrol_node(slurm_fleet.run("scontrol", "show", "node", "dgx07", "-o"))[1]


def test_slurmrestd_22_05_answers_405_to_a_node_update(slurm_fleet):
    headers = {"X-SLURM-USER-NAME": slurm_fleet.user, "X-SLURM-USER-TOKEN": slurm_fleet.token}
    response = httpx.post(f"{slurm_fleet.url}/slurm/v0.0.38/node/dgx01", headers=headers, json={"state": "DRAIN"})
    assert response.status_code == 405


def test_a_rejected_token_is_a_source_unavailable_error(slurm_fleet):
    # slurmrestd 22.05 passes the JWT on to slurmctld and reports its refusal as "500 Unspecified error".
    collector = SlurmCollector(slurm_fleet.url, "not-a-jwt", slurm_fleet.user, retry=NO_RETRY)
    with pytest.raises(SourceUnavailable) as error:
        collector.collect()
    assert error.value.status == 500


def test_a_missing_token_is_refused_with_401_and_not_retried(slurm_fleet):
    collector = SlurmCollector(slurm_fleet.url, "", "", sleep=lambda _s: pytest.fail("must not retry"))
    with pytest.raises(SourceUnavailable) as error:
        collector.collect()
    assert error.value.status == 401 and not error.value.retryable


def test_an_incremental_round_sees_a_job_submitted_one_finished_and_one_cancelled(slurm_fleet, slurm_jobs):
    """Issue 35 item 2 on the real 22.05 fleet: round 1 is full, round 2 asks with the cursor (update_time)
    and merges; a job submitted, one that ended and one cancelled in between are each reflected in it,
    and the merged workloads equal a full list read without any cache."""
    from scheduling.collectors.slurm import SlurmJobCache

    topology = parse_topology(slurm_fleet.run("scontrol", "show", "topology"))
    cache = SlurmJobCache(overlap_s=1)

    def collect(cache=cache):
        return SlurmCollector(
            slurm_fleet.url, slurm_fleet.token, slurm_fleet.user, topology=topology, job_cache=cache
        ).collect()

    def job(*args: str, wrap: str) -> str:
        return slurm_fleet.run(
            "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--time=1", *args, "--wrap", wrap
        ).strip()

    finishing = job("-A", "vision", "-J", "finishing", "--gres=gpu:1", wrap="sleep 6")
    cancelled = job("-A", "vision", "-J", "cancelled", "--gres=gpu:1", wrap="sleep 3000")
    wait_for(
        lambda: {slurm_fleet.squeue().get(j, ("",))[0] for j in (finishing, cancelled)} == {"RUNNING"},
        timeout=30,
        what="the two short jobs to start (backfilled: --time=1)",
    )
    first = {w.external_id: w for w in collect().workloads}
    assert cache.last_round == "full"
    assert first[finishing].state is WorkloadState.RUNNING and first[cancelled].state is WorkloadState.RUNNING

    submitted = job("-A", "llm", "-J", "submitted", "--gres=gpu:1", "--hold", wrap="sleep 3000")
    slurm_fleet.run("scancel", cancelled)
    wait_for(lambda: finishing not in slurm_fleet.squeue(), timeout=30, what="the 6 s job to end")
    try:
        later = {w.external_id: w for w in collect().workloads}
        assert cache.last_round == "incremental"
        assert later[submitted].state is WorkloadState.HELD
        assert finishing not in later and cancelled not in later
        assert set(later) - {submitted} <= set(first)
        assert later == {w.external_id: w for w in collect(SlurmJobCache()).workloads}  # a fresh full list
    finally:
        slurm_fleet.run("scancel", submitted)
