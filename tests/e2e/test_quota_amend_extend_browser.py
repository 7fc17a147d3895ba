"""Quota requests in Chromium: the form shows the team's standing, the requester amends, the decider sees the
amendment, and a granted request is extended as a new request."""

from datetime import timedelta

import pytest

from scheduling.models import QuotaRequest

pytestmark = pytest.mark.browser


def _local(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M")


def _send_request(alice, start: str, end: str) -> None:
    page = alice.go("/quota/new/")
    assert page.locator('#team-standing tr[data-team="nlp"]:not(.over-cap)').is_visible()
    page.get_by_label("GPUs").fill("4")
    page.get_by_label("Start (UTC)").fill(start)
    page.get_by_label("End (UTC)").fill(end)
    page.get_by_label("Justification").fill("ablation study")
    page.locator("#check-request").click()
    page.locator("#send-request").click()
    page.wait_for_url("**/quota/*/")


def test_alice_amends_the_lead_sees_it_approves_and_alice_asks_to_extend(session, federation):
    start, end = (_local(federation + timedelta(days=days)) for days in (0, 3))
    alice = session(width=1440)
    alice.log_in("alice", "alice")
    _send_request(alice, start, end)
    page = alice.page
    page.locator("#id_amend-gpus").fill("6")
    page.locator("#id_amend-reason").fill("two more seeds")
    page.locator("#amend-button").click()
    page.wait_for_load_state()
    assert "amended; it still awaits a decision" in page.locator("body").inner_text()
    request = QuotaRequest.objects.get(requester__username="alice", state="submitted")
    assert request.gpus == 6

    lead = session(width=1440)
    lead.log_in("lead", "lead")
    decider = lead.go(f"/quota/{request.pk}/")
    assert "GPUs 4 → 6" in decider.locator("#amended").inner_text()
    decider.locator("#approve").click()
    decider.wait_for_load_state()

    page = alice.go(f"/quota/{request.pk}/")
    assert page.locator("#extend").is_visible()
    page.locator("#id_extend-ends_at").fill(_local(federation + timedelta(days=5)))
    page.locator("#id_extend-justification").fill("one more week of sweeps")
    page.locator("#extend-button").click()
    page.wait_for_url("**/quota/*/")
    extension = QuotaRequest.objects.get(extends=request)
    assert page.url.endswith(f"/quota/{extension.pk}/")
    assert f"request #{request.pk}" in page.locator("#extends").inner_text()
    assert alice.errors == [] and lead.errors == []


def test_on_a_phone_the_quota_list_shows_period_and_state_without_scrolling_sideways(session, federation):
    alice = session(width=1440)
    alice.log_in("alice", "alice")
    _send_request(alice, _local(federation), _local(federation + timedelta(days=3)))
    phone = session(width=390)
    phone.log_in("alice", "alice")
    page = phone.go("/quota/")
    for header in ("Period", "State"):
        box = page.locator("#request-table th", has_text=header).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (header, box)
    assert not page.locator("#request-table th", has_text="Requested by").is_visible()
    assert phone.errors == []
