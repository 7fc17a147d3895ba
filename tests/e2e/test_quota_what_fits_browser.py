"""Real chromium on the quota form after a refused check (issue #33 item 16): alice is told the most GPUs that fit
her period and the earliest period her GPUs fit, takes one, sees it feasible and sends it; on a phone too."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from scheduling.models import QuotaRequest, Team
from scheduling.services import quota
from tests.browser import sideways

pytestmark = pytest.mark.browser


@pytest.fixture
def crowded(federation):
    """The demo fleet's 320 GPUs, 272 guaranteed, and 40 more granted to inference over four days from
    ``federation`` (a day ahead): 8 unpromised until the grant ends."""
    users = get_user_model().objects
    start = federation.replace(second=0, microsecond=0)
    granted = quota.create_request(
        requester=users.get(username="bob"), team=Team.objects.get(slug="inference"), gpus=40, starts_at=start,
        ends_at=start + timedelta(days=4), justification="load test",
    )
    quota.approve_request(granted.pk, by=users.get(username="admin"), comment="fits")
    return start, start + timedelta(days=4)


def ask(page, gpus: int, start, end) -> None:
    page.get_by_label("Team").select_option(label="NLP research")
    page.get_by_label("GPUs", exact=True).fill(str(gpus))
    page.get_by_label("Start (UTC)").fill(f"{start:%Y-%m-%dT%H:%M}")
    page.get_by_label("End (UTC)").fill(f"{end:%Y-%m-%dT%H:%M}")
    page.get_by_label("Justification").fill("long-context ablations")
    page.get_by_role("button", name="Check feasibility").click()


@pytest.mark.parametrize("width", [1280, 390])
def test_alice_takes_the_earliest_period_that_fits_and_sends_it(session, crowded, width):
    start, grant_end = crowded
    alice = session(width=width)
    alice.log_in("alice", "alice")
    page = alice.go("/quota/new/")
    ask(page, 24, start + timedelta(days=1), start + timedelta(days=3))
    fits = page.locator("#what-fits")
    assert page.locator("#feasibility h3").inner_text() == "Not feasible as asked"
    assert "At most 8 GPUs over the same period." in fits.inner_text()
    assert f"24 GPUs from {grant_end:%Y-%m-%d %H:%M} to {grant_end + timedelta(days=2):%Y-%m-%d %H:%M} UTC" in (
        fits.inner_text())
    assert sideways(page) <= 0
    page.get_by_role("button", name="Check that period").click()
    page.locator("#feasibility h3").wait_for()
    assert page.locator("#feasibility h3").inner_text() == "Feasible"
    assert page.get_by_label("Start (UTC)").input_value() == f"{grant_end:%Y-%m-%dT%H:%M}"
    page.get_by_role("button", name="Send request").click()
    page.wait_for_url(re.compile(r".*/quota/\d+/$"))
    sent = QuotaRequest.objects.get(requester__username="alice")
    assert (sent.gpus, sent.starts_at) == (24, grant_end)
    assert alice.errors == []


def test_alice_takes_the_largest_amount_for_her_period(session, crowded):
    start, _ = crowded
    alice = session()
    alice.log_in("alice", "alice")
    page = alice.go("/quota/new/")
    ask(page, 24, start + timedelta(days=1), start + timedelta(days=3))
    page.get_by_role("button", name="Check 8 GPUs").click()
    page.locator("#feasibility h3").wait_for()
    assert page.locator("#feasibility h3").inner_text() == "Feasible"
    assert page.get_by_label("GPUs", exact=True).input_value() == "8"
    assert page.locator("#what-fits").count() == 0
    assert alice.errors == []
