"""Incremental Slurm rounds (issue 35, item 2): a cursor on /jobs, a merge of the changed jobs, full lists
periodically and when the cursor is lost.

slurmctld's ``update_time`` is all or nothing (proc_req.c ``_slurm_rpc_dump_jobs``): no job changed since it ->
"no change", else every job. ``Slurmctld`` below answers exactly so, over the recorded documents, and counts
what it was asked; the live fleet test is tests/collectors/test_slurm_live.py."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.collectors.errors import MalformedResponse
from scheduling.collectors.reliability import NO_RETRY
from scheduling.collectors.slurm import (
    JOB_FIELDS_READ,
    NO_CHANGE_WARNING,
    SlurmCollector,
    SlurmJobCache,
    build_snapshot,
    decode_jobs,
    parse_job,
    parse_jobs,
    takes_update_time,
)
from scheduling.collectors.snapshot import DEFAULT_TEAMS

from .conftest import FIXTURES, load_fixture


@dataclass
class Slurmctld:
    """slurmrestd over a mutable job list: ``changed_at`` is slurmctld's ``last_job_update``; "no change"
    when ``update_time - 1 >= changed_at``, as slurmctld decides."""

    version: str = "v0.0.38"
    jobs: list[dict[str, Any]] = field(default_factory=list)
    changed_at: int = 1_000
    asked: list[int | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        suffix = "v0.0.40" if self.version >= "v0.0.40" else "v0.0.38"
        self.nodes = load_fixture("slurm", f"{suffix}_nodes.json")
        self.partitions = load_fixture("slurm", f"{suffix}_partitions.json")
        if not self.jobs:
            self.jobs = copy.deepcopy(load_fixture("slurm", f"{suffix}_jobs.json")["jobs"])

    def change(self, at: int) -> None:
        self.changed_at = at

    def handle(self, request: httpx.Request) -> httpx.Response:
        what = request.url.path.rsplit("/", 1)[-1]
        if what == "nodes":
            return httpx.Response(200, json=self.nodes)
        if what == "partitions":
            return httpx.Response(200, json=self.partitions)
        since = request.url.params.get("update_time")
        self.asked.append(int(since) if since is not None else None)
        body: dict[str, Any] = {"meta": {}, "errors": []}
        if since is not None and int(since) - 1 >= self.changed_at:
            body |= {"jobs": [], "warnings": [f"{NO_CHANGE_WARNING} since update_time"]}
            if self.version < "v0.0.40":
                del body["warnings"]  # 22.05 says nothing
            return httpx.Response(200, json=body)
        if self.version >= "v0.0.40":
            # The time slurmctld packed the answer (job_info_msg_t.last_update), not its last change.
            body["last_update"] = {"set": True, "infinite": False, "number": int(time.time())}
        return httpx.Response(200, json=body | {"jobs": self.jobs})

    def collector(self, cache: SlurmJobCache) -> SlurmCollector:
        return SlurmCollector(
            "http://slurmrestd",
            "t",
            "slurm",
            self.version,
            transport=httpx.MockTransport(self.handle),
            retry=NO_RETRY,
            job_cache=cache,
        )

    def full_parse(self):
        """What a round without any cache sees of the same documents (the reference)."""
        return build_snapshot(
            "slurm", self.nodes, json.loads(json.dumps({"jobs": self.jobs, "errors": []})), self.partitions
        ).workloads


def _job(base: dict[str, Any], job_id: int, **changes: Any) -> dict[str, Any]:
    return copy.deepcopy(base) | {"job_id": job_id} | changes


def test_fields_left_out_of_the_fingerprint_do_not_change_a_parsed_job():
    """Every field the parser reads is in JOB_FIELDS_READ: without any other field a job parses the same."""
    for suffix in ("v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"):
        for raw in load_fixture("slurm", f"{suffix}_jobs.json")["jobs"]:
            whole = parse_job(raw, orchestrator="s", teams=DEFAULT_TEAMS)
            only_read = {k: v for k, v in raw.items() if k in JOB_FIELDS_READ}
            assert parse_job(only_read, orchestrator="s", teams=DEFAULT_TEAMS) == whole, (suffix, raw["job_id"])


def test_the_first_round_is_full_and_the_next_asks_since_the_cursor_less_the_overlap():
    ctld = Slurmctld()
    cache = SlurmJobCache(overlap_s=30)
    ctld.collector(cache).collect()
    assert (cache.last_round, ctld.asked) == ("full", [None])
    cursor = cache.cursor
    assert cursor is not None and cursor <= time.time() - 30
    ctld.collector(cache).collect()
    assert ctld.asked[1] == cursor


def test_a_submitted_a_cancelled_a_purged_and_a_started_job_are_each_seen_in_the_next_round():
    ctld = Slurmctld()
    cache = SlurmJobCache()
    first = ctld.collector(cache).collect()
    running, pending = ctld.jobs[0], ctld.jobs[3]
    assert {w.external_id for w in first.workloads} >= {str(running["job_id"]), str(pending["job_id"])}
    cache.cursor = 1  # slurmctld changed after it
    ctld.jobs.append(_job(pending, 9001))  # submitted
    ctld.jobs[0] = running | {"job_state": "CANCELLED"}  # cancelled, still listed for MinJobAge
    purged = ctld.jobs.pop(1)  # ended and purged
    ctld.jobs[2] = ctld.jobs[2] | {"priority": 77}  # re-prioritised
    later = ctld.collector(cache).collect()
    assert cache.last_round == "incremental"
    ids = {w.external_id for w in later.workloads}
    assert "9001" in ids and str(running["job_id"]) not in ids and str(purged["job_id"]) not in ids
    assert later.workloads == ctld.full_parse()


def test_no_change_keeps_what_it_knew_when_slurmrestd_says_so():
    ctld = Slurmctld(version="v0.0.40")
    cache = SlurmJobCache(overlap_s=0)
    known = ctld.collector(cache).collect().workloads
    cursor = cache.cursor
    again = ctld.collector(cache).collect()
    assert cache.last_round == "unchanged" and again.workloads == known and ctld.asked == [None, cursor]


def test_an_empty_answer_without_a_word_is_checked_with_a_full_list():
    """22.05 answers "no change" and "no job left" alike (an empty list): the round then asks in full."""
    ctld = Slurmctld(version="v0.0.38")
    cache = SlurmJobCache(overlap_s=0)
    ctld.collector(cache).collect()
    cache.cursor = ctld.changed_at + 5
    ctld.jobs.clear()  # every job purged...
    ctld.change(ctld.changed_at)  # ...as if it had happened before the cursor: the answer is empty
    snapshot = ctld.collector(cache).collect()
    assert ctld.asked[-2:] == [ctld.changed_at + 5, None]
    assert cache.last_round == "full" and snapshot.workloads == ()


def test_a_full_list_every_n_rounds_and_after_the_cursor_is_lost():
    ctld = Slurmctld()
    ctld.change(2**40)  # always changed: every answer to a cursor is the whole list
    cache = SlurmJobCache(full_every=3)
    for _ in range(7):
        ctld.collector(cache).collect()
    assert [a is None for a in ctld.asked] == [True, False, False, True, False, False, True]
    cache.forget()
    ctld.collector(cache).collect()
    assert ctld.asked[-1] is None and cache.last_round == "full"


def test_a_full_round_re_parses_even_a_job_whose_fields_did_not_change():
    ctld = Slurmctld()
    cache = SlurmJobCache(full_every=2)
    ctld.collector(cache).collect()
    stale = next(iter(cache.known))
    fields, workload = cache.known[stale]
    cache.known[stale] = (fields, None)  # a wrong cached answer: a full round must not keep it
    ctld.collector(cache).collect()  # round 2 of 2: full
    assert cache.last_round == "full" and cache.known[stale][1] == workload


def test_v0_0_36_never_sends_update_time():
    assert not takes_update_time("v0.0.36")
    assert takes_update_time("v0.0.37") and takes_update_time("v0.0.38") and takes_update_time("v0.0.42")
    ctld = Slurmctld()
    cache = SlurmJobCache()
    collector = ctld.collector(cache)
    collector.api_version = "v0.0.36"
    collector.collect()
    collector.collect()
    assert ctld.asked == [None, None]


_MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["submit", "cancel", "purge", "start", "priority", "reason"]), st.integers(0, 50)),
    max_size=8,
)


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40"])
@settings(max_examples=40, deadline=None)
@given(rounds=st.lists(_MUTATIONS, min_size=1, max_size=6), full_every=st.integers(1, 5))
def test_every_incremental_round_equals_a_full_parse_of_the_same_list(version, rounds, full_every):
    """Whatever changes between rounds, the merged workloads are what a fresh full parse gives."""
    ctld = Slurmctld(version=version)
    templates = copy.deepcopy(ctld.jobs)
    cache = SlurmJobCache(full_every=full_every, overlap_s=0)
    ctld.collector(cache).collect()
    next_id, clock = 10_000, ctld.changed_at
    for mutations in rounds:
        for op, n in mutations:
            if op == "submit" or not ctld.jobs:
                ctld.jobs.append(_job(templates[n % len(templates)], next_id))
                next_id += 1
                continue
            i = n % len(ctld.jobs)
            if op == "cancel":
                ctld.jobs[i] = ctld.jobs[i] | {"job_state": "CANCELLED"}
            elif op == "purge":
                ctld.jobs.pop(i)
            elif op == "start":
                ctld.jobs[i] = templates[0] | {"job_id": ctld.jobs[i]["job_id"]}
            elif op == "priority":
                ctld.jobs[i] = ctld.jobs[i] | {"priority": n}
            else:
                ctld.jobs[i] = ctld.jobs[i] | {"state_reason": "Priority" if n % 2 else "Resources"}
        if mutations:
            clock += 10
            ctld.change(clock)
        cache.cursor = min(cache.cursor or 0, clock - 1) if mutations else cache.cursor
        snapshot = ctld.collector(cache).collect()
        assert snapshot.workloads == ctld.full_parse()


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40"])
def test_the_cache_holds_exactly_the_listed_jobs(version):
    ctld = Slurmctld(version=version)
    cache = SlurmJobCache()
    ctld.collector(cache).collect()
    assert set(cache.known) == {j["job_id"] for j in ctld.jobs}


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"])
def test_decoding_only_the_read_fields_gives_the_same_workloads_as_the_whole_document(version):
    body = (FIXTURES / "slurm" / f"{version}_jobs.json").read_bytes()
    whole = parse_jobs(json.loads(body)["jobs"], orchestrator="s", teams=DEFAULT_TEAMS)
    assert parse_jobs(decode_jobs(body)["jobs"], orchestrator="s", teams=DEFAULT_TEAMS) == whole
    assert whole


def test_a_jobs_body_that_is_cut_short_or_holds_a_non_object_is_refused_whole():
    with pytest.raises(MalformedResponse, match="not whole JSON"):
        decode_jobs(b'{"jobs": [{"job_id": 1}')
    with pytest.raises(MalformedResponse, match=r"jobs\[1\]"):
        decode_jobs(b'{"jobs": [{"job_id": 1}, 7]}')
