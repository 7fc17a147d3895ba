"""My workloads: each role sees its own work (a lead also their teams'), every wait explained."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import Node, Workload
from scheduling.services import demo
from scheduling.views import workloads as view

pytestmark = pytest.mark.django_db

PAGE = reverse("my-workloads")


def workload(orchestrator, team, user, external_id, *, state="pending", gang=1, per=8, reason="", nodes=(), **extra):
    now = timezone.now()
    return Workload.objects.create(
        orchestrator=orchestrator, team=team, user=user, external_id=external_id, gang_size=gang, gpus_per_member=per,
        state=state, pending_reason=reason, submitted_at=now - timedelta(minutes=30),
        started_at=now - timedelta(minutes=20) if state == "running" else None, duration_estimate_s=3_600,
        nodes=list(nodes), **extra,
    )


@pytest.fixture
def jobs(orchestrator, fleet, teams, queues, cast):
    """nlp holds its burst limit (32) with rita's running gang; rita's next job waits at the cap."""
    Node.objects.filter(name__in=["dgx00", "dgx01", "dgx02", "dgx03"]).update(gpu_allocated=8)
    return {
        "running": workload(orchestrator, teams["nlp"], "rita", "1001", state="running", gang=4,
                            nodes=["dgx00", "dgx01", "dgx02", "dgx03"]),
        "capped": workload(orchestrator, teams["nlp"], "rita", "1002", reason="AssocGrpGRES"),
        "colleague": workload(orchestrator, teams["nlp"], "sam", "1003", reason="Priority"),
        "outsider": workload(orchestrator, teams["production"], "otto", "2001", reason="Resources"),
        "finished": workload(orchestrator, teams["nlp"], "rita", "0999", state="completed"),
    }


def page(client, user, **query):
    client.force_login(user)
    response = client.get(PAGE, query)
    assert response.status_code == 200
    return response.content.decode()


def test_a_researcher_sees_only_their_own_active_workloads(client, cast, jobs):
    body = page(client, cast["researcher"])
    assert "slurm-a:1001" in body and "slurm-a:1002" in body
    for other in ("1003", "2001", "0999"):
        assert f"slurm-a:{other}" not in body


def test_a_wait_at_the_team_cap_is_explained_with_a_request_quota_link_for_the_team(client, cast, jobs):
    body = page(client, cast["researcher"])
    assert "your team is at its GPU limit of 32 (burst): 32 in use, this job needs 8 more; request quota" in body
    assert f'href="{reverse("quota-new")}?team=nlp"' in body
    assert "Slurm says: AssocGrpGRES" in body


def test_a_lead_sees_the_teams_they_lead_and_below_on_the_team_tab(client, cast, jobs):
    body = page(client, cast["lead"], scope="team")
    assert "My team&#x27;s workloads" in body or "My team's workloads" in body
    for mine in ("1001", "1002", "1003"):
        assert f"slurm-a:{mine}" in body
    assert "slurm-a:2001" not in body


def test_a_lead_without_own_work_sees_an_empty_mine_tab(client, cast, jobs):
    body = page(client, cast["lead"])
    assert "slurm-a:" not in body
    assert "No running or pending workloads" in body


def test_an_outsider_sees_none_of_the_others_work_even_asking_for_the_team_tab(client, cast, jobs):
    body = page(client, cast["outsider"], scope="team")
    assert "slurm-a:2001" in body
    for other in ("1001", "1002", "1003"):
        assert f"slurm-a:{other}" not in body
    assert "?scope=team" not in body  # no team tab for someone who leads nothing


def test_the_job_id_search_box_narrows_the_list(client, cast, jobs):
    body = page(client, cast["researcher"], q="1002")
    assert "slurm-a:1002" in body and "slurm-a:1001" not in body
    assert 'value="1002"' in body


def test_a_pending_job_shows_its_queue_position_and_an_estimated_start(client, cast, jobs):
    body = page(client, cast["outsider"])
    row = body[body.index(f'id="workload-{jobs["outsider"].pk}"'):]
    row = row[:row.index("</tr>")]
    assert "<td>#3</td>" in row  # behind rita's and sam's jobs, submitted at the same moment but filed earlier
    assert "the GPUs it needs are free, but 2 workloads ahead of it go first; #3 in the slurm-a queue" in row


def test_an_unknown_scope_is_a_bad_query(client, cast, jobs):
    client.force_login(cast["researcher"])
    assert client.get(PAGE, {"scope": "everyone"}).status_code == 400


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(PAGE)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_the_navigation_links_to_my_workloads(client, cast, jobs):
    assert f'href="{PAGE}" aria-current="page"' in page(client, cast["researcher"])


def test_the_page_reads_the_demo_federation_and_explains_alices_waits(client, django_user_model):
    demo.create_demo_federation()
    demo.fill_history(days=0.1, step_s=600)
    client.force_login(django_user_model.objects.get(username="alice"))
    pending = {str(pk) for pk in Workload.objects.filter(user="alice", state="pending").values_list("pk", flat=True)}
    body = client.get(PAGE).content.decode()
    shown = re.findall(r'<tr id="workload-(\d+)"', body)
    first = shown[: min(len(pending), view.PAGE_SIZE)]
    assert set(first) <= pending and len(first) == min(len(pending), view.PAGE_SIZE)  # pending first, paged
    assert 'data-code="' in body or not pending


def test_alices_demo_workloads_say_why_they_wait(client, django_user_model):
    demo.create_demo_federation()
    demo.fill_history(days=0.1, step_s=600)
    from scheduling.models import Orchestrator, Team

    slurm = Orchestrator.objects.get(name="slurm-hpc")
    job = workload(slurm, Team.objects.get(slug="nlp"), "alice", "alice-capped-1", reason="AssocGrpGRES")
    client.force_login(django_user_model.objects.get(username="alice"))
    body = client.get(PAGE, {"q": "alice-capped"}).content.decode()
    assert f'id="workload-{job.pk}"' in body
    assert "your team is at its GPU limit of" in body
    assert f'href="{reverse("quota-new")}?team=nlp"' in body


def test_a_long_list_is_paged_and_only_the_page_shown_is_explained(client, cast, jobs, monkeypatch):
    from scheduling.selectors import workloads as reads

    monkeypatch.setattr(view, "PAGE_SIZE", 1)
    explained = []
    real = reads.explain_wait
    monkeypatch.setattr(reads, "explain_wait", lambda request, *a, **k: explained.append(request.id) or real(
        request, *a, **k))
    first = page(client, cast["researcher"])
    assert "2 workloads, 1–1 shown (pending first, newest first)" in first and "Page 1 of 2" in first
    assert "slurm-a:1002" in first and "slurm-a:1001" not in first  # pending first
    assert explained == [str(jobs["capped"].pk)]
    second = page(client, cast["researcher"], page=2)
    assert "slurm-a:1001" in second and "slurm-a:1002" not in second and 'rel="prev"' in second
    assert page(client, cast["researcher"], page="x").count('<tr id="workload-') == 1  # a bad page: the first


def test_the_team_page_links_to_the_explained_waits(client, cast, jobs, teams):
    client.force_login(cast["lead"])
    body = client.get(reverse("team-detail", args=["nlp"])).content.decode()
    assert f'href="{PAGE}?scope=team"' in body


def test_pages_reuse_the_pools_snapshot_and_start_plan_until_the_cache_lets_the_snapshot_go(jobs):
    """The second page within the snapshot's life reads no workload rows for it and runs no new backfill pass;
    a cleared cache (what an expired entry is) makes both new, from the database as it is then."""
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.selectors import workloads as selector

    pending = [jobs["capped"], jobs["colleague"], jobs["outsider"]]
    pool_id = jobs["outsider"].orchestrator_id
    now = timezone.now()
    first = selector.explanations(pending, selector.cached_pool_snapshots(now, {pool_id}), now)
    plan = selector._start_plans[jobs["outsider"].orchestrator.name]
    with CaptureQueriesContext(connection) as reads:
        again = selector.cached_pool_snapshots(now + timedelta(seconds=5), {pool_id})
    assert not [q for q in reads.captured_queries if "scheduling_workload" in q["sql"]]
    later = selector.explanations(pending, again, now + timedelta(seconds=5))
    assert selector._start_plans[jobs["outsider"].orchestrator.name] is plan
    assert {pk: e.estimate for pk, e in later.items()} == {pk: e.estimate for pk, e in first.items()}

    Workload.objects.filter(pk=jobs["colleague"].pk).update(priority=10_000)  # now first in the queue
    assert selector.cached_pool_snapshots(now, {pool_id})[pool_id].queue[0].id != str(jobs["colleague"].pk)
    cache.clear()
    fresh = selector.cached_pool_snapshots(now, {pool_id})[pool_id]
    assert fresh.queue[0].id == str(jobs["colleague"].pk)
    assert selector.explanations(pending, {pool_id: fresh}, now)[jobs["colleague"].pk].estimate.position == 1


def test_a_page_asking_deeper_into_the_queue_extends_the_plan_and_keeps_the_earlier_answers(jobs):
    from scheduling.selectors import workloads as selector

    pool_id = jobs["outsider"].orchestrator_id
    now = timezone.now()
    pool = selector.cached_pool_snapshots(now, {pool_id})[pool_id]
    head = selector.explanations([jobs["capped"]], {pool_id: pool}, now)
    assert selector._start_plans[pool.orchestrator][1] == 1
    deeper = selector.explanations([jobs["capped"], jobs["outsider"]], {pool_id: pool}, now)
    assert selector._start_plans[pool.orchestrator][1] == 3
    assert deeper[jobs["capped"].pk].estimate == head[jobs["capped"].pk].estimate
    assert deeper[jobs["outsider"].pk].estimate.position == 3


def test_each_row_links_to_its_job_page_which_its_reader_may_open(client, cast, jobs):
    for role, scope, listed in (("researcher", "mine", ("capped", "running")), ("lead", "team", ("colleague",))):
        body = page(client, cast[role], scope=scope)
        for key in listed:
            url = reverse("workload-detail", args=[jobs[key].pk])
            assert f'<a href="{url}">slurm-a:{jobs[key].external_id}</a>' in body
            assert client.get(url).status_code == 200


def test_a_stored_pool_snapshot_counts_its_tables_for_a_page_around_it_and_they_are_all_it_reads(jobs):
    from scheduling.selectors import workloads as selector
    from scheduling.services.table_changes import tables_read

    pool_id, now = jobs["outsider"].orchestrator_id, timezone.now()
    computed: set[str] = set()
    with tables_read(computed):
        selector.cached_pool_snapshots(now, {pool_id})
    stored: set[str] = set()
    with tables_read(stored):
        selector.cached_pool_snapshots(now, {pool_id})
    assert "scheduling_workload" in computed and computed <= set(selector.SNAPSHOT_TABLES) <= stored
