"""Issue 36, Medium 10: rounds queued up while no worker ran, then served by a real worker of two processes.

After a worker outage the queued collection rounds ran two at a time and one failed on the rollup's unique
constraint. Now one round runs at a time (the round lease; the others skip) and a rollup rebuild waits for the
one before it, so none fails and every (resolution, period, source, team) has one rollup row. Private
PostgreSQL and Redis (tests/security/processes.py), the real ``run_round`` task and demo federation.

The race needs a rebuild still open when the next begins; a busy database makes that window long. Here a
reader holding today's day rollups (as a long report query under lock would) stands for the busy database:
the first rebuild waits on it with its hour rows written and uncommitted, whatever the machine's speed.
"""

import time

import psycopg
import pytest
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from scheduling.models import CollectorRun, UsageRollup, UsageSample
from scheduling.services import demo
from scheduling.services.metrics import refresh_rollups

from .processes import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
QUEUED_ROUNDS = 8


def _rollups_so_far() -> None:
    """Today's rollups of a first sample per demo source: the rows the next rebuild deletes and writes again."""
    now = timezone.now()
    UsageSample.objects.bulk_create(
        UsageSample(taken_at=now, orchestrator=source, gpus_total=64) for source in demo.demo_orchestrators()
    )
    refresh_rollups(now, now)


def _rebuilds_waiting() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


def _eventually(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_rounds_queued_while_no_worker_ran_never_fail_on_a_worker_of_two_processes(
    private_database, private_redis, producer, workers
):
    demo.create_demo_federation()
    _rollups_so_far()
    with psycopg.connect(private_database.url) as busy:
        busy.execute("SELECT id FROM scheduling_usagerollup WHERE resolution = 'day' FOR SHARE").fetchall()
        queued = [producer.send_task("scheduling.tasks.run_round") for _ in range(QUEUED_ROUNDS)]  # nobody serves
        workers.start(database_url=private_database.url, broker_url=private_redis.url, concurrency=2)
        wait_for(lambda: _rebuilds_waiting() >= 1, "the first rollup rebuild to wait on the busy database")
        # The worker's second process takes the next queued round meanwhile: on main it reached the rebuild
        # too (two waiting); now it skips the round (the lease) or waits its turn for the rebuild.
        _eventually(lambda: _rebuilds_waiting() >= 2, 20)
        busy.commit()
    wait_for(lambda: all(result.ready() for result in queued), "the worker to serve every queued round", timeout=180)
    failures = [str(result.result) for result in queued if result.failed()]
    # On main: IntegrityError "duplicate key value violates unique constraint one_rollup_per_period".
    assert failures == []
    answers = [result.result for result in queued]
    assert any(not answer.get("skipped") for answer in answers), answers  # at least one round did the work
    duplicated = (
        UsageRollup.objects.values("resolution", "period_start", "orchestrator", "team")
        .annotate(rows=Count("pk"))
        .filter(rows__gt=1)
    )
    assert list(duplicated) == []
    assert UsageRollup.objects.exists() and CollectorRun.objects.exists()
