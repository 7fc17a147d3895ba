"""Native reclaim's QOS design on Slurm (engine/slurm_preemption.py): properties over any guarantees and accounts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.slurm_preemption import (
    DEFAULT_BORROW_QOS,
    guaranteed_qos,
    preemption_design,
)

TEAMS = st.sampled_from(["nlp", "recsys", "vision", "llm", "hpo", "research"])
GUARANTEES = st.dictionaries(TEAMS, st.floats(min_value=0, max_value=512, allow_nan=False), max_size=6)


@given(guarantees=GUARANTEES, accounts=st.sets(TEAMS), min_runtime=st.floats(min_value=0, max_value=86_400))
def test_only_owners_preempt_and_only_borrowed_work_is_preempted(guarantees, accounts, min_runtime) -> None:
    design = preemption_design(guarantees, accounts, min_runtime_s=min_runtime)
    by_name = {qos.name: qos for qos in design.qos}
    borrow = by_name[DEFAULT_BORROW_QOS]
    assert borrow.preempt == () and borrow.preempt_mode == "requeue" and borrow.grp_gpus is None
    assert borrow.preempt_exempt_s == math.ceil(min_runtime)  # the minimum runtime, natively
    owners = {team: gpus for team, gpus in guarantees.items() if gpus > 0}
    assert set(by_name) == {DEFAULT_BORROW_QOS} | {guaranteed_qos(team) for team in owners}
    for team, gpus in owners.items():
        mine = by_name[guaranteed_qos(team)]
        # within its guarantee only (whole GPUs, never less than guaranteed), and it may preempt borrowed work only
        assert mine.grp_gpus == math.ceil(gpus) and mine.preempt == (DEFAULT_BORROW_QOS,)
        assert mine.priority > borrow.priority


@given(guarantees=GUARANTEES, accounts=st.sets(TEAMS))
def test_every_account_defaults_to_a_qos_it_may_use_its_own_guarantee_else_borrowing(guarantees, accounts) -> None:
    design = preemption_design(guarantees, accounts)
    assert sorted(a.account for a in design.accounts) == sorted(accounts)
    for account in design.accounts:
        assert account.default_qos in account.qos and DEFAULT_BORROW_QOS in account.qos
        owns = guarantees.get(account.account, 0) > 0
        assert account.default_qos == (guaranteed_qos(account.account) if owns else DEFAULT_BORROW_QOS)
        # a team may run in no other team's guaranteed QOS
        assert all(q in (guaranteed_qos(account.account), DEFAULT_BORROW_QOS) for q in account.qos)


def test_a_bad_borrow_qos_or_runtime_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="borrow_qos"):
        preemption_design({}, [], borrow_qos="a b")
    with pytest.raises(ValueError, match="min_runtime_s"):
        preemption_design({}, [], min_runtime_s=-1)
