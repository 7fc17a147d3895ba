"""Issue 33 item 9: a user in no team is not stuck. The navigation offers only pages they may open, the quota
form says why its team list is empty and whom to ask, and every role's overview starts with a first step."""

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def newcomer(federation, django_user_model):
    django_user_model.objects.create_user("newcomer", password="newcomer-pw")
    return "newcomer", "newcomer-pw"


def _nav_targets(page) -> list[str]:
    return page.locator('nav[aria-label="Main"] a').evaluate_all("links => links.map(a => a.getAttribute('href'))")


@pytest.mark.parametrize("who", ("newcomer", "alice", "lead", "admin"))
def test_every_navigation_link_opens_for_each_role(session, newcomer, who):
    user = session()
    user.log_in(*(newcomer if who == "newcomer" else (who, who)))
    targets = _nav_targets(user.go("/"))
    assert len(targets) >= 9
    for href in targets:
        if href.startswith("/admin/"):
            continue  # Django's admin site: its own pages
        response = user.page.goto(user.base_url + href)
        assert response is not None and response.status == 200, f"{who}: {href} answers {response and response.status}"
    if who == "newcomer":
        assert not {"/rebalance/", "/forecast/", "/whatif/"} & set(targets)
    assert user.errors == []


def test_a_user_in_no_team_reads_why_and_whom_to_ask(session, newcomer):
    user = session()
    user.log_in(*newcomer)
    step = user.go("/").locator("#first-step")
    assert "You are in no team yet" in step.inner_text() and "a portal admin (admin)" in step.inner_text()
    step.get_by_role("link", name="Weekly reports →").click()
    user.page.wait_for_url(user.base_url + "/reports/")
    form = user.go("/quota/new/")
    assert form.get_by_label("Team", exact=True).locator("option[value]:not([value=''])").count() == 0
    why = form.locator("#no-team").inner_text()
    assert "the team list below is empty: you belong to none yet" in why and "a portal admin (admin)" in why
    assert user.errors == []


@pytest.mark.parametrize(("who", "link"), (("alice", "My workloads →"), ("lead", "Quota requests →"),
                                           ("admin", "Governance →")))
def test_every_role_starts_with_a_first_step_it_may_take(session, federation, who, link):
    user = session()
    user.log_in(who, who)
    step = user.go("/").locator("#first-step")
    response_path = step.get_by_role("link", name=link).get_attribute("href")
    assert user.page.goto(user.base_url + response_path).status == 200
    assert user.errors == []
