"""On a phone (390 px): the navigation is one row that scrolls sideways with the current page in view (it
took 30 % of the screen when it wrapped); error pages keep the layout and a way on."""

import pytest

pytestmark = pytest.mark.browser


def test_on_a_phone_the_navigation_is_one_row_with_the_current_page_in_view(session, federation):
    alice = session(width=390)
    alice.log_in("alice", "alice")
    for path, entry in (("/", "Overview"), ("/quota/", "Quota requests"), ("/reports/", "Reports")):
        page = alice.go(path)
        header = page.locator("header.top").bounding_box()
        assert header is not None and header["height"] < 0.12 * 900, (path, header)
        link = page.locator('nav[aria-label="Main"] [aria-current="page"]')
        assert link.inner_text() == entry
        box, nav = link.bounding_box(), page.locator('nav[aria-label="Main"]').bounding_box()
        assert (
            box is not None
            and nav is not None
            and nav["x"] <= box["x"]
            and box["x"] + box["width"] <= nav["x"] + nav["width"]
        )
    assert alice.errors == []


def test_a_missing_page_is_the_layouts_404_in_the_browser(session, federation):
    bob = session()
    bob.log_in("bob", "bob")
    response = bob.page.goto(bob.base_url + "/quota/987654/")
    assert response is not None and response.status == 404
    assert bob.page.get_by_role("heading", name="Nothing here").is_visible()
    bob.page.get_by_role("link", name="Go to the overview").click()
    bob.page.wait_for_url(bob.base_url + "/")


def test_a_table_downloads_as_csv_from_the_browser(session, federation):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/teams/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as CSV").first.click()
    text = open(download.value.path(), encoding="utf-8").read()  # noqa: SIM115 - a throwaway file Playwright owns
    assert download.value.suggested_filename == "team-list.csv"
    assert text.splitlines()[0].startswith("Team,") and "NLP research" in text and "<a " not in text


def test_a_chart_downloads_its_data_as_csv_and_names_its_png(session, federation):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/utilisation/")
    page.wait_for_selector(".chart-csv")
    with page.expect_download() as download:
        page.locator(".chart-csv").first.click()
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()  # noqa: SIM115 - Playwright's file
    assert lines[0] == "trace,x,GPU-hours" and len(lines) > 1  # the y axis is named by its title
    assert download.value.suggested_filename.endswith(".csv") and download.value.suggested_filename != "chart.csv"
    png_name = page.evaluate(
        "JSON.parse(document.querySelector('script[type=\"application/json\"]').textContent)"
        ".config.toImageButtonOptions.filename"
    )
    assert png_name and png_name != "chart"
    assert admin.errors == []


def test_wide_tables_scroll_in_their_own_box_on_a_phone(session, federation):
    admin = session(width=390)
    admin.log_in("admin", "admin")
    for path in ("/fragmentation/", "/forecast/"):
        page = admin.go(path)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} scrolls sideways by {overflow}px on a phone"
    assert admin.errors == []


def test_an_error_page_does_not_claim_when_its_figures_were_drawn(session, federation):
    bob = session()
    bob.log_in("bob", "bob")
    bob.page.goto(bob.base_url + "/quota/987654/")
    assert bob.page.locator("footer.drawn").count() == 0
    page = bob.go("/")
    assert "Figures as of" in page.locator("footer.drawn").inner_text()


def test_on_a_phone_the_occupancy_heatmap_names_nodes_alone_with_its_key_below(session, federation):
    # Its full labels (leaf · domain · node (model, orchestrator)) left no room on a phone: Plotly cut them.
    admin = session(width=390)
    admin.log_in("admin", "admin")
    page = admin.go("/fragmentation/")
    page.wait_for_function("document.querySelector('#heatmap .plot')?._fullLayout")
    labels, key, left, widest = page.evaluate(
        """() => { const h = document.querySelector('#heatmap .plot');
             const ticks = [...h.querySelectorAll('.ytick text')].map(t => t.getBBox().width);
             return [h.layout.yaxis.ticktext, h.data[0].colorbar.orientation, h._fullLayout._size.l,
                     Math.max(...ticks)]; }"""
    )
    assert labels and all(" · " not in label and "(" not in label for label in labels)
    assert key == "h"
    assert left >= widest, "the node names are cut at the left edge"


def test_a_mistyped_address_in_the_demo_is_the_layouts_404_not_djangos_url_list(session, federation, settings):
    """Issue 33 item 12: `make demo` runs with DEBUG on, where Django answered an unknown address with its debug
    page listing every URL pattern."""
    settings.DEBUG = True
    bob = session()
    bob.log_in("bob", "bob")
    response = bob.page.goto(bob.base_url + "/quotas/")
    assert response is not None and response.status == 404
    text = bob.page.locator("body").inner_text()
    assert "URLconf" not in text and "api/v1/" not in text and "Using the URLconf" not in text
    assert bob.page.get_by_role("heading", name="Nothing here").is_visible()
    bob.page.get_by_role("link", name="Go to the overview").click()
    bob.page.wait_for_url(bob.base_url + "/")
