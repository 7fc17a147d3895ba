"""List answers reused while PostgreSQL's snapshot is unchanged: fresh after any committed write, per user.

These tests commit for real (``transactional_db``): inside pytest-django's per-test transaction the cache
rightly stays off, which ``test_off_inside_a_transaction`` checks.
"""

import threading

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from scheduling.api.snapshot_cache import CACHE_HEADER
from scheduling.models import Node, Team
from tests.support import require_postgres

pytestmark = pytest.mark.usefixtures("transactional_db")

NODES = "/api/v1/nodes/"
TEAMS = "/api/v1/teams/"


@pytest.fixture(autouse=True)
def _postgres():
    require_postgres()


def _get(client, path, **headers):
    response = client.get(path, **headers)
    assert response.status_code in (200, 304), response.content[:300]
    return response


def test_second_identical_request_is_served_from_the_cache(api, fleet):
    admin = api("admin")
    first, second = _get(admin, NODES), _get(admin, NODES)
    assert (first[CACHE_HEADER], second[CACHE_HEADER]) == ("miss", "hit")
    assert second.content == first.content
    assert second["ETag"] == first["ETag"]
    assert second["Content-Type"] == first["Content-Type"]


def test_any_committed_write_is_seen_at_once_even_one_that_bypasses_the_orm(api, fleet):
    admin = api("admin")
    before = _get(admin, NODES).json()["results"]
    node = Node.objects.order_by("pk").first()
    with connection.cursor() as cursor:  # no signal, no save(): only the snapshot can notice
        cursor.execute("UPDATE scheduling_node SET name = %s WHERE id = %s", ["renamed-by-sql", node.pk])
    after = _get(admin, NODES)
    assert after[CACHE_HEADER] == "miss"
    names = {row["name"] for row in after.json()["results"]}
    assert "renamed-by-sql" in names and names != {row["name"] for row in before}


def test_a_write_committed_by_another_connection_is_seen(api, fleet, settings):
    admin = api("admin")
    _get(admin, NODES)
    params = connection.get_connection_params()
    dsn = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if k in {"host", "port", "user", "dbname"}})
    with psycopg.connect(dsn, autocommit=False) as other:
        other.execute("UPDATE scheduling_node SET name = 'pending-commit' WHERE id = %s", [min_node_id()])
        while_open = _get(admin, NODES)  # the uncommitted name is invisible, and stays so in what is stored
        assert "pending-commit" not in while_open.content.decode()
        other.commit()
    after = _get(admin, NODES)
    assert after[CACHE_HEADER] == "miss"
    assert "pending-commit" in after.content.decode()


def min_node_id() -> int:
    return Node.objects.order_by("pk").values_list("pk", flat=True)[0]


def test_users_never_share_an_answer(api, cast, teams):
    admin, outsider = api("admin"), api("outsider")
    everyone = {row["slug"] for row in _get(admin, TEAMS).json()["results"]}
    _get(admin, TEAMS)  # stored for the admin
    seen_by_outsider = _get(outsider, TEAMS)
    assert seen_by_outsider[CACHE_HEADER] == "miss"
    assert {row["slug"] for row in seen_by_outsider.json()["results"]} < everyone


def test_query_string_and_host_are_part_of_the_key(api, fleet):
    admin = api("admin")
    _get(admin, NODES)
    filtered = _get(admin, NODES + "?state=down")
    assert filtered[CACHE_HEADER] == "miss"
    other_host = _get(admin, NODES, HTTP_HOST="localhost")
    assert other_host[CACHE_HEADER] == "miss"


def test_if_none_match_gets_304_without_a_body(api, fleet):
    admin = api("admin")
    etag = _get(admin, NODES)["ETag"]
    again = _get(admin, NODES, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b""
    Team.objects.create(slug="new-team", name="New team")  # moves the snapshot; nodes are unchanged
    recomputed = _get(admin, NODES, HTTP_IF_NONE_MATCH=etag)
    assert recomputed[CACHE_HEADER] == "miss" and recomputed.status_code == 304


def test_errors_are_not_stored(api, fleet):
    admin = api("admin")
    assert admin.get(NODES + "?page=999").status_code == 404
    assert CACHE_HEADER not in admin.get(NODES + "?page=999")


def test_off_when_disabled_and_inside_a_transaction(api, fleet):
    from django.db import transaction

    admin = api("admin")
    with override_settings(API_RESPONSE_CACHE_SECONDS=0):
        assert CACHE_HEADER not in _get(admin, NODES)
    with transaction.atomic():
        Node.objects.filter(pk=Node.objects.order_by("pk").first().pk).update(name="uncommitted")
        inside = _get(admin, NODES)
        assert CACHE_HEADER not in inside and "uncommitted" in inside.content.decode()
    assert "uncommitted" in _get(admin, NODES).content.decode()


def test_concurrent_writer_never_leaves_an_older_answer_behind(api, fleet):
    """Readers racing a writer: after the writer's last commit, the next answer shows its last value."""
    admin = api("admin")
    node = Node.objects.order_by("pk").first()
    stop = threading.Event()

    def writer():
        from django.db import connection as own

        for i in range(30):
            Node.objects.filter(pk=node.pk).update(name=f"step-{i}")
        own.close()
        stop.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not stop.is_set():
        _get(admin, NODES)
    thread.join()
    assert "step-29" in _get(admin, NODES).content.decode()
