"""The audit log (issue #33 item 18): every decision in one list, read from the history tables and the admission
decisions, each reader seeing what selectors/access.py allows, filterable, downloadable as CSV."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from scheduling.models import AdmissionDecision, PoolPolicy, Queue, RebalancePlan
from scheduling.selectors.audit_log import AuditFilter, decisions
from scheduling.services import quota
from scheduling.services.audit import save_audited


@pytest.fixture
def decided(cast, teams, queues, period, orchestrator):
    """Decisions of three kinds on nlp and production, one fleet-wide rebalance plan and a pool policy."""
    start, end = period
    nlp_request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=4, starts_at=start, ends_at=end, justification="paper",
    )
    quota.deny_request(nlp_request.pk, by=cast["nlp_lead"], comment="not this week, the cluster is full")
    prod_request = quota.create_request(
        requester=cast["outsider"], team=teams["production"], gpus=2, starts_at=start, ends_at=end,
        justification="serving",
    )
    queue = Queue.objects.get(team=teams["research"])
    queue.weight = Decimal(45)
    save_audited(queue, by=cast["admin"], reason="research grows this term")
    AdmissionDecision.objects.create(uid="u1", user="system:serviceaccount:nlp:runner", namespace="nlp",
                                     name="train-1", kind="Pod", team=teams["nlp"], allowed=False,
                                     message="over the team's cap")
    plan = RebalancePlan(reason="night shift")
    save_audited(plan, by=cast["admin"], reason="proposed by the admin")
    policy = PoolPolicy(
        orchestrator=orchestrator, name="weekday floor", weekdays=[1, 2], start_time="08:00", end_time="20:00"
    )
    save_audited(policy, by=cast["admin"], reason="keep Slurm for the day shift")
    return {"nlp_request": nlp_request, "prod_request": prod_request}


ANY = AuditFilter()


def kinds_and_teams(user, wanted=ANY):
    return {(row["what"], row["team_slug"]) for row in decisions(user, wanted)}


def test_an_admin_reads_every_kind_of_decision_newest_first(cast, decided):
    rows = list(decisions(cast["admin"]))
    kinds = {row["what"] for row in rows}
    assert {"quota-request", "queue", "admission", "rebalance-plan", "pool-policy"} <= kinds
    assert [row["when"] for row in rows] == sorted((row["when"] for row in rows), reverse=True)
    denial = next(row for row in rows if row["what"] == "quota-request" and row["did"] == "denied")
    assert (denial["by_user"], denial["why"], denial["team_slug"]) == (
        "nina", "not this week, the cluster is full", "nlp")


def test_a_researcher_reads_only_their_teams_decisions_and_nothing_fleet_wide(cast, decided):
    seen = kinds_and_teams(cast["researcher"])
    assert seen and {team for _, team in seen} == {"nlp"}
    assert ("admission", "nlp") in seen and ("quota-request", "nlp") in seen


def test_a_lead_reads_their_teams_and_the_teams_below_but_not_a_sibling(cast, decided):
    seen = {team for _, team in kinds_and_teams(cast["lead"])}
    assert seen == {"research", "nlp"}


def test_someone_in_no_team_reads_nothing(cast, decided, django_user_model):
    assert list(decisions(django_user_model.objects.create_user("nobody", password="pw"))) == []


def test_filters_narrow_by_team_user_kind_and_date(cast, teams, decided):
    admin = cast["admin"]
    # production's queue was created by the fixture (a history row without an author), its request filed
    assert kinds_and_teams(admin, AuditFilter(team=teams["production"])) == {
        ("quota-request", "production"), ("queue", "production")}
    assert {row["by_user"] for row in decisions(admin, AuditFilter(actor="NIN"))} == {"nina"}
    assert {row["what"] for row in decisions(admin, AuditFilter(kind="admission"))} == {"admission"}
    tomorrow = timezone.now() + timedelta(days=1)
    assert list(decisions(admin, AuditFilter(since=tomorrow))) == []
    assert list(decisions(admin, AuditFilter(until=tomorrow)))
    # A team asked for never brings in the fleet-wide kinds, and a non-admin asking for one gets none.
    assert list(decisions(cast["researcher"], AuditFilter(kind="rebalance-plan"))) == []


def test_the_page_filters_and_downloads_the_same_rows_as_csv(client, cast, decided):
    client.force_login(cast["lead"])
    page = client.get("/audit/", {"team": "nlp", "kind": "quota-request"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "not this week, the cluster is full" in body and "serving" not in body
    download = client.get("/audit/", {"team": "nlp", "kind": "quota-request", "export": "csv"})
    assert download["Content-Disposition"].startswith("attachment")
    rows = list(csv.reader(io.StringIO(download.content.decode())))
    assert rows[0] == ["When (UTC)", "Decision", "Object", "Team", "By", "Action", "Why"]
    assert {r[3] for r in rows[1:]} == {"nlp"} and rows[1][5:] == ["denied", "not this week, the cluster is full"]


def test_a_bad_filter_names_the_field_and_shows_no_rows(client, cast, decided):
    client.force_login(cast["admin"])
    page = client.get("/audit/", {"since": "2026-13-40", "team": "no-such-team"})
    assert page.status_code == 400
    body = page.content.decode()
    assert "From (UTC date)" in body and "Team:" in body and "No decisions match." in body


def test_a_team_outside_ones_view_is_not_offered(client, cast, decided):
    client.force_login(cast["researcher"])
    assert client.get("/audit/", {"team": "production"}).status_code == 400
