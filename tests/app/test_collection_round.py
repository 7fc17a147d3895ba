"""collection.run_round: the demo federation advances in-process, each real orchestrator's scrape is handed to
the enqueue it is given (the Celery task passes its scrape task's ``delay``), a fragmentation sample is kept."""

import pytest

from scheduling.models import FragmentationSample, Orchestrator
from scheduling.services import collection, demo

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
