"""Issue 16: stored list answers are bounded. A client adding a random parameter to every poll stored a new
answer each time (Redis grew to 120 MB in 30 s); now each user keeps at most a few answers and a large answer
is not stored at all. Stored answers exist on PostgreSQL only, so these tests need it (and commit for real)."""

import pytest
from django.test import override_settings

from scheduling.api.list_cache import CACHE_HEADER
from tests.api.test_list_cache import _postgres_and_no_memory  # noqa: F401 - autouse: PostgreSQL, views unlearnt

from .bad_input_support import api_as

pytestmark = pytest.mark.usefixtures("transactional_db")  # commit for real: no stored answer inside a transaction
KEEP = 3


def _state(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response[CACHE_HEADER]


@override_settings(API_RESPONSE_CACHE_ENTRIES_PER_USER=KEEP)
def test_cache_busting_urls_keep_only_the_newest_answers_of_that_user(cast, teams):
    client = api_as(cast["admin"])
    urls = [f"/api/v1/teams/?bust={i}" for i in range(3 * KEEP)]
    assert [_state(client, url) for url in urls] == ["miss"] * len(urls)
    assert [_state(client, url) for url in urls[-KEEP:]] == ["hit"] * KEEP
    assert [_state(client, url) for url in urls[:-KEEP]] == ["miss"] * (len(urls) - KEEP)


@override_settings(API_RESPONSE_CACHE_ENTRIES_PER_USER=KEEP)
def test_one_users_cache_busting_does_not_evict_another_users_answers(cast, teams):
    patient, buster = api_as(cast["researcher"]), api_as(cast["admin"])
    _state(patient, "/api/v1/teams/")
    for i in range(3 * KEEP):
        _state(buster, f"/api/v1/teams/?bust={i}")
    assert _state(patient, "/api/v1/teams/") == "hit"


@override_settings(API_RESPONSE_CACHE_MAX_KIB=1)
def test_an_answer_over_the_size_limit_is_not_stored(cast, teams, fleet):
    client = api_as(cast["admin"])
    assert [_state(client, "/api/v1/nodes/") for _ in range(2)] == ["miss", "miss"]
    assert [_state(client, "/api/v1/teams/") for _ in range(2)] == ["miss", "hit"]
    assert len(client.get("/api/v1/nodes/").content) > 1024 >= len(client.get("/api/v1/teams/").content)
