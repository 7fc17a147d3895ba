"""The Redis cache backend: one client per connection pool, Django's behaviour, and soft failure."""

import os
import subprocess
import sys
import time

import pytest
from django.core.cache.backends.redis import RedisCacheClient

from gpuportal.cache import RedisCache
from tests.support import redis_url, require_redis

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connections are refused at once


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
    with pytest.raises(ValueError):
        redis_cache.incr("never-set")


def test_an_unreachable_redis_is_a_miss_not_an_error_and_is_left_alone_for_a_while(caplog):
    cache = RedisCache(UNREACHABLE, {})
    assert cache.get("k", "default") == "default"
    assert cache._cache._down_until > time.monotonic()
    cache.set("k", 1)
    assert cache.add("k", 1) is False and cache.get_many(["k"]) == {} and not cache.has_key("k")
    with pytest.raises(ValueError):
        cache.incr("k")
    assert len([r for r in caplog.records if "unreachable" in r.message]) == 1  # logged once, not per call


def test_the_cache_is_tried_again_after_the_pause(redis_cache):
    redis_cache._cache._down_until = time.monotonic() + 60  # as if it had just failed
    redis_cache.set("k", "v")  # skipped while down
    redis_cache._cache._down_until = time.monotonic() - 1
    assert redis_cache.get("k") is None
    redis_cache.set("k", "v")
    assert redis_cache.get("k") == "v" and redis_cache._cache._down_until == 0.0


def test_settings_use_this_backend_for_a_redis_cache_url():
    code = "from django.conf import settings; c = settings.CACHES['default']; print(c['BACKEND'], c['OPTIONS'])"
    env = {**os.environ, "CACHE_URL": "redis://127.0.0.1:6379/3", "SECRET_KEY": "x" * 50}
    env["DJANGO_SETTINGS_MODULE"] = "gpuportal.settings"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("gpuportal.cache.RedisCache") and "socket_timeout" in out
