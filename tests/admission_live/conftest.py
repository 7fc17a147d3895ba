"""A real kube-apiserver calling the portal's mutating webhook over TLS.

Own ports (33xxx) and state dir, so it never meets the other live fixtures. The webhook is served by the
test process itself (Django's live-server thread behind TLS with a certificate from
scripts/k8s/admission-certs.sh), so it reads the test database on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from django.core.servers.basehttp import ThreadedWSGIServer
from django.db import connections
from django.test.testcases import LiveServerThread, QuietWSGIRequestHandler, _StaticFilesHandler
from django.test.utils import override_settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.k8s_live.conftest import BIN, REPO, SCRIPTS, require_fixture, seed

WEBHOOK_PORT = 25444
PORTS = {
    "K8S_ETCD_PORT": "25379",
    "K8S_ETCD_PEER_PORT": "25380",
    "K8S_API_PORT": "25443",
    "K8S_SCHEDULER_PORT": "25459",
    "K8S_CONTROLLER_MANAGER_PORT": "25457",
}
WEBHOOK_NAME = "mutate.admission.gpuportal.io"
MANIFEST = REPO / "deploy" / "k8s" / "admission.yaml"
# A fresh cluster's GPU nodes as KWOK runs them (the k8s fixture's node bodies), tainted as GPU node pools
# usually are: only a pod with the webhook's GPU toleration lands there. No gpuportal.io/pool label: no
# rebalance has run.
GPU_NODES = ("gpu-a1", "gpu-a2")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@dataclass
class Cluster:
    admin: k8s.ApiClient
    core: k8s.CoreV1Api
    certs: Path  # the webhook's CA and serving certificate (scripts/k8s/admission-certs.sh)
    kubeconfig: str  # the admin's, for the portal's own collector
    webhook_token: str  # what the API server presents to webhooks (its AdmissionConfiguration)
    gpu_nodes: tuple[str, ...] = GPU_NODES  # KWOK GPU nodes (8 GPUs each, tainted, no pool label)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require_fixture()
    state = tempfile.mkdtemp(prefix="gpuportal-k8s-admission-")
    env = {**os.environ, **PORTS, "K8S_STATE_DIR": state, "K8S_BIN_DIR": str(BIN)}
    done = subprocess.run(["bash", str(SCRIPTS / "start.sh")], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    if done.returncode != 0:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)
        pytest.fail(f"scripts/k8s/start.sh failed (logs in {state}/log):\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    certs = Path(state) / "admission"
    ca_bundle = subprocess.run(["bash", str(SCRIPTS / "admission-certs.sh"), str(certs), "127.0.0.1"],
                               capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    admin = k8s_config.new_client_from_config(config_file=values["K8S_ADMIN_KUBECONFIG"])
    try:
        seed.register_nodes(k8s.CoreV1Api(admin), [gpu_node(name) for name in GPU_NODES])
        register_webhook(admin, ca_bundle)
        yield Cluster(admin, k8s.CoreV1Api(admin), certs, values["K8S_ADMIN_KUBECONFIG"], values["K8S_WEBHOOK_TOKEN"])
    finally:
        admin.close()
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)
        shutil.rmtree(state, ignore_errors=True)


def gpu_node(name: str) -> dict:
    body = seed.node_body(name, block="leaf1")
    return {**body, "spec": {"taints": [GPU_TAINT]}}


def documented_webhook() -> dict:
    """The one webhook of deploy/k8s/admission.yaml's MutatingWebhookConfiguration, as a site applies it."""
    documents = [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]
    configuration = next(doc for doc in documents if doc["kind"] == "MutatingWebhookConfiguration")
    (webhook,) = configuration["webhooks"]
    return webhook


def register_webhook(admin: k8s.ApiClient, ca_bundle: str) -> None:
    """deploy/k8s/admission.yaml's MutatingWebhookConfiguration (its namespaceSelector: only the team namespaces
    governance labels; its matchConditions: only GPU pods; its rules), pointed at this process by URL."""
    base64.b64decode(ca_bundle, validate=True)  # the script printed a bundle, not an error
    webhook = documented_webhook()
    assert webhook["name"] == WEBHOOK_NAME  # the tests patch /webhooks/0 by it
    webhook["clientConfig"] = {"url": f"https://127.0.0.1:{WEBHOOK_PORT}/admission/v1/mutate", "caBundle": ca_bundle}
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "gpuportal-admission"}, "webhooks": [webhook],
    }
    k8s.AdmissionregistrationV1Api(admin).create_mutating_webhook_configuration(body)


class TLSServer(ThreadedWSGIServer):
    """Django's test server, speaking HTTPS as the API server requires of webhooks."""

    daemon_threads = False  # so server_close joins them
    block_on_close = True
    certs: Path
    accepted: list[ssl.SSLSocket]

    def get_request(self):  # type: ignore[no-untyped-def]
        sock, address = super().get_request()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certs / "tls.crt", self.certs / "tls.key")
        wrapped = context.wrap_socket(sock, server_side=True)  # detaches sock: keep the wrapper
        self.accepted.append(wrapped)
        return wrapped, address

    def server_close(self) -> None:
        # The API server keeps its connection alive: cut it too, or a "stopped" webhook would still answer;
        # then wait for the handler threads, which still hold the test's shared database connection.
        for sock in getattr(self, "accepted", ()):  # absent when binding failed: let that error show
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        super().server_close()


class TLSLiveServerThread(LiveServerThread):
    def __init__(self, certs: Path, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__("127.0.0.1", _StaticFilesHandler, port=WEBHOOK_PORT, **kwargs)
        self.certs = certs

    def _create_server(self, connections_override=None):  # type: ignore[no-untyped-def]
        server = TLSServer(("127.0.0.1", self.port), QuietWSGIRequestHandler, allow_reuse_address=True,
                           connections_override=connections_override)
        server.certs, server.accepted = self.certs, []
        return server


@pytest.fixture
def webhook(cluster, transactional_db) -> Iterator[TLSLiveServerThread]:
    """The portal's webhook on https://127.0.0.1:25444 for one test (a test may stop it early)."""
    shared = {c.alias: c for c in connections.all() if c.vendor == "sqlite" and c.is_in_memory_db()}
    for connection in shared.values():
        connection.inc_thread_sharing()
    thread = TLSLiveServerThread(cluster.certs, connections_override=shared)
    thread.daemon = True
    # The admission process's URLs, answering only the API server's bearer token (as deployed). The tests change
    # teams and quota between two pods and read the decision right after: no directory lifetime, no batching.
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"], ROOT_URLCONF="gpuportal.urls_admission",
                           GPUPORTAL_ADMISSION_TOKEN=cluster.webhook_token, GPUPORTAL_ADMISSION_DIRECTORY_SECONDS=0,
                           GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS=0):
        thread.start()
        thread.is_ready.wait()
        if thread.error:
            raise thread.error
        try:
            yield thread
        finally:
            if thread.is_alive():
                thread.terminate()
            for connection in shared.values():
                connection.dec_thread_sharing()
