"""Issue 33 item 10: no page is wider than a 390 px phone screen, for any role, on every page of the demo
(document.scrollingElement.scrollWidth <= 390 at 390 x 844): wide tables and charts scroll in their own box."""

from datetime import time

import pytest
from django.utils import timezone

pytestmark = pytest.mark.browser

ROLES = {"admin": "admin", "lead": "lead", "alice": "alice", "newcomer": "newcomer-pw"}
EVERYONE = ("/", "/workloads/mine/", "/teams/", "/fragmentation/", "/utilisation/", "/quota/", "/quota/new/",
            "/ledger/", "/reclaim/", "/reports/", "{report}", "/accounts/password_change/")
MEMBERS = ("/teams/nlp/", "/rebalance/", "{plan}", "/forecast/", "/whatif/", "{whatif}", "{quota}")
ADMINS = ("/teams/research/", "/fairshare/", "/fairshare/history/", "/governance/", "/orchestrators/",
          "/rebalance/policies/")


# What sticks out, to say where to look: the outermost elements whose right edge passes the screen's.
WIDEST = """() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391)
  .filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= 391)
  .filter(e => { for (let a = e.parentElement; a; a = a.parentElement) {
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) return false; } return true; })
  .slice(0, 4).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + [...e.classList].join('.')
  + ' ' + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture
def demo_pages(federation, django_user_model):
    from scheduling.models import Orchestrator, PoolPolicy, QuotaRequest, Team
    from scheduling.reports.capacity import Window
    from scheduling.services import demo, rebalance, report_delivery, whatif

    django_user_model.objects.create_user("newcomer", password="newcomer-pw")
    demo.seed_quota_requests()
    now = timezone.now()
    report = report_delivery.generate_report(Window(now - timezone.timedelta(days=7), now, "UTC"))
    lead = django_user_model.objects.get(username="lead")
    scenario = whatif.submit(
        name="four fewer H100 nodes", raw_inputs={"weeks": 1, "fleet": [{"gpu_model": "H100", "nodes": -4}]},
        by=lead, team=Team.objects.get(slug="research"), enqueue=lambda pk: None,
    )
    whatif.run_scenario(scenario.pk)
    # An all-day floor for the Ray pool makes the engine move nodes now: a plan with a reason on every move.
    PoolPolicy.objects.create(orchestrator=Orchestrator.objects.get(name="ray-sweeps"), name="sweeps",
                              weekdays=list(range(1, 8)), start_time=time(0), end_time=time(0), floor_gpus=96)
    plan = rebalance.propose_plan().plan
    assert plan is not None
    return {"{report}": f"/reports/{report.pk}/", "{whatif}": f"/whatif/{scenario.pk}/",
            "{quota}": f"/quota/{QuotaRequest.objects.get(requester__username='alice').pk}/",
            "{plan}": f"/rebalance/{plan.pk}/"}


def _paths(role: str) -> tuple[str, ...]:
    return EVERYONE + (MEMBERS if role != "newcomer" else ()) + (ADMINS if role == "admin" else ())


@pytest.mark.parametrize("role", ROLES)
def test_no_page_is_wider_than_a_phone(browser, live_server, demo_pages, role):
    from tests.browser import Session

    phone = Session(browser, live_server.url, width=390)
    phone.context.close()
    phone.context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=False)
    phone.page = phone.context.new_page()
    try:
        phone.log_in(role if role != "newcomer" else "newcomer", ROLES[role])
        wide = {}
        for path in _paths(role):
            page = phone.go(demo_pages.get(path, path))
            page.wait_for_load_state("networkidle")
            width = page.evaluate("document.scrollingElement.scrollWidth")
            if width > 390:
                wide[path] = (width, page.evaluate(WIDEST))
        assert wide == {}, f"{role}: pages wider than the 390 px screen: {wide}"
    finally:
        phone.context.close()


def test_a_what_ifs_changes_read_as_sentences_not_a_python_dict(session, demo_pages):
    """Issue 33 item 11: the page showed the stored inputs as Python's repr ({'fleet': [{'gpu_model': ...)."""
    lead = session()
    lead.log_in("lead", "lead")
    changes = lead.go(demo_pages["{whatif}"]).locator("#whatif-inputs li").all_inner_texts()
    assert changes == ["Replays 1 week of history (random seed 0).", "Removes 4 H100 nodes."]
    assert lead.errors == []


TALLEST_REASON_ROW = """() => Math.max(0, ...[...document.querySelectorAll('td.why')]
  .map(td => td.closest('tr').getBoundingClientRect().height))"""


def test_a_reason_keeps_a_readable_column_on_a_phone(browser, live_server, demo_pages):
    """A reason squeezed into a table's last column made each row of the rebalance page ~380 px tall on a phone
    (one word a line); it keeps 18rem and its table scrolls sideways instead."""
    from tests.browser import Session

    phone = Session(browser, live_server.url, width=390)
    try:
        phone.log_in("admin", "admin")
        for path in ("/rebalance/", demo_pages["{plan}"], "/teams/nlp/"):
            page = phone.go(path)
            assert page.locator("td.why").count() > 0, f"{path}: no reason cell"
            assert page.evaluate(TALLEST_REASON_ROW) < 150, f"{path}: a row with a reason is too tall on a phone"
    finally:
        phone.context.close()
