"""Django's Redis cache with one ``redis.Redis`` client per connection pool instead of one per call.

Django builds a new ``redis.Redis`` around the pool on every cache call; redis-py 8 fills ~170 response
callbacks in each constructor, which was a fifth of an API request's CPU (three cache calls a request:
the throttle's read and write and the stored list answer). A client only wraps its pool and is
thread-safe, so reusing it changes nothing else.
"""

from django.core.cache.backends import redis as django_redis


class _ReusedClients(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = _ReusedClients
