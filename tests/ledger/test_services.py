"""The ledger service on the database: views from real ingests, findings opened/updated/closed in one
transaction, compact ownership intervals, stale sources held, the email, the weekly-report selector."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings

from scheduling.collectors.snapshot import ObservedNode, Snapshot
from scheduling.engine.types import OrchestratorKind
from scheduling.models import (
    FleetHost,
    LedgerFinding,
    Node,
    NodeAlias,
    NodeMove,
    Orchestrator,
    OwnershipInterval,
    RebalancePlan,
    SourceView,
)
from scheduling.selectors import ledger as ledger_reads
from scheduling.services import ledger
from scheduling.services.ingest import ingest_snapshot, record_failure
from tests.support import require_postgres

from .conftest import T0, running

pytestmark = pytest.mark.django_db


def live(kind: str | None = None):
    rows = LedgerFinding.objects.filter(closed_at__isnull=True, opened_at__isnull=False)
    return rows.filter(kind=kind) if kind else rows


def test_a_healthy_split_records_each_sources_view_and_gives_no_finding(two_sources, rounds):
    outcome = two_sources.round(rounds(0))
    assert outcome.open_total == 0 and LedgerFinding.objects.count() == 0
    assert SourceView.objects.count() == 8
    assert set(SourceView.objects.filter(schedulable=True).values_list("orchestrator__name", "name")) == {
        ("slurm-hpc", "dgx01"),
        ("slurm-hpc", "dgx02"),
        ("k8s-serving", "dgx03"),
        ("k8s-serving", "dgx04"),
    }
    why = SourceView.objects.get(orchestrator=two_sources.k8s, name="dgx01").why_not
    assert why == "cordoned"


def test_a_node_both_sources_may_schedule_on_opens_a_double_ownership_in_one_round_and_mails_the_admins(
    two_sources, rounds, cast, mailoutbox, django_capture_on_commit_callbacks
):
    cast["admin"].email = "ada@example.org"
    cast["admin"].save()
    two_sources.round(rounds(0))
    two_sources.k8s_owns.add("dgx02")
    with django_capture_on_commit_callbacks(execute=True):
        outcome = two_sources.round(rounds(1))
    finding = live(LedgerFinding.Kind.DOUBLE_OWNERSHIP).get()
    assert outcome.opened == (finding.key,)
    assert finding.node == "dgx02" and finding.severity == "high"
    assert finding.orchestrators == "k8s-serving,slurm-hpc"
    assert finding.opened_at == rounds(1)
    (mail,) = mailoutbox
    assert mail.to == ["ada@example.org"] and "dgx02" in mail.subject
    assert "k8s-serving" in mail.body and "/ledger/?kind=double_ownership" in mail.body


def test_draining_one_side_closes_the_double_ownership_the_next_round_and_keeps_it_as_history(
    two_sources, rounds, mailoutbox
):
    two_sources.k8s_owns.add("dgx02")
    two_sources.round(rounds(0))
    two_sources.round(rounds(1))
    assert live(LedgerFinding.Kind.DOUBLE_OWNERSHIP).get().last_seen == rounds(1)
    two_sources.slurm_owns.discard("dgx02")
    outcome = two_sources.round(rounds(2))
    assert live().count() == 0 and len(outcome.closed) == 1
    closed = LedgerFinding.objects.get()
    assert closed.closed_at == rounds(2) and closed.first_seen == rounds(0) and closed.status == "closed"


def test_ownership_is_stored_as_one_interval_per_change_not_per_round(two_sources, rounds):
    for n in range(10):
        two_sources.round(rounds(n))
    assert OwnershipInterval.objects.count() == 4
    two_sources.slurm_owns.discard("dgx02")
    two_sources.k8s_owns.add("dgx02")
    for n in range(10, 20):
        two_sources.round(rounds(n))
    rows = list(OwnershipInterval.objects.filter(node="dgx02").order_by("started_at"))
    assert [(r.orchestrator.name, r.started_at, r.ended_at) for r in rows] == [
        ("slurm-hpc", rounds(0), rounds(10)),
        ("k8s-serving", rounds(10), None),
    ]
    spans = ledger_reads.ownership_between(rounds(0), rounds(20), nodes=["dgx02"])
    assert [s.orchestrator for s in spans] == ["slurm-hpc", "k8s-serving"]


@override_settings(GPUPORTAL_LEDGER={"orphan_after_s": 60})
def test_a_node_drained_everywhere_becomes_an_orphan_after_the_setting(two_sources, rounds):
    two_sources.slurm_owns.discard("dgx01")
    two_sources.round(rounds(0))
    two_sources.round(rounds(1))
    assert live().count() == 0 and LedgerFinding.objects.get().status == "pending"
    two_sources.round(rounds(2))
    orphan = live(LedgerFinding.Kind.ORPHAN).get()
    assert orphan.node == "dgx01" and orphan.first_seen == rounds(0) and orphan.opened_at == rounds(2)
    assert "maintenance" in orphan.explanation and "cordoned" in orphan.explanation


@override_settings(GPUPORTAL_LEDGER={"orphan_after_s": 60, "stale_after_s": 90})
def test_a_failing_source_holds_its_nodes_no_orphan_opens_and_its_interval_stays_open(two_sources, rounds):
    two_sources.round(rounds(0))
    for n in range(1, 20):  # Slurm answers no more; Kubernetes still does
        record_failure(two_sources.slurm, "connection refused")
        two_sources.scrape_k8s(rounds(n))
        ledger.evaluate(rounds(n))
    assert LedgerFinding.objects.count() == 0
    assert OwnershipInterval.objects.filter(orchestrator=two_sources.slurm, ended_at__isnull=True).count() == 2
    assert ledger_reads.ledger_status().stale_sources == ("slurm-hpc",)


@override_settings(GPUPORTAL_LEDGER={"orphan_after_s": 60, "stale_after_s": 90})
def test_a_source_that_stops_answering_without_an_error_is_stale_after_the_setting(two_sources, rounds):
    two_sources.round(rounds(0))
    later = rounds(0) + timedelta(seconds=91)
    two_sources.scrape_k8s(later)
    assert ledger.evaluate(later).stale_sources == ("slurm-hpc",)


@override_settings(GPUPORTAL_REBALANCE={"drain_timeout_s": 600})
def test_a_plan_step_draining_past_the_drain_timeout_is_a_stuck_transition(two_sources, rounds):
    two_sources.round(rounds(0))
    node = Node.objects.get(name="dgx02")
    plan = RebalancePlan.objects.create(state=RebalancePlan.State.APPLYING, dry_run=False)
    move = NodeMove.objects.create(
        plan=plan, node=node, source=two_sources.slurm, target=two_sources.k8s, state=NodeMove.State.DRAINING
    )
    NodeMove.objects.filter(pk=move.pk).update(updated_at=rounds(0))
    two_sources.slurm_owns.discard("dgx02")
    two_sources.round(rounds(10))
    assert live().count() == 0  # 300 s into a 600 s drain: in transition, neither stuck nor orphaned
    two_sources.round(rounds(21))
    stuck = live(LedgerFinding.Kind.STUCK_TRANSITION).get()
    assert stuck.node == "dgx02" and f"Plan #{plan.pk}" in stuck.explanation
    plan.state = RebalancePlan.State.FAILED
    plan.save()
    two_sources.round(rounds(22))
    assert live(LedgerFinding.Kind.STUCK_TRANSITION).count() == 0


@override_settings(GPUPORTAL_LEDGER={"phantom_after_s": 60})
def test_gpus_slurm_counts_allocated_with_no_job_behind_them_are_a_phantom_allocation(two_sources, rounds):
    leaky = {"dgx01": {"gpu_allocated": 8}}
    jobs = (running("41", "dgx01", 4),)
    two_sources.scrape_slurm(rounds(0), workloads=jobs, **leaky)
    two_sources.scrape_k8s(rounds(0))
    ledger.evaluate(rounds(0))
    assert SourceView.objects.get(orchestrator=two_sources.slurm, name="dgx01").gpu_backed == 4
    for n in (1, 2):
        two_sources.scrape_slurm(rounds(n), workloads=jobs, **leaky)
        ledger.evaluate(rounds(n))
    phantom = live(LedgerFinding.Kind.PHANTOM_ALLOCATION).get()
    assert phantom.node == "dgx01" and "4 GPUs are held by nothing" in phantom.explanation


def test_an_orchestrator_reporting_fewer_gpus_than_the_inventory_is_a_capacity_mismatch(two_sources, rounds):
    two_sources.round(rounds(0), dgx01={"gpu_total": 7})
    finding = live(LedgerFinding.Kind.CAPACITY_MISMATCH).get()
    assert finding.node == "dgx01" and "reports 7 GPUs" in finding.explanation
    two_sources.round(rounds(1))
    assert live().count() == 0


def test_an_unknown_node_is_found_and_adopting_it_into_the_inventory_clears_it(two_sources, rounds):
    FleetHost.objects.filter(name="dgx04").delete()
    two_sources.round(rounds(0))
    unknown = live(LedgerFinding.Kind.UNKNOWN_NODE)
    assert sorted(unknown.values_list("orchestrators", flat=True)) == ["k8s-serving", "slurm-hpc"]
    adopted = ledger.adopt_hosts(reason="first install")
    assert [h.name for h in adopted] == ["dgx04"] and adopted[0].gpu_total == 8
    assert adopted[0].history.first().history_change_reason == "first install"
    two_sources.round(rounds(1))
    assert live().count() == 0


def test_an_alias_joins_a_node_a_source_names_by_its_address(two_sources, rounds):
    ray = Orchestrator.objects.create(name="ray-sweeps", kind="ray", endpoint="http://127.0.0.1:3")
    alive = ObservedNode(name="10.0.0.4", orchestrator="ray-sweeps", gpu_total=8, state="alive", schedulable=True)
    snapshot = Snapshot("ray-sweeps", OrchestratorKind.RAY, rounds(0), (alive,), ())
    ingest_snapshot(ray, snapshot)
    two_sources.round(rounds(0))
    assert set(live().values_list("kind", "node")) == {("unknown_node", "10.0.0.4")}
    NodeAlias.objects.create(orchestrator=ray, name="10.0.0.4", host=FleetHost.objects.get(name="dgx04"))
    ingest_snapshot(ray, replace(snapshot, taken_at=rounds(1)))
    two_sources.round(rounds(1))
    double = live(LedgerFinding.Kind.DOUBLE_OWNERSHIP).get()
    assert double.node == "dgx04" and double.orchestrators == "k8s-serving,ray-sweeps"
    assert live(LedgerFinding.Kind.UNKNOWN_NODE).count() == 0


def test_the_weekly_report_selector_gives_each_finding_open_inside_the_window(two_sources, rounds):
    two_sources.k8s_owns.add("dgx02")
    two_sources.round(rounds(0))
    two_sources.slurm_owns.discard("dgx02")
    two_sources.round(rounds(4))
    records = ledger_reads.ledger_findings_between(rounds(2), rounds(100))
    (record,) = records
    assert record.kind == "double_ownership" and record.open_seconds_in_window == 60
    assert record.orchestrators == ("k8s-serving", "slurm-hpc")
    assert ledger_reads.ledger_findings_between(rounds(5), rounds(100)) == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_evaluating_at_once_leave_one_live_finding_per_condition():
    require_postgres()
    from .conftest import Fleet

    fleet = Fleet()
    fleet.k8s_owns.add("dgx02")
    fleet.scrape_slurm(T0)
    fleet.scrape_k8s(T0)
    errors: list[BaseException] = []

    def evaluate():
        try:
            ledger.evaluate(T0)
        except BaseException as error:  # surfaced in the assertion below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert LedgerFinding.objects.filter(kind="double_ownership", closed_at__isnull=True).count() == 1
    assert OwnershipInterval.objects.filter(node="dgx02", ended_at__isnull=True).count() == 2
