"""Pages served again while nothing they were drawn from has changed, for at most ``PAGE_CACHE_SECONDS``.

A page is read far more often than the data under it changes (a collector round every 30 s or so): twenty
people with the overview or their team's page open re-draw the same tables and charts on every reload. As
the API's list answers (``api/list_cache.py``), a page keeps the PostgreSQL generations of every table its
drawing read (the SQL watched while rendering, plus the tables of stored answers it used,
``table_changes.note_reads``), read *before* drawing, and is served again only while they are unchanged: a
grant approved, a share edited or a collector round commits and the next request draws anew.

Unlike a list answer, a page also shows the clock: queue waits ("waiting 41 min"), ranges that end now,
"scraped 2 min ago". So a stored page expires ``PAGE_CACHE_SECONDS`` after it was drawn (the cache's timeout;
30 s by default, one collector round; 0 turns storing off), and every page says when it was drawn (base.html).

The key is everything else the bytes depend on: the view, the user (roles, teams, visibility), the absolute
URL (filters, ranges, host) and the CSRF cookie (the page's forms carry a token of that secret: another
browser of the same user has another one). Stored only: a 200 HTML answer that set no cookie, changed no session
and left or showed no message, on PostgreSQL outside a transaction;
at most ``PAGE_CACHE_MAX_KIB`` and ``PAGE_CACHE_ENTRIES_PER_USER`` pages per user (``services/answer_store``).
"""

import functools
import hashlib
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, HttpResponse

from scheduling.models import Team
from scheduling.services import answer_store, table_changes

CACHE_HEADER = "X-Gpuportal-Cache"
# Read before the view runs (the user by the auth middleware, the team tree by the request's tree scope), so a
# page's capture may not see them: every page depends on them.
ALWAYS_READ = (get_user_model()._meta.db_table, Team._meta.db_table)
# Tables each view was seen to read, per process; grows as new paths are met.
_seen: dict[str, frozenset[str]] = {}


def served_while_unchanged(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    name = f"{view.__module__}.{view.__qualname__}"

    @functools.wraps(view)
    def page(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not _enabled(request):
            return view(request, *args, **kwargs)
        key = _key(name, request)
        stored = cache.get(key)
        # Before a view's first page its tables are unknown: every table counts, once.
        reads = _seen.get(name) or table_changes.known_tables()
        before = table_changes.generations({*ALWAYS_READ, *reads, *(stored["tables"] if stored else ())})
        if stored is not None and _still_true(stored, before):
            return _answer(stored, "hit")
        read: set[str] = set()
        # A write while drawing needs no check of its own: it names its table, which joins the page's tables,
        # and moves that table's generation past the one stored, so the page is drawn again next time.
        with table_changes.tables_read(read):
            response = view(request, *args, **kwargs)
            if hasattr(response, "render") and not response.is_rendered:
                response.render()  # a TemplateResponse draws here, inside the capture
        _seen[name] = _seen.get(name, frozenset()) | read
        read.update(ALWAYS_READ)
        if read <= before.keys() and _storable(request, response):
            entry = {
                "tables": {t: before[t] for t in read},
                "body": response.content,
                "content_type": response["Content-Type"],
            }
            answer_store.store_for_user(
                f"page-index:{request.user.pk}", key, entry,
                keep=settings.PAGE_CACHE_ENTRIES_PER_USER, timeout_s=settings.PAGE_CACHE_SECONDS,
            )
        response[CACHE_HEADER] = "miss"
        return response

    return page


def _enabled(request: HttpRequest) -> bool:
    return (
        settings.PAGE_CACHE_SECONDS > 0
        and request.method in ("GET", "HEAD")
        and request.user.is_authenticated
        and settings.CSRF_COOKIE_NAME in request.COOKIES
        and not len(messages.get_messages(request))  # len() leaves them unread, to be shown
        and not connection.in_atomic_block
        and table_changes.readiness() == "ok"
    )


def _key(name: str, request: HttpRequest) -> str:
    parts = (name, str(request.user.pk), request.COOKIES[settings.CSRF_COOKIE_NAME], request.build_absolute_uri())
    return "page:" + hashlib.blake2b("\n".join(parts).encode(), digest_size=20).hexdigest()


def _still_true(stored: dict, now_seen: dict[str, int]) -> bool:
    return all(now_seen[t] == g for t, g in stored["tables"].items())


def _storable(request: HttpRequest, response: HttpResponse) -> bool:
    return (
        response.status_code == 200
        and not response.streaming
        and response.get("Content-Type", "").startswith("text/html")
        and not response.cookies
        and not response.has_header("Content-Disposition")
        and not request.session.modified
        and not len(messages.get_messages(request))
        and len(response.content) <= settings.PAGE_CACHE_MAX_KIB * 1024
    )


def _answer(stored: dict, state: str) -> HttpResponse:
    response = HttpResponse(stored["body"], content_type=stored["content_type"])
    response[CACHE_HEADER] = state
    return response
