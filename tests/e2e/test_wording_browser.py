"""Issue 33 item 11: raw values and wording. A submitted request names who decides it; the weekly report's p90
queue wait reads as a duration, not "p90 queue wait (s) 4077.5"."""

import re

import pytest
from django.utils import timezone

pytestmark = pytest.mark.browser


def test_a_submitted_request_names_who_decides_it(session, federation):
    alice = session()
    alice.log_in("alice", "alice")
    page = alice.go("/quota/new/")
    page.get_by_label("GPUs", exact=True).fill("4")
    page.get_by_label("Start (UTC)").fill(federation.strftime("%Y-%m-%dT%H:%M"))
    page.get_by_label("End (UTC)").fill((federation + timezone.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"))
    page.get_by_label("Justification").fill("Ablations for the long-context paper.")
    page.get_by_role("button", name="Check feasibility").click()
    page.get_by_role("button", name="Send request").click()
    page.wait_for_url(re.compile(r".*/quota/\d+/$"))
    message = page.locator(".message").first.inner_text()
    assert re.fullmatch(r"Request #\d+ for NLP research sent to lead, who decide it\.", message), message
    assert "deciders" not in message
    assert alice.errors == []


def test_the_reports_queue_wait_reads_as_a_duration(session, federation):
    from scheduling.reports.capacity import Window
    from scheduling.services import report_delivery

    now = timezone.now()
    report = report_delivery.generate_report(Window(now - timezone.timedelta(days=7), now, "UTC"))
    admin = session()
    admin.log_in("admin", "admin")
    row = admin.go(f"/reports/{report.pk}/").locator("#trend tr", has_text="p90 queue wait")
    cells = row.locator("td").all_inner_texts()
    assert "(s)" not in row.inner_text()
    assert cells[0] == "—" or re.fullmatch(r"\d+ (d|h|min|s)( \d+ (h|min|s))?", cells[0]), cells
    assert admin.errors == []


def test_a_plural_team_name_takes_a_bare_apostrophe(session, federation):
    """"Recommendation models's team page" read as a typo; the possessive of a name ending in s is "models'"."""
    from scheduling.wording import possessive

    assert possessive("Recommendation models") == "Recommendation models'" and possessive("alice") == "alice's"
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/utilisation/teams/recsys/")
    assert page.get_by_role("link", name="Recommendation models' team page").is_visible()
    assert "models's" not in page.locator("body").inner_text()
    assert admin.errors == []
