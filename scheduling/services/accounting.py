"""Slurm accounting as a usage source: finished jobs from slurmdbd become (or correct) ``Workload`` rows.

The weekly report and per-account GPU-hours count job intervals (``selectors/report.held_intervals``), so a
job that started and ended between two scrapes, which no scrape ever listed, counts once it is read here.
Each job is keyed by its Slurm id, the scrape's ``external_id`` (``123``, array task ``45_6``): a job a scrape
saw running is the same row, its end time corrected from the scrape's round to slurmdbd's record, so nothing
is counted twice, and reading a job again writes nothing. A read that fails marks the source stale
(``AccountingSource.last_error``) and touches no job.
"""

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scheduling.collectors import CollectorError
from scheduling.collectors.slurm_accounting import FinishedJob
from scheduling.engine.owners import Claim, NameKind
from scheduling.models import AccountingSource, Orchestrator, Team, Workload

from . import identity
from .bulk import chunks, field_values, write_rows
from .metrics import refresh_rollups
from .orchestrators import AccountingReader, accounting_reader, masked, teams_of

# Each read starts this far before the last one ended: slurmdbd learns of a job's end late when slurmctld
# queued the message while slurmdbd was away, and a scrape racing the job's end may have reopened the row.
OVERLAP = timedelta(minutes=15)
FIRST_READ = timedelta(days=1)  # how far back the first read of a new source reaches

FINAL_STATES = {
    "COMPLETED": Workload.State.COMPLETED,
    "CANCELLED": Workload.State.CANCELLED,
    "PREEMPTED": Workload.State.PREEMPTED,
}  # every other end (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...) is a failure
ACCOUNTED_FIELDS = [
    "team", "user", "cluster_user", "state", "gang_size", "gpus_per_member", "started_at", "finished_at"
]


def sync_accounting(
    orchestrator: Orchestrator, reader: AccountingReader | None = None, now: datetime | None = None
) -> AccountingSource | None:
    """Read the finished jobs since the last good read and record them; ``None`` without accounting."""
    try:
        reader = reader or accounting_reader(orchestrator)
    except CollectorError as error:  # refused endpoint or credentials: stale, like a failed read
        return _mark_stale(orchestrator, str(error), now or timezone.now())
    if reader is None:
        return None
    now = now or timezone.now()
    source, _ = AccountingSource.objects.get_or_create(orchestrator=orchestrator)
    since = source.read_until - OVERLAP if source.read_until else now - FIRST_READ
    try:
        jobs = [job for job in reader(since.timestamp(), now.timestamp()) if job.gpus]
    except CollectorError as error:
        return _mark_stale(orchestrator, str(error), now)
    with transaction.atomic():
        written = record_finished_jobs(orchestrator, jobs)
        AccountingSource.objects.filter(pk=source.pk).update(read_until=now, last_success_at=now, jobs_recorded=written)
        if written:  # jobs shorter than a round join the utilisation rollups (metrics._add_unsampled_jobs)
            refresh_rollups(_at(min(j.start for j in jobs)), _at(max(j.end for j in jobs)))
    source.refresh_from_db()
    return source


def _mark_stale(orchestrator: Orchestrator, error: str, now: datetime) -> AccountingSource:
    source, _ = AccountingSource.objects.get_or_create(orchestrator=orchestrator)
    source.last_error, source.last_error_at = masked(error, orchestrator)[:2000], now
    source.save(update_fields=["last_error", "last_error_at"])
    return source


def record_finished_jobs(orchestrator: Orchestrator, jobs: Iterable[FinishedJob]) -> int:
    """Create or correct one ``Workload`` per finished GPU job (jobs without GPUs are not tracked, as in the
    scrape); returns how many rows were written."""
    by_id = {job.job_id: job for job in jobs if job.gpus}
    stored = {
        row.external_id: row
        for chunk in chunks(list(by_id))
        for row in Workload.objects.filter(orchestrator=orchestrator, external_id__in=chunk)
    }
    teams = teams_of(orchestrator)
    team_ids = dict(Team.objects.values_list("slug", "pk"))
    owners = identity.owner_map(Claim(NameKind.SLURM_USER, job.user) for job in by_id.values())
    new, changed = [], []
    for job_id, job in by_id.items():
        row = stored.get(job_id) or Workload(
            orchestrator=orchestrator, external_id=job_id, submitted_at=_at(job.submitted)
        )
        before = field_values(row, ACCOUNTED_FIELDS) if row.pk else None
        _fill(row, job, team_ids.get(teams.slurm_team(job.account, job.user)))
        row.user = owners.owner((Claim(NameKind.SLURM_USER, job.user),), orchestrator.name).username
        if row.pk is None:
            new.append(row)
        elif field_values(row, ACCOUNTED_FIELDS) != before:
            changed.append(row)
    # Two workers may read the same window at once (the read runs after the scrape's lease is released): the
    # second one's rows are the same jobs with the same values, so its conflicting inserts are skipped.
    Workload.objects.bulk_create(new, batch_size=1000, ignore_conflicts=True)
    write_rows(Workload, changed, [*ACCOUNTED_FIELDS, "pending_reason"])
    return len(new) + len(changed)


def _fill(row: Workload, job: FinishedJob, team_id: int | None) -> None:
    row.team_id, row.cluster_user, row.state = team_id, job.user, FINAL_STATES.get(job.state, Workload.State.FAILED)
    # Keep the scrape's gang shape when it still multiplies to the GPUs slurmdbd allocated.
    gang = row.gang_size if row.pk and row.gang_size and job.gpus % row.gang_size == 0 else 1
    row.gang_size, row.gpus_per_member = gang, job.gpus // gang
    row.started_at, row.finished_at, row.pending_reason = _at(job.start), _at(job.end), ""


def _at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)
