"""Redis down: the API and the pages keep answering (the cache, throttle counters included, is skipped)."""

import pytest
from django.test import override_settings

from scheduling.api.list_cache import CACHE_HEADER

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connections are refused at once


@pytest.mark.django_db(transaction=True)  # committed data, so the list cache is in play where it can be
def test_the_api_and_pages_keep_answering_while_redis_is_down(api, fleet, client, cast):
    caches = {"default": {"BACKEND": "gpuportal.cache.RedisCache", "LOCATION": UNREACHABLE}}
    with override_settings(CACHES=caches):
        admin = api("admin")
        for _ in range(3):
            response = admin.get("/api/v1/nodes/")
            assert response.status_code == 200 and response.json()["count"] == len(fleet)
            assert response.get(CACHE_HEADER) != "hit"  # nothing could be stored
        client.force_login(cast["admin"])
        assert client.get("/").status_code == 200
