"""benchmarks/reclaim_sim.py: the public traces are optional (the run says it skipped and why), a second public
trace (Alibaba openb) gets teams from its QoS classes, and on the shipped Philly slice reclaim serves every
claim within the grace plus one round without costing utilisation."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import reclaim_sim

OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


def _main(monkeypatch, capsys, *args: str) -> list[dict]:
    monkeypatch.setattr(sys, "argv", ["reclaim_sim.py", *args])
    reclaim_sim.main()
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_without_the_shared_traces_the_run_says_it_skipped_and_why(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GPUPORTAL_TRACES_DIR", str(tmp_path))
    [line] = _main(monkeypatch, capsys, "--trace", "openb-default")
    assert line["trace"] == "openb-default"
    assert "openb_pod_list_default.csv" in line["skipped"] and "does not exist" in line["skipped"]


def test_openb_pods_get_their_qos_class_as_team(monkeypatch, tmp_path):
    folder = tmp_path / reclaim_sim.OPENB_DIR
    folder.mkdir(parents=True)
    rows = [
        "p0,1000,1024,1,1000,,LS,Running,0,7200,0",
        "p1,1000,1024,2,1000,,BE,Succeeded,60,3600,60",
        "p2,1000,1024,1,1000,,Burstable,Running,120,7200,120",
    ]
    (folder / "openb_pod_list_tiny.csv").write_text("\n".join([OPENB_HEADER, *rows]) + "\n")
    (folder / "openb_node_list_gpu_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,V100\n")
    monkeypatch.setenv("GPUPORTAL_TRACES_DIR", str(tmp_path))
    jobs = reclaim_sim.openb_teams(list(reclaim_sim.load_trace("openb-tiny").jobs), "openb-tiny")
    assert {job.request.id: job.request.team for job in jobs} == {"p0": "LS", "p1": "BE", "p2": "Burstable"}


def test_on_the_shipped_philly_slice_reclaim_serves_claims_within_a_round_and_keeps_utilisation(monkeypatch, capsys):
    copies, split = _main(monkeypatch, capsys, "--trace", "philly-demo")
    assert copies["overdue_beyond_round_gpu_h"] > 0  # nobody takes borrowed GPUs back: guarantees wait
    assert split["overdue_beyond_round_gpu_h"] == 0
    assert split["overdue_gpu_h"] < copies["overdue_gpu_h"]
    # what waited is split by the engine's own decision on each claim: with nobody reclaiming, borrowed GPUs the
    # rules would have given back were there
    assert copies["overdue_gpu_h_by_kind"]["reclaimable"] > 0
    assert sum(split["overdue_gpu_h_by_kind"].values()) == pytest.approx(split["overdue_gpu_h"], abs=0.2)
    assert abs(split["utilisation"] - copies["utilisation"]) <= 0.01
