"""Slurm accounting as a usage source (services/accounting.py): finished jobs from slurmdbd count once in the
job history the weekly report reads, whether or not a scrape saw them, and a failing slurmdbd only makes the
source stale."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.collectors.slurm_accounting import FinishedJob
from scheduling.collectors.snapshot import ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.types import OrchestratorKind
from scheduling.models import AccountingSource, UsageRollup, Workload
from scheduling.selectors.report import held_intervals
from scheduling.selectors.usage import gpu_hours_by_orchestrator, gpu_hours_by_team
from scheduling.services.accounting import OVERLAP, sync_accounting
from scheduling.services.ingest import ingest_snapshot

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EPOCH = int(T0.timestamp())


def finished(job_id: str, account: str, gpus: int, start: int, seconds: int, state: str = "COMPLETED") -> FinishedJob:
    return FinishedJob(job_id, account, "alice", state, gpus, start, start + seconds, start - 5)


def reading(*jobs: FinishedJob):
    """A reader that answers ``jobs`` and remembers the windows it was asked for."""
    windows: list[tuple[float, float]] = []

    def read(start: float, end: float) -> list[FinishedJob]:
        windows.append((start, end))
        return list(jobs)

    read.windows = windows  # type: ignore[attr-defined]
    return read


def gpu_seconds_by_team(since: datetime, until: datetime) -> dict[int | None, float]:
    totals: dict[int | None, float] = {}
    for item in held_intervals(since, until):
        totals[item.team_id] = totals.get(item.team_id, 0.0) + item.gpus * (item.end - item.start).total_seconds()
    return totals


def test_a_job_shorter_than_a_round_that_no_scrape_saw_counts_in_the_job_history(orchestrator, teams):
    sync_accounting(orchestrator, reading(finished("41", "production", 2, EPOCH + 3, 7)), now=T0 + timedelta(minutes=1))
    (job,) = Workload.objects.all()
    assert (job.external_id, job.team, job.state, job.gpus) == ("41", teams["production"], "completed", 2)
    assert gpu_seconds_by_team(T0, T0 + timedelta(hours=1)) == {teams["production"].pk: 14.0}


def test_a_job_a_scrape_saw_running_is_the_same_row_with_slurmdbds_end_time(orchestrator, teams):
    seen = ObservedWorkload(
        external_id="42", orchestrator="slurm-a", team="research", state=WorkloadState.RUNNING, gang_size=2,
        gpus_per_member=4, submitted_at=EPOCH - 60, started_at=EPOCH,
    )  # fmt: skip
    ingest_snapshot(orchestrator, Snapshot("slurm-a", OrchestratorKind.SLURM, T0 + timedelta(seconds=30), (), (seen,)))
    ingest_snapshot(
        orchestrator, Snapshot("slurm-a", OrchestratorKind.SLURM, T0 + timedelta(seconds=60), (), ())
    )  # gone: closed
    assert Workload.objects.get().finished_at == T0 + timedelta(seconds=60)  # the scrape's round, not the end
    sync_accounting(orchestrator, reading(finished("42", "research", 8, EPOCH, 40)), now=T0 + timedelta(minutes=2))
    (job,) = Workload.objects.all()
    assert (job.gang_size, job.gpus_per_member, job.finished_at) == (2, 4, T0 + timedelta(seconds=40))
    assert gpu_seconds_by_team(T0, T0 + timedelta(hours=1)) == {teams["research"].pk: 320.0}


def test_reading_the_same_jobs_again_writes_nothing_and_counts_nothing_twice(orchestrator, teams):
    read = reading(finished("43", "research", 1, EPOCH, 10), finished("44_3", "nlp", 4, EPOCH, 20, "TIMEOUT"))
    first = sync_accounting(orchestrator, read, now=T0 + timedelta(minutes=1))
    again = sync_accounting(orchestrator, read, now=T0 + timedelta(minutes=2))
    assert (first.jobs_recorded, again.jobs_recorded, Workload.objects.count()) == (2, 0, 2)
    assert Workload.objects.get(external_id="44_3").state == "failed"
    assert gpu_seconds_by_team(T0, T0 + timedelta(hours=1)) == {teams["research"].pk: 10.0, teams["nlp"].pk: 80.0}


def test_each_read_starts_a_little_before_the_last_one_ended(orchestrator):
    read = reading()
    sync_accounting(orchestrator, read, now=T0)
    sync_accounting(orchestrator, read, now=T0 + timedelta(minutes=1))
    assert read.windows[1] == ((T0 - OVERLAP).timestamp(), (T0 + timedelta(minutes=1)).timestamp())


def test_jobs_without_gpus_are_not_tracked(orchestrator):
    sync_accounting(orchestrator, reading(finished("45", "research", 0, EPOCH, 10)), now=T0)
    assert not Workload.objects.exists()


def test_a_failing_slurmdbd_makes_the_source_stale_and_erases_nothing(orchestrator, teams):
    good = sync_accounting(orchestrator, reading(finished("46", "research", 2, EPOCH, 10)), now=T0)
    orchestrator.options = {"accounting": {"sacct": "/nonexistent/sacct"}}  # a sacct that cannot run
    orchestrator.save()
    stale = sync_accounting(orchestrator, now=T0 + timedelta(minutes=1))
    assert stale.stale and "nonexistent" in stale.last_error
    assert (stale.read_until, stale.last_success_at) == (good.read_until, T0)
    assert Workload.objects.get().finished_at == T0 + timedelta(seconds=10)


def test_an_orchestrator_without_accounting_reads_nothing(orchestrator):
    assert sync_accounting(orchestrator) is None
    assert not AccountingSource.objects.exists()


def test_the_orchestrators_page_shows_a_stale_accounting_source_with_its_error(orchestrator, client, django_user_model):
    sync_accounting(orchestrator, reading(finished("47", "research", 1, EPOCH, 10)), now=T0)
    orchestrator.options = {"accounting": {"sacct": "/nonexistent/sacct"}}
    orchestrator.save()
    sync_accounting(orchestrator, now=T0 + timedelta(minutes=1))
    client.force_login(django_user_model.objects.create_superuser("root", password="x"))
    page = client.get("/orchestrators/").content.decode()
    assert 'accounting: <span class="badge bad">stale</span>' in page and "nonexistent" in page


def team_gpu_hours(slug: str) -> float:
    rows = {row.key: row for row in gpu_hours_by_team(T0, T0 + timedelta(hours=1))}
    return rows[slug].allocated_h


def test_a_10_s_job_no_scrape_saw_counts_in_the_utilisation_gpu_hours(orchestrator, teams):
    sync_accounting(
        orchestrator, reading(finished("51", "production", 8, EPOCH + 5, 10)), now=T0 + timedelta(minutes=1)
    )
    assert team_gpu_hours("production") * 3600 == pytest.approx(80.0)
    pools = {row.key: row for row in gpu_hours_by_orchestrator(T0, T0 + timedelta(hours=1))}
    assert pools["slurm-a"].allocated_h * 3600 == pytest.approx(80.0)
    # reading it again rebuilds the same hour: still counted once
    sync_accounting(
        orchestrator, reading(finished("51", "production", 8, EPOCH + 5, 10)), now=T0 + timedelta(minutes=2)
    )
    assert team_gpu_hours("production") * 3600 == pytest.approx(80.0)


def test_a_job_crossing_the_hour_counts_in_both_hours(orchestrator, teams):
    start = EPOCH + 3600 - 4  # 4 s before 13:00, 6 s after
    sync_accounting(orchestrator, reading(finished("52", "research", 2, start, 10)), now=T0 + timedelta(hours=2))
    hours = {
        r.period_start: r.gpu_s_allocated for r in UsageRollup.objects.filter(resolution="hour", team=teams["research"])
    }
    assert sorted(hours.values()) == [pytest.approx(8.0), pytest.approx(12.0)]


def test_a_job_a_scrape_saw_running_is_counted_by_the_samples_only(orchestrator, teams, fleet):
    seen = ObservedWorkload(
        external_id="53", orchestrator="slurm-a", team="research", state=WorkloadState.RUNNING, gang_size=1,
        gpus_per_member=8, submitted_at=EPOCH - 60, started_at=EPOCH, nodes=("dgx00",),
    )  # fmt: skip
    ingest_snapshot(orchestrator, Snapshot("slurm-a", OrchestratorKind.SLURM, T0 + timedelta(seconds=30), (), (seen,)))
    ingest_snapshot(orchestrator, Snapshot("slurm-a", OrchestratorKind.SLURM, T0 + timedelta(seconds=60), (), ()))
    sampled = team_gpu_hours("research")
    assert sampled > 0
    sync_accounting(orchestrator, reading(finished("53", "research", 8, EPOCH, 45)), now=T0 + timedelta(minutes=2))
    assert team_gpu_hours("research") == pytest.approx(sampled)
