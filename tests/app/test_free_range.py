"""Free from/to windows beside the presets on every page with a range control: shown, linked, and refused with
the field and the rule when impossible."""

from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

RANGED = ["/", "/ledger/", "/utilisation/", "/fragmentation/", "/rebalance/", "/teams/nlp/"]


@pytest.fixture
def admin_client(client, cast, queues):
    client.force_login(cast["admin"])
    return client


def _at(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize("url", RANGED)
def test_a_free_window_is_shown_with_its_ends_and_a_permalink(admin_client, url):
    until = (timezone.now() - timedelta(days=1)).replace(second=0, microsecond=0)
    since = until - timedelta(hours=5)
    response = admin_client.get(url, {"from": _at(since), "to": _at(until)})
    assert response.status_code == 200
    page = unescape(response.content.decode())
    assert f'id="custom-window">{since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC</span>' in page
    assert f'value="{_at(since)}"' in page and f'value="{_at(until)}"' in page
    assert f"?from={_at(since).replace(':', '%3A')}&to={_at(until).replace(':', '%3A')}" in page


@pytest.mark.parametrize("url", RANGED)
def test_from_after_to_is_a_400_naming_from(admin_client, url):
    now = timezone.now()
    response = admin_client.get(url, {"from": _at(now), "to": _at(now - timedelta(hours=1))})
    assert response.status_code == 400
    assert "from must be before to" in unescape(response.content.decode())


def test_one_end_alone_is_a_400_naming_the_missing_one(admin_client):
    response = admin_client.get("/utilisation/", {"from": _at(timezone.now())})
    assert response.status_code == 400 and "to is needed with from" in unescape(response.content.decode())
    response = admin_client.get("/utilisation/", {"from": "", "to": "soon"})
    assert response.status_code == 400 and "from is needed with to" in unescape(response.content.decode())


def test_an_impossible_end_names_its_parameter(admin_client):
    response = admin_client.get("/utilisation/", {"from": "2026-13-45T99:99", "to": _at(timezone.now())})
    assert response.status_code == 400 and "from must be an ISO 8601" in unescape(response.content.decode())


def test_a_window_longer_than_the_page_reads_is_a_400_naming_to(admin_client):
    now = timezone.now()
    response = admin_client.get("/rebalance/", {"from": _at(now - timedelta(days=8)), "to": _at(now)})
    assert response.status_code == 400
    assert "to may be at most 7 days after from" in unescape(response.content.decode())
