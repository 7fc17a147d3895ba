#!/usr/bin/env bash
# Start a real Kubernetes control plane on loopback: our own etcd, kube-apiserver (TLS with a CA made
# here, static bearer tokens, RBAC, the ResourceQuota admission plugin), the real kube-scheduler and
# kube-controller-manager (its resourcequota, namespace and job controllers, so a quota's status.used is
# real, a deleted namespace empties and a Job's pods exist), and KWOK's controller, which plays the kubelets of the nodes annotated
# kwok.x-k8s.io/node=fake (Ready, heartbeats; their pods go Running and finish: scripts/k8s/kwok-stages.yaml).
# The releases are those of scripts/k8s/build (built and cached by scripts/k8s/install.sh).
#
# Everything lives in $K8S_STATE_DIR (default /tmp/gpuportal-k8s), wiped on every start so each run
# begins with an empty cluster. Prints KEY=VALUE lines (also written to $STATE/env):
#   K8S_ADMIN_KUBECONFIG   system:masters (seeding, direct queries)
#   K8S_PORTAL_KUBECONFIG  user "gpuportal" with only the portal's RBAC role (collector, actuator)
#   K8S_SCHEDULER_KUBECONFIG, K8S_API_URL, K8S_STATE_DIR
# Kueue is started on top by scripts/k8s/kueue.py (kueue.kubeconfig is written for it here).
# Needs root only for the cache path; scripts/k8s/install.sh must have run first.
set -euo pipefail

STATE=${K8S_STATE_DIR:-/tmp/gpuportal-k8s}
BIN=${K8S_BIN_DIR:-/var/cache/gpuportal-k8s/go-bin}
ETCD_PORT=${K8S_ETCD_PORT:-24379}
ETCD_PEER_PORT=${K8S_ETCD_PEER_PORT:-24380}
API_PORT=${K8S_API_PORT:-24443}
SCHEDULER_PORT=${K8S_SCHEDULER_PORT:-24459}
CONTROLLER_MANAGER_PORT=${K8S_CONTROLLER_MANAGER_PORT:-24457}
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "start.sh: $*" >&2; exit 1; }
for bin in etcd kube-apiserver kube-scheduler kube-controller-manager kwok; do
    [ -x "$BIN/$bin" ] || die "$BIN/$bin missing: run scripts/k8s/install.sh"
done
command -v openssl >/dev/null || die "openssl missing: run scripts/k8s/install.sh"

# A previous cluster from this state dir would hold the ports: stop it first.
"$HERE/stop.sh" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE"/{pki,etcd,log,run}
chmod 700 "$STATE/pki" "$STATE/etcd"  # etcd warns about a data dir others can read

# --- PKI: a CA, the apiserver's serving cert for 127.0.0.1/localhost, and the service-account key
# pair the apiserver requires (--service-account-issuer/-signing-key-file) even with no pods running.
PKI=$STATE/pki
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=gpuportal-fixture-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt"
openssl_quiet req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.csr"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' \
    >"$PKI/apiserver.ext"
openssl_quiet x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 7 -extfile "$PKI/apiserver.ext" -out "$PKI/apiserver.crt"
openssl_quiet genrsa -out "$PKI/sa.key" 2048
openssl_quiet rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

# --- static bearer tokens (token,user,uid,"groups"): fresh random ones every start.
token() { openssl rand -hex 24; }
ADMIN_TOKEN=$(token)
SCHEDULER_TOKEN=$(token)
CONTROLLER_MANAGER_TOKEN=$(token)
PORTAL_TOKEN=$(token)
KWOK_TOKEN=$(token)
KUEUE_TOKEN=$(token)
{
    echo "$ADMIN_TOKEN,fixture-admin,fixture-admin,\"system:masters\""
    # The bootstrap RBAC policy already grants this user what kube-scheduler needs.
    echo "$SCHEDULER_TOKEN,system:kube-scheduler,system:kube-scheduler"
    # Likewise for the controller manager (system:kube-controller-manager and the per-controller roles).
    echo "$CONTROLLER_MANAGER_TOKEN,system:kube-controller-manager,system:kube-controller-manager"
    # Gets only the role scripts/k8s/seed.py binds: what the collector and actuator need, no more.
    echo "$PORTAL_TOKEN,gpuportal,gpuportal,\"gpuportal:portal\""
    # KWOK writes the status of nodes and pods it plays the kubelet for, as a kubelet's node identity
    # would; the fixture gives it the ClusterRole bound below.
    echo "$KWOK_TOKEN,gpuportal-kwok,gpuportal-kwok"
    # Kueue's controller-manager (scripts/k8s/kueue.py, when a test starts it): its release's own ClusterRole.
    echo "$KUEUE_TOKEN,gpuportal-kueue,gpuportal-kueue"
} >"$PKI/tokens.csv"
chmod 600 "$PKI/tokens.csv"

# --- what the API server presents to admission webhooks: the portal's webhook answers only the bearer of
# GPUPORTAL_ADMISSION_TOKEN (docs/routing.md). "*" matches any webhook host this fixture registers.
WEBHOOK_TOKEN=$(token)
cat >"$PKI/admission-kubeconfig.yaml" <<KUBECONFIG
apiVersion: v1
kind: Config
users:
  - name: "*"
    user: {token: "$WEBHOOK_TOKEN"}
KUBECONFIG
cat >"$PKI/admission-config.yaml" <<ADMISSION
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: "$PKI/admission-kubeconfig.yaml"
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: "$PKI/admission-kubeconfig.yaml"
ADMISSION
chmod 600 "$PKI/admission-kubeconfig.yaml"

URL="https://127.0.0.1:$API_PORT"
kubeconfig() {  # name token -> path
    local path="$STATE/$1.kubeconfig"
    cat >"$path" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: gpuportal-fixture
  cluster:
    server: $URL
    certificate-authority: $PKI/ca.crt
users:
- name: $1
  user:
    token: $2
contexts:
- name: $1
  context:
    cluster: gpuportal-fixture
    user: $1
current-context: $1
KCFG
    chmod 600 "$path"
    echo "$path"
}
ADMIN_KUBECONFIG=$(kubeconfig admin "$ADMIN_TOKEN")
SCHEDULER_KUBECONFIG=$(kubeconfig scheduler "$SCHEDULER_TOKEN")
CONTROLLER_MANAGER_KUBECONFIG=$(kubeconfig controller-manager "$CONTROLLER_MANAGER_TOKEN")
PORTAL_KUBECONFIG=$(kubeconfig portal "$PORTAL_TOKEN")
KWOK_KUBECONFIG=$(kubeconfig kwok "$KWOK_TOKEN")
kubeconfig kueue "$KUEUE_TOKEN" >/dev/null

# --- etcd: our own (the release k8s.io/kubernetes requires, built beside it), loopback only. fsync is
# off: the data dir is a throw-away under /tmp, and hundreds of KWOK nodes heartbeating write a lot.
nohup "$BIN/etcd" --name gpuportal-fixture --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "gpuportal-fixture=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --logger zap --log-level warn >"$STATE/log/etcd.log" 2>&1 &
echo $! >"$STATE/run/etcd.pid"

wait_http() {  # what url tries [curl args...]
    local what=$1 url=$2 tries=$3 code=000
    shift 3
    for _ in $(seq 1 "$tries"); do
        code=$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url" || true)
        [ "$code" = 200 ] && return 0
        sleep 0.1
    done
    die "$what not ready at $url (HTTP $code); see $STATE/log/"
}
wait_http etcd "http://127.0.0.1:$ETCD_PORT/health" 100

# --- kube-apiserver. Admission: only what a real cluster's node/pod flow and team quotas need here.
#   TaintNodesByCondition  new Nodes get node.kubernetes.io/not-ready:NoSchedule (seed.py lifts it, as
#                          the node lifecycle controller would once the node reports Ready)
#   Priority, DefaultTolerationSeconds, NamespaceLifecycle: as on any cluster
#   ResourceQuota          a pod beyond its namespace's quota (requests.nvidia.com/gpu) is refused with
#                          "exceeded quota"; it reads the usage kube-controller-manager keeps in status
#   MutatingAdmissionWebhook  calls the portal's webhook once a MutatingWebhookConfiguration is registered
#                          (tests/admission_live does; with none registered it does nothing); with
#   ValidatingAdmissionWebhook also Kueue's (scripts/k8s/kueue.py registers them when a test starts Kueue)
#   ServiceAccount is disabled: no controller-manager creates the namespaces' "default" accounts, so
#   every pod would be refused. The rest of the default set guards objects the fixture never makes.
# --endpoint-reconciler-type=none: the "kubernetes" Service endpoint cannot be a loopback address.
nohup "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --token-auth-file "$PKI/tokens.csv" --anonymous-auth=false \
    --admission-control-config-file "$PKI/admission-config.yaml" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range 10.96.0.0/24 \
    --enable-admission-plugins NamespaceLifecycle,TaintNodesByCondition,Priority,DefaultTolerationSeconds,ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --disable-admission-plugins ServiceAccount,LimitRanger,DefaultStorageClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,RuntimeClass,CertificateApproval,CertificateSigning,CertificateSubjectRestriction,DefaultIngressClass \
    --endpoint-reconciler-type none \
    --enable-priority-and-fairness=false --profiling=false \
    --v 1 >"$STATE/log/kube-apiserver.log" 2>&1 &
echo $! >"$STATE/run/kube-apiserver.pid"
# /readyz waits for the bootstrap RBAC roles and priority classes, which the scheduler relies on.
wait_http kube-apiserver "$URL/readyz" 300 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN"

# --- kube-scheduler: the real one, no leader election (only one), health on its own loopback port.
nohup "$BIN/kube-scheduler" --kubeconfig "$SCHEDULER_KUBECONFIG" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" \
    --profiling=false --v 1 >"$STATE/log/kube-scheduler.log" 2>&1 &
echo $! >"$STATE/run/kube-scheduler.pid"
wait_http kube-scheduler "https://127.0.0.1:$SCHEDULER_PORT/healthz" 200 -k

# --- kube-controller-manager: only the controllers whose objects the fixture has. resourcequota keeps
# each quota's status (hard and used) current, which the admission plugin needs before it admits any
# pod in a namespace with a quota; namespace empties a deleted namespace; job runs batch/v1 Jobs' pods
# (and deletes them when Kueue suspends a Job it evicts). No serviceaccount-token
# controller (no ServiceAccount admission), no node lifecycle (seed.py plays the kubelets).
# Without --use-service-account-credentials (no ServiceAccount tokens here) every controller runs as
# system:kube-controller-manager: give that user the bootstrap roles those two controllers' own
# service accounts would have, and nothing more.
for controller in resourcequota namespace job; do
    curl -sf -o /dev/null --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        -H 'Content-Type: application/json' -X POST "$URL/apis/rbac.authorization.k8s.io/v1/clusterrolebindings" \
        -d "{\"metadata\": {\"name\": \"gpuportal-fixture:$controller-controller\"},
             \"roleRef\": {\"apiGroup\": \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\",
                         \"name\": \"system:controller:$controller-controller\"},
             \"subjects\": [{\"apiGroup\": \"rbac.authorization.k8s.io\", \"kind\": \"User\",
                           \"name\": \"system:kube-controller-manager\"}]}" \
        || die "could not bind system:controller:$controller-controller"
done
nohup "$BIN/kube-controller-manager" --kubeconfig "$CONTROLLER_MANAGER_KUBECONFIG" --leader-elect=false \
    --controllers resourcequota,namespace,job --use-service-account-credentials=false \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
    --profiling=false --v 1 >"$STATE/log/kube-controller-manager.log" 2>&1 &
echo $! >"$STATE/run/kube-controller-manager.pid"
wait_http kube-controller-manager "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" 200 -k

# --- KWOK: the kubelets of the nodes annotated kwok.x-k8s.io/node=fake (seed.py's fleet and any test's
# extra nodes), with the Stages of kwok-stages.yaml. Its role: what a kubelet writes for its nodes and
# pods, and the events it records. No server port: several fixtures may run side by side.
api_post() {  # path json
    curl -sf -o /dev/null --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        -H 'Content-Type: application/json' -X POST "$URL$1" -d "$2"
}
api_post /apis/rbac.authorization.k8s.io/v1/clusterroles '{"metadata": {"name": "gpuportal-fixture:kwok"},
    "rules": [
      {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch", "patch", "update", "delete"]},
      {"apiGroups": [""], "resources": ["nodes/status", "pods/status"], "verbs": ["get", "patch", "update"]},
      {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
      {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch"]}]}' \
    || die "could not create the kwok ClusterRole"
api_post /apis/rbac.authorization.k8s.io/v1/clusterrolebindings '{"metadata": {"name": "gpuportal-fixture:kwok"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuportal-fixture:kwok"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "gpuportal-kwok"}]}' \
    || die "could not bind the kwok ClusterRole"
nohup "$BIN/kwok" --kubeconfig "$KWOK_KUBECONFIG" --config "$HERE/kwok-stages.yaml" \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --cidr 10.128.0.0/12 --node-lease-duration-seconds 40 \
    >"$STATE/log/kwok.log" 2>&1 &
echo $! >"$STATE/run/kwok.pid"
sleep 0.5
kill -0 "$(cat "$STATE/run/kwok.pid")" 2>/dev/null || die "kwok exited at start; see $STATE/log/kwok.log"

{
    echo "K8S_STATE_DIR=$STATE"
    echo "K8S_API_URL=$URL"
    echo "K8S_ADMIN_KUBECONFIG=$ADMIN_KUBECONFIG"
    echo "K8S_PORTAL_KUBECONFIG=$PORTAL_KUBECONFIG"
    echo "K8S_SCHEDULER_KUBECONFIG=$SCHEDULER_KUBECONFIG"
    echo "K8S_VERSION=$("$BIN/kube-apiserver" --version | cut -d' ' -f2)"
    echo "K8S_WEBHOOK_TOKEN=$WEBHOOK_TOKEN"
} | tee "$STATE/env"
