"""Reading and writing native reclaim's QOSes with sacctmgr (collectors/slurm_preemption.py), on sacctmgr's own
answers as the live fleets print them; the writes themselves run live (tests/governance_live/
test_native_reclaim_live.py)."""

from __future__ import annotations

from scheduling.collectors.slurm_preemption import SlurmPreemptionWriter, parse_qos, qos_argv
from scheduling.engine.slurm_preemption import PreemptionQos, preemption_design

# sacctmgr -n -P show qos format=name,priority,preempt,preemptmode,grptres,preemptexempttime (Slurm 22.05)
SHOWN = "normal|0||cluster||\nscavenger|0||requeue||00:10:00\nnlp-guaranteed|1000|scavenger|cluster|gres/gpu=8|\n"


def test_sacctmgr_qos_listing_reads_back_what_governance_manages() -> None:
    found = parse_qos(SHOWN)
    assert found["scavenger"] == PreemptionQos("scavenger", 0, (), "requeue", None, 600)
    assert found["nlp-guaranteed"] == PreemptionQos("nlp-guaranteed", 1000, ("scavenger",), "", 8, 0)
    assert found["normal"].preempt_mode == ""  # "cluster": the slurm.conf PreemptMode


def test_only_what_differs_is_written_and_a_qos_in_step_writes_nothing() -> None:
    design = preemption_design({"nlp": 8}, ["nlp", "recsys"], min_runtime_s=600)
    current = parse_qos(SHOWN)
    assert [qos_argv(qos, current[qos.name]) for qos in design.qos] == [[], []]
    raised = preemption_design({"nlp": 12}, ["nlp"], min_runtime_s=0)
    assert [qos_argv(qos, current[qos.name]) for qos in raised.qos] == [
        ["-i", "modify", "qos", "where", "name=scavenger", "set", "preemptexempttime=-1"],
        ["-i", "modify", "qos", "where", "name=nlp-guaranteed", "set", "grptres=gres/gpu=12"]]


def test_a_dry_run_reads_the_cluster_and_describes_the_writes_without_running_them() -> None:
    ran: list[list[str]] = []
    answers = {"qos": "normal|0||cluster||\n",  # account|user|qos|defaultqos: the account's row has no user
               "assoc": "nlp||normal|\nnlp|root|normal|normal\nrecsys||normal|\nrecsys|root|normal|normal\n"}

    def sacctmgr(argv):
        ran.append(list(argv))
        return answers[argv[3]] if argv[:3] == ["-n", "-P", "show"] else ""

    writer = SlurmPreemptionWriter(sacctmgr, "gpuportal", dry_run=True)
    commands = writer.apply(preemption_design({"nlp": 8}, ["nlp", "recsys"]))
    assert all(argv[:3] == ["-n", "-P", "show"] for argv in ran)  # only reads ran
    assert "sacctmgr -i modify user where name=root account=recsys cluster=gpuportal set qos+=scavenger " \
           "defaultqos=scavenger" in commands
    assert "sacctmgr -i modify account where name=nlp cluster=gpuportal set qos+=nlp-guaranteed,scavenger " \
           "defaultqos=nlp-guaranteed" in commands
