"""Live governance fleets: Slurm 22.05 (scripts/slurm/start.sh) and Slurm 24.11 (start-trixie.sh), each
with slurmdbd accounting, on state dirs and ports of their own (the defaults + 12000), so a developer's
fleets, CI's and the collector tests' (tests/collectors/conftest.py) run beside them untouched.

Not + 20000: 36817-37208 lies in Linux's ephemeral port range (32768-60999), where any outgoing
connection may hold a port for a moment and a slurmd then fails to bind it ("Address already in use")."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.collectors.conftest import REPO, SlurmFleet, require_live
from tests.k8s_live.conftest import wait_for
from tests.support import require

SCRIPTS = REPO / "scripts" / "slurm"
TRIXIE_CACHE = Path(os.environ.get("SLURM_TRIXIE_CACHE", "/var/cache/gpuportal-slurm-trixie"))
FLEETS = {
    "22.05": (
        "start.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-governance",
            "SLURMCTLD_PORT": "28817",
            "SLURMDBD_PORT": "28819",
            "SLURMRESTD_PORT": "28820",
            "SLURMD_PORT_BASE": "29000",
        },
    ),
    "24.11": (
        "start-trixie.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-trixie-governance",
            "SLURMCTLD_PORT": "28827",
            "SLURMDBD_PORT": "28829",
            "SLURMRESTD_PORT": "28830",
            "SLURMD_PORT_BASE": "29200",
        },
    ),
}
BINARIES = ["slurmctld", "slurmd", "slurmdbd", "slurmrestd", "munged", "sacctmgr", "mariadb"]


@dataclass
class GovernedFleet(SlurmFleet):
    """A fleet plus what governance needs: its version, API version and its own client binaries."""

    version: str = ""
    api_version: str = ""
    bin_dir: str = ""

    def sacctmgr_prefix(self) -> list[str]:
        return [f"{self.bin_dir}/sacctmgr"]


def _require(version: str) -> None:
    require_live(f"Slurm {version} with accounting", BINARIES)
    built = (TRIXIE_CACHE / "current" / "COMPLETE").exists()
    require(version != "24.11" or built, f"no Slurm 24.11 root in {TRIXIE_CACHE}: run scripts/slurm/install-trixie.sh")


# The enforcement round's live tests (test_enforcement_live.py): the defaults + 14000, with accounting databases
# of their own, so they run beside the fleets above.
ENFORCEMENT_FLEETS = {
    "22.05": (
        "start.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-govsync",
            "SLURM_ACCT_DB": "govsync_slurm_acct_2205",
            "SLURMCTLD_PORT": "30817",
            "SLURMDBD_PORT": "30819",
            "SLURMRESTD_PORT": "30820",
            "SLURMD_PORT_BASE": "31000",
        },
    ),
    "24.11": (
        "start-trixie.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-trixie-govsync",
            "SLURM_ACCT_DB": "govsync_slurm_acct_2411",
            "SLURMCTLD_PORT": "30827",
            "SLURMDBD_PORT": "30829",
            "SLURMRESTD_PORT": "30830",
            "SLURMD_PORT_BASE": "31200",
        },
    ),
}


@contextmanager
def started_fleet(version: str, script: str, ports: dict[str, str]) -> Iterator[GovernedFleet]:
    """A fleet of ``version`` started by ``script`` on ``ports`` and state dir, stopped afterwards."""
    _require(version)
    env = {**os.environ, **ports}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(SCRIPTS / script)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/slurm/{script} failed:\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    env["SLURM_CONF"] = values["SLURM_CONF"]
    env["PATH"] = f"{values['SLURM_BIN_DIR']}:{env.get('PATH', '')}"
    fleet = GovernedFleet(
        values["SLURMRESTD_URL"],
        values["SLURM_JWT"],
        values["SLURM_USER"],
        env,
        time.monotonic() - started,
        version=values["SLURM_VERSION"],
        api_version="v0.0.38" if version == "22.05" else "v0.0.42",
        bin_dir=values["SLURM_BIN_DIR"],
    )
    try:
        yield fleet
    finally:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)


@pytest.fixture(scope="session", params=sorted(FLEETS))
def governed_fleet(request) -> Iterator[GovernedFleet]:
    with started_fleet(request.param, *FLEETS[request.param]) as fleet:
        yield fleet


@pytest.fixture(scope="session", params=sorted(ENFORCEMENT_FLEETS))
def enforced_fleet(request) -> Iterator[GovernedFleet]:
    with started_fleet(request.param, *ENFORCEMENT_FLEETS[request.param]) as fleet:
        yield fleet


# Approval to enforced with a real worker, and a partial apply (test_enforcement_rounds_live.py): 22.05 on ports
# 19617-19632, two nodes, an accounting database of its own.
ROUNDS_FLEET = (
    "start.sh",
    {
        "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-rounds",
        "SLURM_ACCT_DB": "rounds_slurm_acct_2205",
        "SLURM_NODES": "2",
        "SLURMCTLD_PORT": "19617",
        "SLURMDBD_PORT": "19619",
        "SLURMRESTD_PORT": "19620",
        "SLURMD_PORT_BASE": "19630",
    },
)


@pytest.fixture(scope="session")
def rounds_fleet() -> Iterator[GovernedFleet]:
    with started_fleet("22.05", *ROUNDS_FLEET) as fleet:
        yield fleet


# ------------------------------------------------------------------------------------------- Kubernetes

VOLCANO = ("scheduling.volcano.sh", "v1beta1", "queues")


@dataclass(frozen=True)
class Footprint:
    namespaces: frozenset[str]
    quotas: frozenset[tuple[str, str]]
    queues: frozenset[str]


def footprint(core, custom) -> Footprint:
    return Footprint(
        frozenset(ns.metadata.name for ns in core.list_namespace().items),
        frozenset((q.metadata.namespace, q.metadata.name) for q in core.list_resource_quota_for_all_namespaces().items),
        frozenset(q["metadata"]["name"] for q in custom.list_cluster_custom_object(*VOLCANO)["items"]),
    )


@pytest.fixture
def cluster(cluster):
    """The session's Kubernetes cluster, left as this test found it: a round here writes namespaces, quotas and
    Volcano queues (queues without the status a Volcano controller would add), and later tests — the collector's
    compare every queue and namespace of the cluster with what they seeded — share the cluster."""
    core, custom = cluster.core, cluster.custom
    before = footprint(core, custom)
    specs = {q["metadata"]["name"]: q["spec"] for q in custom.list_cluster_custom_object(*VOLCANO)["items"]}
    yield cluster
    after = footprint(core, custom)
    for name in after.queues - before.queues:
        custom.delete_cluster_custom_object(*VOLCANO, name)
    for name, spec in specs.items():  # a round governing a seeded team (research) rewrote its queue: put it back
        queue = custom.get_cluster_custom_object(*VOLCANO, name)
        if queue["spec"] != spec:
            queue["spec"] = spec
            custom.replace_cluster_custom_object(*VOLCANO, name, queue)
    for namespace, name in after.quotas - before.quotas:
        if namespace in before.namespaces:  # the others go with their namespace
            core.delete_namespaced_resource_quota(name, namespace)
    added = after.namespaces - before.namespaces
    for name in added:
        core.delete_namespace(name)
    # kube-controller-manager empties and removes them; a later test may create the same name again
    wait_for(
        lambda: not added & footprint(core, custom).namespaces, timeout=120, what=f"namespaces {sorted(added)} gone"
    )
