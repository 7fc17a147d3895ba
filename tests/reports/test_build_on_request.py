"""An admin builds the report of any finished week from the browser's report list; the running week is
refused naming the field and why; a week that has its report is not built twice; nobody is mailed."""

from datetime import date

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from scheduling.models import CapacityReport
from scheduling.services import report_delivery

from .conftest import MONDAY, WEEK

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(cast):
    client = Client()
    client.force_login(cast["admin"])
    return client


def _messages(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def test_an_admin_builds_a_finished_weeks_report_from_the_list_and_nobody_is_mailed(
    admin_client, week, settings, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert 'id="report-build"' in admin_client.get(reverse("report-list")).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("report-build"), {"week_of": "2026-11-18"}, follow=True)
    report = CapacityReport.objects.get()
    assert (report.period_start, report.period_end) == (WEEK.start, WEEK.end)
    assert report.status == CapacityReport.Status.READY and report.content["headline"]
    assert "Building the report of the week of 2026-11-16" in _messages(response)
    assert mail.outbox == []
    again = admin_client.post(reverse("report-build"), {"week_of": "2026-11-22"}, follow=True)
    assert "exists already" in _messages(again) and CapacityReport.objects.count() == 1


def test_the_running_week_is_refused_naming_the_field(admin_client, cast):
    today = date.today().isoformat()
    response = admin_client.post(reverse("report-build"), {"week_of": today}, follow=True)
    text = _messages(response)
    assert "Week of: the week of" in text and "is not finished until" in text
    assert not CapacityReport.objects.exists()


@pytest.mark.parametrize("value", ["", "2026-13-45", "yesterday"])
def test_a_bad_date_is_refused_naming_the_field(admin_client, value):
    text = _messages(admin_client.post(reverse("report-build"), {"week_of": value}, follow=True))
    assert text.startswith("Week of: ") and not CapacityReport.objects.exists()


def test_a_failed_build_is_queued_again_and_other_roles_may_not_build(cast, week, django_capture_on_commit_callbacks):
    failed = CapacityReport.objects.create(
        period_start=WEEK.start, period_end=WEEK.end, time_zone="UTC", status=CapacityReport.Status.FAILED
    )
    queued: list[int] = []
    with django_capture_on_commit_callbacks(execute=True):
        report, again = report_delivery.request_build(MONDAY.date(), enqueue=queued.append)
    assert again and report.pk == failed.pk and queued == [failed.pk]
    assert CapacityReport.objects.get().status == CapacityReport.Status.GENERATING
    for role in ("lead", "researcher", "outsider"):
        client = Client()
        client.force_login(cast[role])
        assert client.post(reverse("report-build"), {"week_of": "2026-11-18"}).status_code == 403
        assert 'id="report-build"' not in client.get(reverse("report-list")).content.decode()


def test_a_superuser_without_staff_builds_reports_as_every_other_page_treats_them_as_an_admin(
    django_user_model, week, settings, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    root = django_user_model.objects.create_user("root", password="pw", is_superuser=True, is_staff=False)
    client = Client()
    client.force_login(root)
    assert 'id="report-build"' in client.get(reverse("report-list")).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("report-build"), {"week_of": "2026-11-18"}, follow=True)
    assert CapacityReport.objects.get().status == CapacityReport.Status.READY
