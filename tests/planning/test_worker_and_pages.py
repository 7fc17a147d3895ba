"""A real Celery worker on Redis runs a what-if; the pages and the API per role."""

import time

import pytest
from django.urls import reverse

from scheduling.models import WhatIfScenario
from scheduling.services import whatif
from tests.app.test_services_live import worker  # noqa: F401  (a real `celery worker` process on Redis)
from tests.support import in_process_app

INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}]}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_what_if_updates_progress_and_stores_results(worker, cast, teams, recorded):  # noqa: F811
    scenario = whatif.submit(
        name="worker",
        raw_inputs=INPUTS,
        by=cast["lead"],
        team=teams["research"],
        enqueue=lambda pk: worker.send_task("scheduling.tasks.run_whatif", args=[pk]),
    )
    seen = set()
    for _ in range(1200):  # polls until the worker finishes (bounded, never a timing assertion)
        row = WhatIfScenario.objects.get(pk=scenario.pk)
        seen.add(row.status)
        if row.status in (WhatIfScenario.Status.DONE, WhatIfScenario.Status.FAILED):
            break
        time.sleep(0.1)
    assert row.status == WhatIfScenario.Status.DONE, row.error
    assert row.progress == 100 and row.started_at and row.finished_at
    assert row.results["history"]["jobs"] == 302
    assert row.results["scenario"]["capacity_gpus"] == 32
    # The worker's stored result is the same as running the service here, in the test process.
    again = whatif.submit(name="here", raw_inputs=INPUTS, by=cast["lead"], team=teams["research"])
    WhatIfScenario.objects.filter(pk=again.pk).update(created_at=row.created_at)
    here = whatif.run_scenario(again.pk, app=in_process_app())
    strip = lambda r: {s: {k: v for k, v in r[s].items() if k != "wall_time_s"} for s in ("baseline", "scenario")}  # noqa: E731
    assert strip(here.results) == strip(row.results)


@pytest.fixture
def nobody(django_user_model):
    return django_user_model.objects.create_user("nemo", password="pw")


@pytest.fixture
def finished(cast, teams, recorded):
    return whatif.run_scenario(
        whatif.submit(name="shared", raw_inputs=INPUTS, by=cast["lead"], team=teams["research"]).pk
    )


def _client(client, user):
    client.force_login(user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "list_status", "has_form", "detail_status"),
    [
        ("admin", 200, True, 200),
        ("lead", 200, True, 200),
        ("nlp_lead", 200, True, 200),
        ("researcher", 200, False, 200),
        ("outsider", 200, False, 404),
    ],
)
def test_what_if_pages_follow_the_roles(client, cast, finished, role, list_status, has_form, detail_status):
    c = _client(client, cast[role])
    page = c.get(reverse("whatif"))
    assert page.status_code == list_status
    assert (b'id="whatif-form"' in page.content) == has_form
    assert (f"#{finished.pk} shared".encode() in page.content) == (detail_status == 200)
    detail = c.get(reverse("whatif-detail", args=[finished.pk]))
    assert detail.status_code == detail_status
    if detail_status == 200:
        assert b'id="comparison-table"' in detail.content and b'id="team-waits"' in detail.content
        assert b'class="plot" data-figure="' in detail.content  # drawn by static/js/charts.js


@pytest.mark.django_db
def test_a_user_in_no_team_is_refused_planning_pages(client, nobody, finished):
    c = _client(client, nobody)
    assert c.get(reverse("whatif")).status_code == 403
    assert c.get(reverse("forecast")).status_code == 403
    assert c.get(reverse("whatif-detail", args=[finished.pk])).status_code == 404


@pytest.mark.django_db
def test_a_researcher_cannot_post_a_scenario(client, cast, recorded):
    response = _client(client, cast["researcher"]).post(reverse("whatif"), {"name": "x", "weeks": 2, "seed": 0})
    assert response.status_code == 403 and not WhatIfScenario.objects.exists()


@pytest.mark.django_db
def test_the_form_names_the_field_and_the_rule(client, cast, teams, recorded):
    form = {
        "name": "too many",
        "team": teams["research"].pk,
        "weeks": 2,
        "seed": 0,
        "fleet_model": "H100",
        "fleet_nodes": -20,
    }
    response = _client(client, cast["lead"]).post(reverse("whatif"), form)
    assert response.status_code == 400
    assert b"cannot remove 20 H100 nodes: the fleet has 8" in response.content
    assert not WhatIfScenario.objects.exists()


@pytest.mark.django_db
def test_a_lead_submits_from_the_form_and_lands_on_the_progress_page(client, cast, teams, recorded, monkeypatch):
    from scheduling.views import planning

    queued = []
    monkeypatch.setattr(planning, "_enqueue", queued.append)
    form = {
        "name": "grow",
        "team": teams["research"].pk,
        "weeks": 2,
        "seed": 0,
        "fleet_model": "H100",
        "fleet_nodes": 4,
    }
    c = _client(client, cast["lead"])
    response = c.post(reverse("whatif"), form)
    scenario = WhatIfScenario.objects.get()
    assert response.status_code == 302 and response.url == reverse("whatif-detail", args=[scenario.pk])
    assert scenario.inputs["fleet"] == [{"gpu_model": "H100", "nodes": 4, "gpus_per_node": None}]
    page = c.get(response.url)
    assert b'id="whatif-progress"' in page.content
    status = c.get(reverse("whatif-status", args=[scenario.pk])).json()
    # issue 36: the status also says when the run last made progress and whether that stopped
    assert {k: status[k] for k in ("status", "progress", "error", "stalled", "note")} == {
        "status": "queued",
        "progress": 0,
        "error": "",
        "stalled": False,
        "note": "",
    }


@pytest.mark.django_db
def test_the_api_submits_and_polls(cast, teams, recorded, monkeypatch, django_capture_on_commit_callbacks):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    from scheduling.api import planning

    monkeypatch.setattr(planning, "_enqueue", lambda pk: whatif.run_scenario(pk))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['lead'])[1]}")
    bad = api.post(
        "/api/v1/whatif/",
        {"name": "x", "team": "research", "inputs": {"weeks": 99, "weights": {"nlp": 5}}},
        format="json",
    )
    assert bad.status_code == 400 and "between 1 and 12" in bad.json()["weeks"][0]
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post("/api/v1/whatif/", {"name": "api", "team": "research", "inputs": INPUTS}, format="json")
    assert created.status_code == 201
    polled = api.get(f"/api/v1/whatif/{created.json()['id']}/").json()
    assert (
        polled["status"] == "done"
        and polled["progress"] == 100
        and polled["results"]["scenario"]["capacity_gpus"] == 32
    )


@pytest.mark.django_db
def test_the_forecast_page_shows_the_visible_teams_and_says_when_history_is_short(client, cast, queues):
    page = _client(client, cast["researcher"]).get(reverse("forecast"))
    assert page.status_code == 200
    assert b"NLP: not enough history" in page.content and b"Production" not in page.content


@pytest.mark.django_db
def test_a_nul_in_a_team_slug_is_a_400_naming_the_field_not_a_server_error(cast, queues):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['admin'])[1]}")
    for path, body in (
        ("/api/v1/whatif/", {"name": "x", "team": "re\x00search", "inputs": INPUTS}),
        ("/api/v1/queues/", {"team": "n\x00lp", "weight": "1", "guaranteed": 0, "burst_limit": 0, "reason": "r"}),
    ):
        response = api.post(path, body, format="json")
        assert response.status_code == 400 and "NUL" in response.json()["team"][0], path
