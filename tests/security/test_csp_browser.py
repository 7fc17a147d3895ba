"""Issue 16, in a real browser: a team named like the start of an HTML comment used to stop every chart on
the page from drawing; with the chart data embedded as escaped JSON and drawn by a static script, the charts
draw and the Content-Security-Policy is never violated."""

import pytest

from scheduling.models import Team

pytestmark = pytest.mark.browser

HOSTILE = "<!--<script>"
# Collects what the policy blocked, from before the page's own scripts run.
WATCH_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.cspViolations.push(e.violatedDirective + " " + e.blockedURI + " at " + e.sourceFile + ":" + e.lineNumber);
});
"""
CHART_PAGES = {"/": 3, "/teams/research/": 2, "/utilisation/": 3}


@pytest.fixture
def hostile_team(transactional_db):
    from scheduling.services import demo

    demo.create_demo_federation()
    demo.fill_history(days=0.2, step_s=600)
    Team.objects.filter(slug="research").update(name=HOSTILE)


def test_a_team_named_like_an_html_comment_gets_its_charts_drawn_without_a_csp_violation(session, hostile_team):
    me = session()
    me.context.add_init_script(WATCH_CSP)
    me.log_in("admin", "admin")
    for path, count in CHART_PAGES.items():
        page = me.go(path)
        page.wait_for_function(f"document.querySelectorAll('.plot .main-svg').length >= {count}", timeout=15000)
        undrawn = page.evaluate("[...document.querySelectorAll('.plot')].filter(p => !p.querySelector('.main-svg'))")
        assert undrawn == [] and page.locator(".plot g.trace").count() > 0, f"{path}: a chart was not drawn"
        assert page.evaluate("window.cspViolations") == [], path
    team_axis = me.go("/").locator("#team-chart .xtick").all_text_contents()
    assert HOSTILE in team_axis, "the name is drawn as text"
    assert me.errors == []
