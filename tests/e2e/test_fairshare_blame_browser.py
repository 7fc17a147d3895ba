"""Issue 33 item 8: a fair-share guarantee error lands on the field that was edited. Two sub-teams' weights
change together (still 100 %) with one guarantee raised past the parent's: the error is on that team's
guarantee, not on the sibling whose weight alone changed."""

import pytest

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(("raised", "sibling", "guarantee"), (("nlp", "vision", 70), ("vision", "nlp", 60)))
def test_the_guarantee_error_is_on_the_edited_guarantee(session, federation, raised, sibling, guarantee):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/fairshare/")
    page.locator("tr[data-team='nlp'] input[name$='-weight']").fill("55")
    page.locator("tr[data-team='vision'] input[name$='-weight']").fill("45")
    page.locator(f"tr[data-team='{raised}'] input[name$='-guaranteed']").fill(str(guarantee))
    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector("tr.row-errors")
    errors = page.locator(f"tr[data-team='{raised}'] + tr.row-errors")
    assert "sub-teams' guarantees sum to" in errors.inner_text()
    assert errors.inner_text().startswith(f"{raised}/any:")
    assert page.locator(f"tr[data-team='{sibling}'] + tr.row-errors").count() == 0
    invalid = page.locator("input[aria-invalid='true']")
    assert invalid.count() == 1 and invalid.get_attribute("name").endswith("-guaranteed")
    assert invalid.evaluate("e => e.closest('tr').dataset.team") == raised
    assert admin.errors == []
