"""List responses served again while the database shows nothing new: keyed by PostgreSQL's snapshot.

Dashboards and scripts poll the same lists every few seconds, and the data under them changes with a
collector round (every 30 s or so), so most list requests recompute an answer the previous poll already
had (issue 9's load benchmark spends ~80% of its CPU in the queryset and the serializer).

The key is the one thing that proves two answers are equal: ``pg_current_snapshot()``. Two statements
with the same snapshot (oldest running transaction, next transaction id, the ones in progress) see
exactly the same committed rows, whichever table, writer or path (ORM, ``bulk_update``, raw SQL) changed
them; any write commits under a new transaction id and so moves the snapshot for every later reader.
The snapshot is read *before* the list is computed, so a commit in between only makes the stored answer
newer than its key, never older. No per-table bookkeeping, no triggers, nothing to forget to invalidate.

The rest of the key is everything else the body depends on: the user (visibility, roles), the absolute
URL (filters, page, and the host in pagination links), the renderer. Only 200 answers on PostgreSQL,
outside a transaction (our own uncommitted writes are invisible to the snapshot's text), are stored,
for at most ``API_RESPONSE_CACHE_SECONDS`` (so a deploy that changes a serializer is seen soon), and
only up to ``MAX_BODY_BYTES``. Every answer carries an ``ETag``; a matching ``If-None-Match`` gets 304.
"""

import hashlib

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import HttpResponse, HttpResponseNotModified

CACHE_HEADER = "X-Gpuportal-Cache"
MAX_BODY_BYTES = 1 << 20
CACHED_FORMATS = frozenset({"json"})


def database_snapshot() -> str | None:
    """The snapshot a new statement of this connection would see, or None where it proves nothing."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_snapshot()::text")
        return cursor.fetchone()[0]


def _key(request, snapshot: str) -> str:
    parts = (str(request.user.pk), request.accepted_renderer.format, request.build_absolute_uri(), snapshot)
    return "api-list:" + hashlib.blake2b("\n".join(parts).encode(), digest_size=20).hexdigest()


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _answer(request, body: bytes, content_type: str, etag: str, state: str) -> HttpResponse:
    if etag in request.headers.get("If-None-Match", ""):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(body, content_type=content_type)
    response["ETag"] = etag
    response[CACHE_HEADER] = state
    return response


class SnapshotCachedListMixin:
    """For viewsets whose list body depends on the database and the request only (not on the clock)."""

    def list(self, request, *args, **kwargs):
        seconds = settings.API_RESPONSE_CACHE_SECONDS
        cacheable = seconds > 0 and request.accepted_renderer.format in CACHED_FORMATS
        snapshot = database_snapshot() if cacheable else None
        if snapshot is None:
            return super().list(request, *args, **kwargs)
        key = _key(request, snapshot)
        stored = cache.get(key)
        if stored is not None:
            return _answer(request, *stored, state="hit")
        response = super().list(request, *args, **kwargs)
        if response.status_code != 200:
            return response
        # Rendered here rather than by the handler, so the bytes can be stored; DRF then skips rendering.
        response = self.finalize_response(request, response, *args, **kwargs)
        body = response.render().content
        stored = (body, response["Content-Type"], _etag(body))
        if len(body) <= MAX_BODY_BYTES:
            cache.set(key, stored, seconds)
        return _answer(request, *stored, state="miss")
