"""Real headless chromium: charts drawn, a quota request filed and approved, a fair-share edit refused."""

import re

import pytest

from scheduling.models import Queue, QuotaRequest

pytestmark = pytest.mark.browser

CHART_PAGES = {"/": 3, "/teams/research/": 2, "/fragmentation/": 3, "/utilisation/": 3, "/ledger/": 1}


def test_charts_are_drawn_as_svg_without_console_errors(session, federation):
    me = session()
    me.log_in("admin", "admin")
    for path, charts in CHART_PAGES.items():
        page = me.go(path)
        page.wait_for_function(f"document.querySelectorAll('.plot .main-svg').length >= {charts}", timeout=15000)
        assert page.locator(".plot .main-svg").count() >= charts, path
        assert page.locator(".plot g.trace").count() > 0, f"{path}: charts have axes but no traces"
    assert me.errors == []


def test_a_researcher_files_a_quota_request_and_a_lead_approves_it(session, federation):
    start = federation.strftime("%Y-%m-%dT%H:%M")
    end = federation.replace(day=min(federation.day + 5, 28)).strftime("%Y-%m-%dT%H:%M")
    alice = session()
    alice.log_in("alice", "alice")
    page = alice.go("/quota/new/")
    page.get_by_label("Team").select_option(label="NLP research")
    page.get_by_label("GPUs", exact=True).fill("16")
    page.get_by_label("Start (UTC)").fill(start)
    page.get_by_label("End (UTC)").fill(end)
    page.get_by_label("Justification").fill("NeurIPS camera-ready ablations")
    page.get_by_role("button", name="Check feasibility").click()
    feasibility = page.locator("#feasibility")
    assert "Fits inside research's 40 %" in feasibility.inner_text()
    page.get_by_role("button", name="Send request").click()
    page.wait_for_url(re.compile(r".*/quota/\d+/$"))
    assert page.locator("#request-state").inner_text() == "Submitted"
    request_id = QuotaRequest.objects.get().pk

    lead = session()
    lead.log_in("lead", "lead")
    page = lead.go("/quota/")
    page.locator("#awaiting").get_by_role("link", name=str(request_id), exact=True).click()
    page.get_by_label("Comment").fill("Approved for the deadline week")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_selector("#decision")
    assert page.locator("#request-state").inner_text() == "Approved"

    page = alice.go(f"/quota/{request_id}/")
    assert "Approved by lead" in page.locator("#decision").inner_text()
    assert alice.errors == [] and lead.errors == []


def test_an_admin_editing_a_weight_sees_the_over_100_percent_error(session, federation):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/fairshare/")
    weight = page.locator("tr[data-team='research'] input[name$='-weight']")
    weight.fill("50")
    local = page.locator("#local-errors")
    local.wait_for(state="visible")
    assert "sum to more than 100 %" in local.inner_text()
    assert page.locator("tr[data-team='research'] td.sum").inner_text() == "top level: 110 %"
    page.wait_for_selector("#check-result[data-valid='false']")
    assert "sum to 110.00%" in page.locator("#check-result").inner_text()

    page.get_by_label("Reason").fill("try a bigger research share")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_selector(".error-summary")
    assert str(Queue.objects.get(team__slug="research").weight) == "40.00"
    assert admin.errors == []


def test_pages_fit_a_phone_and_start_with_a_skip_link(session, federation):
    phone = session(width=390)
    phone.log_in("alice", "alice")
    for path in ("/", "/teams/nlp/", "/quota/new/", "/utilisation/"):
        page = phone.go(path)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} scrolls sideways by {overflow}px on a phone"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"

