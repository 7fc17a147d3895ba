"""Report pages and API per role: everyone signed in reads the fleet report; per-user rows only for admins
and the leads of that team; downloads in three formats; subscribe and unsubscribe."""

import pytest
from django.urls import reverse

from scheduling.models import ReportSubscription
from scheduling.services import report_delivery

from .conftest import WEEK

pytestmark = pytest.mark.django_db

EVERYONE = ("researcher", "lead", "nlp_lead", "admin", "outsider")


@pytest.fixture
def stored(week):
    return report_delivery.generate_report(WEEK)


def _as(client, user):
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_log_in(client, stored):
    for url in (reverse("report-list"), reverse("report-detail", args=[stored.pk])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", EVERYONE)
def test_every_signed_in_role_reads_the_list_and_the_fleet_report(client, cast, stored, role):
    _as(client, cast[role])
    listing = client.get(reverse("report-list")).content.decode()
    assert reverse("report-download", args=[stored.pk, "pdf"]) in listing
    page = client.get(reverse("report-detail", args=[stored.pk])).content.decode()
    assert "2. Capacity per pool (GPU-hours)" in page and "slurm-a" in page


@pytest.mark.parametrize(
    ("role", "sees_leo", "sees_rita"),
    [
        ("admin", True, True),
        ("lead", True, True),
        ("nlp_lead", False, True),
        ("researcher", False, False),
        ("outsider", False, False),
    ],
)
def test_top_users_show_only_to_admins_and_leads_of_the_team(client, cast, stored, role, sees_leo, sees_rita):
    page = _as(client, cast[role]).get(reverse("report-detail", args=[stored.pk])).content.decode()
    top = page.split("<h3>Top users</h3>")[1].split("</section>")[0]
    assert ("leo" in top) is sees_leo
    assert ("rita" in top) is sees_rita


@pytest.mark.parametrize(("fmt", "type_"), [("html", "text/html"), ("pdf", "application/pdf"), ("csv", "text/csv")])
def test_downloads_come_in_html_pdf_and_csv(client, cast, stored, fmt, type_):
    response = _as(client, cast["researcher"]).get(reverse("report-download", args=[stored.pk, fmt]))
    assert response.status_code == 200 and response["Content-Type"].startswith(type_)
    assert "capacity-report-2026-11-16" in response["Content-Disposition"]


def test_an_unknown_format_or_report_is_not_found(client, cast, stored):
    _as(client, cast["researcher"])
    assert client.get(reverse("report-download", args=[stored.pk, "docx"])).status_code == 404
    assert client.get(reverse("report-detail", args=[stored.pk + 99])).status_code == 404


def test_a_user_subscribes_changes_format_and_unsubscribes_from_the_list_page(client, cast):
    _as(client, cast["researcher"])
    url = reverse("report-subscription")
    client.post(url, {"action": "subscribe", "format": "csv"})
    assert ReportSubscription.objects.get(user=cast["researcher"]).format == "csv"
    client.post(url, {"action": "subscribe", "format": "pdf"})
    assert ReportSubscription.objects.get(user=cast["researcher"]).format == "pdf"
    client.post(url, {"action": "unsubscribe"})
    assert not ReportSubscription.objects.exists()
    response = client.post(url, {"action": "subscribe", "format": "docx"}, follow=True)
    assert "Unknown format" in response.content.decode() and not ReportSubscription.objects.exists()


def test_the_api_gives_each_reader_the_rows_they_may_see(cast, stored):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    def content_for(role):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast[role])[1]}")
        return client.get(f"/api/v1/reports/{stored.pk}/").json()["content"]

    teams = lambda c: {t["slug"]: t["top_users"] for t in c["sections"]["teams"]["teams"]}  # noqa: E731
    assert teams(content_for("admin"))["production"] and not teams(content_for("researcher"))["production"]


def test_the_api_subscription_round_trip(cast):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['outsider'])[1]}")
    assert client.get("/api/v1/reports/subscription/").status_code == 404
    bad = client.put("/api/v1/reports/subscription/", {"format": "docx"}, format="json")
    assert bad.status_code == 400 and "format" in bad.json()
    assert client.put("/api/v1/reports/subscription/", {"format": "link"}, format="json").json() == {"format": "link"}
    assert client.delete("/api/v1/reports/subscription/").status_code == 204
