"""Issue 33 item 4: status text that is true. Governance rounds that run and reach no cluster are not "no
round has run yet"; the requester of a grant that no cluster enforces reads so on the grant; a saved fair-share
change says where it takes effect."""

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def rounds_ran(federation):
    """A governance round as the beat task runs one every 30 s in `make demo`: the demo's orchestrators are
    simulated, so it reaches none of them."""
    from scheduling.services import demo
    from scheduling.services.enforcement import rounds as enforcement_rounds

    demo.seed_quota_requests()
    assert enforcement_rounds.reconcile() == []
    return federation


def test_the_team_page_says_rounds_run_and_reach_no_cluster(session, rounds_ran):
    lead = session()
    lead.log_in("lead", "lead")
    page = lead.go("/teams/research/")
    text = page.locator("#enforcement").inner_text()
    assert "No governance round has run yet" not in text
    assert "Governance rounds run (the last at" in text
    assert "Nothing is enforced for this team on any cluster" in text
    assert "the demo's simulated cluster" in text  # says why each orchestrator is left alone
    assert lead.errors == []


def test_the_requester_of_a_grant_enforced_nowhere_is_told_so(session, rounds_ran):
    from scheduling.models import QuotaRequest

    granted = QuotaRequest.objects.get(requester__username="bob", state=QuotaRequest.State.APPROVED)
    bob = session()
    bob.log_in("bob", "bob")
    page = bob.go(f"/quota/{granted.pk}/")
    card = page.locator("#grant-reach")
    assert "attention" in (card.get_attribute("class") or "")
    text = card.inner_text()
    assert "No orchestrator is governed: the portal writes it to no cluster" in text
    assert "no cluster holds the team to it" in text and "Ask a portal admin" in text
    assert "No governance round has run yet" not in page.locator("#enforcement").inner_text()
    assert bob.errors == []


def test_a_saved_fair_share_change_says_where_it_takes_effect(session, rounds_ran):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/fairshare/")
    page.locator("tr[data-team='recsys'] input[name$='-burst_limit']").fill("200")
    page.get_by_label("Reason").fill("recsys bursts for the launch")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(admin.base_url + "/fairshare/history/")
    message = page.locator(".message").first.inner_text()
    assert "Saved 1 entitlement change (recsys bursts for the launch)" in message  # one change: no "(s)"
    assert "no orchestrator is governed: the portal writes it to no cluster" in message
    assert admin.errors == []
