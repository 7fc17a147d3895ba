"""A source whose every round runs in one process (the Kubernetes watcher) is ingested from a memo of its last
committed round: only what changed is written. What is stored must be exactly what a full round stores, round
after round, and the memo must never be trusted after a round it remembers did not commit or after a mapping
the rows are derived with changed."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.collectors.snapshot import ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.owners import Claim, NameKind
from scheduling.engine.types import OrchestratorKind
from scheduling.models import IdentityOverride, Node, SourceView, Workload
from scheduling.services import ingest
from scheduling.services.ingest import forget_rounds, ingest_snapshot, remember_rounds

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NODES = [f"dgx{i:02d}" for i in range(5)]
JOBS = [f"j{i}" for i in range(8)]

node_versions = st.builds(
    lambda name, allocated, down: ObservedNode(
        name=name, orchestrator="slurm-a", gpu_total=8, gpu_allocated=allocated, gpu_model="H100",
        state="down" if down else "", labels={"rack": name[-1]},
    ),
    st.sampled_from(NODES), st.integers(0, 8), st.booleans(),
)  # fmt: skip
job_versions = st.builds(
    lambda job_id, running, team, user, node: ObservedWorkload(
        external_id=job_id, orchestrator="slurm-a", team=team,
        state=WorkloadState.RUNNING if running else WorkloadState.PENDING, gpus_per_member=8,
        submitted_at=T0.timestamp() - 60, nodes=(node,) if running else (), user=user,
        claims=(Claim(NameKind.SLURM_USER, user),),
    ),
    st.sampled_from(JOBS), st.booleans(), st.sampled_from(["nlp", "production", "nobody"]),
    st.sampled_from(["rita", "root"]), st.sampled_from(NODES),
)  # fmt: skip
# A round keeps each object of the last one (the very same object, as the collector's own memo does), drops
# it, or lists a new version: per name, one of those.
round_changes = st.lists(st.one_of(node_versions, job_versions, st.sampled_from(NODES + JOBS)), max_size=6)


def _rounds(changes_per_round):
    nodes: dict[str, ObservedNode] = {n: ObservedNode(name=n, orchestrator="slurm-a", gpu_total=8) for n in NODES}
    jobs: dict[str, ObservedWorkload] = {}
    rounds = []
    for number, changes in enumerate(changes_per_round):
        for change in changes:
            if isinstance(change, ObservedNode):
                nodes[change.name] = change
            elif isinstance(change, ObservedWorkload):
                jobs[change.external_id] = change
            else:
                nodes.pop(change, None), jobs.pop(change, None)
        at = T0 + timedelta(seconds=30 * number)
        rounds.append(Snapshot("slurm-a", OrchestratorKind.SLURM, at, tuple(nodes.values()), tuple(jobs.values())))
    return rounds


def _stored(orchestrator):
    nodes = Node.objects.order_by("name").values_list(
        "name", "orchestrator_id", "state", "gpu_allocated", "labels", "last_seen_at"
    )
    workloads = Workload.objects.order_by("external_id").values_list(
        "external_id", "state", "finished_at", "started_at", "user", "cluster_user", "team_id", "nodes"
    )
    views = SourceView.objects.order_by("name").values_list("name", "state", "gpu_allocated", "seen_at")
    return list(nodes), list(workloads), list(views)


def _ingest_all(orchestrator, rounds, remembered: bool):
    """Every round ingested in turn (the orchestrator re-read each time, as a scrape does); then rolled back."""
    if remembered:
        remember_rounds(orchestrator)
    try:
        with transaction.atomic():
            for snapshot in rounds:
                orchestrator.refresh_from_db()
                ingest_snapshot(orchestrator, snapshot)
            stored = _stored(orchestrator)
            transaction.set_rollback(True)
    finally:
        forget_rounds(orchestrator)
    return stored


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes_per_round=st.lists(round_changes, min_size=2, max_size=6))
def test_rounds_from_the_memo_store_exactly_what_full_rounds_store(orchestrator, teams, cast, changes_per_round):
    rounds = _rounds(changes_per_round)
    assert _ingest_all(orchestrator, rounds, remembered=True) == _ingest_all(orchestrator, rounds, remembered=False)


def _snapshot(at, *jobs):
    nodes = (ObservedNode(name="dgx01", orchestrator="slurm-a", gpu_total=8),)
    return Snapshot("slurm-a", OrchestratorKind.SLURM, at, nodes, tuple(jobs))


def _job(job_id, user="root"):
    return ObservedWorkload(
        external_id=job_id, orchestrator="slurm-a", team="nlp", state=WorkloadState.PENDING, gpus_per_member=8,
        submitted_at=T0.timestamp(), user=user, claims=(Claim(NameKind.SLURM_USER, user),),
    )  # fmt: skip


@pytest.fixture
def remembered(orchestrator):
    remember_rounds(orchestrator)
    yield orchestrator
    forget_rounds(orchestrator)


def test_a_round_that_did_not_commit_is_not_remembered(remembered, teams):
    first, second = _job("1"), _job("2")
    ingest_snapshot(remembered, _snapshot(T0, first))
    with pytest.raises(RuntimeError), transaction.atomic():
        ingest_snapshot(remembered, _snapshot(T0 + timedelta(seconds=30), first, second))
        raise RuntimeError("the scrape failed after ingesting (say, the drift check)")
    remembered.refresh_from_db()
    # The same objects again: only a memo that knows the last round was lost writes job 2 now.
    ingest_snapshot(remembered, _snapshot(T0 + timedelta(seconds=60), first, second))
    assert set(Workload.objects.values_list("external_id", flat=True)) == {"1", "2"}


def test_a_new_identity_mapping_rewrites_unchanged_workloads(remembered, teams, cast):
    job = _job("1")
    ingest_snapshot(remembered, _snapshot(T0, job))
    assert Workload.objects.get().user == ""
    IdentityOverride.objects.create(user=cast["researcher"], orchestrator=remembered, kind="slurm_user", name="root")
    remembered.refresh_from_db()
    ingest_snapshot(remembered, _snapshot(T0 + timedelta(seconds=30), job))
    assert Workload.objects.get().user == cast["researcher"].username


def test_a_row_written_by_someone_else_is_corrected_by_the_next_full_round(remembered, teams):
    job = _job("1")
    for round_number in range(ingest.FULL_ROUND_EVERY + 2):  # round 0 full, then 20 from the memo, then full
        if round_number == 1:
            Workload.objects.update(pending_reason="edited by hand")
        remembered.refresh_from_db()
        ingest_snapshot(remembered, _snapshot(T0 + timedelta(seconds=30 * round_number), replace(job)))
        if round_number == 1:
            assert Workload.objects.get().pending_reason == "edited by hand"  # an equal object: not compared
    assert Workload.objects.get().pending_reason == ""


def test_views_are_rewritten_only_where_they_changed_and_all_carry_the_rounds_time(orchestrator, teams):
    def node(name, allocated):
        return ObservedNode(name=name, orchestrator="slurm-a", gpu_total=8, gpu_allocated=allocated)

    first = Snapshot("slurm-a", OrchestratorKind.SLURM, T0, (node("a", 0), node("b", 0), node("c", 0)), ())
    ingest_snapshot(orchestrator, first)
    kept = SourceView.objects.get(name="a").pk
    later = T0 + timedelta(seconds=30)
    ingest_snapshot(orchestrator, replace(first, taken_at=later, nodes=(node("a", 0), node("b", 4))))
    views = {v.name: v for v in SourceView.objects.all()}
    assert set(views) == {"a", "b"}  # c is no longer listed
    assert views["a"].pk == kept and views["b"].gpu_allocated == 4
    assert {v.seen_at for v in views.values()} == {later}
