"""The demo's split in Chromium (issue 31): alice (researcher in nlp) goes from the team list to her team's page
and reads its share on every demo orchestrator and GPU model beside the fleet figures, with the note that the
demo's clusters are simulated; the quota page lists the same shares under "Cap now". At 1440 and 390 px the pages
do not scroll sideways (the split table scrolls inside its own frame). Screenshots go to ``$GPUPORTAL_SHOTS`` when
it is set."""

from __future__ import annotations

import pytest

from scheduling.models import EntitlementShare
from tests.browser import shot, sideways

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1440, 390])
def test_alice_reads_nlps_share_per_orchestrator_and_model_on_the_demo(session, federation, width):
    person = session(width=width)
    if width == 390:
        person.page.set_viewport_size({"width": 390, "height": 844})
    person.log_in("alice", "alice")
    page = person.go("/teams/")
    page.get_by_role("link", name="NLP research").first.click()
    page.wait_for_url("**/teams/nlp/")
    split = page.locator("#entitlement-split")
    split.scroll_into_view_if_needed()
    rows = split.locator("tbody tr")
    shares = list(EntitlementShare.objects.filter(team__slug="nlp").select_related("orchestrator"))
    assert rows.count() == len(shares) == 4
    seen = {tuple(rows.nth(i).locator("td").all_inner_texts()[:4]) for i in range(rows.count())}
    assert seen == {(s.orchestrator.name, s.gpu_model, str(s.guarantee), str(s.cap)) for s in shares}
    assert "fleet cap 192" in split.inner_text()
    assert split.locator("#split-simulated").is_visible()
    shot(page, f"team-nlp-{width}")
    assert sideways(page) <= 1, f"the team page scrolls sideways by {sideways(page)}px at {width}"

    page = person.go("/quota/new/")
    row = page.locator('tr[data-team="nlp"]').first
    listed = row.locator("ul.split-shares li").all_inner_texts()
    shot(page, f"quota-{width}")
    assert sorted(listed) == sorted(
        f"{s.orchestrator.name} {s.gpu_model}: guarantee {s.guarantee}, cap {s.cap}" for s in shares
    )
    assert sideways(page) <= 1, f"the quota page scrolls sideways by {sideways(page)}px at {width}"
    assert person.errors == []
