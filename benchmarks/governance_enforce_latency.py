"""From approval to enforced, live on Slurm and Kubernetes (issue 18's figure: at most one round, 30 s by default).

Starts the project's fixtures on fixed ports below the ephemeral range: Slurm 22.05 with slurmdbd and MariaDB
(scripts/slurm/start.sh; slurmctld 19517, slurmdbd 19519, slurmrestd 19520, slurmd 19531-19532) and Kubernetes
(scripts/k8s/start.sh + seed.py; etcd 19541/19542, kube-apiserver 19543, scheduler 19544, controller-manager
19545); a real ``celery worker`` on Redis ($BENCH_REDIS_URL, default redis://127.0.0.1:6379/13), no beat; the
portal on a throwaway SQLite file, or on $BENCH_DATABASE_URL (an empty PostgreSQL database you own).

Two teams with queues, a Slurm and a Kubernetes orchestrator in auto mode. Each trial approves a researcher's
request for 4 more GPUs through ``services.quota.approve_request`` (the page's and the API's path); the clock runs
from just before the approval until ``sacctmgr show assoc`` shows the account's new ``GrpTRES`` and the team
namespace's ``ResourceQuota`` the new hard limit (polled every 0.1 s). The approval asks for a round once it
commits (services/governance_trigger.py, after GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S); without that, the change
waits for the next beat round: up to GPUPORTAL_ROUND_SECONDS plus the round itself. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _live_fixtures as live

SLURM_PORTS = {"SLURMCTLD_PORT": 19517, "SLURMDBD_PORT": 19519, "SLURMRESTD_PORT": 19520, "SLURMD_PORT_BASE": 19530}
K8S_PORTS = {
    "K8S_ETCD_PORT": 19541,
    "K8S_ETCD_PEER_PORT": 19542,
    "K8S_API_PORT": 19543,
    "K8S_SCHEDULER_PORT": 19544,
    "K8S_CONTROLLER_MANAGER_PORT": 19545,
}
TRIALS, STEP, POLL_S, GIVE_UP_S = 5, 4, 0.1, 120.0
TEAMS = {"atlas": (40, 4, 8), "borealis": (60, 8, 16)}  # weight %, guaranteed, burst limit


def portal_env(redis: str) -> dict[str, str]:
    """The broker and var dir this process and its worker share (set before Django reads its settings)."""
    env = {"CELERY_BROKER_URL": redis, "GPUPORTAL_VAR_DIR": tempfile.mkdtemp(prefix="gpuportal-bench-var-")}
    os.environ.update(env)
    return env


def require_redis(url: str) -> None:
    address = urlsplit(url)
    try:
        socket.create_connection((address.hostname or "127.0.0.1", address.port or 6379), timeout=2).close()
    except OSError as error:
        raise live.Unavailable(f"no Redis at {url} (set BENCH_REDIS_URL): {error}") from error


def start_worker(env: dict[str, str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--pool=solo", "--loglevel=WARNING"]
    argv += ["--without-heartbeat", "--without-gossip", "--without-mingle"]
    return subprocess.Popen(argv, cwd=live.REPO, env={**os.environ, **env}, stdout=sys.stderr)  # stdout: JSON only


def wait_until_ready(celery_app) -> None:
    """The worker answers a ping: the first trial does not time the worker's start."""
    deadline = time.monotonic() + 120
    while not celery_app.control.ping(timeout=1.0):
        if time.monotonic() > deadline:
            raise live.Unavailable("the Celery worker did not answer a ping within 120 s")


def federation(slurm: dict[str, str], k8s: dict[str, str]):
    """Teams, a researcher and an admin, 64 H100 on the Slurm side, both orchestrators governed in auto mode."""
    from decimal import Decimal

    from django.contrib.auth import get_user_model

    from scheduling.models import IdentityOverride, Membership, Node, Orchestrator, Queue, Team

    users = get_user_model().objects
    admin = users.create_user("ada", is_staff=True, is_superuser=True)
    alice = users.create_user("alice")
    teams = {slug: Team.objects.create(slug=slug, name=slug.title()) for slug in TEAMS}
    for slug, (weight, guaranteed, burst) in TEAMS.items():
        Queue.objects.create(team=teams[slug], weight=Decimal(weight), guaranteed=guaranteed, burst_limit=burst)
    Membership.objects.create(user=alice, team=teams["atlas"])
    hpc_options = {
        "slurm_conf": slurm["SLURM_CONF"],
        "governance": {
            "mode": "auto",
            "cluster": "gpuportal",
            "root_account": "portal",
            "sacctmgr": f"{slurm['SLURM_BIN_DIR']}/sacctmgr",
        },
    }
    hpc = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=slurm["SLURMRESTD_URL"], options=hpc_options)
    IdentityOverride.objects.create(user=alice, orchestrator=hpc, kind="slurm_user", name="root")
    for i in range(8):
        Node.objects.create(orchestrator=hpc, name=f"dgx{i:02d}", gpu_model="H100", gpu_total=8)
    k8s_options = {
        "kubeconfig": k8s["K8S_PORTAL_KUBECONFIG"],
        "governance": {"mode": "auto"},  # each team in a namespace named after it, made by the portal
    }
    Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1", options=k8s_options)
    return teams["atlas"], alice, admin


def enforced_caps(slurm: dict[str, str], core) -> tuple[int | None, int | None]:
    """atlas's cap as Slurm's association and the namespace's ResourceQuota hold it now."""
    from scheduling.collectors.slurm_accounting import SlurmAccountingWriter, sacctmgr_runner

    run = sacctmgr_runner((f"{slurm['SLURM_BIN_DIR']}/sacctmgr",), {"SLURM_CONF": slurm["SLURM_CONF"]})
    accounts = {a.name: a for a in SlurmAccountingWriter(run, "gpuportal").read()[0]}
    tres = dict(accounts["atlas"].grp_tres) if "atlas" in accounts else {}
    quota = core.read_namespaced_resource_quota("gpuportal-gpu", "atlas").spec.hard["requests.nvidia.com/gpu"]
    return tres.get("gres/gpu"), int(quota)


def one_trial(team, alice, admin, want: int, slurm, core) -> dict[str, float | None]:
    from django.utils import timezone

    from scheduling.services import quota

    start = timezone.now() - timedelta(minutes=1)
    request = quota.create_request(
        requester=alice, team=team, gpus=STEP, starts_at=start, ends_at=start + timedelta(days=1), justification="b"
    )
    began = time.perf_counter()
    quota.approve_request(request.pk, by=admin)
    seen: dict[str, float | None] = {"slurm_s": None, "kubernetes_s": None}
    while time.perf_counter() - began < GIVE_UP_S and None in seen.values():
        slurm_cap, k8s_cap = enforced_caps(slurm, core)
        now = time.perf_counter() - began
        if seen["slurm_s"] is None and slurm_cap == want:
            seen["slurm_s"] = round(now, 2)
        if seen["kubernetes_s"] is None and k8s_cap == want:
            seen["kubernetes_s"] = round(now, 2)
        time.sleep(POLL_S)
    return seen


def measure(slurm: dict[str, str], k8s: dict[str, str], env: dict[str, str]) -> dict[str, object]:
    from benchmarks._django import throwaway_django

    vendor = throwaway_django("enforce")
    env = {**env, "DATABASE_URL": os.environ["DATABASE_URL"], "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test"}
    from django.conf import settings
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    from gpuportal.celery import app as celery_app
    from scheduling.models import EnforcementRun
    from scheduling.services.enforcement import rounds as enforcement_rounds

    team, alice, admin = federation(slurm, k8s)
    standing = enforcement_rounds.reconcile()  # the standing state: accounts, associations, namespaces, quotas, queues
    if any(o.error for o in standing):
        raise live.Unavailable("; ".join(f"{o.orchestrator}: {o.error}" for o in standing if o.error)[:800])
    core = k8s_client.CoreV1Api(k8s_config.new_client_from_config(config_file=k8s["K8S_ADMIN_KUBECONFIG"]))
    celery_app.control.purge()  # an earlier run's messages must not run rounds here
    worker = start_worker(env)
    try:
        wait_until_ready(celery_app)
        trials = [one_trial(team, alice, admin, TEAMS["atlas"][2] + STEP * (i + 1), slurm, core) for i in range(TRIALS)]
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    rounds = [(r.finished_at - r.started_at).total_seconds() for r in EnforcementRun.objects.exclude(finished_at=None)]
    both = [max(t.values()) for t in trials if None not in t.values()]
    return {
        "database": vendor,
        "trials": trials,
        "enforced_both_s_median": round(statistics.median(both), 2) if both else None,
        "enforced_both_s_max": round(max(both), 2) if both else None,
        "trigger_delay_s": settings.GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S,
        "rounds": EnforcementRun.objects.count(),
        "round_s_median": round(statistics.median(rounds), 2),
        "beat_only_worst_s": round(settings.GPUPORTAL_ROUND_SECONDS + max(rounds), 2),
        "goal_s": settings.GPUPORTAL_ROUND_SECONDS,
    }


def main() -> None:
    report: dict[str, object] = {"bench": "governance_approval_to_enforced", "load_1m": os.getloadavg()[0]}
    env = portal_env(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"))
    stops = []
    try:
        require_redis(env["CELERY_BROKER_URL"])
        slurm, stop = live.start_slurm(SLURM_PORTS, "bench_enforce_slurm_acct")
        stops.append(stop)
        k8s, stop = live.start_kubernetes(K8S_PORTS)
        stops.append(stop)
        report.update(measure(slurm, k8s, env))
    except live.Unavailable as error:
        report["unavailable"] = str(error)
    finally:
        for stop in reversed(stops):
            stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
