"""List answers reused while the tables they read are unchanged: fresh after any committed write to one of
them (ORM, raw SQL, another connection), untouched by writes elsewhere, never shared between users.

These tests commit for real (``transactional_db``): inside pytest-django's per-test transaction the cache
rightly stays off, which ``test_off_when_disabled_and_inside_a_transaction`` checks.
"""

import threading

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from scheduling.api import list_cache
from scheduling.api.list_cache import CACHE_HEADER, CachedListMixin
from scheduling.models import Membership, Node, Orchestrator, Team, Workload
from scheduling.services import table_changes
from tests.support import require_postgres

pytestmark = pytest.mark.usefixtures("transactional_db")

NODES = "/api/v1/nodes/"
TEAMS = "/api/v1/teams/"


def _views(cls=CachedListMixin):
    for sub in cls.__subclasses__():
        yield sub
        yield from _views(sub)


@pytest.fixture(autouse=True)
def _postgres_and_no_memory():
    require_postgres()
    for view in _views():  # what earlier tests taught the views must not decide these
        view._seen_tables = frozenset()
    list_cache.status.cache_clear()
    yield
    list_cache.status.cache_clear()


def _get(client, path, **headers):
    response = client.get(path, **headers)
    assert response.status_code in (200, 304), response.content[:300]
    return response


def _first_node_id() -> int:
    return Node.objects.order_by("pk").values_list("pk", flat=True)[0]


def test_every_table_carries_the_change_trigger_after_migrate():
    assert table_changes.tables_without_trigger() == []


def test_a_table_without_the_trigger_turns_storing_off_and_health_says_why(api, fleet, client, cast):
    client.force_login(cast["admin"])  # /health's details are for admins
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TRIGGER {table_changes.TRIGGER} ON scheduling_orchestrator")
    try:
        admin = api("admin")
        assert CACHE_HEADER not in _get(admin, NODES) and CACHE_HEADER not in _get(admin, NODES)
        assert "scheduling_orchestrator" in client.get("/health").json()["checks"]["api_list_cache"]
    finally:
        table_changes.install_triggers()
        list_cache.status.cache_clear()
    assert client.get("/health").json()["checks"]["api_list_cache"] == "ok"
    _get(admin, NODES)
    assert _get(admin, NODES)[CACHE_HEADER] == "hit"


def test_second_identical_request_is_served_from_the_cache(api, fleet):
    admin = api("admin")
    first, second = _get(admin, NODES), _get(admin, NODES)
    assert (first[CACHE_HEADER], second[CACHE_HEADER]) == ("miss", "hit")
    assert second.content == first.content
    assert second["ETag"] == first["ETag"]
    for header in ("Content-Type", "Vary", "Allow"):
        assert second[header] == first[header] == _get(api("admin"), NODES + "?x=1")[header], header
    assert "Accept" in first["Vary"] and first["Cache-Control"] == "private, no-cache"


def test_a_write_to_a_table_the_list_reads_is_seen_at_once_even_by_raw_sql(api, fleet):
    admin = api("admin")
    _get(admin, NODES)
    with connection.cursor() as cursor:  # no signal, no save(): only the trigger can notice
        cursor.execute("UPDATE scheduling_node SET name = 'renamed-by-sql' WHERE id = %s", [_first_node_id()])
    after = _get(admin, NODES)
    assert after[CACHE_HEADER] == "miss"
    assert "renamed-by-sql" in {row["name"] for row in after.json()["results"]}


def test_a_joined_table_is_a_dependency_too(api, fleet):
    admin = api("admin")
    _get(admin, NODES), _get(admin, NODES)
    Orchestrator.objects.update(name="slurm-renamed")  # nodes show their orchestrator's name
    after = _get(admin, NODES)
    assert after[CACHE_HEADER] == "miss"
    assert {row["orchestrator"] for row in after.json()["results"]} == {"slurm-renamed"}


def test_writes_to_tables_the_list_does_not_read_leave_it_cached(api, fleet, teams):
    admin = api("admin")
    _get(admin, NODES), _get(admin, NODES)
    Team.objects.create(slug="new-team", name="New team")
    Workload.objects.create(
        orchestrator=fleet[0].orchestrator, external_id="w1", team=teams["nlp"], submitted_at=timezone.now()
    )
    assert _get(admin, NODES)[CACHE_HEADER] == "hit"


def test_a_write_committed_by_another_connection_is_seen_only_once_committed(api, fleet):
    admin = api("admin")
    _get(admin, NODES)
    params = connection.get_connection_params()
    dsn = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if k in {"host", "port", "user", "dbname"}})
    with psycopg.connect(dsn, autocommit=False) as other:
        other.execute("UPDATE scheduling_node SET name = 'pending-commit' WHERE id = %s", [_first_node_id()])
        while_open = _get(admin, NODES)  # the uncommitted name is invisible, and stays so in what is stored
        assert "pending-commit" not in while_open.content.decode()
        other.commit()
    after = _get(admin, NODES)
    assert after[CACHE_HEADER] == "miss"
    assert "pending-commit" in after.content.decode()


def test_users_never_share_an_answer(api, cast, teams):
    admin, outsider = api("admin"), api("outsider")
    everyone = {row["slug"] for row in _get(admin, TEAMS).json()["results"]}
    _get(admin, TEAMS)  # stored for the admin
    seen_by_outsider = _get(outsider, TEAMS)
    assert seen_by_outsider[CACHE_HEADER] == "miss"
    assert {row["slug"] for row in seen_by_outsider.json()["results"]} < everyone


def test_a_new_membership_widens_what_the_member_sees_at_once(api, cast, teams):
    outsider = api("outsider")
    before = {row["slug"] for row in _get(outsider, TEAMS).json()["results"]}
    _get(outsider, TEAMS)
    Membership.objects.create(user=cast["outsider"], team=teams["nlp"], role=Membership.Role.RESEARCHER)
    after = _get(outsider, TEAMS)
    assert after[CACHE_HEADER] == "miss"
    assert "nlp" in {row["slug"] for row in after.json()["results"]} - before


def test_query_string_and_host_are_part_of_the_key(api, fleet):
    admin = api("admin")
    _get(admin, NODES), _get(admin, NODES)
    assert _get(admin, NODES + "?state=down")[CACHE_HEADER] == "miss"
    assert _get(admin, NODES, HTTP_HOST="localhost")[CACHE_HEADER] == "miss"


def test_if_none_match_gets_304_without_a_body(api, fleet):
    admin = api("admin")
    etag = _get(admin, NODES)["ETag"]
    again = _get(admin, NODES, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b""
    Node.objects.filter(pk=_first_node_id()).update(name="changed")
    changed = _get(admin, NODES, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag


def test_compaction_keeps_generations_and_answers(api, fleet):
    admin = api("admin")
    _get(admin, NODES), _get(admin, NODES)
    for i in range(5):
        Node.objects.filter(pk=_first_node_id()).update(name=f"n{i}")
    tables = ["scheduling_node", "scheduling_orchestrator"]
    before = table_changes.generations(tables)
    removed = table_changes.compact()
    assert removed > 0 and table_changes.generations(tables) == before
    _get(admin, NODES)
    assert _get(admin, NODES)[CACHE_HEADER] == "hit"


def test_errors_are_not_stored(api, fleet):
    admin = api("admin")
    assert admin.get(NODES + "?page=999").status_code == 404
    assert CACHE_HEADER not in admin.get(NODES + "?page=999")


def test_off_when_disabled_and_inside_a_transaction(api, fleet, client, cast):
    client.force_login(cast["admin"])  # /health's details are for admins
    admin = api("admin")
    with override_settings(API_RESPONSE_CACHE_SECONDS=0):
        assert CACHE_HEADER not in _get(admin, NODES)
        assert client.get("/health").json()["checks"]["api_list_cache"] == "off: API_RESPONSE_CACHE_SECONDS is 0"
    with transaction.atomic():
        Node.objects.filter(pk=_first_node_id()).update(name="uncommitted")
        inside = _get(admin, NODES)
        assert CACHE_HEADER not in inside and "uncommitted" in inside.content.decode()
    assert "uncommitted" in _get(admin, NODES).content.decode()


def test_concurrent_writer_never_leaves_an_older_answer_behind(api, fleet):
    """Readers racing a writer: after the writer's last commit, the next answer shows its last value."""
    admin = api("admin")
    node = _first_node_id()
    done = threading.Event()

    def writer():
        from django.db import connection as own

        for i in range(30):
            Node.objects.filter(pk=node).update(name=f"step-{i}")
        own.close()
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        _get(admin, NODES)
    thread.join()
    assert "step-29" in _get(admin, NODES).content.decode()
