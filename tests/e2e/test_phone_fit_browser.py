"""Issue 33 item 10, the phone's first screen: the time-range block folds its from–to form away (it took a
quarter of a 390 × 844 screen), and the chart modebar no longer covers the occupancy heatmap's labels."""

import pytest

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}

# Every box of the heatmap's tick labels (the GPU columns on top, the nodes on the left) and of its modebar.
BOXES = """() => {
  const chart = document.querySelector('#heatmap');
  const box = e => { const b = e.getBoundingClientRect();
    return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  return {modebar: [...chart.querySelectorAll('.modebar')].map(box),
          labels: [...chart.querySelectorAll('.xtick text, .ytick text')].map(e => ({text: e.textContent, ...box(e)}))};
}"""


def _signed_in(browser, live_server, username: str, width: int = PHONE["width"]):
    from tests.browser import Session

    person = Session(browser, live_server.url)
    person.context.close()
    person.context = browser.new_context(viewport={"width": width, "height": PHONE["height"]})
    person.page = person.context.new_page()
    person.log_in(username, username)
    return person


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_modebar_covers_none_of_the_heatmaps_labels(browser, live_server, federation, width):
    admin = _signed_in(browser, live_server, "admin", width)
    try:
        page = admin.go("/fragmentation/")
        plot = page.locator("#heatmap .plot")
        plot.scroll_into_view_if_needed()
        plot.hover(position={"x": width // 3, "y": 300})  # the modebar shows while the pointer is on the chart
        page.locator("#heatmap .modebar").wait_for(state="visible")
        boxes = page.evaluate(BOXES)
        assert len(boxes["modebar"]) == 1 and len(boxes["labels"]) >= 8 + 40  # 8 GPU columns, 40 nodes
        covered = [label["text"] for label in boxes["labels"] if _overlap(boxes["modebar"][0], label)]
        assert covered == [], f"at {width} px the modebar covers {covered}"
        assert admin.errors == []
    finally:
        admin.close()


def test_the_time_range_keeps_to_one_band_of_the_phones_first_screen(browser, live_server, federation):
    phone = _signed_in(browser, live_server, "alice")
    try:
        page = phone.go("/utilisation/")
        band = page.evaluate("""() => {
          const parts = [...document.querySelectorAll('form.range, #range-custom > summary')]
            .filter(e => e.checkVisibility()).map(e => e.getBoundingClientRect());
          return Math.max(...parts.map(b => b.bottom)) - Math.min(...parts.map(b => b.top));
        }""")
        assert band <= 0.15 * PHONE["height"], f"the time-range controls take {band:.0f} px of the first screen"
        assert not page.locator("#range-from").is_visible()  # folded away until asked for
        assert page.locator("#range-select").is_visible()  # the presets stay at hand
        page.locator("#range-custom summary").click()
        assert page.locator("#range-from").is_visible() and page.locator("#range-to").is_visible()
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    finally:
        phone.close()


def test_a_chosen_from_to_window_shows_its_form_open(browser, live_server, federation):
    phone = _signed_in(browser, live_server, "alice")
    try:
        page = phone.go("/utilisation/?from=2026-01-05T00:00&to=2026-01-05T06:00")
        assert page.locator("#custom-window").is_visible()
        assert page.locator("#range-from").input_value() == "2026-01-05T00:00"  # what was chosen, ready to change
    finally:
        phone.close()
