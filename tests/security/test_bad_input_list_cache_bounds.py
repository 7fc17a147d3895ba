"""Issue 16: the list cache's bounds (answer size, answers per user) as bookkeeping alone, without PostgreSQL's
table generations, so they are checked on every database (tests/security/test_bad_input_list_cache.py checks
them through the API on PostgreSQL)."""

import pytest
from django.core.cache import cache
from django.test import override_settings

from scheduling.api import list_cache

KEEP = 3


@pytest.mark.django_db
@override_settings(API_RESPONSE_CACHE_ENTRIES_PER_USER=KEEP, API_RESPONSE_CACHE_MAX_KIB=1)
def test_the_bounds_hold_on_any_cache_backend(cast, rf):
    request = rf.get("/api/v1/teams/")
    request.user = cast["admin"]
    keys = [f"api-list:test-{i}" for i in range(3 * KEEP)]
    for key in keys:
        list_cache.store_answer(request, key, ({}, b"[]", "application/json", '"e"', ""))
    assert [key for key in keys if cache.get(key) is not None] == keys[-KEEP:]
    list_cache.store_answer(request, "api-list:large", ({}, b"x" * 1025, "application/json", '"e"', ""))
    assert cache.get("api-list:large") is None
