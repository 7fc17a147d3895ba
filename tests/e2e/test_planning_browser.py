"""Real headless chromium on the planning pages: a lead runs a what-if from the form and watches it finish."""

import re
import threading

import pytest
from django.db import connection

from scheduling.models import WhatIfScenario
from scheduling.services import whatif

pytestmark = pytest.mark.browser


def _run_and_disconnect(pk: int) -> None:
    try:
        whatif.run_scenario(pk)
    finally:
        connection.close()  # a thread's own connection, or the test database cannot be dropped


def test_a_lead_runs_a_what_if_and_the_page_follows_its_progress_to_the_result(session, federation):
    lead = session()
    lead.log_in("lead", "lead")
    page = lead.go("/whatif/")
    page.get_by_label("Name").fill("four more H100 nodes")
    page.get_by_label("Team", exact=True).select_option(label="Research")
    page.get_by_label("Weeks").fill("1")
    page.get_by_label("GPU model to add or remove").fill("H100")
    page.get_by_label("Nodes (+ add, − remove)").fill("4")
    page.get_by_role("button", name="Run").click()
    page.wait_for_url(re.compile(r".*/whatif/\d+/$"))
    assert page.locator("#whatif-progress").count() == 1  # queued: no worker in this test yet
    scenario = WhatIfScenario.objects.get()
    # The "worker": the same service call the Celery task makes, in another thread, while the page polls.
    worker = threading.Thread(target=_run_and_disconnect, args=(scenario.pk,))
    worker.start()
    page.wait_for_selector("#comparison-table", timeout=120_000)
    worker.join(timeout=120)
    assert "capacity (GPUs)" in page.locator("#comparison-table").inner_text()
    page.wait_for_function("document.querySelectorAll('.plot .main-svg').length >= 2", timeout=15000)
    assert lead.errors == []


def test_a_form_error_names_the_field_in_the_browser(session, federation):
    lead = session()
    lead.log_in("lead", "lead")
    page = lead.go("/whatif/")
    page.get_by_label("Name").fill("too many")
    page.get_by_label("Team", exact=True).select_option(label="Research")
    page.get_by_label("GPU model to add or remove").fill("H100")
    page.get_by_label("Nodes (+ add, − remove)").fill("-500")
    page.get_by_role("button", name="Run").click()
    assert "cannot remove 500 H100 nodes: the fleet has 24" in page.locator(".field.invalid").inner_text()


def test_the_forecast_page_draws_its_charts(session, federation):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/forecast/")
    page.wait_for_function("document.querySelectorAll('.plot .main-svg').length >= 3", timeout=15000)
    assert page.locator("#outlook-table").count() == 1
    assert admin.errors == []
