"""Real chromium on the audit log (issue #33 item 18): each role finds the decisions it may read and no others,
filters them, downloads them as CSV (the file checked), and the page fits a phone."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from scheduling.services import demo
from tests.browser import sideways

pytestmark = pytest.mark.browser

ADMIN_GRANTS = "Fits: the fleet has headroom this week."  # the admin's approval of bob's inference request


@pytest.fixture
def decided(federation):
    demo.seed_quota_requests()


def audit_page(session, username: str, width: int = 1280):
    person = session(width=width)
    person.log_in(username, username)
    return person


def log_text(page) -> str:
    return page.locator("#audit-log").inner_text()


def test_an_admin_filters_the_log_by_user_and_kind_and_downloads_it_as_csv(session, decided):
    admin = audit_page(session, "admin")
    page = admin.go("/")
    page.get_by_role("link", name="Audit log").click()
    page.wait_for_url(admin.base_url + "/audit/")
    assert ADMIN_GRANTS in log_text(page)
    page.get_by_label("User", exact=True).fill("admin")
    page.get_by_label("Decision").select_option(label="Quota request")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/audit/?*kind=quota-request*")
    rows = page.locator("#audit-log tbody tr")
    assert rows.count() == 1 and "approved" in rows.first.inner_text() and ADMIN_GRANTS in rows.first.inner_text()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as CSV").click()
    assert download.value.suggested_filename == "audit-log.csv"
    text = open(download.value.path(), encoding="utf-8").read()  # noqa: SIM115 - a throwaway file Playwright owns
    table = list(csv.reader(io.StringIO(text)))
    assert table[0] == ["When (UTC)", "Decision", "Object", "Team", "By", "Action", "Why"]
    shown = [row[1:2] + row[3:] for row in table[1:]]
    assert shown == [["Quota request", "inference", "admin", "approved", ADMIN_GRANTS]]
    assert "<a " not in text
    assert admin.errors == []


def test_a_lead_sees_their_branch_and_a_researcher_their_team_but_neither_anothers(session, decided):
    lead = audit_page(session, "lead")
    text = log_text(lead.go("/audit/"))
    teams_shown = set(lead.page.locator("#audit-log tbody td:nth-child(4)").all_inner_texts())
    assert "nlp" in teams_shown and "inference" not in teams_shown and ADMIN_GRANTS not in text
    bob = audit_page(session, "bob")
    text = log_text(bob.go("/audit/"))
    assert ADMIN_GRANTS in text
    assert set(bob.page.locator("#audit-log tbody td:nth-child(4)").all_inner_texts()) == {"inference"}
    alice = audit_page(session, "alice")
    alice.go("/audit/?kind=quota-request")
    assert set(alice.page.locator("#audit-log tbody td:nth-child(2)").all_inner_texts()) == {"Quota request"}
    assert set(alice.page.locator("#audit-log tbody td:nth-child(4)").all_inner_texts()) == {"nlp"}
    page = alice.go("/audit/?kind=rebalance-plan")
    assert "No decisions match." in log_text(page)
    assert lead.errors == bob.errors == alice.errors == []


def test_a_user_in_no_team_is_told_why_the_log_is_empty(session, decided):
    get_user_model().objects.create_user("carol", password="carol")
    carol = audit_page(session, "carol")
    page = carol.go("/audit/")
    assert "You are in no team" in page.locator("main").inner_text()
    assert "No decisions match." in log_text(page)
    assert carol.errors == []


def test_on_a_phone_the_log_fits_the_screen(session, decided):
    admin = audit_page(session, "admin", width=390)
    page = admin.go("/audit/")
    assert ADMIN_GRANTS in log_text(page)
    assert sideways(page) <= 0
    assert admin.errors == []
