"""The rebalancer's verbs take plain arguments (names, endpoints, clients, paths) and read the orchestrator's
answer through collectors/conditions.py; no daemon needed here (the live rebalance tests apply them)."""

from __future__ import annotations

import yaml
from kubernetes import client as k8s

from scheduling.collectors.verbs import DRAIN_TAINT, POOL_LABEL, KubernetesVerbs, RayVerbs, SlurmVerbs


def _slurm(states: dict[str, tuple[str, set[str], str]]) -> SlurmVerbs:
    verbs = SlurmVerbs("", "", "slurm", "v0.0.38", dry_run=True)
    verbs.actuator.node_state = states.__getitem__  # what scontrol would answer
    return verbs


def test_slurm_verbs_drain_to_release_and_resume_to_take():
    verbs = _slurm({})
    verbs.actuator.scontrol = "/nonexistent/scontrol"  # dry run: never executed
    assert verbs.release("dgx03", "to k8s") == "/nonexistent/scontrol update nodename=dgx03 state=drain 'reason=to k8s'"
    assert verbs.take("dgx03").endswith("nodename=dgx03 state=resume")
    assert "reason=gpuportal: rebalance rolled back" in verbs.undo_take("dgx03")


def test_slurm_verbs_read_empty_released_and_taken_from_the_drain_flag():
    verbs = _slurm(
        {
            "busy": ("mixed", {"DRAIN"}, "plan 1"),
            "empty": ("idle", {"DRAIN"}, "plan 1"),
            "down": ("down", {"DRAIN"}, "plan 1"),
            "back": ("idle", set(), ""),
        }
    )
    assert [verbs.is_empty(n) for n in ("busy", "empty", "down", "back")] == [False, True, True, False]
    assert verbs.verify_released("busy") and not verbs.verify_released("back")
    assert verbs.verify_taken("back") and not verbs.verify_taken("empty")


def test_kubernetes_verbs_label_the_node_with_the_owner_they_were_given():
    verbs = KubernetesVerbs(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9")), "k8s-serving", dry_run=True)
    assert f'"{POOL_LABEL}": "k8s-serving"' in verbs.take("dgx08")
    assert f"+{DRAIN_TAINT}=draining:NoSchedule" in verbs.release("dgx08", "to slurm")


def test_ray_verbs_follow_the_owned_count_they_are_asked_when_they_run(tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump({"available_node_types": {"gpu": {"min_workers": 0, "max_workers": 9}}}))
    owned = [4]
    verbs = RayVerbs(config, "gpu", lambda: owned[0], dry_run=False)
    verbs.release("n1", "to slurm")
    assert yaml.safe_load(config.read_text())["available_node_types"]["gpu"] == {"min_workers": 3, "max_workers": 3}
    owned[0] = 5
    verbs.take("n1")
    assert yaml.safe_load(config.read_text())["available_node_types"]["gpu"] == {"min_workers": 5, "max_workers": 5}
    assert verbs.is_empty("n1") is None and verbs.verify_taken("n1")  # Ray cannot say: the portal's count decides
