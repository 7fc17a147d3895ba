"""How long and how much memory a collection round takes. Prints one JSON line per case.

- ``slurm``: parsing 2,000 nodes / 50,000 jobs (one document each, as slurmrestd 22.05 answers).
- ``slurm_incremental``: 10,000 nodes / 200,000 jobs (issue 35 item 2). Three rounds, each after 1 % of the
  jobs churned (started, ended, re-prioritised, newly submitted), interleaved: ``today`` (json.loads of the
  whole answer, every job parsed: the collector before), ``incremental`` (msgspec decode of the read fields,
  only changed jobs parsed, merged into the round before) and ``full`` (the periodic full re-parse, msgspec).
  Goal: a steady (incremental) round <= 5 s CPU.
- ``k8s``: 5,000 nodes / 150,000 pods / 37,500 PodGroups served page by page (500 items, ``continue``
  tokens) to the real ``KubernetesCollector``, then ``ingest_snapshot`` of three rounds (first, 5 %
  churn, everything changed). Goal: parse + persist <= 10 s and <= 1 GB RSS.
- ``live``: rounds of ``collection.scrape`` against the live Kubernetes, Ray and Prometheus fixtures,
  started here on free ports (Slurm only when a running fleet is named). Goal: <= 2 s a round.

Synthetic answers are built from our recorded samples (tests/collectors/fixtures). The timed part is
what a round does after the bytes arrive (making them is not timed). Wall and CPU seconds are given:
the machine is shared. Each case runs in its own process, so its peak RSS is its own. The database is
DATABASE_URL's (persist runs in a transaction rolled back at the end), else a throwaway SQLite file.

    python benchmarks/collect.py            # every case
    python benchmarks/collect.py --case k8s
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scheduling.collectors import k8s, slurm  # noqa: E402

FIXTURES = REPO / "tests" / "collectors" / "fixtures"
PAGE = 500


def _fixture(kind: str, name: str):
    return json.loads((FIXTURES / kind / name).read_text())


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


# ------------------------------------------------------------------------------------------ Slurm


def slurm_documents(nodes: int, jobs: int, rng: random.Random) -> tuple[bytes, bytes, bytes]:
    node_template = _fixture("slurm", "v0.0.38_nodes.json")["nodes"][0]
    jobs_doc = _fixture("slurm", "v0.0.38_jobs.json")
    running_template, pending_template = jobs_doc["jobs"][0], jobs_doc["jobs"][3]
    names = [f"gpu{i:05d}" for i in range(nodes)]
    node_list = []
    for name in names:
        used = rng.randint(0, 8)
        node = dict(node_template, name=name, hostname=name, state="mixed" if used else "idle")
        node["gres_used"] = f"gpu:h100:{used}(IDX:{'0-' + str(used - 1) if used else 'N/A'})"
        node_list.append(node)
    job_list = []
    for job_id in range(1, jobs + 1):
        running = rng.random() < 0.3
        job = copy.deepcopy(running_template if running else pending_template)
        width = rng.choice((1, 1, 1, 2, 4))
        job.update(job_id=job_id, node_count=width, account=f"team{job_id % 40}", user_name=f"user{job_id % 300}")
        job["tres_per_node"] = f"gres:gpu:{rng.choice((1, 2, 4, 8))}"
        if running:
            first = rng.randrange(nodes - width)
            job["nodes"] = f"gpu[{first:05d}-{first + width - 1:05d}]" if width > 1 else names[first]
            job["gres_detail"] = ["gpu:h100:1(IDX:0)"] * width
        job_list.append(job)
    meta = {"meta": jobs_doc["meta"], "errors": []}
    partitions = _fixture("slurm", "v0.0.38_partitions.json")
    partitions["partitions"][0]["nodes"] = f"gpu[00000-{nodes - 1:05d}]"
    return (
        json.dumps(meta | {"nodes": node_list}).encode(),
        json.dumps(meta | {"jobs": job_list}).encode(),
        json.dumps(partitions).encode(),
    )


def run_slurm(nodes: int = 2000, jobs: int = 50_000) -> dict:
    bodies = slurm_documents(nodes, jobs, random.Random(1))
    started, cpu = time.perf_counter(), time.process_time()
    snapshot = slurm.build_snapshot("bench-slurm", *(json.loads(body) for body in bodies))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "case": "slurm",
        "nodes": len(snapshot.nodes),
        "jobs": jobs,
        "workloads": len(snapshot.workloads),
        "response_mb": round(sum(map(len, bodies)) / 2**20, 1),
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(_peak_rss_mb()),
    }


def _slurm_job_list(nodes: int, jobs: int, rng: random.Random) -> tuple[list[dict], dict, dict]:
    """(jobs, nodes document, partitions document) of the synthetic fleet (as ``slurm_documents``)."""
    nodes_doc, jobs_doc, partitions = (json.loads(b) for b in slurm_documents(nodes, jobs, rng))
    return jobs_doc["jobs"], nodes_doc, partitions


def _churn(job_list: list[dict], share: float, rng: random.Random, next_id: int, nodes: int) -> int:
    """Change ``share`` of the jobs as a busy round sees it: a quarter each start, end, change priority,
    and are newly submitted. Returns the next free job id."""
    running = json.loads(json.dumps(job_list[0]))
    for k in range(int(len(job_list) * share)):
        i = rng.randrange(len(job_list))
        what = k % 4
        if what == 0:  # a pending job starts
            first = rng.randrange(nodes - 1)
            job_list[i] = dict(job_list[i], job_state="RUNNING", nodes=f"gpu{first:05d}", node_count=1)
            job_list[i]["gres_detail"] = ["gpu:h100:1(IDX:0)"]
        elif what == 1:  # a job ends (listed as COMPLETED until MinJobAge)
            job_list[i] = dict(job_list[i], job_state="COMPLETED")
        elif what == 2:
            job_list[i] = dict(job_list[i], priority=rng.randrange(1, 10**6))
        else:
            job_list.append(dict(running, job_id=next_id, job_state="PENDING", nodes="", gres_detail=[]))
            next_id += 1
    return next_id


def run_slurm_incremental(nodes: int = 10_000, jobs: int = 200_000, rounds: int = 3, churn: float = 0.01) -> dict:
    rng = random.Random(1)
    job_list, nodes_doc, partitions = _slurm_job_list(nodes, jobs, rng)
    node_body, partition_body = json.dumps(nodes_doc).encode(), json.dumps(partitions).encode()
    meta = {"meta": {}, "errors": []}
    cache = slurm.SlurmJobCache()

    def incremental_round(body: bytes, which: str, job_cache: slurm.SlurmJobCache | None) -> tuple[float, float, int]:
        started, cpu = time.perf_counter(), time.process_time()
        nodes_now, parts_now = json.loads(node_body), json.loads(partition_body)
        jobs_now = json.loads(body) if which == "today" else slurm.decode_jobs(body)
        if job_cache is not None:
            job_cache.last_round = which
        snapshot = slurm.build_snapshot("bench", nodes_now, jobs_now, parts_now, job_cache=job_cache)
        return time.perf_counter() - started, time.process_time() - cpu, len(snapshot.workloads)

    body = json.dumps(meta | {"jobs": job_list}).encode()
    incremental_round(body, "full", cache)  # the round before the steady ones (not counted)
    figures: dict[str, list] = {"today": [], "incremental": [], "full": []}
    next_id, workloads = jobs + 1, {}
    for _ in range(rounds):
        next_id = _churn(job_list, churn, rng, next_id, nodes)
        body = json.dumps(meta | {"jobs": job_list}).encode()
        for which, job_cache in (("today", None), ("incremental", cache), ("full", slurm.SlurmJobCache())):
            wall, cpu, workloads[which] = incremental_round(body, which, job_cache)
            figures[which].append((round(wall, 2), round(cpu, 2)))
        assert len(set(workloads.values())) == 1, workloads  # the three agree on what they saw
    return {
        "case": "slurm_incremental",
        "nodes": nodes,
        "jobs": len(job_list),
        "churn": churn,
        "workloads": workloads["incremental"],
        "response_mb": round(len(body) / 2**20, 1),
        **{f"{which}_cpu_seconds": [cpu for _wall, cpu in f] for which, f in figures.items()},
        **{f"{which}_seconds": [wall for wall, _cpu in f] for which, f in figures.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "peak_rss_mb": round(_peak_rss_mb()),
    }


# ------------------------------------------------------------------------------------- Kubernetes


class FakeListResponse:
    """What ``_preload_content=False`` hands back: the body bytes and a connection to release."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        pass


class SyntheticKubernetes:
    """Serves a large cluster's list pages to the real collector, in the apiserver's JSON form, made
    page by page as the collector asks (so only one page of bytes lives at a time). The time spent
    making pages is counted here and taken off the measurement.

    ``pods`` pods in gangs of 4 (one Volcano PodGroup each, 80 % of the gangs bound, the rest
    pending), 40 team namespaces, on ``nodes`` nodes. ``round_no`` > 0 moves a ``churn`` share of
    the gangs (bound or not, and where), as a later scrape of a busy cluster sees it."""

    def __init__(self, nodes: int, pods: int, *, round_no: int = 0, churn: float = 0.0, seed: int = 1) -> None:
        self.nodes, self.pods, self.round_no, self.churn, self.seed = nodes, pods, round_no, churn, seed
        pod_items = _fixture("k8s", "podlist.json")["items"]
        bound = copy.deepcopy(next(p for p in pod_items if p["spec"].get("nodeName")))
        pending = copy.deepcopy(next(p for p in pod_items if not p["spec"].get("nodeName")))
        for pod in (bound, pending):
            pod["metadata"] |= {"name": "@NAME@", "namespace": "@NS@", "uid": "@UID@"}
            pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "@GROUP@"
        bound["spec"]["nodeName"] = "@NODE@"
        self.bound_template, self.pending_template = json.dumps(bound), json.dumps(pending)
        node = copy.deepcopy(_fixture("k8s", "nodelist.json")["items"][0])
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = "@NODE@"
        self.node_template = json.dumps(node)
        groups = {g["status"]["phase"]: g for g in _fixture("k8s", "volcano_podgrouplist.json")["items"]}
        for group in groups.values():
            group["metadata"] |= {"name": "@GROUP@", "namespace": "@NS@"}
            group["spec"]["minMember"] = 4
        self.group_templates = {phase: json.dumps(g) for phase, g in groups.items()}
        self.queues = _fixture("k8s", "volcano_queuelist.json")
        self.making_wall = self.making_cpu = 0.0
        self.response_bytes = 0

    # The three list calls the collector makes, with the official client's signatures.
    def list_node(self, **kwargs):
        return self._serve("NodeList", self.nodes, self._node, kwargs)

    def list_pod_for_all_namespaces(self, **kwargs):
        return self._serve("PodList", self.pods, self._pod, kwargs)

    def list_cluster_custom_object(self, group, version, plural, **kwargs):
        if plural == "queues":
            return self._serve(
                "QueueList", len(self.queues["items"]), lambda i: json.dumps(self.queues["items"][i]), kwargs
            )
        return self._serve("PodGroupList", self.pods // 4, self._podgroup, kwargs)

    def _serve(self, kind, total, item, kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        start = int(kwargs.get("_continue") or 0)
        end = min(start + (kwargs.get("limit") or total), total)
        token = str(end) if end < total else ""
        items = ",".join(item(i) for i in range(start, end))
        body = f'{{"kind":"{kind}","apiVersion":"v1","metadata":{{"continue":"{token}"}},"items":[{items}]}}'.encode()
        self.making_wall += time.perf_counter() - wall
        self.making_cpu += time.process_time() - cpu
        self.response_bytes += len(body)
        return FakeListResponse(body)

    def _node(self, i: int) -> str:
        return self.node_template.replace("@NODE@", f"node{i:05d}")

    def _placement(self, gang: int) -> random.Random:
        """Where a gang stands this round: unchanged unless it is one of the round's churned gangs."""
        moved = self.round_no and random.Random(gang * 7 + self.seed).random() < self.churn
        return random.Random((self.seed * 1_000_003 + gang) * (self.round_no + 1 if moved else 1))

    def _gang_bound(self, gang: int) -> bool:
        return self._placement(gang).random() < 0.8

    def _pod(self, i: int) -> str:
        gang = i // 4
        place = self._placement(gang)
        bound = place.random() < 0.8
        text = (self.bound_template if bound else self.pending_template).replace("@NAME@", f"pod-{i}")
        text = text.replace("@UID@", f"{i:08x}-0000-4000-8000-{self.seed:012x}")  # each pod its own, as a UUID
        text = text.replace("@NS@", f"team{gang % 40}").replace("@GROUP@", f"job-{gang}")
        if bound:
            for _ in range(i % 4):
                place.random()
            text = text.replace("@NODE@", f"node{place.randrange(self.nodes):05d}")
        return text

    def _podgroup(self, gang: int) -> str:
        text = self.group_templates["Running" if self._gang_bound(gang) else "Pending"]
        return text.replace("@GROUP@", f"job-{gang}").replace("@NS@", f"team{gang % 40}")


def _clock():
    return time.perf_counter(), time.process_time()


def _since(mark) -> tuple[float, float]:
    return time.perf_counter() - mark[0], time.process_time() - mark[1]


def collect_k8s(cluster: SyntheticKubernetes):
    """One collection round through the real ``KubernetesCollector`` (paging, decoding, snapshot)."""
    from kubernetes import client

    collector = k8s.KubernetesCollector(client.ApiClient(), name="bench-k8s", page_size=PAGE)
    collector.core = collector.custom = cluster
    return collector.collect()


def run_k8s(nodes: int = 5000, pods: int = 150_000, persist: bool = True) -> dict:
    cluster = SyntheticKubernetes(nodes, pods)
    mark = _clock()
    snapshot = collect_k8s(cluster)
    wall, cpu = _since(mark)
    record = {
        **_sizes("k8s", snapshot, pods),
        "response_mb": round(cluster.response_bytes / 2**20, 1),
        "parse_seconds": _round(wall - cluster.making_wall),
        "parse_cpu_seconds": _round(cpu - cluster.making_cpu),
    }
    if persist:
        later = (collect_k8s(SyntheticKubernetes(nodes, pods, round_no=n, churn=c)) for n, c in ((1, CHURN), (2, 1.0)))
        record |= persist_k8s(chain([snapshot], later))  # one round's snapshot in memory at a time
        del snapshot
        record["seconds"] = _round(record["parse_seconds"] + record["persist_seconds"])
        record["cpu_seconds"] = _round(record["parse_cpu_seconds"] + record["persist_cpu_seconds"])
    record["peak_rss_mb"] = round(_peak_rss_mb())
    return record


def _sizes(case: str, snapshot, pods: int) -> dict:
    return {
        "case": case,
        "nodes": len(snapshot.nodes),
        "pods": pods,
        "podgroups": pods // 4,
        "workloads": len(snapshot.workloads),
    }


CHURN = 0.05  # share of gangs that start, stop or move between two scrapes 30 s apart (a busy cluster)


def persist_k8s(snapshots) -> dict:
    """``ingest_snapshot`` of three rounds: the first creates every row, the second sees ``CHURN`` of the
    gangs changed (the figure a steady round costs), the third every gang moved (the worst round). All
    inside a transaction rolled back at the end, so the database is left as it was. CPU is this
    process's only: the database server's own work shows in the wall time."""
    from benchmarks.busy import setup_django

    setup_django()
    from django.db import connection, transaction

    from scheduling.models import Orchestrator, Team
    from scheduling.services.ingest import ingest_snapshot

    figures = {"database": connection.vendor, "churn": CHURN}
    names = ("persist_first", "persist", "persist_all_changed")
    with transaction.atomic():
        orchestrator = Orchestrator.objects.create(name="bench-k8s", kind="kubernetes", endpoint="https://bench.k8s")
        Team.objects.bulk_create([Team(slug=f"team{i}", name=f"Team {i}") for i in range(40)], ignore_conflicts=True)
        start = datetime.now(UTC)
        for n, name in enumerate(names):
            snapshot = replace(next(snapshots), taken_at=start + timedelta(seconds=30 * n))
            mark = _clock()
            ingest_snapshot(orchestrator, snapshot)
            del snapshot
            figures[f"{name}_seconds"], figures[f"{name}_cpu_seconds"] = map(_round, _since(mark))
        transaction.set_rollback(True)
    return figures


def _round(value: float) -> float:
    return round(value, 2)


# ------------------------------------------------------------------------------- Kubernetes by watch

WATCH_CHURN = 0.01  # share of gangs (4 pods each) that change between two rounds 30 s apart
NODE_EVENTS = 0.10  # share of nodes MODIFIED a round (a kubelet posts its status when it changes, else every 5 min)


def watching_collector(cluster: SyntheticKubernetes):
    """The real ``WatchingCollector`` over the synthetic cluster's list calls (its threads not started: the
    benchmark lists and feeds events itself, so what is timed is exactly the round's work)."""
    from kubernetes import client

    from scheduling.collectors.k8s_watch import WatchingCollector

    source = k8s.KubernetesCollector(client.ApiClient(), name="bench-k8s", page_size=PAGE)
    source.core = source.custom = cluster
    return WatchingCollector(source)


def churn_events(nodes: int, pods: int) -> tuple[list[bytes], list[bytes]]:
    """The watch events of one round: the pods of the ``WATCH_CHURN`` gangs that changed (each MODIFIED as the
    next round's cluster has it: bound elsewhere, or waiting) and ``NODE_EVENTS`` of the nodes MODIFIED."""
    later = SyntheticKubernetes(nodes, pods, round_no=1, churn=WATCH_CHURN)
    moved = [g for g in range(pods // 4) if random.Random(g * 7 + later.seed).random() < WATCH_CHURN]
    pod_events = [b'{"type":"MODIFIED","object":%s}' % later._pod(4 * g + m).encode() for g in moved for m in range(4)]
    step = round(1 / NODE_EVENTS)
    node_events = [b'{"type":"MODIFIED","object":%s}' % later._node(i).encode() for i in range(0, nodes, step)]
    return pod_events, node_events


def run_k8s_watch(nodes: int = 5000, pods: int = 150_000, persist: bool = True) -> dict:
    """The first round after a restart (every list read once, the snapshot from the cache) and a steady round
    (one round's watch events applied, the snapshot from the cache), each then persisted as a round does."""
    cluster = SyntheticKubernetes(nodes, pods)
    watching = watching_collector(cluster)
    mark = _clock()
    for watched in watching.lists.values():
        watched.relist()
    first = watching.collect()
    first_wall, first_cpu = _since(mark)
    pod_events, node_events = churn_events(nodes, pods)
    mark = _clock()
    for line in pod_events:
        watching.lists["pods"].apply(line)
    for line in node_events:
        watching.lists["nodes"].apply(line)
    steady = watching.collect()
    steady_wall, steady_cpu = _since(mark)
    record = {
        **_sizes("k8s_watch", steady, pods),
        "churn": WATCH_CHURN,
        "pod_events": len(pod_events),
        "node_events": len(node_events),
        "fallbacks": watching.fallbacks,
        "first_round_parse_seconds": _round(first_wall - cluster.making_wall),
        "first_round_parse_cpu_seconds": _round(first_cpu - cluster.making_cpu),
        "steady_parse_seconds": _round(steady_wall),
        "steady_parse_cpu_seconds": _round(steady_cpu),
        "parse_peak_rss_mb": round(_peak_rss_mb()),
    }
    if persist:
        figures = persist_rounds(first, steady)
        del first, steady
        record |= figures
        persist_cpu = figures["persist_steady_cpu_seconds"]
        record["steady_cpu_seconds"] = _round(record["steady_parse_cpu_seconds"] + persist_cpu)
    record["peak_rss_mb"] = round(_peak_rss_mb())
    record["load"] = os.getloadavg()
    return record


def persist_rounds(first, steady) -> dict:
    """``ingest_snapshot`` of the first round (creates every row) and of the steady round that follows, in a
    transaction rolled back at the end: once as the watcher runs them (``remember_rounds``: the steady round
    writes what changed since the first) and once as any other process would (the steady round compares every
    stored row), one after the other in this process."""
    from benchmarks.busy import setup_django

    setup_django()
    from django.db import connection, transaction

    from scheduling.models import Orchestrator, Team
    from scheduling.services.ingest import forget_rounds, ingest_snapshot, remember_rounds

    figures: dict = {"database": connection.vendor}
    for variant in ("memo", "full"):
        with transaction.atomic():
            orchestrator = Orchestrator.objects.create(name="bench-k8s", kind="kubernetes", endpoint="https://b.k8s")
            teams = [Team(slug=f"team{i}", name=f"Team {i}") for i in range(40)]
            Team.objects.bulk_create(teams, ignore_conflicts=True)
            if variant == "memo":
                remember_rounds(orchestrator)
            start = datetime.now(UTC)
            for n, (name, snapshot) in enumerate((("first", first), ("steady", steady))):
                mark = _clock()
                ingest_snapshot(orchestrator, replace(snapshot, taken_at=start + timedelta(seconds=30 * n)))
                key = name if variant == "memo" else f"{name}_full_compare"
                figures[f"persist_{key}_seconds"], figures[f"persist_{key}_cpu_seconds"] = map(_round, _since(mark))
            forget_rounds(orchestrator)
            transaction.set_rollback(True)
    return figures


def _status_kb(field: str) -> int:
    """VmRSS (resident now) or VmHWM (the peak since the process started or since ``_restart_peak``), in kB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _restart_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:  # Linux: "5" resets VmHWM to the current RSS
        refs.write("5")


def run_k8s_watcher_memory(nodes: int = 5000, pods: int = 150_000) -> dict:
    """What ``manage.py watch_kubernetes`` holds, as that process runs: the first round (lists, snapshot, ingest
    with the round memo), then a steady round (one round's events, snapshot, ingest). The figures the goal is
    about are the RSS held between rounds and the steady round's own peak (VmHWM restarted before it); the
    other cases' ``peak_rss_mb`` also count the benchmark's two snapshots and both persist variants. The schema
    is migrated by another process, as a deployment does, so the migration graph is not counted here."""
    import gc

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings_test")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='gpuportal-bench-')}/watch.sqlite3")
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--verbosity=0"], check=True)
    import django

    django.setup()
    from django.db import connection, transaction

    from scheduling.models import Orchestrator, Team
    from scheduling.services.ingest import forget_rounds, ingest_snapshot, remember_rounds

    cluster = SyntheticKubernetes(nodes, pods)
    gc.collect()
    record: dict = {"case": "k8s_watcher_memory", "nodes": nodes, "pods": pods, "churn": WATCH_CHURN}
    record["before_mb"] = round(_status_kb("VmRSS") / 1024)
    with transaction.atomic():
        orchestrator = Orchestrator.objects.create(name="bench-k8s", kind="kubernetes", endpoint="https://b.k8s")
        Team.objects.bulk_create([Team(slug=f"team{i}", name=f"Team {i}") for i in range(40)], ignore_conflicts=True)
        remember_rounds(orchestrator)
        watching = watching_collector(cluster)
        start = datetime.now(UTC)
        for watched in watching.lists.values():
            watched.relist()
        ingest_snapshot(orchestrator, replace(watching.collect(), taken_at=start))
        gc.collect()
        record["first_round_peak_mb"] = round(_status_kb("VmHWM") / 1024)
        record["held_after_first_round_mb"] = round(_status_kb("VmRSS") / 1024)
        _restart_peak()
        pod_events, node_events = churn_events(nodes, pods)  # the bytes the streams carry meanwhile
        mark = _clock()
        for line in pod_events:
            watching.lists["pods"].apply(line)
        for line in node_events:
            watching.lists["nodes"].apply(line)
        del pod_events, node_events
        ingest_snapshot(orchestrator, replace(watching.collect(), taken_at=start + timedelta(seconds=30)))
        record["steady_cpu_seconds"] = _round(_since(mark)[1])
        gc.collect()
        record["steady_round_peak_mb"] = round(_status_kb("VmHWM") / 1024)
        record["held_after_steady_round_mb"] = round(_status_kb("VmRSS") / 1024)
        forget_rounds(orchestrator)
        transaction.set_rollback(True)
    record["database"] = connection.vendor
    record["load"] = os.getloadavg()
    return record


def run_k8s_relist() -> dict:
    """Today's re-list round parse only (no persist), to interleave with ``k8s_watch`` on the same machine."""
    return run_k8s(persist=False) | {"case": "k8s_relist", "load": os.getloadavg()}


# ------------------------------------------------------------------------------------- live round

LIVE_ROUNDS = 5


def run_live() -> dict:
    """One collection round (``collection.scrape`` per orchestrator: collect + ingest, as Celery and
    ``collect --once`` run it) against the live fixtures this benchmark starts: Kubernetes, Ray and
    Prometheus. Slurm joins when a running fleet is named by ``SLURM_REST_URL`` + ``SLURM_JWT``
    (its fixture has fixed ports; this benchmark never starts it). A warm-up round creates the rows;
    then ``LIVE_ROUNDS`` rounds are timed. CPU is this process's; the daemons' own is not counted."""
    from benchmarks import _live_fixtures as live

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would swamp the JSON
    record: dict = {"case": "live_round", "rounds": LIVE_ROUNDS}
    stops = []
    try:
        sources = _start_live_sources(live, stops, record)
        if not sources:
            return record | {"skipped": "no live fixture can run here"}
        record |= _time_live_rounds(sources)
    finally:
        for stop in reversed(stops):
            stop()
    return record


def _start_live_sources(live, stops: list, record: dict) -> list[tuple[str, str, str, dict]]:
    """(name, kind, endpoint, options) of every fixture that started; the others are named, with why."""
    sources, missing = [], {}
    for name, start in (("k8s-live", live.start_kubernetes), ("ray-live", live.start_ray)):
        try:
            values, stop = start()
        except live.Unavailable as why:
            missing[name] = str(why)
            continue
        stops.append(stop)
        if name == "k8s-live":
            sources.append((name, "kubernetes", values["K8S_API_URL"], {"kubeconfig": values["K8S_PORTAL_KUBECONFIG"]}))
        else:
            sources.append((name, "ray", values["RAY_DASHBOARD_URL"], {}))
    if os.environ.get("SLURM_REST_URL") and os.environ.get("SLURM_JWT"):
        options = {"user": os.environ.get("SLURM_USER", "slurm")}
        sources.append(("slurm-live", "slurm", os.environ["SLURM_REST_URL"], options | {"jwt_env": "SLURM_JWT"}))
    else:
        missing["slurm-live"] = "not started by this benchmark (set SLURM_REST_URL and SLURM_JWT for a running fleet)"
    try:
        values, stop = live.start_prometheus([f"dgx{i:02d}" for i in range(1, 7)])
        stops.append(stop)
        sources.append(("dcgm-live", "prometheus", values["PROMETHEUS_URL"], {"step_s": 1, "lag_s": 1}))
    except live.Unavailable as why:
        missing["dcgm-live"] = str(why)
    record["not_measured"] = missing
    return sources


def _time_live_rounds(sources) -> dict:
    from benchmarks.busy import setup_django

    setup_django()
    from scheduling.models import Node, Orchestrator
    from scheduling.services import collection

    rows = []
    for name, kind, endpoint, options in sources:
        credentials = f"env:{options.pop('jwt_env')}" if "jwt_env" in options else ""
        orchestrator, _ = collection.register_orchestrator(
            kind=kind, name=name, url=endpoint, credentials_ref=credentials, options=options
        )
        rows.append(orchestrator)
    for orchestrator in rows:  # warm-up: the first round creates every row
        _scrape_ok(collection, orchestrator)
    rounds, per_source = [], {o.name: [] for o in rows}
    for _ in range(LIVE_ROUNDS):
        time.sleep(1.0)  # Prometheus scrapes every second: let each round find new samples
        round_mark = _clock()
        for orchestrator in rows:
            mark = _clock()
            _scrape_ok(collection, orchestrator)
            per_source[orchestrator.name].append(_since(mark))
        rounds.append(_since(round_mark))
    Node.objects.filter(orchestrator__in=rows).delete()  # nodes protect their owner
    Orchestrator.objects.filter(pk__in=[o.pk for o in rows]).delete()

    def median(pairs, i):
        return _round(sorted(p[i] for p in pairs)[len(pairs) // 2])

    return {
        "round_seconds": median(rounds, 0),
        "round_cpu_seconds": median(rounds, 1),
        "round_seconds_max": _round(max(r[0] for r in rounds)),
        "per_source": {
            name: {"seconds": median(pairs, 0), "cpu_seconds": median(pairs, 1)} for name, pairs in per_source.items()
        },
        "parallel_round_seconds": _round(max(median(pairs, 0) for pairs in per_source.values())),
    }


def _scrape_ok(collection, orchestrator) -> None:
    outcome = collection.scrape(orchestrator.pk)
    if outcome.run is None or not outcome.run.ok:
        raise RuntimeError(f"{orchestrator.name}: {outcome.skipped or outcome.run.error}")


CASES = {
    "slurm": run_slurm,
    "slurm_incremental": run_slurm_incremental,
    "k8s": run_k8s,
    "k8s_relist": run_k8s_relist,
    "k8s_watch": run_k8s_watch,
    "k8s_watch_parse": lambda: run_k8s_watch(persist=False),
    "k8s_watcher_memory": run_k8s_watcher_memory,
    "live": run_live,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case]()), flush=True)
        return
    for case in CASES:  # one process per case so each peak RSS is its own
        subprocess.run([sys.executable, __file__, "--case", case], check=True)


if __name__ == "__main__":
    main()
