"""Issue 37: charts laid out as a person sees them, on any machine. The charts draw in a font shipped with the
site (Inter, static/vendor/inter), so the margins static/js/charts.js starts them with fit their labels the
same everywhere; what is held is what a person sees (no label, legend entry or axis title cut off or over
the plot) and what a redraw costs (plotly.js lays each chart out once, at most twice), with a tolerance of a
few pixels instead of margins exact to the pixel."""

import pytest

pytestmark = pytest.mark.browser

CHART_PAGES = {"/": 3, "/teams/research/": 2, "/fragmentation/": 3, "/utilisation/": 3, "/ledger/": 1, "/forecast/": 2}
# How far plotly.js may grow a margin past the start charts.js gave it: sub-pixel text metrics of one font
# differ a little between FreeType builds; a wrong estimate (a legend row, a label's width) is tens of pixels.
GROWTH_TOLERANCE_PX = 6
MAX_DRAWS = 2  # plotly.js lays a chart out again when a margin grows: once is the goal, twice the most

# Counts each chart's layout passes: plotly.js fires plotly_beforeplot at the start of every _doPlot, the first
# and each automargin redraw. Its event emitter is set on the chart's <div> as _ev; this catches that moment.
COUNT_DRAWS = """
Object.defineProperty(HTMLDivElement.prototype, "_ev", {
  configurable: true,
  get: function () { return undefined; },
  set: function (emitter) {
    Object.defineProperty(this, "_ev", { value: emitter, writable: true, configurable: true });
    var holder = this;
    holder.__draws = holder.__draws || 0;
    emitter.on("plotly_beforeplot", function () { holder.__draws += 1; });
  },
});
"""

# Per chart: layout passes, margin growth past charts.js's start, and every text a person reads that is cut off
# by the chart's edge or drawn over the plot area.
LOOK = """() => [...document.querySelectorAll('.plot[data-figure]')].map(h => {
  const box = h.getBoundingClientRect(), size = h._fullLayout._size, slack = 1;
  const plot = {left: box.left + size.l, top: box.top + size.t, right: box.left + size.l + size.w,
                bottom: box.top + size.t + size.h};
  const inside = r => r.left >= box.left - slack && r.right <= box.right + slack
                   && r.top >= box.top - slack && r.bottom <= box.bottom + slack;
  const overPlot = r => r.left < plot.right - slack && r.right > plot.left + slack
                      && r.top < plot.bottom - slack && r.bottom > plot.top + slack;
  const texts = [...h.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, '
                                      + '.legendtext, .cbaxis text, .colorbar text')]
    .map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
  const legend = h.querySelector('.legend');
  const legendBox = legend && legend.getBoundingClientRect();
  return {
    id: h.id,
    draws: h.__draws,
    grown: ['l', 'r', 't', 'b'].map(s => [s, Math.round(size[s]) - h.layout.margin[s]]).filter(([, g]) => g > 0),
    clipped: texts.filter(([, r]) => !inside(r)).map(([t]) => t),
    legendOverPlot: Boolean(legendBox && legendBox.width > 0 && overPlot(legendBox)),
    legendClipped: Boolean(legendBox && legendBox.width > 0 && !inside(legendBox)),
    font: h._fullLayout.font.family,
    textFont: texts.length ? getComputedStyle(h.querySelector('.xtick text, .ytick text')).fontFamily : '',
  };
})"""


def look_at_charts(me, path: str, charts: int) -> list[dict]:
    page = me.go(path)
    page.wait_for_function(
        f"[...document.querySelectorAll('.plot[data-figure]')].filter(h => h._fullLayout && h.querySelector"
        f"('.main-svg')).length >= {charts}",
        timeout=20000,
    )
    page.wait_for_timeout(300)  # an automargin redraw runs after the first layout pass's promises settle
    return page.evaluate(LOOK)


@pytest.mark.parametrize("width", [1440, 390])
def test_charts_draw_in_the_shipped_font_once_with_nothing_cut_off(session, federation, width):
    me = session(width=width)
    me.context.add_init_script(COUNT_DRAWS)
    me.log_in("admin", "admin")
    for path, charts in CHART_PAGES.items():
        seen = look_at_charts(me, path, charts)
        assert len(seen) >= charts, path
        loaded = me.page.evaluate(
            "document.fonts.check('12px Inter') && [...document.fonts].some(f => f.family.replace(/\"/g, '') "
            "=== 'Inter' && f.status === 'loaded')"
        )
        assert loaded, f"{path}: the shipped chart font was not loaded"
        for chart in seen:
            where = f"{path} {chart['id']} at {width}px"
            assert chart["font"].startswith("Inter") and "Inter" in chart["textFont"], (where, chart)
            assert chart["clipped"] == [], f"{where}: text cut off by the chart's edge: {chart['clipped']}"
            assert not chart["legendOverPlot"] and not chart["legendClipped"], f"{where}: legend {chart}"
            assert 1 <= chart["draws"] <= MAX_DRAWS, f"{where}: laid out {chart['draws']} times"
            if width >= 1024:  # on a phone plotly.js may tilt team names 90 degrees, past the estimate: one redraw
                too_far = [(side, grown) for side, grown in chart["grown"] if grown > GROWTH_TOLERANCE_PX]
                assert too_far == [], f"{where}: margins grew past charts.js's start: {too_far}"
    assert me.errors == []


def test_the_chart_font_is_served_from_the_site_with_its_licence(client):
    from django.contrib.staticfiles import finders

    for name in ("inter-latin-400-normal.woff2", "inter-latin-ext-400-normal.woff2"):
        found = finders.find(f"vendor/inter/{name}")
        assert found, name
        with open(found, "rb") as handle:
            assert handle.read(4) == b"wOF2", name
    licence = finders.find("vendor/inter/LICENSE")
    assert licence and "SIL Open Font License" in open(licence, encoding="utf-8").read()  # noqa: SIM115
