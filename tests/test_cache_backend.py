"""The Redis cache backend keeps one client per connection pool and still behaves as Django's."""

import os
import subprocess
import sys

import pytest
from django.core.cache.backends.redis import RedisCacheClient

from gpuportal.cache import RedisCache
from tests.support import redis_url, require_redis


@pytest.fixture
def redis_cache():
    require_redis()
    cache = RedisCache(redis_url(), {"KEY_PREFIX": "cache-backend-test"})
    yield cache
    cache.clear()


def test_one_client_per_pool_is_reused(redis_cache):
    client = redis_cache._cache
    assert isinstance(client, RedisCacheClient)
    assert client.get_client("a") is client.get_client("b") is client.get_client(None, write=True)


def test_values_round_trip_and_expire_as_with_djangos_backend(redis_cache):
    redis_cache.set("answer", {"body": b"x" * 10, "n": 3}, 30)
    assert redis_cache.get("answer") == {"body": b"x" * 10, "n": 3}
    assert redis_cache.add("answer", "other") is False
    redis_cache.set("gone", 1, 0)  # timeout 0: expires at once
    assert redis_cache.get("gone", "missing") == "missing"
    assert redis_cache.add("answer-count", 1) is True
    assert redis_cache.incr("answer-count") == 2 and redis_cache.get("answer-count") == 2


def test_settings_use_this_backend_for_a_redis_cache_url():
    code = "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    env = {**os.environ, "CACHE_URL": "redis://127.0.0.1:6379/3", "SECRET_KEY": "x" * 50}
    env["DJANGO_SETTINGS_MODULE"] = "gpuportal.settings"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "gpuportal.cache.RedisCache"
