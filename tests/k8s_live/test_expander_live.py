"""The gpu-priority-expander reads what cluster-autoscaler sends: real Pods and Nodes serialized by Kubernetes.

cluster-autoscaler (not served by this machine's Go proxy, docs/kubernetes-fixture.md) marshals each v1.Pod and
template v1.Node with Kubernetes' generated protobuf code; kube-apiserver answers with the same bytes when asked
for ``application/vnd.kubernetes.protobuf``. Those bytes go through the real gRPC server over TLS here.
"""

from __future__ import annotations

import grpc
import pytest
from django.utils import timezone

from scheduling.expander_protocol import codec, expander_pb2, expander_pb2_grpc, k8s_subset_pb2
from scheduling.management.commands.serve_expander import build_server
from scheduling.models import ExpanderDecision, Node, Orchestrator, Workload
from tests.rebalance.test_expander_server import self_signed

from .conftest import GPU, effective_gpus, live_gpu_pods

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PROTOBUF = "application/vnd.kubernetes.protobuf"


def serialized(api_client, path: str) -> bytes:
    """The object at ``path`` as Kubernetes serializes it: the ``raw`` of the apiserver's protobuf envelope."""
    headers = {"Accept": PROTOBUF}
    api_client.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)  # a kubeconfig token, if any
    response = api_client.call_api("GET", api_client.configuration.host + path, header_params=headers)
    body = response.read()
    assert body[:4] == b"k8s\x00", f"{path}: not a protobuf answer ({body[:40]!r})"
    envelope = k8s_subset_pb2.Unknown()
    envelope.ParseFromString(body[4:])
    assert envelope.contentType in ("", PROTOBUF)
    return envelope.raw


def test_real_kubernetes_pods_and_nodes_decode_and_choose_a_group(cluster, tmp_path):
    pod = next(p for p in live_gpu_pods(cluster.core) if effective_gpus(p) > 0)
    node = next(n for n in cluster.core.list_node().items if int(n.status.capacity.get(GPU, 0)) > 0)
    pod_bytes = serialized(cluster.admin, f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}")
    node_bytes = serialized(cluster.admin, f"/api/v1/nodes/{node.metadata.name}")

    request = expander_pb2.BestOptionsRequest()
    for group in ("kwok-gpu-a", "kwok-gpu-b"):
        request.options.add(nodeGroupId=group, nodeCount=1).podBytes.append(pod_bytes)
        request.nodeBytesMap[group] = node_bytes
    request.options[1].nodeCount = 3  # more nodes for the same pod: more waste

    options = codec.growth_options(request, default_pool="kwok")
    assert options[0].gpus_per_node == int(node.status.capacity[GPU])
    assert [p.gpus for p in options[0].pods] == [effective_gpus(pod)]
    assert options[0].pods[0].priority == (pod.spec.priority or 0)
    assert options[0].gpu_model == (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")

    kwok = Orchestrator.objects.create(name="kwok", kind="kubernetes", endpoint="demo://kwok")
    Node.objects.create(orchestrator=kwok, name="kw-a", gpu_model="H100", gpu_total=8)
    Workload.objects.create(orchestrator=kwok, external_id="waiting", gang_size=1, gpus_per_member=8,
                            state=Workload.State.PENDING, submitted_at=timezone.now())
    cert, key = self_signed(tmp_path)
    server, port = build_server("kwok", cert, key, "127.0.0.1:0", workers=1)
    server.start()
    try:
        with grpc.secure_channel(f"localhost:{port}", grpc.ssl_channel_credentials(root_certificates=cert)) as chan:
            reply = expander_pb2_grpc.ExpanderStub(chan).BestOptions(request, timeout=10)
    finally:
        server.stop(grace=None)
    assert [o.nodeGroupId for o in reply.options] == ["kwok-gpu-a"]
    assert ExpanderDecision.objects.get().chosen == ["kwok-gpu-a"]
