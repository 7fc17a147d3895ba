"""A live Kubernetes fixture with Kueue admitting Jobs: scripts/k8s/start.sh (kube-apiserver, etcd,
kube-scheduler, kube-controller-manager with its job controller, KWOK) plus Kueue's controller-manager started
by scripts/k8s/kueue.py, out of cluster, with its webhooks on loopback. Its own cluster (not the seeded fleet
of tests/k8s_live): 4 KWOK nodes x 8 GPUs in two blocks of two (``network.topology.kubernetes.io/block``) and
nothing else, so the GPUs Kueue's quota governs are exactly the GPUs the pods can run on, and the pool the
portal collects is those 32.

Skips with a reason where it cannot run (not root, a binary not built); fails under ``CI=true``.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.k8s_live.conftest import BIN, SCRIPTS, AdminApis, require_fixture, seed, session_env
from tests.support import require

NODES = 4
GPUS_PER_NODE = 8
KUEUE = ("kueue.x-k8s.io", "v1beta2")  # what Kueue stores; the portal writes v1beta1 through its conversion webhook
FLAVOR = "default-flavor"  # GovOrchestrator.kueue_flavor's default


def block_of(node_index: int) -> str:
    return f"leaf{1 + node_index // 2}"


def free_low_port() -> int:
    """A free loopback port below Linux's ephemeral range (32768-60999), where an outgoing connection could
    take it between this probe and the server's bind."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 20000-32000")


@dataclass
class KueueCluster(AdminApis):
    admin: k8s.ApiClient
    portal_kubeconfig: str
    state: Path
    env: dict[str, str]
    kueue_start_seconds: float

    @property
    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self.admin)


def require_kueue() -> None:
    require_fixture()
    require((BIN / "kueue").exists() and (BIN / "kueue-config" / "crd").is_dir(),
            f"live Kueue unavailable: {BIN / 'kueue'} or {BIN / 'kueue-config'} missing (run scripts/k8s/install.sh)")


@pytest.fixture(scope="session")
def kueue_cluster() -> Iterator[KueueCluster]:
    require_kueue()
    env = {
        **os.environ, **session_env(), "K8S_BIN_DIR": str(BIN),
        "K8S_KUEUE_WEBHOOK_PORT": str(free_low_port()), "K8S_KUEUE_HEALTH_PORT": str(free_low_port()),
    }
    state = Path(env["K8S_STATE_DIR"])

    def stop() -> None:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)

    done = subprocess.run(["bash", str(SCRIPTS / "start.sh")], env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    if done.returncode != 0:
        stop()
        pytest.fail(f"scripts/k8s/start.sh failed (logs in {state}/log):\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    admin = k8s_config.new_client_from_config(config_file=values["K8S_ADMIN_KUBECONFIG"])
    passed = False
    try:
        seed.grant_portal_role(admin)
        # two blocks of two nodes (kq00, kq01 in leaf1; kq02, kq03 in leaf2): what topology-aware scheduling places in
        nodes = [seed.node_body(f"kq{index:02d}", block_of(index), GPUS_PER_NODE) for index in range(NODES)]
        seed.register_nodes(k8s.CoreV1Api(admin), nodes)
        started = time.monotonic()
        kueue = subprocess.run([sys.executable, str(SCRIPTS / "kueue.py"), "start", str(state)], env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        if kueue.returncode != 0:
            pytest.fail(f"scripts/k8s/kueue.py failed (logs in {state}/log):\n{kueue.stdout}\n{kueue.stderr}")
        values.update(line.split("=", 1) for line in kueue.stdout.splitlines() if "=" in line)
        # The site's part (Kueue's docs: an admin makes the ResourceFlavors): one flavor for the nodes' GPUs.
        k8s.CustomObjectsApi(admin).create_cluster_custom_object(
            *KUEUE, "resourceflavors",
            {"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}})
        yield KueueCluster(admin, values["K8S_PORTAL_KUBECONFIG"], state, values, time.monotonic() - started)
        passed = True
    finally:
        admin.close()
        stop()
        if passed:
            shutil.rmtree(state, ignore_errors=True)
