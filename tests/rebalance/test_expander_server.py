"""The gpu-priority-expander over real gRPC and TLS: cluster-autoscaler's protocol in, the fleet's choice out.

The client here is grpcio's, speaking the published ``grpcplugin.Expander/BestOptions`` method with the
messages of ``scheduling/expander_protocol/expander.proto``; the live test in tests/k8s_live sends real
Kubernetes-serialized Pods and Nodes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.expander_protocol import expander_pb2, expander_pb2_grpc, k8s_subset_pb2
from scheduling.management.commands.serve_expander import build_server
from scheduling.models import ExpanderDecision, Workload

pytestmark = pytest.mark.django_db(transaction=True)  # the server answers from its own threads

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "scheduling" / "expander_protocol"


def self_signed(directory: Path) -> tuple[bytes, bytes]:
    key, cert = directory / "tls.key", directory / "tls.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert.read_bytes(), key.read_bytes()


@pytest.fixture
def expander(tmp_path) -> Iterator[expander_pb2_grpc.ExpanderStub]:
    cert, key = self_signed(tmp_path)
    server, port = build_server("k8s-serving", cert, key, "127.0.0.1:0", workers=2)
    server.start()
    channel = grpc.secure_channel(f"localhost:{port}", grpc.ssl_channel_credentials(root_certificates=cert))
    try:
        yield expander_pb2_grpc.ExpanderStub(channel)
    finally:
        channel.close()
        server.stop(grace=None)


def template(pool: str | None, gpus: int) -> k8s_subset_pb2.Node:
    node = k8s_subset_pb2.Node()
    node.metadata.name = f"template-{pool or 'unlabelled'}"
    if pool:
        node.metadata.labels["gpuportal.io/pool"] = pool
    node.metadata.labels["nvidia.com/gpu.product"] = "H100"
    if gpus:
        node.status.capacity["nvidia.com/gpu"].string = str(gpus)
    node.status.capacity["cpu"].string = "96"
    return node


def gpu_pod(name: str, gpus: int, priority: int = 0) -> k8s_subset_pb2.Pod:
    pod = k8s_subset_pb2.Pod()
    pod.metadata.name, pod.metadata.namespace = name, "research"
    container = pod.spec.containers.add()
    container.name = "trainer"
    container.resources.limits["nvidia.com/gpu"].string = str(gpus)
    container.resources.requests["cpu"].string = "500m"
    pod.spec.priority = priority
    return pod


def request_of(groups: dict[str, tuple[str | None, int]], pods: list[k8s_subset_pb2.Pod], as_bytes: bool = True
               ) -> expander_pb2.BestOptionsRequest:
    """Options as cluster-autoscaler >= 1.35 sends them (serialized bytes) or older ones (embedded messages)."""
    request = expander_pb2.BestOptionsRequest()
    for group, (pool, gpus) in groups.items():
        option = request.options.add(nodeGroupId=group, nodeCount=1, debug=f"{group} debug")
        if as_bytes:
            option.podBytes.extend(p.SerializeToString() for p in pods)
            request.nodeBytesMap[group] = template(pool, gpus).SerializeToString()
        else:
            option.pod.extend(pods)
            request.nodeMap[group].CopyFrom(template(pool, gpus))
    return request


@pytest.fixture
def ray_queue(federation):
    """ray-sweeps (8 GPUs) has 32 GPUs pending; slurm-hpc and k8s-serving have nothing waiting."""
    now = timezone.now()
    for i in range(4):
        Workload.objects.create(
            orchestrator=federation["orchs"]["ray-sweeps"], external_id=f"sweep-{i}", gang_size=1,
            gpus_per_member=8, state=Workload.State.PENDING, submitted_at=now - timedelta(minutes=30),
        )
    return federation


@pytest.mark.parametrize("as_bytes", (True, False), ids=("podBytes-1.35", "pod-messages-before-1.35"))
def test_the_expander_grows_the_pool_whose_queue_waits_and_records_why(expander, ray_queue, as_bytes):
    groups = {"slurm-h100": ("slurm-hpc", 8), "ray-h100": ("ray-sweeps", 8), "cpu-only": ("ray-sweeps", 0)}
    reply = expander.BestOptions(request_of(groups, [gpu_pod("sweep-9", 8)], as_bytes), timeout=10)
    assert [o.nodeGroupId for o in reply.options] == ["ray-h100"]
    assert reply.options[0].nodeCount == 1
    decision = ExpanderDecision.objects.get()
    assert decision.chosen == ["ray-h100"]
    assert "pool ray-sweeps queue" in decision.summary
    reasons = {r["node_group"]: r["reason"] for r in decision.ranked}
    assert "queue not short" in reasons["slurm-h100"]
    assert "no GPU" in reasons["cpu-only"]
    assert decision.autoscaler.startswith("ipv4:127.0.0.1")


def test_a_group_past_its_pool_ceiling_is_not_grown(expander, ray_queue):
    from scheduling.models import PoolPolicy

    PoolPolicy.objects.create(
        orchestrator=ray_queue["orchs"]["ray-sweeps"], name="sweeps capped", weekdays=[1, 2, 3, 4, 5, 6, 7],
        start_time="00:00", end_time="00:00", ceiling_gpus=8, precedence=5,
    )
    groups = {"ray-h100": ("ray-sweeps", 8), "volcano-h100": ("k8s-serving", 8)}
    reply = expander.BestOptions(request_of(groups, [gpu_pod("sweep-9", 8)]), timeout=10)
    assert [o.nodeGroupId for o in reply.options] == ["volcano-h100"]
    ranked = {r["node_group"]: r for r in ExpanderDecision.objects.get().ranked}
    assert not ranked["ray-h100"]["eligible"]
    assert "above its ceiling of 8 (rule 'sweeps capped')" in ranked["ray-h100"]["reason"]


def test_a_template_without_the_pool_label_joins_the_default_pool(expander, ray_queue):
    reply = expander.BestOptions(request_of({"plain-h100": (None, 8)}, [gpu_pod("p", 8)]), timeout=10)
    assert [o.nodeGroupId for o in reply.options] == ["plain-h100"]
    assert ExpanderDecision.objects.get().ranked[0]["pool"] == "k8s-serving"


def test_an_unreadable_pod_is_refused_naming_the_field(expander, federation):
    request = request_of({"ray-h100": ("ray-sweeps", 8)}, [])
    request.options[0].podBytes.append(b"\xff\xff not a pod")
    with pytest.raises(grpc.RpcError) as refused:
        expander.BestOptions(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "options[ray-h100].podBytes[0]" in refused.value.details()
    assert not ExpanderDecision.objects.exists()


def test_plain_connections_are_refused(tmp_path, federation):
    cert, key = self_signed(tmp_path)
    server, port = build_server("k8s-serving", cert, key, "127.0.0.1:0", workers=1)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as refused:
            expander_pb2_grpc.ExpanderStub(channel).BestOptions(expander_pb2.BestOptionsRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(grace=None)


def test_admins_and_team_members_see_the_expanders_answers_on_the_rebalance_page(client, cast, expander, ray_queue):
    expander.BestOptions(request_of({"ray-h100": ("ray-sweeps", 8), "slurm-h100": ("slurm-hpc", 8)},
                                    [gpu_pod("sweep-9", 8)]), timeout=10)
    for role in ("admin", "researcher"):
        client.force_login(cast[role])
        page = client.get(reverse("rebalance")).content.decode()
        assert 'id="expander-decisions"' in page
        assert "ray-h100" in page and "slurm-h100" in page and "queue not short" in page


def test_the_generated_modules_match_the_proto_files(tmp_path):
    protos = ["scheduling/expander_protocol/k8s_subset.proto", "scheduling/expander_protocol/expander.proto"]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", str(REPO), f"--python_out={tmp_path}",
         f"--grpc_python_out={tmp_path}", *[str(REPO / p) for p in protos]],
        check=True, capture_output=True,
    )
    for name in ("k8s_subset_pb2.py", "expander_pb2.py", "expander_pb2_grpc.py"):
        fresh = (tmp_path / "scheduling" / "expander_protocol" / name).read_text()
        assert fresh == (PROTOCOL / name).read_text(), f"{name} is stale: run `make protos`"
