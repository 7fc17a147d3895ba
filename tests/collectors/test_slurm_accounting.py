"""Slurm accounting readers and the sacctmgr writer, on recorded slurmdb answers (22.05 and 24.11) and a
fake sacctmgr that keeps associations in memory the way slurmdbd does."""

from __future__ import annotations

import pytest

from scheduling.collectors.errors import MalformedResponse, SourceUnavailable
from scheduling.collectors.slurm_accounting import (
    FinishedJob,
    SlurmAccountingWriter,
    add_account_argv,
    gpu_hours_by_account,
    modify_account_argv,
    parse_finished_jobs,
    parse_grp_tres,
    parse_sacctmgr_associations,
    parse_slurmdb_associations,
    sacctmgr_runner,
    slurmdb_time,
)
from scheduling.engine.governance_types import SlurmAccount, SlurmUser

from .conftest import load_fixture

RESEARCH = SlurmAccount("research", "root", 41, (("gres/gpu", 8),))


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40", "v0.0.42"])
def test_associations_read_from_slurmdb_give_fairshare_and_the_gpu_cap(version):
    accounts, users = parse_slurmdb_associations(
        load_fixture("slurm", f"{version}_slurmdb_associations.json"), "gpuportal"
    )
    by_name = {a.name: a for a in accounts}
    assert by_name["research"] == RESEARCH
    assert by_name["vision"] == SlurmAccount("vision", "root", 1, ())
    assert SlurmUser("root", "research") in users and "root" not in by_name


def test_associations_of_another_cluster_are_left_out():
    accounts, users = parse_slurmdb_associations(load_fixture("slurm", "v0.0.42_slurmdb_associations.json"), "other")
    assert accounts == [] and users == []


def test_sacctmgr_parsable_rows_split_into_accounts_and_users():
    text = "root|||1|\nroot|root||1|\nresearch||root|41|gres/gpu=8\nresearch|alice||parent|\n"
    accounts, users = parse_sacctmgr_associations(text)
    assert accounts == [RESEARCH] and users == [SlurmUser("root", "root"), SlurmUser("alice", "research")]


def test_a_short_sacctmgr_row_is_malformed_not_guessed():
    with pytest.raises(MalformedResponse, match="5 fields"):
        parse_sacctmgr_associations("research|root\n")


def test_grptres_text_reads_as_sorted_pairs_and_a_cleared_limit_reads_as_none():
    assert parse_grp_tres("gres/gpu=8,cpu=64") == (("cpu", 64), ("gres/gpu", 8))
    assert parse_grp_tres("gres/gpu=-1") == () and parse_grp_tres("") == ()
    with pytest.raises(MalformedResponse):
        parse_grp_tres("gres/gpu=lots")


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.42"])
def test_finished_jobs_carry_their_gpus_and_times(version):
    jobs = {j.account: j for j in parse_finished_jobs(load_fixture("slurm", f"{version}_slurmdb_jobs.json"))}
    quick = jobs["research"]
    assert quick.state == "COMPLETED" and quick.gpus == 2 and quick.end - quick.start in (2, 3)
    assert quick.gpu_seconds == 2 * (quick.end - quick.start)


def test_a_job_cancelled_before_it_started_used_nothing_and_is_left_out():
    document = {"jobs": [{"job_id": 7, "state": {"current": ["CANCELLED"]}, "time": {"start": 0, "end": 99}}]}
    assert parse_finished_jobs(document) == []


def test_slurmdb_reporting_nothing_found_is_an_empty_answer_not_a_failure():
    document = load_fixture("slurm", "v0.0.38_slurmdb_jobs.json") | {"jobs": []}
    document["errors"] = [{"error_number": 9003, "error": "Nothing found with query"}]
    assert parse_finished_jobs(document) == []
    document["errors"] = [{"error_number": 7000, "error": "Unable to connect to database"}]
    with pytest.raises(SourceUnavailable):
        parse_finished_jobs(document)


def test_gpu_hours_per_account_clip_each_job_to_the_window():
    jobs = [FinishedJob("1", "a", "u", "COMPLETED", 4, 0, 7200), FinishedJob("2", "b", "u", "FAILED", 1, 3600, 10800)]
    assert gpu_hours_by_account(jobs, 3600, 7200) == {"a": 4.0, "b": 1.0}
    assert gpu_hours_by_account(jobs, 7200, 9000) == {"b": 0.5}


def test_adding_an_account_sets_its_parent_fairshare_and_cap_in_one_command():
    assert add_account_argv(RESEARCH, "c") == [
        "-i",
        "add",
        "account",
        "research",
        "cluster=c",
        "parent=root",
        "fairshare=41",
        "grptres=gres/gpu=8",
    ]


def test_modifying_sets_only_what_differs_and_clears_a_cap_that_should_go():
    current = SlurmAccount("research", "root", 41, (("gres/gpu", 8), ("cpu", 64)))
    wanted = SlurmAccount("research", "root", 40, (("gres/gpu", 8),))
    argv = modify_account_argv(wanted, current, "c")
    assert argv[-2:] == ["fairshare=40", "grptres=gres/gpu=8,cpu=-1"]
    assert modify_account_argv(current, current, "c") == []


class FakeSacctmgr:
    """Associations in memory; answers the show/add/modify/delete commands the writer sends."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], list[str]] = {("root", ""): ["root", "", "", "1", ""]}
        self.writes: list[list[str]] = []

    def __call__(self, args):
        args = list(args)
        if args[:2] == ["-n", "-P"]:
            return self.show(dict(a.split("=", 1) for a in args if "=" in a))
        self.writes.append(args)
        words = dict(a.split("=", 1) for a in args if "=" in a)
        if args[1:3] == ["add", "account"]:
            grp = words.get("grptres", "")
            self.rows[(args[3], "")] = [args[3], "", words["parent"], words["fairshare"], grp]
        elif args[1:3] == ["add", "user"]:
            self.rows[(words["account"], args[3])] = [words["account"], args[3], "", "1", ""]
        elif args[1:3] == ["modify", "account"]:
            row = self.rows[(words["name"], "")]
            for key, index in (("parent", 2), ("fairshare", 3)):
                row[index] = words.get(key, row[index])
            if "grptres" in words:
                row[4] = ",".join(p for p in words["grptres"].split(",") if not p.endswith("=-1"))
        elif args[1:3] == ["delete", "account"]:
            self.rows = {k: v for k, v in self.rows.items() if k[0] != words["name"]}
        elif args[1:3] == ["delete", "user"]:
            self.rows.pop((words["account"], words["name"]), None)
        return ""

    def show(self, where):
        rows = [
            r
            for (account, user), r in self.rows.items()
            if where.get("account", account) == account and where.get("user", user) == user
        ]
        return "".join("|".join(r) + "\n" for r in rows)


def test_ensuring_an_account_twice_writes_once():
    fake = FakeSacctmgr()
    writer = SlurmAccountingWriter(fake, "c")
    assert writer.ensure_account(RESEARCH) is True
    assert writer.ensure_account(RESEARCH) is False
    assert len(fake.writes) == 1 and writer.read()[0] == [RESEARCH]


def test_ensuring_a_changed_account_modifies_it_in_place():
    fake = FakeSacctmgr()
    writer = SlurmAccountingWriter(fake, "c")
    writer.ensure_account(RESEARCH)
    writer.ensure_account(SlurmAccount("research", "root", 60, ()))
    assert fake.writes[-1][:4] == ["-i", "modify", "account", "where"]
    assert writer.read()[0] == [SlurmAccount("research", "root", 60, ())]


def test_users_are_added_once_and_removing_an_absent_one_writes_nothing():
    fake = FakeSacctmgr()
    writer = SlurmAccountingWriter(fake, "c")
    writer.ensure_account(RESEARCH)
    alice = SlurmUser("alice", "research")
    assert writer.ensure_user(alice) and not writer.ensure_user(alice)
    assert writer.remove_user(alice) and not writer.remove_user(alice)
    assert writer.remove_account("research") and not writer.remove_account("research")
    assert [w[1:3] for w in fake.writes] == [
        ["add", "account"],
        ["add", "user"],
        ["delete", "user"],
        ["delete", "account"],
    ]


def test_slurmdb_times_are_epoch_from_v0042_and_relative_to_now_before_it():
    assert slurmdb_time(1000, "v0.0.42", now=5000) == "1000"
    assert slurmdb_time(1000, "v0.0.41", now=5000) == "now-4000"  # 24.11's v0.0.40/41 refuse epochs with 422
    assert slurmdb_time(1000, "v0.0.40", now=5000) == "now-4000"
    assert slurmdb_time(1000, "v0.0.38", now=5000) == "now-4000"
    assert slurmdb_time(5060, "v0.0.38", now=5000) == "now+60"
    assert slurmdb_time(5000.2, "v0.0.37", now=5000) == "now"


def test_a_failing_sacctmgr_is_a_source_unavailable_error_with_its_message():
    run = sacctmgr_runner(["sh", "-c", 'echo " Nothing new added." >&2; exit 1', "sacctmgr"])
    with pytest.raises(SourceUnavailable, match=r"add account x -> 1: Nothing new added\."):
        run(["add", "account", "x"])


def test_a_missing_sacctmgr_binary_is_retryable_unavailability():
    with pytest.raises(SourceUnavailable) as error:
        sacctmgr_runner(["/nonexistent/sacctmgr"])(["show", "assoc"])
    assert error.value.retryable
