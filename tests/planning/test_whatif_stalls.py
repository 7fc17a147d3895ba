"""Issue 36 item 5: a what-if whose progress stopped says so on its page and status, and the reaper queues it
again after GPUPORTAL_REAPER_STALLED_AFTER_S of silence instead of leaving "Running — 99 %" for 70 minutes."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import WhatIfScenario
from scheduling.services import reaper, whatif

pytestmark = pytest.mark.django_db
INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}]}


def _stuck_at_99(cast, teams, silent_s: float) -> WhatIfScenario:
    scenario = whatif.submit(name="stuck", raw_inputs=INPUTS, by=cast["lead"], team=teams["research"])
    silent_since = timezone.now() - timedelta(seconds=silent_s)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(
        status=WhatIfScenario.Status.RUNNING, progress=99, attempts=1, heartbeat_at=silent_since
    )
    return WhatIfScenario.objects.get(pk=scenario.pk)


def test_a_run_whose_progress_stopped_says_when_and_that_it_stopped(client, cast, teams, recorded):
    scenario = _stuck_at_99(cast, teams, silent_s=600)
    client.force_login(cast["lead"])
    page = client.get(reverse("whatif-detail", args=[scenario.pk])).content.decode()
    assert "Last progress" in page and "No worker has made progress on this run since" in page
    status = client.get(reverse("whatif-status", args=[scenario.pk])).json()
    assert status["stalled"] is True and status["last_progress_at"] and "10 min" in status["note"]


def test_a_run_that_beats_is_not_called_stalled(client, cast, teams, recorded):
    scenario = _stuck_at_99(cast, teams, silent_s=5)
    client.force_login(cast["lead"])
    status = client.get(reverse("whatif-status", args=[scenario.pk])).json()
    assert status["stalled"] is False and status["note"] == ""


def test_the_reaper_queues_a_stalled_run_again_and_the_new_start_finishes_it(
    cast, teams, recorded, settings, django_capture_on_commit_callbacks
):
    scenario = _stuck_at_99(cast, teams, silent_s=settings.GPUPORTAL_REAPER["stalled_after_s"] + 30)
    queued = []
    with django_capture_on_commit_callbacks(execute=True):  # the message goes out when the reaper commits
        counts = reaper.reap(enqueue_whatif=queued.append, enqueue_report=lambda pk: None)
    assert counts["whatif"]["requeued"] == 1 and queued == [scenario.pk]
    row = WhatIfScenario.objects.get(pk=scenario.pk)
    assert row.status == WhatIfScenario.Status.QUEUED and row.error.startswith("Queued again at")
    finished = whatif.run_scenario(scenario.pk)  # what the queued message does on a live worker
    assert finished.status == WhatIfScenario.Status.DONE and finished.attempts == 2
