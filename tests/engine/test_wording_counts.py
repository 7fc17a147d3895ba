"""Issue 33 item 11: counts read as people write them in the reasons the engine gives ("1 GPU", never
"1 GPUs" or "GPU(s)"), and a field's error names its field once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.explain import explain_wait
from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot
from scheduling.engine.types import Rejection, Request
from scheduling.wording import labelled, plural

from .fleets import dgx


def test_a_one_gpu_job_waiting_for_capacity_waits_for_1_gpu() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0", free=0),))
    explanation = explain_wait(Request("j1", gpus_per_member=1), pool, now=0.0, raw_reason="Resources")
    assert explanation.message.startswith("waiting for 1 GPU (1 × 1): 0 free in the pool"), explanation.message


def test_a_rejection_for_one_whole_gpu_says_so_in_the_singular() -> None:
    rejection = ClusterState((dgx("n0", free=0),)).place(Request("j1", gpus_per_member=1))
    assert isinstance(rejection, Rejection)
    assert rejection.message == "needs 1 whole GPU on one node; no GPU is free"


@given(st.integers(min_value=0, max_value=10_000))
def test_plural_never_writes_1_gpus_or_a_bracketed_s(count: int) -> None:
    text = plural(count, "GPU")
    assert text == (f"{count} GPU" if count == 1 else f"{count} GPUs")
    assert "(s)" not in text


def test_an_error_that_starts_with_its_label_is_not_labelled_twice() -> None:
    assert labelled("GPUs", "GPUs must be at least 1.") == "GPUs must be at least 1."
    assert labelled("Weeks", "weeks must be between 1 and 12, got 20") == "weeks must be between 1 and 12, got 20"
    assert labelled("Justification", "This field is required.") == "Justification: This field is required."
