"""Issue 36 item 10 and issue 33 item 7: a report judges each source only over the part of the week it
existed (a source registered since is not "stale 168 h" in a rebuilt past week), and a week with no data at
all is built, marked "no data" and never sent."""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse

from scheduling.models import CapacityReport, CollectorRun, Orchestrator
from scheduling.reports.capacity import Window
from scheduling.services import report_delivery
from scheduling.services.report_delivery import report_content

from .conftest import MONDAY, THURSDAY, WEEK, _backdate

pytestmark = pytest.mark.django_db
EMPTY_WEEK = Window(MONDAY - timedelta(days=70), MONDAY - timedelta(days=63), "UTC")


def _sources(content):
    return {s["name"]: s for s in content["sections"]["completeness"]["sources"]}


def _rules(content):
    return [a["rule"] for a in content["sections"]["trend"]["actions"]]


def test_a_rebuilt_past_week_does_not_call_a_source_registered_since_stale(week):
    Orchestrator.objects.create(name="ray-new", kind="ray", endpoint="http://ray.example:8265")  # registered today
    content = report_content(WEEK)
    new = _sources(content)["ray-new"]
    # On main: stale_h 168.0 and a high "stale-source" action for a source that did not exist that week.
    assert (new["stale_h"], new["judged_h"], new["fresh_pct"]) == (0.0, 0.0, None)
    assert new["registered_on"] > "2026-11-23"
    assert not any("ray-new" in a["text"] for a in content["sections"]["trend"]["actions"])
    assert _sources(content)["k8s-a"]["stale_h"] == pytest.approx(168.0)  # registered before: judged all week


def test_a_source_registered_midweek_is_judged_from_its_registration_on(week):
    late = Orchestrator.objects.create(name="ray-late", kind="ray", endpoint="http://ray.example:8265")
    _backdate(Orchestrator, THURSDAY + timedelta(hours=6), name="ray-late")
    CollectorRun.objects.bulk_create(
        CollectorRun(orchestrator=late, started_at=THURSDAY + timedelta(hours=6, minutes=5 * i), ok=True)
        for i in range(3 * 24 * 12 + 18 * 12)  # every 5 minutes from Thu 06:00 to the week's end
    )
    source = _sources(report_content(WEEK))["ray-late"]
    # On main: stale 78 h (Mon 00:00 to Thu 06:00) and fresh 53.6 %.
    assert source["registered_on"] == "2026-11-19"
    assert source["judged_h"] == pytest.approx(90.0)
    assert source["stale_h"] == 0.0 and source["fresh_pct"] == 100.0


def test_a_week_with_no_data_is_marked_so_and_never_mailed(cast):
    Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="http://slurm.example:6820")
    _backdate(Orchestrator, EMPTY_WEEK.start - timedelta(days=1))  # registered, but nothing ran that week
    cast["admin"].email = "ada@example.org"
    cast["admin"].save()
    report_delivery.subscribe(cast["admin"], "link")
    report = report_delivery.generate_report(EMPTY_WEEK)
    # On main: "ready" (Ready to send) with slurm-a "stale 168 h", and mailed to every subscriber.
    assert report.status == CapacityReport.Status.NO_DATA
    assert report.content["sections"]["completeness"]["has_data"] is False
    assert _rules(report.content) == ["no-data"]  # one word for it, not "stale 168 h" per source
    assert report_delivery.send_report(report.pk) == 0
    report_delivery.resend_report(report)  # an admin's resend has nothing to send either
    assert report_delivery.send_report(report.pk) == 0
    assert CapacityReport.objects.get(pk=report.pk).status == CapacityReport.Status.NO_DATA and mail.outbox == []


def test_a_no_data_week_rebuilt_once_its_data_is_backfilled_becomes_ready(week):
    report = report_delivery.generate_report(EMPTY_WEEK)
    assert report.status == CapacityReport.Status.NO_DATA
    CollectorRun.objects.create(orchestrator=week["orchestrator"], started_at=EMPTY_WEEK.start, ok=True)
    assert report_delivery.rebuild_report(report).status == CapacityReport.Status.READY


def test_the_pages_say_no_data_and_registered_on(client, cast, week):
    Orchestrator.objects.create(name="ray-new", kind="ray", endpoint="http://ray.example:8265")
    empty = report_delivery.generate_report(EMPTY_WEEK)
    full = report_delivery.generate_report(WEEK)
    client.force_login(cast["admin"])
    listing = client.get(reverse("report-list")).content.decode()
    assert "No data (not sent)" in listing and "Ready to send" in listing
    page = client.get(reverse("report-detail", args=[empty.pk])).content.decode()
    assert 'id="report-no-data"' in page and "No data for this week" in page
    page = client.get(reverse("report-detail", args=[full.pk])).content.decode()
    assert "registered on " in page and "not registered yet this week" in page and 'id="report-no-data"' not in page
