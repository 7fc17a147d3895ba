"""Issue 33 item 11, what was left: a report not sent yet read "Sent: None"; the what-if form answered with its
API's field names ("quota_request") and a bogus "unknown fields: weights"; errors repeated their label
("GPUs: GPUs must be…"); the what-if chart counted "hours since the start of the history" instead of dates."""

import json
import re

import pytest
from django.utils import timezone

from tests.e2e.test_phone_width_browser import demo_pages  # noqa: F401 - the demo with a report and a what-if

pytestmark = pytest.mark.browser


def test_a_report_not_sent_yet_says_so(session, federation):
    from scheduling.reports.capacity import Window
    from scheduling.services import report_delivery

    now = timezone.now()
    report_delivery.generate_report(Window(now - timezone.timedelta(days=7), now, "UTC"))
    alice = session(width=1280)
    alice.log_in("alice", "alice")
    table = alice.go("/reports/").locator("table.grid")
    headers = table.locator("thead th").all_inner_texts()
    sent = table.locator("tbody tr").first.locator("td").nth(headers.index("Sent")).inner_text()
    assert sent == "not sent"
    assert "None" not in table.inner_text()


def test_the_what_if_form_speaks_in_its_own_labels(session, federation):
    lead = session(width=1280)
    lead.log_in("lead", "lead")
    page = lead.go("/whatif/")
    page.get_by_label("Name").fill("nothing changed")
    page.get_by_label("Team", exact=True).select_option(label="Research")
    page.locator("#run-whatif").click()
    form = page.locator("#whatif-form").inner_text()
    assert "Change at least one thing" in form
    assert not re.search(r"\b(quota_request|gpu_model|unknown fields)\b", form), form

    page.get_by_label("Name").fill("too heavy")
    page.get_by_label("Team weight").select_option(label="NLP research")
    page.get_by_label("New weight (%)").fill("70")  # nlp 70 + vision 40 > 100
    page.locator("#run-whatif").click()
    form = page.locator("#whatif-form").inner_text()
    assert "sum to 110.00%" in form
    assert "unknown fields" not in form  # a refused field is not an unknown one


def test_a_fields_error_names_the_field_once(session, federation):
    alice = session(width=1280)
    alice.log_in("alice", "alice")
    page = alice.go("/quota/new/")
    page.get_by_label("GPUs", exact=True).fill("0")
    page.get_by_role("button", name="Check feasibility").click()
    errors = page.locator(".field.invalid .error").all_inner_texts()
    assert "GPUs must be a whole number of at least 1." in errors, errors
    assert not any(e.lower().startswith("gpus: gpus") for e in errors), errors


def test_the_what_if_chart_runs_along_the_dates_of_the_history(session, demo_pages):  # noqa: F811
    lead = session(width=1280)
    lead.log_in("lead", "lead")
    page = lead.go(demo_pages["{whatif}"])
    page.wait_for_load_state("networkidle")
    figure = json.loads(page.locator("script[id$='-figure']").first.text_content())
    assert figure["layout"]["xaxis"]["type"] == "date"
    assert "hours since" not in page.locator("main").inner_text()
    since = page.locator("main").inner_text()
    first_x = figure["data"][0]["x"][0]
    assert re.match(r"\d{4}-\d\d-\d\d", str(first_x)), first_x
    assert re.search(r"History \d{4}-\d\d-\d\d \d\d:\d\d – \d{4}-\d\d-\d\d \d\d:\d\d UTC", since)
    assert lead.errors == []
