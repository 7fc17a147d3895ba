"""Issue 36, Medium 10: rounds are safe when queued up or redelivered. One collection round at a time (the
round lease, released only by its holder), and a rollup rebuild never fails on another's rows. The real
worker of two processes is in tests/security/test_faults_queued_rounds.py."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from scheduling import tasks
from scheduling.models import FragmentationSample, ReclaimPlan, RoundLease, UsageRollup, UsageSample
from scheduling.services import collection, demo, leases, reclaim
from scheduling.services.metrics import refresh_rollups
from tests.app.test_reclaim import borrowed  # noqa: F401  (recsys borrows hpc, nlp waits for its guarantee)


def _hold_the_round_lease():
    return leases.round_lease(collection.COLLECTION_ROUND, collection.round_lease_length())


@pytest.mark.django_db
def test_a_round_queued_while_another_runs_does_nothing(orchestrator):
    demo.create_demo_federation()
    queued: list[int] = []
    with _hold_the_round_lease() as token:
        assert token
        with pytest.raises(collection.RoundSkipped, match="holds the lease"):
            collection.run_round(enqueue_scrape=queued.append)
    assert queued == [] and not FragmentationSample.objects.exists()
    collection.run_round(enqueue_scrape=queued.append)  # the lease is free again
    assert queued == [orchestrator.pk] and FragmentationSample.objects.count() == 1


@pytest.mark.django_db
def test_the_round_task_answers_skipped_instead_of_failing():
    with _hold_the_round_lease():
        assert tasks.run_round() == {"started": 0, "finished": 0, "skipped": 1}


@pytest.mark.django_db
def test_a_failed_round_releases_its_lease():
    def broken(orchestrator_id):
        raise RuntimeError("broker gone")

    from scheduling.models import Orchestrator

    Orchestrator.objects.create(name="slurm-real", kind="slurm", endpoint="http://127.0.0.1:9")
    with pytest.raises(RuntimeError):
        collection.run_round(enqueue_scrape=broken)
    assert RoundLease.objects.get(kind=collection.COLLECTION_ROUND).lease_until is None


@pytest.mark.django_db
def test_a_lease_left_by_a_killed_round_is_taken_over_once_it_ran_out_and_only_its_holder_releases_it():
    with _hold_the_round_lease() as dead:
        row = RoundLease.objects.filter(kind=collection.COLLECTION_ROUND)
        assert row.get().lease_until - timezone.now() > timedelta(seconds=tasks.LIMITS["round"])
        with _hold_the_round_lease() as second:
            assert second is None  # the holder's time limit has not passed
        row.update(lease_until=timezone.now() - timedelta(seconds=1))  # its worker was killed long ago
        with _hold_the_round_lease() as taker:
            assert taker and taker != dead
            assert not leases.release(row, dead)  # the dead round's late release frees nothing
            assert row.get().lease_token == taker
    assert row.get().lease_token == ""  # released by the taker on its way out (and not by the dead one)


@pytest.mark.django_db
def test_a_reclaim_round_queued_while_another_runs_on_its_orchestrator_stores_no_second_plan(borrowed):  # noqa: F811
    with leases.round_lease(f"reclaim {borrowed.pk}", leases.outliving("default")) as token:
        assert token
        assert reclaim.reclaim_round(borrowed.pk) is None  # on main no lease: it stored (auto: applied) a plan
    assert not ReclaimPlan.objects.exists()
    assert reclaim.reclaim_round(borrowed.pk).state == ReclaimPlan.State.PENDING  # the lease is free again


def test_the_round_task_has_a_time_limit_its_lease_outlives(settings):
    assert tasks.run_round.time_limit == settings.GPUPORTAL_TASK_TIME_LIMITS["round"]
    assert collection.round_lease_length() > timedelta(seconds=tasks.run_round.time_limit)


@pytest.mark.django_db
def test_a_rollup_rebuilt_twice_has_one_row_per_key(orchestrator):
    now = timezone.now()
    UsageSample.objects.create(taken_at=now, orchestrator=orchestrator, gpus_total=8, gpus_allocated=4)
    assert refresh_rollups(now, now) == refresh_rollups(now, now) == 2  # one hour row, one day row
    assert UsageRollup.objects.count() == 2


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_rollup_rebuild_begun_while_another_is_uncommitted_waits_for_it_instead_of_failing(orchestrator):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite runs one writing transaction at a time")
    now = timezone.now()
    UsageSample.objects.create(taken_at=now, orchestrator=orchestrator, gpus_total=8, gpus_allocated=4)
    written, commit, outcomes = threading.Event(), threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                refresh_rollups(now, now)
                written.set()
                commit.wait(20)
            outcomes["first"] = "ok"
        finally:
            connections.close_all()

    def second():
        try:
            written.wait(20)
            refresh_rollups(now, now)
            outcomes["second"] = "ok"
        except Exception as error:  # on main: IntegrityError on one_rollup_per_period
            outcomes["second"] = f"{type(error).__name__}: {error}"
        finally:
            connections.close_all()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while _lock_waiters() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)  # the second rebuild is waiting on the first's uncommitted rows or lock
    commit.set()
    for thread in threads:
        thread.join(30)
    assert outcomes == {"first": "ok", "second": "ok"}
    assert UsageRollup.objects.count() == 2
