"""The utilisation drill-down, team → user → job: the numbers add up, the window rides along, every level
downloads as CSV, and who sees whose rows follows access.py (the weekly report's per-user rule)."""

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from scheduling.models import Workload
from scheduling.selectors import access, drilldown

pytestmark = pytest.mark.django_db

SINCE = datetime(2026, 3, 2, tzinfo=UTC)
UNTIL = SINCE + timedelta(days=7)
WINDOW = {"from": "2026-03-02T00:00", "to": "2026-03-09T00:00"}


def _job(orchestrator, team, user, external_id, *, gpus=8, started=None, hours=None, waited_h=1.0, state=None):
    started = started or SINCE + timedelta(hours=10)
    finished = started + timedelta(hours=hours) if hours is not None else None
    return Workload.objects.create(
        orchestrator=orchestrator, team=team, user=user, external_id=external_id, gpus_per_member=gpus,
        submitted_at=started - timedelta(hours=waited_h), started_at=started, finished_at=finished,
        state=state or (Workload.State.COMPLETED if finished else Workload.State.RUNNING),
        nodes=[{"node": "dgx00", "gpus": list(range(gpus))}],
    )  # fmt: skip


@pytest.fixture
def jobs(orchestrator, teams, cast):
    nlp, research, production = teams["nlp"], teams["research"], teams["production"]
    return {
        "rita-1": _job(orchestrator, nlp, "rita", "r1", gpus=8, hours=10, waited_h=1),  # 80 GPU-h
        "rita-2": _job(orchestrator, nlp, "rita", "r2", gpus=2, hours=5, waited_h=3),  # 10 GPU-h
        # started a day before the window, ended 2 h into it: 4 GPUs x 2 h inside
        "early": _job(orchestrator, nlp, "nlp-user2", "e1", gpus=4, started=SINCE - timedelta(days=1), hours=26),
        # still running at the window's end, started 4 h before it: 1 GPU x 4 h inside
        "late": _job(orchestrator, research, "leo", "l1", gpus=1, started=UNTIL - timedelta(hours=4)),
        "waiting": Workload.objects.create(
            orchestrator=orchestrator,
            team=nlp,
            user="rita",
            external_id="w1",
            gpus_per_member=8,
            submitted_at=SINCE + timedelta(days=1),
            state=Workload.State.PENDING,
            pending_reason="Resources",
        ),
        "otto": _job(orchestrator, production, "otto", "o1", gpus=8, hours=1),
    }


def _rows(result) -> dict[str, drilldown.UserUsage]:
    return {row.user: row for row in result.rows}


def test_per_user_gpu_hours_add_up_to_the_team_and_a_parent_counts_its_sub_teams(jobs, teams):
    nlp = drilldown.team_users(teams["nlp"], SINCE, UNTIL, readable=None)
    rows = _rows(nlp)
    assert rows["rita"].gpu_hours == pytest.approx(90) and rows["nlp-user2"].gpu_hours == pytest.approx(8)
    assert nlp.gpu_hours == pytest.approx(sum(r.gpu_hours for r in nlp.rows)) == pytest.approx(98)
    assert sum(r.share_pct for r in nlp.rows) == pytest.approx(100)
    research = drilldown.team_users(teams["research"], SINCE, UNTIL, readable=None)
    assert set(_rows(research)) == {"rita", "nlp-user2", "leo"}
    assert research.gpu_hours == pytest.approx(98 + 4) == pytest.approx(sum(r.gpu_hours for r in research.rows))


def test_a_users_jobs_add_up_to_their_row_and_waits_are_start_minus_submit(jobs, teams):
    row = _rows(drilldown.team_users(teams["nlp"], SINCE, UNTIL, readable=None))["rita"]
    listed = drilldown.jobs_in_window([teams["nlp"].pk], SINCE, UNTIL, "rita")
    assert {j.external_id for j in listed} == {"r1", "r2", "w1"}  # the waiting job is listed, with no GPU-hours
    assert sum(j.gpu_hours for j in listed) == pytest.approx(row.gpu_hours)
    assert row.jobs == 2 and row.mean_wait_s == pytest.approx(2 * 3600) and row.p95_wait_s == pytest.approx(3 * 3600)
    assert next(j for j in listed if j.external_id == "w1").wait_s is None


def test_a_researcher_reads_only_their_own_row_and_the_rest_is_summed_so_the_total_holds(jobs, teams, cast):
    readable = access.usage_users_readable_by(cast["researcher"], teams["nlp"])
    assert readable == frozenset({"rita"})
    result = drilldown.team_users(teams["nlp"], SINCE, UNTIL, readable)
    rows = _rows(result)
    assert set(rows) == {"rita", drilldown.OTHER_USERS} and not rows[drilldown.OTHER_USERS].named
    assert result.gpu_hours == pytest.approx(98) == pytest.approx(sum(r.gpu_hours for r in result.rows))


@pytest.mark.parametrize(
    ("who", "team", "expected"),
    [
        ("admin", "production", None),
        ("lead", "nlp", None),  # the lead of research reads its sub-teams' users
        ("lead", "research", None),
        ("nlp_lead", "nlp", None),
        ("nlp_lead", "research", frozenset()),  # a team above one's own is not one's to read
        ("researcher", "research", frozenset()),
        ("outsider", "nlp", frozenset()),
    ],
)
def test_who_reads_whose_usage_rows(cast, teams, who, team, expected):
    assert access.usage_users_readable_by(cast[who], teams[team]) == expected


def _get(client, user, name, *args, **query):
    client.force_login(user)
    return client.get(reverse(name, args=args), {**WINDOW, **query})


@pytest.mark.parametrize(
    ("who", "status"), [("admin", 200), ("lead", 200), ("nlp_lead", 200), ("researcher", 200), ("outsider", 404)]
)
def test_the_team_level_opens_for_those_who_see_the_team(client, jobs, cast, who, status):
    assert _get(client, cast[who], "usage-team", "nlp").status_code == status


def test_a_researcher_sees_no_other_members_name_and_cannot_open_their_jobs(client, jobs, cast):
    body = _get(client, cast["researcher"], "usage-team", "nlp").content.decode()
    assert "rita" in body and "nlp-user2" not in body and "other users" in body
    assert _get(client, cast["researcher"], "usage-user", "nlp", "nlp-user2").status_code == 404
    assert _get(client, cast["researcher"], "usage-user", "nlp", "rita").status_code == 200
    assert _get(client, cast["researcher"], "usage-team", "research").status_code == 404


def test_a_user_without_a_team_sees_nothing(client, jobs, django_user_model):
    nobody = django_user_model.objects.create_user("nobody", password="pw")
    assert _get(client, nobody, "usage-team", "nlp").status_code == 404
    assert _get(client, nobody, "usage-user", "nlp", "rita").status_code == 404
    client.force_login(nobody)
    assert client.get(reverse("workload-detail", args=[jobs["rita-1"].pk])).status_code == 404


def test_the_job_page_follows_the_apis_workload_visibility(client, jobs, cast):
    job = jobs["rita-1"]
    for who, status in (("researcher", 200), ("lead", 200), ("admin", 200), ("outsider", 404)):
        client.force_login(cast[who])
        page = client.get(reverse("workload-detail", args=[job.pk]))
        api = client.get(f"/api/v1/workloads/{job.pk}/")
        assert (page.status_code, api.status_code) == (status, status), who


def test_each_level_links_the_next_in_the_same_window_with_breadcrumbs_back(client, jobs, cast):
    query = "from=2026-03-02T00%3A00&amp;to=2026-03-09T00%3A00"  # as HTML writes it
    utilisation = _get(client, cast["lead"], "utilisation").content.decode()
    assert f'href="/utilisation/teams/nlp/?{query}"' in utilisation
    team = _get(client, cast["lead"], "usage-team", "nlp").content.decode()
    assert f'href="/utilisation/teams/nlp/users/rita/?{query}"' in team and f'href="/utilisation/?{query}"' in team
    user = _get(client, cast["lead"], "usage-user", "nlp", "rita").content.decode()
    assert f'href="/workloads/{jobs["rita-1"].pk}/?team=nlp&amp;{query}"' in user
    assert f'href="/utilisation/teams/nlp/?{query}"' in user
    job = _get(client, cast["lead"], "workload-detail", jobs["rita-1"].pk, team="nlp").content.decode()
    assert f'href="/utilisation/teams/nlp/users/rita/?{query}"' in job and "dgx00" in job and "1 h" in job


def test_a_live_preset_stays_live_down_the_drill(client, jobs, cast):
    client.force_login(cast["admin"])
    body = client.get(reverse("usage-team", args=["nlp"]), {"range": "30d"}).content.decode()
    crumbs = body.split('class="crumbs"')[1].split("</nav>")[0]
    assert crumbs == '><a href="/utilisation/?range=30d">Utilisation</a> › <span aria-current="page">NLP</span>'


def test_a_pending_jobs_page_explains_its_wait_with_the_explain_code(client, jobs, cast, fleet):
    client.force_login(cast["researcher"])
    body = client.get(reverse("workload-detail", args=[jobs["waiting"].pk])).content.decode()
    assert "Not placed yet" in body and "Queue position #1" in body and "Slurm says: Resources" in body
    assert 'class="explanation"><span data-code=' in body


def _csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_every_level_downloads_as_csv(client, jobs, cast):
    team = _csv(_get(client, cast["lead"], "usage-team", "nlp", export="csv"))
    assert team[0][:3] == ["User", "GPU-hours", "Jobs run"]
    assert {row[0]: float(row[1]) for row in team[1:]} == {"rita": 90.0, "nlp-user2": 8.0}
    jobs_csv = _csv(_get(client, cast["lead"], "usage-user", "nlp", "rita", export="csv"))
    assert sorted(row[0] for row in jobs_csv[1:]) == ["r1", "r2", "w1"]
    mine = _csv(_get(client, cast["researcher"], "usage-team", "nlp", export="csv"))
    assert sorted(row[0] for row in mine[1:]) == ["other users", "rita"]


API_WINDOW = {"since": "2026-03-02T00:00:00Z", "until": "2026-03-09T00:00:00Z"}


def test_the_api_answers_as_the_pages_do_for_each_role(client, jobs, cast):
    path = "/api/v1/usage/teams/nlp/users/"
    client.force_login(cast["lead"])
    lead = client.get(path, API_WINDOW).json()
    assert {u["user"]: u["gpu_hours"] for u in lead["users"]} == {"rita": 90.0, "nlp-user2": 8.0}
    assert lead["gpu_hours"] == pytest.approx(sum(u["gpu_hours"] for u in lead["users"]))
    jobs_api = client.get(path + "rita/jobs/", API_WINDOW).json()
    assert sorted(j["external_id"] for j in jobs_api) == ["r1", "r2", "w1"]
    client.force_login(cast["researcher"])
    mine = client.get(path, API_WINDOW).json()
    assert sorted((u["user"], u["named"]) for u in mine["users"]) == [("other users", False), ("rita", True)]
    assert client.get(path + "nlp-user2/jobs/", API_WINDOW).status_code == 404
    client.force_login(cast["outsider"])
    assert client.get(path, API_WINDOW).status_code == 404


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "2026-03-09T00:00:00Z", "until": "2026-03-02T00:00:00Z"}, "since"),
        ({"since": "2024-01-01T00:00:00Z", "until": "2026-03-02T00:00:00Z"}, "until"),
        ({"since": "soon"}, "since"),
    ],
)
def test_a_bad_api_window_is_a_400_naming_the_field(client, cast, teams, query, field):
    client.force_login(cast["admin"])
    response = client.get("/api/v1/usage/teams/nlp/users/", query)
    assert response.status_code == 400 and field in response.json()
