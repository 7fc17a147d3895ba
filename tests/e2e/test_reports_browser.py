"""Real headless chromium on the capacity reports: the list, a report with its SVG charts, a subscription."""

import pytest
from django.utils import timezone

from scheduling.models import ReportSubscription
from scheduling.reports.capacity import Window
from scheduling.services import report_delivery

pytestmark = pytest.mark.browser


def test_a_researcher_reads_a_report_with_its_charts_and_subscribes(session, federation):
    now = timezone.now()
    report = report_delivery.generate_report(Window(now - timezone.timedelta(days=7), now, "UTC"))
    alice = session()
    alice.log_in("alice", "alice")
    page = alice.go("/reports/")
    page.get_by_role("link", name=report.period_start.strftime("%a %Y-%m-%d")).click()
    page.wait_for_url(f"**/reports/{report.pk}/")
    charts = page.locator(".capacity-report svg[role=img]")
    assert charts.count() == 3
    assert page.locator("#capacity svg rect").count() > 0  # the demo pools' bars are drawn
    assert "8. Week over week and suggested actions" in page.locator("#trend h2").inner_text()
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename.endswith(".csv")
    page = alice.go("/reports/")
    page.get_by_label("Format").select_option("link")
    page.get_by_role("button", name="Subscribe").click()
    assert "Subscribed" in page.locator(".message").first.inner_text()
    assert ReportSubscription.objects.get(user__username="alice").format == "link"
    assert alice.errors == []
