"""Actuators: dry-run by default, exact commands, idempotent edits (no daemon needed here; the live
Slurm tests apply drain/resume for real)."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client as k8s

from scheduling.collectors import KubernetesActuator, RayActuator, SlurmActuator
from scheduling.collectors.actuators import taint_identity, taints_after


def test_a_slurm_drain_is_a_dry_run_by_default_and_names_the_exact_scontrol_command():
    # A missing scontrol proves nothing was executed: running it would raise SourceUnavailable.
    result = SlurmActuator(scontrol="/nonexistent/scontrol").drain("dgx03", "rebalance to k8s")
    assert result.dry_run and not result.changed
    assert result.command_or_request == (
        "/nonexistent/scontrol update nodename=dgx03 state=drain 'reason=rebalance to k8s'"
    )
    assert SlurmActuator(scontrol="scontrol").resume("dgx03").command_or_request == (
        "scontrol update nodename=dgx03 state=resume"
    )


def test_slurm_uses_rest_only_where_slurmrestd_can_update_nodes():
    old = SlurmActuator("http://slurm.test", "jwt", "portal", api_version="v0.0.38").drain("dgx01", "x")
    new = SlurmActuator("http://slurm.test", "jwt", "portal", api_version="v0.0.39").drain("dgx01", "x")
    assert old.command_or_request.startswith("scontrol update")
    assert new.command_or_request == 'POST /slurm/v0.0.39/node/dgx01 {"state": "DRAIN", "reason": "x"}'


def test_slurm_refuses_a_drain_without_a_reason():
    with pytest.raises(ValueError):
        SlurmActuator().drain("dgx01", "  ")


def test_kubernetes_verbs_are_dry_runs_describing_their_patch():
    actuator = KubernetesActuator(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9")))
    cordon = actuator.cordon("dgx08")
    assert cordon.dry_run and not cordon.changed
    assert cordon.command_or_request == 'PATCH /api/v1/nodes/dgx08 {"spec": {"unschedulable": true}}'
    label = actuator.label("dgx08", "gpuportal.io/pool", "slurm")
    assert '"gpuportal.io/pool": "slurm"' in label.command_or_request
    taint = actuator.taint("dgx08", "gpuportal.io/drain", "rebalance")
    assert taint.verb == "taint" and "+gpuportal.io/drain=rebalance:NoSchedule" in taint.command_or_request


def test_taint_lists_keep_other_taints_and_replace_the_same_key_and_effect():
    current = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "drain", "value": "a", "effect": "NoSchedule"},
    ]
    added = taints_after(current, "drain", "b", "NoSchedule", remove=False)
    assert added == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "drain", "value": "b", "effect": "NoSchedule"},
    ]
    assert taints_after(current, "drain", "", "NoSchedule", remove=True) == current[:1]


def test_re_applying_a_taint_without_a_value_gives_the_list_the_apiserver_already_holds():
    # The apiserver omits an empty value; the wanted list must not differ from it by a "value": "".
    current = [{"key": "gpuportal.io/no-new-work", "effect": "NoSchedule"}]
    assert taints_after(current, "gpuportal.io/no-new-work", "", "NoSchedule", remove=False) == current
    assert [taint_identity(t) for t in current] == [("gpuportal.io/no-new-work", "", "NoSchedule")]


def test_re_applying_a_taint_that_is_not_the_last_keeps_the_order_and_its_time_added():
    current = [
        {"key": "first", "value": "a", "effect": "NoExecute", "timeAdded": "2026-12-03T10:00:00Z"},
        {"key": "second", "value": "b", "effect": "NoSchedule"},
    ]
    assert taints_after(current, "first", "a", "NoExecute", remove=False) == current
    changed = taints_after(current, "first", "c", "NoExecute", remove=False)
    assert changed == [{"key": "first", "value": "c", "effect": "NoExecute"}, current[1]]


def test_ray_without_an_autoscaler_config_is_observe_only():
    result = RayActuator(None, dry_run=False).set_bounds("gpu_worker", 0, 4)
    assert not result.changed and result.message.startswith("observe only")
    assert RayActuator("/nonexistent/cluster.yaml").observe_only


def test_ray_bounds_are_written_to_the_autoscaler_config_once(tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "max_workers": 8,
                "available_node_types": {"gpu_worker": {"min_workers": 0, "max_workers": 2, "resources": {"GPU": 8}}},
            }
        )
    )
    dry = RayActuator(config).set_bounds("gpu_worker", 1, 4)
    assert dry.dry_run and not dry.changed
    assert yaml.safe_load(config.read_text())["available_node_types"]["gpu_worker"]["max_workers"] == 2
    applied = RayActuator(config, dry_run=False).set_bounds("gpu_worker", 1, 4)
    assert applied.changed
    node_type = yaml.safe_load(config.read_text())["available_node_types"]["gpu_worker"]
    assert (node_type["min_workers"], node_type["max_workers"]) == (1, 4)
    assert not RayActuator(config, dry_run=False).set_bounds("gpu_worker", 1, 4).changed
    with pytest.raises(ValueError):
        RayActuator(config).set_bounds("cpu_worker", 0, 1)
    with pytest.raises(ValueError):
        RayActuator(config).set_bounds("gpu_worker", 3, 2)
