"""Where governance takes effect, as the pages say it (selectors.enforcement.governance_reach): written to the
governed Slurm and Kubernetes orchestrators, observed on Ray, nowhere for the demo's or a disabled one."""

import pytest

from scheduling.models import Orchestrator
from scheduling.selectors.enforcement import governance_reach

pytestmark = pytest.mark.django_db


def _orchestrator(name: str, kind: str, endpoint: str, enabled: bool = True) -> Orchestrator:
    return Orchestrator.objects.create(name=name, kind=kind, endpoint=endpoint, enabled=enabled)


def test_a_change_is_written_to_the_governed_slurm_and_kubernetes_orchestrators_and_observed_on_ray():
    _orchestrator("slurm-a", "slurm", "https://slurm-a.example:6820")
    _orchestrator("k8s-b", "kubernetes", "https://k8s-b.example:6443")
    _orchestrator("ray-c", "ray", "http://ray-c.example:8265")
    _orchestrator("slurm-old", "slurm", "https://old.example:6820", enabled=False)
    _orchestrator("demo-x", "slurm", "demo://demo-x")
    reach = governance_reach()
    assert reach.last_round_at is None
    assert reach.enforced_on == ("k8s-b", "slurm-a") and reach.observed_on == ("ray-c",)
    assert reach.not_governed == ("demo-x: the demo's simulated cluster", "slurm-old: disabled")
    assert reach.where() == (
        "written to k8s-b and slurm-a at the next governance round; ray-c only observed (Ray has no per-team quota)"
    )
    assert reach.where("slurm-a").startswith("written to slurm-a at the next governance round")
    assert reach.enforces("slurm-a") and not reach.enforces("slurm-old") and not reach.enforces("ray-c")
    assert reach.where("slurm-old").startswith("slurm-old is not governed: the portal writes it nowhere")


def test_with_only_the_demo_a_change_is_written_nowhere():
    _orchestrator("demo-x", "slurm", "demo://demo-x")
    reach = governance_reach()
    assert not reach.enforces()
    assert reach.where() == (
        "no orchestrator is governed: the portal writes it to no cluster (demo-x: the demo's simulated cluster)"
    )
