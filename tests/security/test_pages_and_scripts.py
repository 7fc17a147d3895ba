"""Issue 16, pages and scripts: chart data is embedded so that no text can end its <script> element, and
every page sends a Content-Security-Policy that runs this site's own script files only."""

import json
import re

import pytest
from django.urls import reverse

from scheduling import charts

pytestmark = pytest.mark.django_db

HOSTILE = "<!--<script></script>&"


def _directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


def test_chart_data_carries_no_markup_and_reads_back_the_same():
    html = charts.team_standing_chart([(HOSTILE, 8.0, 4.0, 16.0)])
    block = re.search(r'<script type="application/json" id="(chart-\d+-figure)">(.*?)</script>', html, re.S)
    assert block is not None and "<" not in block.group(2) and "&" not in block.group(2)
    assert json.loads(block.group(2))["data"][0]["x"] == [HOSTILE]
    assert f'data-figure="{block.group(1)}"' in html
    assert html.count("<script") == 1, "the figure is data; static/js/charts.js draws it"


def test_pages_send_a_policy_that_runs_only_the_sites_own_scripts(client, cast):
    client.force_login(cast["researcher"])
    page = client.get(reverse("overview"))
    directives = _directives(page)
    assert directives["script-src"] == ["'self'"] and directives["default-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"]
    assert not any("unsafe" in source for source in directives["style-src-elem"])
    assert "<script>" not in page.content.decode(), "no inline script left on the page"


def test_a_downloaded_report_allows_exactly_its_own_style_element(client, cast, stored_report):
    from scheduling.reports.documents import style_hashes

    client.force_login(cast["researcher"])
    download = client.get(reverse("report-download", args=[stored_report.pk, "html"]))
    own = style_hashes(download.content.decode())
    assert len(own) == 1 and own[0] in _directives(download)["style-src-elem"]
    assert own[0] not in _directives(client.get(reverse("overview")))["style-src-elem"]
