"""Migration 0020 keeps what governance knew: its Slurm user overrides become identity override rows, and the
names workloads carried become their cluster names."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduling.services import table_changes

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE, AFTER = ("scheduling", "0019_grant_reminder_and_extension"), ("scheduling", "0020_workload_owners")


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


@pytest.fixture
def back_to_latest():
    yield
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    migrate(next(node for node in leaves if node[0] == "scheduling"))  # the other tests' schema
    if table_changes.supported():
        table_changes.install_triggers()  # as migrate's post_migrate does: the re-made tables lost theirs
        assert table_changes.tables_without_trigger() == []


def test_governance_user_overrides_become_rows_and_workload_users_their_cluster_names(back_to_latest):
    old = migrate(BEFORE)
    alice = old.get_model("auth", "User").objects.create(username="alice")
    options = {"governance": {"mode": "auto", "user_overrides": {"alice": "asmith", "gone": "x1"}}}
    hpc = old.get_model("scheduling", "Orchestrator").objects.create(
        name="hpc", kind="slurm", endpoint="https://slurm.example", options=options
    )
    old.get_model("scheduling", "Workload").objects.create(
        orchestrator=hpc, external_id="1", user="asmith", submitted_at="2026-12-01T00:00:00Z"
    )
    new = migrate(AFTER)
    overrides = new.get_model("scheduling", "IdentityOverride").objects
    rows = list(overrides.values_list("user_id", "orchestrator__name", "kind", "name"))
    assert rows == [(alice.pk, "hpc", "slurm_user", "asmith")]  # "gone" names no portal user: never used
    assert new.get_model("scheduling", "Orchestrator").objects.get().options == {"governance": {"mode": "auto"}}
    workload = new.get_model("scheduling", "Workload").objects.get()
    assert (workload.user, workload.cluster_user) == ("asmith", "asmith")  # the next round maps the owner
