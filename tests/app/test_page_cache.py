"""Pages served again while the tables they were drawn from are unchanged (scheduling/views/page_cache.py): drawn
anew after any committed write to one of them, never shared between users or browsers, never older than
``PAGE_CACHE_SECONDS``, and never stored when drawing had a side effect (a write, a cookie, a message shown).

These tests commit for real (``transactional_db``): inside pytest-django's per-test transaction the cache rightly
stays off, which ``test_off_inside_a_transaction_and_without_generations`` checks.
"""

import time

import pytest
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import include, path, reverse

from scheduling.models import Node
from scheduling.services import table_changes
from scheduling.views import page_cache
from scheduling.views.page_cache import CACHE_HEADER, served_while_unchanged
from tests.support import require_postgres

OVERVIEW = "/"


@login_required
@served_while_unchanged
def _writes_on_get(request):
    Node.objects.update(gpu_allocated=1)
    return HttpResponse("<p>wrote</p>")


@login_required
@served_while_unchanged
def _sets_a_cookie(request):
    response = HttpResponse("<p>cookie</p>")
    response.set_cookie("seen", "1")
    return response


@login_required
@served_while_unchanged
def _leaves_a_message(request):
    messages.info(request, "for the next page")
    return HttpResponse("<p>message</p>")


urlpatterns = [
    path("writes/", _writes_on_get),
    path("cookie/", _sets_a_cookie),
    path("message/", _leaves_a_message),
    path("", include("gpuportal.urls")),
]


@pytest.fixture
def postgres(transactional_db):
    require_postgres()
    table_changes.readiness.cache_clear()
    page_cache._seen.clear()  # what earlier tests taught the views must not decide these
    yield
    table_changes.readiness.cache_clear()


def _browser(user) -> Client:
    """A signed-in browser holding its CSRF cookie, as after the sign-in page."""
    browser = Client()
    browser.force_login(user)
    browser.get(OVERVIEW)  # the first page sets the CSRF cookie
    assert "csrftoken" in browser.cookies
    return browser


def _get(browser: Client, url: str = OVERVIEW):
    response = browser.get(url)
    assert response.status_code == 200, response.content[:300]
    return response


def test_a_page_is_served_again_until_a_table_it_read_is_written(postgres, cast, fleet):
    admin = _browser(cast["admin"])
    first, second = _get(admin), _get(admin)
    assert (first[CACHE_HEADER], second[CACHE_HEADER]) == ("miss", "hit")
    assert second.content == first.content
    assert second["Content-Type"] == first["Content-Type"]
    with connection.cursor() as cursor:  # no signal, no save(): only the trigger can notice
        cursor.execute("UPDATE scheduling_node SET gpu_total = 6 WHERE name = 'dgx00'")
    after = _get(admin)
    assert after[CACHE_HEADER] == "miss"
    assert after.content != first.content


def test_signing_in_as_someone_else_in_the_same_browser_draws_their_page(postgres, cast, fleet):
    browser = _browser(cast["admin"])
    _get(browser), _get(browser)
    browser.force_login(cast["outsider"])  # the browser keeps its CSRF cookie
    seen = _get(browser)
    assert seen[CACHE_HEADER] == "miss"
    assert b"otto" in seen.content and b"ada" not in seen.content


def test_users_never_share_a_page(postgres, cast, fleet):
    admin, outsider = _browser(cast["admin"]), _browser(cast["outsider"])
    _get(admin), _get(admin)
    seen = _get(outsider)
    assert seen[CACHE_HEADER] == "miss"
    assert b"otto" in seen.content and b"ada" not in seen.content


def test_each_browser_of_a_user_gets_pages_with_its_own_csrf_token(postgres, cast, fleet):
    one, other = _browser(cast["admin"]), _browser(cast["admin"])
    assert one.cookies["csrftoken"].value != other.cookies["csrftoken"].value
    _get(one), _get(one)
    page = _get(other)
    assert page[CACHE_HEADER] == "miss"
    strict = Client(enforce_csrf_checks=True)  # the other browser, checking its form's token as a real one would
    strict.cookies = other.cookies
    token = page.content.decode().split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    assert strict.post(reverse("logout"), {"csrfmiddlewaretoken": token}).status_code == 302


def test_a_page_is_never_older_than_page_cache_seconds(postgres, cast, fleet):
    admin = _browser(cast["admin"])
    with override_settings(PAGE_CACHE_SECONDS=1):
        assert [_get(admin)[CACHE_HEADER] for _ in range(2)] == ["miss", "hit"]
        time.sleep(1.2)  # the clock moves on (waits, ranges ending now) though no table did
        assert _get(admin)[CACHE_HEADER] == "miss"


def test_every_page_says_when_it_was_drawn(postgres, cast, fleet):
    assert b"Figures as of " in _get(_browser(cast["admin"])).content


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/writes/", "/cookie/"])
def test_a_page_drawn_with_a_side_effect_is_never_stored(postgres, cast, fleet, url):
    admin = _browser(cast["admin"])
    assert [_get(admin, url)[CACHE_HEADER] for _ in range(3)] == ["miss"] * 3


@override_settings(ROOT_URLCONF=__name__)
def test_a_page_that_leaves_a_message_is_drawn_each_time(postgres, cast, fleet):
    admin = _browser(cast["admin"])
    for _ in range(3):
        assert _get(admin, "/message/")[CACHE_HEADER] == "miss"
        assert b"for the next page" in _get(admin).content


@override_settings(ROOT_URLCONF=__name__)
def test_a_waiting_message_is_shown_and_the_page_not_stored(postgres, cast, fleet):
    admin = _browser(cast["admin"])  # nothing stored yet: its first page had no CSRF cookie to key it by
    _get(admin, "/message/")  # leaves a message for the next page
    shown = _get(admin)
    assert b"for the next page" in shown.content and CACHE_HEADER not in shown
    after = _get(admin)  # drawn again: the page with the message was not stored
    assert b"for the next page" not in after.content and after[CACHE_HEADER] == "miss"
    assert _get(admin)[CACHE_HEADER] == "hit"


def test_off_inside_a_transaction_and_without_generations(cast, fleet, client):
    client.force_login(cast["admin"])
    client.get(OVERVIEW)
    assert CACHE_HEADER not in client.get(OVERVIEW)


def test_off_when_page_cache_seconds_is_zero(postgres, cast, fleet):
    admin = _browser(cast["admin"])
    with override_settings(PAGE_CACHE_SECONDS=0):
        assert CACHE_HEADER not in _get(admin) and CACHE_HEADER not in _get(admin)
