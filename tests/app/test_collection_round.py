"""collection.run_round: the demo federation advances in-process, each real orchestrator's scrape is handed to
the enqueue it is given (the Celery task passes its scrape task's ``delay``), a fragmentation sample is kept."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import FragmentationSample, Orchestrator
from scheduling.services import collection, demo, kubernetes_watch

pytestmark = pytest.mark.django_db


def test_a_round_advances_the_demo_and_enqueues_one_scrape_per_enabled_real_orchestrator():
    demo.create_demo_federation()
    real = Orchestrator.objects.create(name="slurm-real", kind="slurm", endpoint="http://127.0.0.1:9")
    Orchestrator.objects.create(name="off", kind="ray", endpoint="http://127.0.0.1:9", enabled=False)
    queued: list[int] = []
    result = collection.run_round(enqueue_scrape=queued.append)
    assert queued == [real.pk]
    assert result is not None  # the demo round ran (what it started depends on the wall clock)
    assert FragmentationSample.objects.count() == 1


def test_without_a_demo_federation_a_round_only_enqueues_the_scrapes(orchestrator):
    queued: list[int] = []
    assert collection.run_round(enqueue_scrape=queued.append) is None
    assert queued == [orchestrator.pk]


def test_a_source_a_watch_process_marks_is_left_to_it_until_its_mark_runs_out():
    watched = Orchestrator.objects.create(name="k8s-watched", kind="kubernetes", endpoint="https://127.0.0.1:9")
    other = Orchestrator.objects.create(name="k8s-listed", kind="kubernetes", endpoint="https://127.0.0.1:9")
    kubernetes_watch.mark_watched(watched, interval_s=30)
    queued: list[int] = []
    collection.run_round(enqueue_scrape=queued.append)
    assert queued == [other.pk]
    Orchestrator.objects.filter(pk=watched.pk).update(watched_until=timezone.now() - timedelta(seconds=1))
    queued.clear()
    collection.run_round(enqueue_scrape=queued.append)
    assert sorted(queued) == sorted([watched.pk, other.pk]), "a watcher that stopped renewing: re-listed again"
