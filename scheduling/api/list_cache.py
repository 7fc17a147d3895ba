"""List answers served again while none of the tables they were computed from has changed.

Dashboards and scripts poll the same lists every few seconds, and the data under them changes with a
collector round (every 30 s or so), so most list requests recompute an answer the previous poll already
had (the load benchmark, ``benchmarks/api_load.py``, spent ~80% of its CPU in the queryset and the serializer).

What a list reads is discovered, not declared: the SQL run while computing the answer is watched and
every table it names (joins, visibility subqueries, prefetches, serializer lookups) becomes a dependency.
Each table has a generation kept by PostgreSQL triggers (``services/table_changes.py``) that moves with
every commit that wrote it, through the ORM, ``bulk_update`` or raw SQL. A stored answer keeps the
generations of its tables; a request whose tables still have them gets the stored bytes.

The generations are read *before* the answer is computed, so a commit in between only makes the stored
answer newer than its generations, never older. If the computation reads a table whose generation was not
read first (a view's first request, or a new code path), the answer is not stored; the tables are
remembered for the next time. The key is everything else the body depends on: the user (visibility,
roles), the absolute URL (filters, page, the host in pagination links) and the renderer. Only 200 answers
on PostgreSQL, outside a transaction (our own uncommitted writes count for nothing yet), are stored, for
at most ``API_RESPONSE_CACHE_SECONDS``. Every answer carries an ``ETag``; a matching ``If-None-Match`` gets 304.

Bounded, because the key holds the whole URL: a client adding a random parameter to every poll (cache-busting)
stored a new answer each time and grew Redis to 120 MB in 30 s. An answer over ``API_RESPONSE_CACHE_MAX_KIB``
is not stored (large pages are rare and cheap to recompute next to their transfer), and each user keeps at
most ``API_RESPONSE_CACHE_ENTRIES_PER_USER`` answers (``services/answer_store.py``).
"""

import hashlib
import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.http import HttpResponse, HttpResponseNotModified

from scheduling.services import answer_store, table_changes

logger = logging.getLogger(__name__)
CACHE_HEADER = "X-Gpuportal-Cache"
CACHED_FORMATS = frozenset({"json"})


def _enabled(request) -> bool:
    return (
        settings.API_RESPONSE_CACHE_SECONDS > 0
        and request.accepted_renderer.format in CACHED_FORMATS
        and not connection.in_atomic_block
        and status() == "ok"
    )


def describe() -> str:
    """For /health: "ok", or why list answers are not stored."""
    return status() if settings.API_RESPONSE_CACHE_SECONDS > 0 else "off: API_RESPONSE_CACHE_SECONDS is 0"


# Once per process: "ok", or why the database cannot back stored answers (``status.cache_clear()`` to ask again).
status = table_changes.readiness


def _key(view, request) -> str:
    parts = (type(view).__qualname__, str(request.user.pk), request.accepted_renderer.format)
    plain = "\n".join((*parts, request.build_absolute_uri()))
    return "api-list:" + hashlib.blake2b(plain.encode(), digest_size=20).hexdigest()


def _index_key(request) -> str:
    return f"api-list-index:{request.user.pk}"


def store_answer(request, key: str, entry: tuple) -> None:
    """Store one answer and its key in the user's index; beyond the per-user bound, the oldest go."""
    if len(entry[1]) > settings.API_RESPONSE_CACHE_MAX_KIB * 1024:
        return
    answer_store.store_for_user(
        _index_key(request), key, entry,
        keep=settings.API_RESPONSE_CACHE_ENTRIES_PER_USER, timeout_s=settings.API_RESPONSE_CACHE_SECONDS,
    )


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _answer(request, body: bytes, content_type: str, etag: str, vary: str, state: str) -> HttpResponse:
    if etag in request.headers.get("If-None-Match", ""):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(body, content_type=content_type)
    response["ETag"] = etag
    # Per user: no shared cache may keep it; a browser may, asking each time (If-None-Match -> 304).
    response["Cache-Control"] = "private, no-cache"
    if vary:
        response["Vary"] = vary
    response[CACHE_HEADER] = state
    return response


class CachedListMixin:
    """For viewsets whose list body depends on the database and the request only (not on the clock)."""

    # Tables this view's answers were seen to read; grows as new paths are met (per process).
    _seen_tables: frozenset[str] = frozenset()

    def list(self, request, *args, **kwargs):
        if not _enabled(request):
            return super().list(request, *args, **kwargs)
        key = _key(self, request)
        stored = cache.get(key)
        user_table = get_user_model()._meta.db_table  # roles and staff flag are read before the list
        # Before a view's first answer its tables are unknown: every table counts, once.
        reads = type(self)._seen_tables or frozenset(table_changes.known_tables())
        before = table_changes.generations({user_table, *reads, *(stored[0] if stored else ())})
        if stored is not None and all(before[t] == g for t, g in stored[0].items()):
            return _answer(request, *stored[1:], state="hit")
        read: set[str] = set()
        with table_changes.tables_read(read):
            response = super().list(request, *args, **kwargs)
            if response.status_code != 200:
                return response
            # Rendered here, not by the handler, so the bytes can be stored; DRF then skips rendering.
            rendered = self.finalize_response(request, response, *args, **kwargs).render()
        type(self)._seen_tables = type(self)._seen_tables | read
        read.add(user_table)
        body, vary = rendered.content, rendered.get("Vary", "")
        entry = ({t: before[t] for t in read if t in before}, body, rendered["Content-Type"], _etag(body), vary)
        if read <= before.keys():
            store_answer(request, key, entry)
        return _answer(request, *entry[1:], state="miss")
