"""Django's Redis cache, with one client per connection pool, and a Redis outage costing speed, not errors.

* One ``redis.Redis`` per pool: Django builds a new client around the pool on every cache call; redis-py
  8 fills ~170 response callbacks in each constructor, which was a fifth of an API request's CPU (three
  cache calls a request: the throttle's read and write and the stored list answer). A client only wraps
  its pool and is thread-safe, so reusing it changes nothing else.
* Fail soft: the cache holds only what can be recomputed (stored API answers, forecasts, throttle
  counters), so when Redis is unreachable a read is a miss and a write is dropped, instead of every
  page and API call failing. After a failure Redis is left alone for ``RETRY_AFTER_S`` (a blackholed
  host would otherwise cost a connect timeout per call); the outage and the recovery are logged once.
  Throttling is off meanwhile: availability is worth more than rate limits here.
"""

import functools
import logging
import time

from django.core.cache.backends import redis as django_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
RETRY_AFTER_S = 5.0
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


def _soft(fallback):
    """Run the cache call unless Redis is known to be down; on a connection failure return ``fallback(*args)``."""

    def wrap(method):
        @functools.wraps(method)
        def call(self, *args):
            if time.monotonic() < self._down_until:
                return fallback(*args)
            try:
                result = method(self, *args)
            except UNREACHABLE as error:
                if not self._down_until:
                    logger.warning("Redis cache unreachable (%s); serving without it", error)
                self._down_until = time.monotonic() + RETRY_AFTER_S
                return fallback(*args)
            if self._down_until:
                logger.warning("Redis cache reachable again")
                self._down_until = 0.0
            return result

        return call

    return wrap


def _missing(key, delta=None):
    raise ValueError(f"Key '{key}' not found (Redis unreachable).")


class _SoftClient(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}
        self._down_until = 0.0

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client

    add = _soft(lambda key, value, timeout: False)(django_redis.RedisCacheClient.add)
    get = _soft(lambda key, default: default)(django_redis.RedisCacheClient.get)
    set = _soft(lambda key, value, timeout: None)(django_redis.RedisCacheClient.set)
    touch = _soft(lambda key, timeout: False)(django_redis.RedisCacheClient.touch)
    delete = _soft(lambda key: False)(django_redis.RedisCacheClient.delete)
    get_many = _soft(lambda keys: {})(django_redis.RedisCacheClient.get_many)
    has_key = _soft(lambda key: False)(django_redis.RedisCacheClient.has_key)
    incr = _soft(_missing)(django_redis.RedisCacheClient.incr)
    set_many = _soft(lambda data, timeout: None)(django_redis.RedisCacheClient.set_many)
    delete_many = _soft(lambda keys: None)(django_redis.RedisCacheClient.delete_many)
    clear = _soft(lambda: False)(django_redis.RedisCacheClient.clear)


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = _SoftClient
