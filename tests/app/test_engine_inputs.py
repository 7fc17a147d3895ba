"""One ORM -> engine translation (issue 34 item 3, ``selectors/engine_inputs.py``): where the copies it replaced
disagreed, every reader now follows one rule.

* A stored workload kind the engine does not know read as batch on the what-if export and the rebalancer but
  raised in a pool snapshot (taking down "my workloads", routing and admission for the whole pool).
* Running work without a recorded start had no expected end in a pool snapshot but ended at the epoch plus
  its time limit on the rebalancer (so the rebalancer took it for work about to finish).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.engine.submissions import WorkloadDescription
from scheduling.engine.types import WorkloadKind
from scheduling.models import Orchestrator, Workload
from scheduling.selectors.engine_inputs import engine_nodes, simulated_nodes
from scheduling.selectors.planning import history_trace_jobs
from scheduling.selectors.rebalance import running_now
from scheduling.selectors.routing import submission_request
from scheduling.selectors.workloads import pool_snapshots

pytestmark = pytest.mark.django_db


def _workload(orchestrator, external_id, *, state, kind="training", started=None, nodes=(), estimate=0):
    now = timezone.now()
    return Workload.objects.create(
        orchestrator=orchestrator, external_id=external_id, kind=kind, state=state, gpus_per_member=2,
        submitted_at=now - timedelta(hours=2), started_at=started, nodes=list(nodes),
        duration_estimate_s=estimate,
    )  # fmt: skip


def test_a_stored_kind_the_engine_does_not_know_reads_as_batch_everywhere(orchestrator, fleet):
    """The model's choices are not enforced by the database (a collector or a hand edit can write any text)."""
    started = timezone.now() - timedelta(hours=1)
    _workload(orchestrator, "odd-pending", state="pending", kind="interactive")
    _workload(orchestrator, "odd-running", state="running", kind="", started=started,
              nodes=[{"node": "dgx00", "gpus": [0, 1]}])  # fmt: skip
    _workload(orchestrator, "known", state="pending", kind="inference", estimate=600)

    snapshot = pool_snapshots(timezone.now(), {orchestrator.pk})[orchestrator.pk]  # raised ValueError before
    by_id = {Workload.objects.get(pk=int(r.id)).external_id: r.kind for r in snapshot.queue}
    assert by_id == {"odd-pending": WorkloadKind.BATCH, "known": WorkloadKind.INFERENCE}
    assert [w.kind for w in running_now([orchestrator], {})] == [WorkloadKind.BATCH]
    replayed = {job.request.id: job.request.kind for job in history_trace_jobs(timezone.now(), 1).jobs}
    assert replayed["slurm-a:odd-running"] is WorkloadKind.BATCH
    assert replayed["slurm-a:known"] is WorkloadKind.INFERENCE


def test_running_work_without_a_recorded_start_has_no_expected_end_on_any_reader(orchestrator, fleet):
    started = timezone.now() - timedelta(minutes=30)
    _workload(orchestrator, "unstarted", state="running", estimate=3600, nodes=[{"node": "dgx00", "gpus": [0, 1]}])
    _workload(orchestrator, "timed", state="running", estimate=3600, started=started,
              nodes=[{"node": "dgx01", "gpus": [0, 1]}])  # fmt: skip

    ends = {w.id: w.expected_end for w in running_now([orchestrator], {})}
    assert ends["unstarted"] is None  # was 3600.0: the epoch plus its limit, "ends now" to the rebalancer
    assert ends["timed"] == pytest.approx(started.timestamp() + 3600)
    snapshot = pool_snapshots(timezone.now(), {orchestrator.pk})[orchestrator.pk]
    by_id = {Workload.objects.get(pk=int(w.id)).external_id: w.expected_end for w in snapshot.running}
    assert by_id == {"unstarted": None, "timed": pytest.approx(started.timestamp() + 3600)}


def test_the_what_if_names_pools_as_its_recorded_jobs_do_and_the_live_readers_by_name(orchestrator, fleet):
    """The what-if replay reads node pools by orchestrator kind because the recorded jobs and pool rules it
    replays name them so; every live reader names them by the orchestrator's name."""
    Orchestrator.objects.filter(pk=orchestrator.pk).update(name="hpc-east")
    fleet[0].state = "down"
    fleet[0].save()
    fleet[1].state = "drained"
    fleet[1].nvlink_domain = ""
    fleet[1].save()
    _workload(orchestrator, "done", state="running", started=timezone.now() - timedelta(hours=1))

    (job,) = history_trace_jobs(timezone.now(), 1).jobs
    simulated = {n.name: n for n in simulated_nodes()}
    assert {n.orchestrator for n in simulated.values()} == {job.request.orchestrator} == {"slurm"}
    assert "dgx00" not in simulated  # down: not in the replay
    assert simulated["dgx01"].schedulable and simulated["dgx01"].nvlink_domain == "dgx01"  # drained comes back
    assert {n.orchestrator for n in engine_nodes()} == {"hpc-east"}
    assert not {n.name: n for n in engine_nodes()}["dgx01"].schedulable


def test_a_kind_a_user_types_is_refused_by_name_not_read_as_batch():
    with pytest.raises(ValueError, match=r"^kind: 'interactive' is not one of training, hpo, inference, batch$"):
        submission_request(WorkloadDescription(kind="interactive"))
    assert submission_request(WorkloadDescription(kind="hpo")).kind is WorkloadKind.HPO
