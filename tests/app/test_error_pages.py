"""403, 404 and 500 are pages in the site's layout that say why and where to go, not Django's bare texts
or its debug page (which the demo, running with DEBUG on, used to show for a page's 404)."""

import pytest
from django.test import RequestFactory
from django.views import defaults

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("debug", [False, True])
def test_a_page_about_something_missing_is_the_layouts_404_with_ways_on(client, cast, settings, debug):
    settings.DEBUG = debug
    client.force_login(cast["researcher"])
    response = client.get("/quota/999999/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Nothing here" in body and "/quota/999999/" in body and 'aria-label="Main"' in body
    assert 'href="/"' in body and "Technical details" not in body and "Page not found at" not in body


def test_a_forbidden_page_is_the_layouts_403_saying_why(client, cast):
    client.force_login(cast["researcher"])
    response = client.get("/fairshare/")
    body = response.content.decode()
    assert response.status_code == 403
    assert "You may not open this page" in body and "Only portal admins edit fair-share policy." in body
    assert cast["researcher"].username in body and 'aria-label="Main"' in body


def test_the_api_keeps_answering_its_errors_in_json(client, cast):
    client.force_login(cast["researcher"])
    response = client.get("/api/v1/quota-requests/999999/")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")


def test_a_server_error_is_a_page_that_needs_no_request_context():
    """Django renders 500.html with an empty context: the page may not depend on the user or a query."""
    response = defaults.server_error(RequestFactory().get("/anything/"))
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in body and "saved whole" in body and "/static/css/portal.css" in body
