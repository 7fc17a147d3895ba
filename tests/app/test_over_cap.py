""""In use" above a team's cap (burst limit + grants in force) says why (issue 31 item 5): work started before
the limit was lowered, work on orchestrators where no team cap holds (Ray, ungoverned), and the rest held above its
share where it runs, which reclaim takes back."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import Orchestrator, Workload
from tests.support import active_grant, set_queue

pytestmark = pytest.mark.django_db


def _running(orchestrator, team, external_id, gpus, started):
    return Workload.objects.create(
        orchestrator=orchestrator, team=team, user="rita", external_id=external_id, gpus_per_member=gpus,
        state="running", submitted_at=started - timedelta(minutes=1), started_at=started,
    )  # fmt: skip


def _note(client, user, slug: str) -> str:
    client.force_login(user)
    body = client.get(reverse("quota-new")).content.decode()
    marker = f'<tr class="over-cap" data-team="{slug}"><td colspan="6" class="small">'
    return body.split(marker, 1)[1].split("</td>", 1)[0] if marker in body else ""


def test_in_use_above_the_burst_limit_is_explained_part_by_part(client, cast, teams, queues, orchestrator, fleet):
    hpc = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint="https://hpc.example:6820")
    ray = Orchestrator.objects.create(name="ray-a", kind="ray", endpoint="http://ray.example:8265")
    long_ago = timezone.now() - timedelta(days=2)
    _running(hpc, teams["nlp"], "old", 16, long_ago)  # before the limit is lowered below
    set_queue(teams["nlp"], weight=Decimal(100), guaranteed=4, burst_limit=8, by=cast["admin"], reason="tighter")
    _running(ray, teams["nlp"], "sweep", 8, timezone.now())
    _running(hpc, teams["nlp"], "new", 12, timezone.now())
    note = _note(client, cast["researcher"], "nlp")
    lowered = note.split("lowered on ", 1)[1].split(" UTC", 1)[0]
    assert note == (
        f"36 in use, 28 above its cap of 8: 16 started before the limit was lowered on {lowered} UTC; "
        "8 on Ray ray-a (team caps observed, not enforced); "
        "4 held above its share where they run, only because they were running already; reclaim takes them back"
    )


def test_a_grant_is_part_of_the_cap_it_is_measured_against(client, cast, teams, queues, orchestrator, fleet):
    """nlp (burst limit 32) with a live grant of 8 runs 44: 4 above its cap of 40, not 12 above 32."""
    active_grant(teams["nlp"], cast["researcher"], 8)
    _running(orchestrator, teams["nlp"], "big", 44, timezone.now())
    note = _note(client, cast["researcher"], "nlp")
    assert note.startswith("44 in use, 4 above its cap of 40 (burst limit 32 + 8 granted): ")


def test_a_team_within_its_limit_gets_no_note(client, cast, teams, queues, orchestrator, fleet):
    _running(orchestrator, teams["nlp"], "small", 4, timezone.now())
    assert _note(client, cast["researcher"], "nlp") == ""
