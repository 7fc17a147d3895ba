"""Run Kueue's controller-manager against a running live fixture (scripts/k8s/start.sh), out of cluster.

    .venv/bin/python scripts/k8s/kueue.py start [STATE_DIR]   # default $K8S_STATE_DIR or /tmp/gpuportal-k8s
    bash scripts/k8s/stop.sh                                  # stops Kueue with the rest

Installs the release's own objects, as its manifests would in a cluster, from what scripts/k8s/build/build.sh
copied beside the binary (``$K8S_BIN_DIR/kueue-config``): every Kueue CRD, the controller's ClusterRole (and
its Role on Secrets in ``kueue-system``) bound to the user ``gpuportal-kueue`` (start.sh's
``kueue.kubeconfig``), and Kueue's webhooks. Kueue cannot run without its webhooks: the Job webhook suspends a
new Job until its Workload is admitted (else the job controller starts its pods at once), and its v1beta1 <->
v1beta2 conversion webhook serves the API version the portal writes (v1beta1) from the stored one (v1beta2).
The apiserver is on loopback and no Service can route to a process outside the cluster, so each registration
names a URL, ``https://127.0.0.1:<webhook port>/<path>``, with the CA of a certificate made here
(scripts/k8s/admission-certs.sh) as its ``caBundle``; Kueue's own certificate management (which wants a
Service and a Secret) is off. Only the webhooks of the integrations this fixture enables are registered:
Kueue's own kinds and ``batch/v1`` Jobs (a registered webhook whose handler is not served would refuse every
Pod or Deployment with failurePolicy Fail).

Kueue reads its metrics-server certificate from the fixed path ``/etc/kueue/metrics/certs`` whenever its own
certificate management is off, even with the metrics server disabled, so one is written there if missing.
Ports (webhook, health probes) come from ``K8S_KUEUE_WEBHOOK_PORT``/``K8S_KUEUE_HEALTH_PORT`` (defaults 24462,
24463: below the ephemeral range, clear of the fixture's 24379-24459).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

HERE = Path(__file__).resolve().parent
BIN = Path(os.environ.get("K8S_BIN_DIR", "/var/cache/gpuportal-k8s/go-bin"))
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
NAMESPACE = "kueue-system"
ROLE = "gpuportal-fixture:kueue"
USER = "gpuportal-kueue"
# The CRDs Kueue's own kustomization gives a conversion webhook (config/components/crd/kustomization.yaml).
CONVERTED = {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
# The integrations this fixture enables, and the API groups whose webhooks they serve.
FRAMEWORKS = ["batch/job"]
WEBHOOK_GROUPS = {"kueue.x-k8s.io", "batch"}
OUTSIDE_KUEUE = {  # as Kueue's kustomization: its Job webhooks leave the system namespaces alone
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
    ]
}


def log(message: str) -> None:
    print(f"kueue.py: {message}", file=sys.stderr, flush=True)


def make_certs(out: Path) -> str:
    """The webhook server's certificate for 127.0.0.1; returns the caBundle (base64 of the CA)."""
    subprocess.run(["bash", str(HERE / "admission-certs.sh"), str(out), "127.0.0.1"], check=True,
                   capture_output=True)
    if not (METRICS_CERTS / "tls.crt").exists():
        METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(out / name, METRICS_CERTS / name)
    return base64.b64encode((out / "ca.crt").read_bytes()).decode()


def config_file(state: Path, webhook_port: int, health_port: int) -> Path:
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},  # no metrics server: several fixtures may run side by side
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(state / "kueue" / "certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": FRAMEWORKS},
        # The visibility API is an aggregated apiserver the fixture has no Service to route to.
        # Topology-aware scheduling is Beta and on by default since v0.14 (pkg/features/kube_features.go);
        # named here so the fixture does not hang on a default a bump could change (tests/kueue_live's TAS test
        # and benchmarks/vs_k8s_schedulers.py's kueue_tas line need it).
        "featureGates": {"VisibilityOnDemand": False, "TopologyAwareScheduling": True},
    }
    path = state / "kueue" / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def tas_bodies(topology: str, flavor: str, levels: list[str], node_labels: dict[str, str]) -> list[dict[str, Any]]:
    """The site admin's part of topology-aware scheduling (Kueue's docs): a ``Topology`` naming the node labels
    of each level, outermost first, ``kubernetes.io/hostname`` last (so Kueue assigns each pod its node), and a
    ResourceFlavor with that ``topologyName``. Its ``nodeLabels`` (at least one is required with a topology)
    choose the nodes the topology covers. Workloads admitted to the flavor are placed by TAS: their pods carry
    the scheduling gate ``kueue.x-k8s.io/topology`` until Kueue's ungater gives each its node selector."""
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": topology},
         "spec": {"levels": [{"nodeLabel": label} for label in levels]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": node_labels, "topologyName": topology}},
    ]


def _apply(create, replace, read, body: dict[str, Any], *args: Any) -> None:
    """Create, or replace what an earlier start of this cluster left (same name, its resourceVersion)."""
    try:
        create(*args, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        current = read(body["metadata"]["name"], *args)
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        replace(body["metadata"]["name"], *args, body)


def install_crds(api: k8s.ApiClient, config: Path, webhook_url: str, ca_bundle: str) -> None:
    ext = k8s.ApiextensionsV1Api(api)
    names = []
    for path in sorted((config / "crd").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["plural"] in CONVERTED:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"url": f"{webhook_url}/convert", "caBundle": ca_bundle},
                            "conversionReviewVersions": ["v1"]},
            }
        _apply(ext.create_custom_resource_definition, ext.replace_custom_resource_definition,
               ext.read_custom_resource_definition, crd)
        names.append(crd["metadata"]["name"])
    for name in names:
        _wait(f"CRD {name} established", lambda n=name: _established(ext, n), 30)


def _established(ext: k8s.ApiextensionsV1Api, name: str) -> bool:
    conditions = ext.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def grant_role(api: k8s.ApiClient, config: Path) -> None:
    rbac, core = k8s.RbacAuthorizationV1Api(api), k8s.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    role = yaml.safe_load((config / "role.yaml").read_text())
    role["metadata"] = {"name": ROLE}
    _apply(rbac.create_cluster_role, rbac.replace_cluster_role, rbac.read_cluster_role, role)
    binding = {
        "metadata": {"name": ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    _apply(rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding, rbac.read_cluster_role_binding,
           binding)
    # and the Role on Secrets in its own namespace that its manager's cache watches (it blocks without it)
    secrets = yaml.safe_load((config / "secrets-role.yaml").read_text())
    secrets["metadata"] = {"name": ROLE, "namespace": NAMESPACE}
    _apply(rbac.create_namespaced_role, rbac.replace_namespaced_role, rbac.read_namespaced_role, secrets, NAMESPACE)
    binding["roleRef"] = {**binding["roleRef"], "kind": "Role"}
    _apply(rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding,
           rbac.read_namespaced_role_binding, {**binding, "metadata": {"name": ROLE, "namespace": NAMESPACE}},
           NAMESPACE)


def webhook_configurations(config: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The release's Mutating/ValidatingWebhookConfigurations, cut to this fixture's integrations and pointed
    at Kueue's webhook server on loopback."""
    out = []
    for doc in yaml.safe_load_all((config / "webhooks.yaml").read_text()):
        if not doc:
            continue
        kept = []
        for hook in doc["webhooks"]:
            groups = {g for rule in hook.get("rules") or () for g in rule.get("apiGroups") or ()}
            if not groups <= WEBHOOK_GROUPS:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{webhook_url}{path}", "caBundle": ca_bundle}
            if "batch" in groups:
                hook["namespaceSelector"] = OUTSIDE_KUEUE
            kept.append(hook)
        kind = doc["kind"]
        doc["metadata"] = {"name": f"gpuportal-fixture-kueue-{kind.removesuffix('WebhookConfiguration').lower()}"}
        doc["webhooks"] = kept
        out.append(doc)
    return out


def register_webhooks(api: k8s.ApiClient, config: Path, webhook_url: str, ca_bundle: str) -> None:
    adm = k8s.AdmissionregistrationV1Api(api)
    for doc in webhook_configurations(config, webhook_url, ca_bundle):
        if doc["kind"] == "MutatingWebhookConfiguration":
            _apply(adm.create_mutating_webhook_configuration, adm.replace_mutating_webhook_configuration,
                   adm.read_mutating_webhook_configuration, doc)
        else:
            _apply(adm.create_validating_webhook_configuration, adm.replace_validating_webhook_configuration,
                   adm.read_validating_webhook_configuration, doc)


def _wait(what: str, ready, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (ApiException, OSError, urllib.error.URLError) as exc:
            last = exc
        time.sleep(0.2)
    raise SystemExit(f"kueue.py: {what}: not within {seconds:g} s ({last})")


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return bool(answer.status == 200)


def _webhook_answers(api: k8s.ApiClient) -> bool:
    """A dry-run ResourceFlavor create passes through Kueue's mutating and validating webhooks."""
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "probe"}}
    k8s.CustomObjectsApi(api).create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "resourceflavors", body, dry_run="All")
    return True


def start(state: Path) -> dict[str, str]:
    binary = BIN / "kueue"
    if not binary.exists():
        raise SystemExit(f"kueue.py: {binary} missing: run scripts/k8s/install.sh")
    config = BIN / "kueue-config"
    webhook_port = int(os.environ.get("K8S_KUEUE_WEBHOOK_PORT", "24462"))
    health_port = int(os.environ.get("K8S_KUEUE_HEALTH_PORT", "24463"))
    webhook_url = f"https://127.0.0.1:{webhook_port}"
    admin = k8s_config.new_client_from_config(str(state / "admin.kubeconfig"))
    (state / "kueue").mkdir(exist_ok=True)
    started = time.monotonic()
    ca_bundle = make_certs(state / "kueue" / "certs")
    grant_role(admin, config)
    install_crds(admin, config, webhook_url, ca_bundle)
    cfg = config_file(state, webhook_port, health_port)
    with open(state / "log" / "kueue.log", "ab") as log_file:
        process = subprocess.Popen(
            [str(binary), "--config", str(cfg), "--zap-log-level=2"],
            env={**os.environ, "KUBECONFIG": str(state / "kueue.kubeconfig")},
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    (state / "run" / "kueue.pid").write_text(f"{process.pid}\n")
    _wait("kueue readyz", lambda: process.poll() is None and _healthy(f"http://127.0.0.1:{health_port}/readyz"),
          120)
    register_webhooks(admin, config, webhook_url, ca_bundle)
    _wait("kueue's webhooks answering", lambda: _webhook_answers(admin), 60)
    env = {
        "K8S_KUEUE_WEBHOOK_URL": webhook_url,
        "K8S_KUEUE_START_SECONDS": f"{time.monotonic() - started:.1f}",
        "K8S_KUEUE_VERSION": _release((state / "log" / "kueue.log").read_text(errors="replace")),
    }
    with open(state / "env", "a") as out:
        out.writelines(f"{k}={v}\n" for k, v in env.items())
    return env


def _release(log_text: str) -> str:
    """The release Kueue logs at start ("Initializing" ... "gitVersion": "v0.17.0"); it has no --version."""
    found = re.search(r'"gitVersion"\s*:\s*"([^"]+)"', log_text)
    return found.group(1) if found else "unknown"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "start":
        print(__doc__, file=sys.stderr)
        return 2
    state = Path(argv[2] if len(argv) > 2 else os.environ.get("K8S_STATE_DIR", "/tmp/gpuportal-k8s"))
    for key, value in start(state).items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
