"""Retry policy, backoff with jitter and the circuit breaker (pure; no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.collectors import BreakerState, CircuitBreaker, MalformedResponse, RetryPolicy, SourceUnavailable
from scheduling.collectors.reliability import guarded, with_retries


def test_the_same_seed_gives_the_same_delays_and_they_grow_to_the_cap():
    policy = RetryPolicy(attempts=6, base_delay_s=1, max_delay_s=5, jitter=0, seed=3)
    assert list(policy.delays()) == [1, 2, 4, 5, 5]
    jittered = RetryPolicy(attempts=4, seed=42)
    assert list(jittered.delays()) == list(jittered.delays())
    assert list(jittered.delays()) != list(RetryPolicy(attempts=4, seed=43).delays())


@given(attempts=st.integers(1, 8), base=st.floats(0.01, 5), jitter=st.floats(0, 1), seed=st.integers(0, 99))
def test_every_delay_stays_between_the_jittered_floor_and_its_ceiling(attempts, base, jitter, seed):
    policy = RetryPolicy(attempts=attempts, base_delay_s=base, max_delay_s=10, jitter=jitter, seed=seed)
    delays = list(policy.delays())
    assert len(delays) == attempts - 1
    for n, delay in enumerate(delays):
        ceiling = min(10, base * 2**n)
        assert ceiling * (1 - jitter) - 1e-9 <= delay <= ceiling + 1e-9


def test_only_retryable_failures_are_retried():
    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise SourceUnavailable("busy")
        return "ok"

    assert with_retries(flaky, RetryPolicy(attempts=3, seed=1), sleeps.append) == "ok"
    assert len(sleeps) == 2

    def refused():
        calls.append(1)
        raise SourceUnavailable("401", retryable=False)

    calls.clear()
    with pytest.raises(SourceUnavailable):
        with_retries(refused, RetryPolicy(attempts=5), sleeps.append)
    assert len(calls) == 1

    def broken():
        raise MalformedResponse("cut")

    with pytest.raises(MalformedResponse):
        with_retries(broken, RetryPolicy(attempts=5), lambda _s: pytest.fail("no retry on malformed data"))


def test_breaker_state_survives_a_round_trip_through_plain_data():
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=1, reset_after_s=30, clock=lambda: now[0])
    breaker.record_failure("timeout")
    restored = CircuitBreaker(BreakerState.from_dict(breaker.state.to_dict()), reset_after_s=30, clock=lambda: now[0])
    assert restored.status == "open" and restored.state.last_error == "timeout"


def test_a_failed_half_open_trial_reopens_the_breaker_at_once():
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=3, reset_after_s=10, clock=lambda: now[0])
    for _ in range(3):
        breaker.record_failure()
    now[0] = 11
    assert breaker.allow()

    def failing():
        raise SourceUnavailable("still down")

    with pytest.raises(SourceUnavailable):
        guarded(breaker, "slurm", failing)
    assert breaker.status == "open" and breaker.state.opened_at == 11
