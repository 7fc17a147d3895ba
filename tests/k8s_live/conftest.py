"""The live Kubernetes fixture: a real kube-apiserver + etcd + kube-scheduler + kube-controller-manager on
loopback, with KWOK playing the kubelets, at the releases pinned in scripts/k8s/build; started once per
session by scripts/k8s/start.sh and seeded by scripts/k8s/seed.py (6 x 8-GPU nodes, Volcano CRDs, pods
bound by the real scheduler and run by KWOK). See docs/kubernetes-fixture.md.

A test here skips with a reason when the fixture cannot run on this machine (not root, binaries not
built), unless ``CI=true``: CI runs scripts/ci/install-kubernetes.sh first, so there it fails.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client as k8s

from tests.support import require

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "k8s"
BIN = Path(os.environ.get("K8S_BIN_DIR", "/var/cache/gpuportal-k8s/go-bin"))
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
GPU = "nvidia.com/gpu"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def session_env() -> dict[str, str]:
    """Own state dir and free loopback ports per session: a developer's cluster (start.sh defaults) or
    another engineer's test run on this shared machine is never touched (start.sh stops only the
    cluster of its own state dir)."""
    return {
        "K8S_STATE_DIR": tempfile.mkdtemp(prefix="gpuportal-k8s-pytest-"),
        "K8S_ETCD_PORT": str(free_port()),
        "K8S_ETCD_PEER_PORT": str(free_port()),
        "K8S_API_PORT": str(free_port()),
        "K8S_SCHEDULER_PORT": str(free_port()),
        "K8S_CONTROLLER_MANAGER_PORT": str(free_port()),
    }


def load_script(stem: str) -> ModuleType:
    """A fixture script of scripts/k8s (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(f"gpuportal_k8s_{stem}", SCRIPTS / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


seed = load_script("seed")


def require_fixture() -> None:
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root")
    missing = [str(BIN / b) for b in BINARIES if not (BIN / b).exists()]
    missing += [b for b in ("openssl", "curl") if shutil.which(b) is None]
    if missing:
        problems.append(f"missing {', '.join(missing)} (run scripts/k8s/install.sh: builds once, then cached)")
    require(not problems, f"live Kubernetes unavailable: {'; '.join(problems)}")


def pinned_release(module: str) -> str:
    """The version scripts/k8s/build/*/go.mod requires of a module (e.g. k8s.io/kubernetes): what runs."""
    for build_mod in sorted((SCRIPTS / "build").glob("*/go.mod")):
        for line in build_mod.read_text().splitlines():
            words = line.split("//")[0].split()  # tidy marks tool modules "// indirect"
            if len(words) == 2 and words[0] == module:
                return words[1]
            if len(words) == 3 and words[:2] == ["require", module]:
                return words[2]
    raise LookupError(f"no build module under {SCRIPTS / 'build'} requires {module}")


def rss_mib(pid_file: Path) -> float:
    for line in Path(f"/proc/{pid_file.read_text().strip()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class AdminApis:
    """The typed APIs of a fixture's system:masters client (``admin``)."""

    admin: k8s.ApiClient

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.admin)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.admin)


@dataclass
class Cluster(AdminApis):
    admin: k8s.ApiClient  # system:masters: seeding and the direct queries tests compare against
    portal: k8s.ApiClient  # the portal's own RBAC role: what the collector and actuator use
    state: Path
    env: dict[str, str]
    start_seconds: float
    seed_seconds: float
    rss_mib: dict[str, float]
    bound: dict[str, str]


# ------------------------------------------------------------------------------ the API's own answers


def effective_gpus(pod: k8s.V1Pod) -> int:
    """What the scheduler reserves for a pod: its app containers' sum, or its largest init container
    if that is larger (init containers run one at a time, before the app)."""

    def wanted(container: k8s.V1Container) -> int:
        resources = container.resources or k8s.V1ResourceRequirements()
        value = (resources.requests or {}).get(GPU, (resources.limits or {}).get(GPU, 0))
        return int(value)

    app = sum(wanted(c) for c in pod.spec.containers)
    return max(app, max((wanted(c) for c in pod.spec.init_containers or ()), default=0))


def live_gpu_pods(core: k8s.CoreV1Api) -> list[k8s.V1Pod]:
    """Every pod that wants GPUs and has not terminated (Succeeded/Failed pods hold nothing)."""
    return [
        p
        for p in core.list_pod_for_all_namespaces().items
        if effective_gpus(p) and p.status.phase not in ("Succeeded", "Failed")
    ]


def podgroup_queues(custom: k8s.CustomObjectsApi) -> dict[str, str]:
    """ "namespace/podgroup" -> queue, from the PodGroup objects themselves."""
    groups = custom.list_cluster_custom_object(seed.VOLCANO_GROUP, seed.VOLCANO_VERSION, "podgroups")["items"]
    return {f"{g['metadata']['namespace']}/{g['metadata']['name']}": g["spec"]["queue"] for g in groups}


def wait_for(condition: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")
