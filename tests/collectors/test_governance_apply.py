"""Applying a governance diff: in an order slurmdbd accepts, one result per change, failures isolated."""

from __future__ import annotations

from scheduling.collectors.errors import SourceUnavailable
from scheduling.collectors.governance_apply import apply_slurm, slurm_order
from scheduling.collectors.slurm_accounting import SlurmAccountingWriter
from scheduling.engine.governance_state import Action, DesiredState, diff
from scheduling.engine.governance_types import SlurmAccount, SlurmUser

from .test_slurm_accounting import FakeSacctmgr

TREE = (
    SlurmUser("alice", "nlp"),
    SlurmAccount("nlp", "research", 5000),
    SlurmAccount("research", "portal", 4000),
    SlurmAccount("portal", "root", 1),
)


def test_accounts_are_created_parents_first_and_users_after_their_account():
    order = [c.id for c in slurm_order(diff(DesiredState("hpc", TREE, {}), []).changes)]
    assert order == ["slurm_account:portal", "slurm_account:research", "slurm_account:nlp", "slurm_user:nlp/alice"]


def test_deletes_go_children_first_after_every_create():
    result = diff(DesiredState("hpc", (SlurmAccount("other", "root", 1),), {}), TREE, TREE)
    order = [(c.action.value, c.id) for c in slurm_order(result.changes)]
    assert order == [
        ("create", "slurm_account:other"),
        ("delete", "slurm_user:nlp/alice"),
        ("delete", "slurm_account:nlp"),
        ("delete", "slurm_account:research"),
        ("delete", "slurm_account:portal"),
    ]


def test_applying_the_tree_twice_writes_it_once():
    fake = FakeSacctmgr()
    writer = SlurmAccountingWriter(fake, "c")
    first = apply_slurm(diff(DesiredState("hpc", TREE, {}), []).changes, writer)
    assert all(r.written and not r.error for r in first)
    accounts, users = writer.read()
    again = diff(DesiredState("hpc", TREE, {}), [*accounts, *users], TREE)
    assert {c.action for c in again.changes} == {Action.UNCHANGED} and apply_slurm(again.changes, writer) == []


def test_a_failing_write_is_reported_and_the_rest_still_applied():
    fake = FakeSacctmgr()

    def flaky(args):
        if "research" in args and "add" in args:
            raise SourceUnavailable("sacctmgr: slurmdbd went away")
        return fake(args)

    results = apply_slurm(diff(DesiredState("hpc", TREE[2:], {}), []).changes, SlurmAccountingWriter(flaky, "c"))
    assert [(r.id, r.written, r.error) for r in results] == [
        ("slurm_account:portal", True, ""),
        ("slurm_account:research", False, "sacctmgr: slurmdbd went away"),
    ]
