"""Persisting collector snapshots: one transaction, stale on failure, nothing good erased."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from scheduling.collectors.snapshot import ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.types import OrchestratorKind
from scheduling.models import CollectorRun, Node, Orchestrator, UsageSample, Workload
from scheduling.services.collection import acquire_lease, register_orchestrator, scrape
from scheduling.services.ingest import ingest_snapshot, record_failure

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _node(name, allocated=0, **extra):
    return ObservedNode(
        name=name,
        orchestrator="slurm-a",
        gpu_total=8,
        gpu_allocated=allocated,
        gpu_model="H100",
        leaf_switch="leaf0",
        **extra,
    )


def _job(job_id, state=WorkloadState.RUNNING, team="nlp", gang=1, gpus=8, nodes=()):
    return ObservedWorkload(
        external_id=job_id,
        orchestrator="slurm-a",
        team=team,
        state=state,
        gang_size=gang,
        gpus_per_member=gpus,
        nodes=nodes,
        submitted_at=T0.timestamp() - 60,
        pending_reason="Resources" if state is WorkloadState.PENDING else "",
    )


def _snapshot(nodes, workloads, at=T0, pending=0.0):
    return Snapshot("slurm-a", OrchestratorKind.SLURM, at, tuple(nodes), tuple(workloads), pending_gpus=pending)


def test_a_snapshot_becomes_nodes_workloads_samples_and_a_run(orchestrator, teams):
    run = ingest_snapshot(
        orchestrator,
        _snapshot(
            [_node("dgx01", 8), _node("dgx02", 0)],
            [_job("1", nodes=("dgx01",)), _job("2", WorkloadState.PENDING, gang=2)],
            pending=16,
        ),
    )
    assert (run.ok, run.nodes, run.gpus_total, run.gpus_allocated, run.workloads_running, run.workloads_pending) == (
        True,
        2,
        16,
        8,
        1,
        1,
    )
    assert Node.objects.get(name="dgx01").state == Node.State.ALLOCATED
    pending = Workload.objects.get(external_id="2")
    assert (pending.state, pending.gpus, pending.team.slug, pending.pending_reason) == (
        "pending",
        16,
        "nlp",
        "Resources",
    )
    pool = UsageSample.objects.get(team__isnull=True)
    assert (pool.gpus_total, pool.gpus_allocated, pool.gpus_pending) == (16, 8, 16)


def test_work_that_left_the_listing_is_completed_and_a_vanished_node_is_marked_down(orchestrator, teams):
    waiting = _job("2", state=WorkloadState.PENDING, gpus=16)
    ingest_snapshot(
        orchestrator, _snapshot([_node("dgx01", 8), _node("dgx02")], [_job("1", nodes=("dgx01",)), waiting])
    )
    later = T0 + timedelta(minutes=1)
    ingest_snapshot(orchestrator, _snapshot([_node("dgx01")], [], at=later))
    job = Workload.objects.get(external_id="1")
    assert (job.state, job.finished_at) == (Workload.State.COMPLETED, later)
    never_ran = Workload.objects.get(external_id="2")  # left the queue without starting: not a finished job
    assert (never_ran.state, never_ran.finished_at, never_ran.started_at) == (Workload.State.CANCELLED, later, None)
    assert Node.objects.get(name="dgx02").state == Node.State.DOWN
    assert Node.objects.count() == 2


def test_a_failure_marks_the_source_stale_and_keeps_the_last_good_data(orchestrator, teams):
    ingest_snapshot(orchestrator, _snapshot([_node("dgx01", 8)], [_job("1", nodes=("dgx01",))]))
    record_failure(orchestrator, "SourceUnavailable: connect timeout")
    orchestrator.refresh_from_db()
    assert orchestrator.is_stale and "connect timeout" in orchestrator.last_error
    assert Node.objects.get(name="dgx01").gpu_allocated == 8
    assert Workload.objects.get(external_id="1").state == Workload.State.RUNNING
    assert list(CollectorRun.objects.values_list("ok", flat=True)) == [False, True]


def test_drained_nodes_and_per_scrape_counters_do_not_bloat_history(orchestrator, teams):
    for minute in range(3):
        ingest_snapshot(
            orchestrator,
            _snapshot([_node("dgx01", minute, state_flags=("DRAIN",))], [], at=T0 + timedelta(minutes=minute)),
        )
    node = Node.objects.get(name="dgx01")
    assert node.state == Node.State.DRAINING and node.gpu_allocated == 2
    assert node.history.count() == 1  # created once; counters are not audit events


def test_a_node_seen_by_another_orchestrator_changes_owner_with_history(orchestrator, teams):
    ingest_snapshot(orchestrator, _snapshot([_node("dgx01")], []))
    ray = Orchestrator.objects.create(name="ray-a", kind="ray", endpoint="http://127.0.0.1:8265")
    ingest_snapshot(ray, Snapshot("ray-a", OrchestratorKind.RAY, T0, (_node("dgx01"),), ()))
    node = Node.objects.get(name="dgx01")
    assert node.orchestrator == ray
    assert node.history.first().history_change_reason == "observed in ray-a"


def test_an_unreachable_endpoint_is_recorded_as_stale_through_the_real_client(db):
    orchestrator, created = register_orchestrator(kind="ray", name="ray-down", url="http://127.0.0.1:9")
    assert created
    outcome = scrape(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert outcome.run is not None and not outcome.run.ok
    assert orchestrator.is_stale and orchestrator.breaker_state["consecutive_failures"] == 1
    assert orchestrator.lease_until is None


def test_only_one_scrape_holds_an_orchestrators_lease(orchestrator):
    assert acquire_lease(orchestrator.pk)
    assert not acquire_lease(orchestrator.pk)
    assert scrape(orchestrator.pk).skipped == "another scrape holds the lease"


def test_a_missing_credential_names_the_variable(db):
    orchestrator, _ = register_orchestrator(
        kind="slurm", name="slurm-x", url="http://127.0.0.1:9", credentials_ref="env:GPUPORTAL_SECRET_TEST_UNSET_TOKEN"
    )
    scrape(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert "GPUPORTAL_SECRET_TEST_UNSET_TOKEN is not set" in orchestrator.last_error


def test_register_orchestrator_is_idempotent_and_collect_reports_json(db, capsys):
    call_command("register_orchestrator", "--kind", "ray", "--name", "ray-b", "--url", "http://127.0.0.1:9")
    call_command("register_orchestrator", "--kind", "ray", "--name", "ray-b", "--url", "http://127.0.0.1:10")
    assert Orchestrator.objects.get(name="ray-b").endpoint == "http://127.0.0.1:10"
    capsys.readouterr()
    call_command("collect", "--once", "--json")
    import json

    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["name"] == "ray-b" and row["stale"] is True and row["error"]
    assert set(row) >= {
        "nodes",
        "gpus_total",
        "gpus_allocated",
        "workloads_running",
        "workloads_pending",
        "pending_gpus",
    }


def test_a_drained_node_still_listed_by_its_old_owner_is_not_claimed_back(orchestrator, teams):
    ray = Orchestrator.objects.create(name="ray-a", kind="ray", endpoint="http://127.0.0.1:8265")
    ingest_snapshot(ray, Snapshot("ray-a", OrchestratorKind.RAY, T0, (_node("dgx01"),), ()))
    ingest_snapshot(orchestrator, _snapshot([_node("dgx01", state_flags=("DRAIN",))], []))
    assert Node.objects.get(name="dgx01").orchestrator == ray


def _writes_to(table: str, queries) -> int:
    return sum(1 for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE")) and table in q["sql"])


def test_a_repeated_scrape_rewrites_no_unchanged_row_and_writes_what_changed(orchestrator, teams):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    nodes = [_node("dgx01", 8), _node("dgx02", 0)]
    jobs = [_job("1", nodes=("dgx01",)), _job("2", WorkloadState.PENDING, gang=2)]
    ingest_snapshot(orchestrator, _snapshot(nodes, jobs, pending=16))
    with CaptureQueriesContext(connection) as same:
        ingest_snapshot(orchestrator, _snapshot(nodes, jobs, at=T0 + timedelta(seconds=30), pending=16))
    assert _writes_to('"scheduling_workload"', same.captured_queries) == 0
    assert Node.objects.get(name="dgx02").last_seen_at == T0 + timedelta(seconds=30)  # seen, in one UPDATE

    started = [jobs[0], _job("2", gang=2, nodes=("dgx02",))]
    later = T0 + timedelta(seconds=60)
    with CaptureQueriesContext(connection) as changed:
        ingest_snapshot(orchestrator, _snapshot([_node("dgx01", 8), _node("dgx02", 8)], started, at=later))
    assert _writes_to('"scheduling_workload"', changed.captured_queries) == 1  # one batched upsert
    job = Workload.objects.get(external_id="2")
    assert (job.state, job.nodes, job.started_at) == ("running", [{"node": "dgx02", "gpus": []}], later)
    assert Workload.objects.get(external_id="1").state == "running"
    assert Node.objects.get(name="dgx02").state == Node.State.ALLOCATED
