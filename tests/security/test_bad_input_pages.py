"""Issue 16: bad query parameters on the pages are a 400 whose page names the parameter and the rule.

A negative ``per_page`` made django-tables2 ask for page -1 (EmptyPage: a 500); an impossible ``end`` date made
``parse_datetime`` raise ValueError (a 500)."""

import pytest

from scheduling.views.common import MAX_PER_PAGE

pytestmark = pytest.mark.django_db

PAGINATED = [
    ("/quota/", "per_page"),
    ("/quota/", "a-per_page"),
    ("/teams/", "per_page"),
    ("/reports/", "per_page"),
    ("/ledger/", "o-per_page"),
    ("/ledger/", "c-per_page"),
    ("/teams/nlp/", "r-per_page"),
]
RANGED = ["/", "/ledger/", "/utilisation/", "/fragmentation/", "/rebalance/", "/teams/nlp/"]


@pytest.fixture
def admin_client(client, cast, queues):
    client.force_login(cast["admin"])
    return client


@pytest.mark.parametrize("url, parameter", PAGINATED)
@pytest.mark.parametrize("value", ["-1", "0", "1000000000000", "ten", "2.5"])
def test_a_bad_page_size_is_a_400_naming_the_parameter_and_the_rule(admin_client, url, parameter, value):
    response = admin_client.get(url, {parameter: value})
    assert response.status_code == 400
    page = response.content.decode()
    assert parameter in page and f"a whole number from 1 to {MAX_PER_PAGE}" in page


@pytest.mark.parametrize("url, parameter", PAGINATED)
def test_a_good_page_size_is_used(admin_client, url, parameter):
    assert admin_client.get(url, {parameter: "5"}).status_code == 200


@pytest.mark.parametrize("url", RANGED)
@pytest.mark.parametrize("value", ["2026-13-45T99:99", "yesterday", "0001-01-01T00:00", "2026-01-01T00:00+99:00"])
def test_an_impossible_end_is_a_400_naming_the_parameter_and_the_format(admin_client, url, value):
    response = admin_client.get(url, {"end": value})
    assert response.status_code == 400
    page = response.content.decode()
    assert "end" in page and "2026-03-01T12:00" in page
    assert 'href="' in page and "without it" in page  # a way back to the page


@pytest.mark.parametrize("url", RANGED)
def test_a_start_parameter_is_no_server_error(admin_client, url):
    """No page reads ``start`` (windows are a range ending at ``end``): it is ignored, never a 500."""
    assert admin_client.get(url, {"start": "2026-13-45T99:99"}).status_code == 200


def test_a_good_end_still_pins_the_window(admin_client):
    response = admin_client.get("/utilisation/", {"range": "24h", "end": "2025-03-01T12:00"})
    assert response.status_code == 200 and "pinned to 2025-03-01 12:00" in response.content.decode()


@pytest.mark.parametrize("url", ["/quota/?team=1%00", "/teams/?q=a%00", "/ledger/?node=a%00", "/whatif/?x=%00"])
def test_a_nul_in_a_page_filter_is_no_server_error(admin_client, url):
    assert admin_client.get(url).status_code in (200, 400)


PAGES = [
    "/",
    "/teams/",
    "/teams/nlp/",
    "/quota/",
    "/quota/new/",
    "/ledger/",
    "/utilisation/",
    "/fragmentation/",
    "/rebalance/",
    "/rebalance/policies/",
    "/reports/",
    "/forecast/",
    "/whatif/",
    "/orchestrators/",
    "/fairshare/",
    "/fairshare/history/",
]
PARAMETERS = [
    "q",
    "team",
    "parent",
    "top_level",
    "state",
    "kind",
    "severity",
    "status",
    "node",
    "orchestrator",
    "gpu_model",
    "user",
    "min_gpus",
    "range",
    "page",
    "sort",
    "o-page",
    "o-sort",
    "w-page",
    "g-page",
]


@pytest.mark.parametrize("value", ["\x00", "-1", "9" * 30, "ü"])
def test_no_page_answers_odd_query_values_with_a_server_error(admin_client, value):
    for page in PAGES:
        for parameter in PARAMETERS:
            response = admin_client.get(page, {parameter: value})
            assert response.status_code in (200, 400), f"{page}?{parameter}={value!r}: {response.status_code}"


@pytest.mark.parametrize("query", ["?page=-1", "?page=0", "?page=abc", "?page=99999999999999999999", "?per_page=-1"])
def test_api_lists_answer_a_bad_page_with_a_404_or_the_list(cast, query):
    from .bad_input_support import api_as

    client = api_as(cast["admin"])
    for url in ("/api/v1/quota-requests/", "/api/v1/teams/", "/api/v1/reports/", "/api/v1/ledger/findings/"):
        assert client.get(url + query).status_code in (200, 404), url + query
