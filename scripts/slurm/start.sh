#!/usr/bin/env bash
# Start a real Slurm fleet on this host, loopback only: slurmdbd (accounting in MariaDB), slurmctld,
# 8 slurmd (dgx01-dgx08, each "8 x H100" backed by fake character devices), slurmrestd with JWT auth,
# and a private munged. Slurm 22.05 from this system by default; with SLURM_ROOT set (see
# start-trixie.sh) every daemon and client runs from that Debian root instead (Slurm 24.11).
#
# Accounting: AccountingStorageEnforce=associations,limits,qos, so a job needs an association. The
# cluster, the accounts in $SLURM_ACCOUNTS (default "vision llm hpo") and root as their user are made
# here; PriorityType=priority/multifactor, so Fairshare= shows in sshare. The database is
# $SLURM_ACCT_DB (default gpuportal_slurm_acct_<hash of the state dir>, so parallel fleets never
# share one) on the MariaDB at $SLURM_MYSQL_HOST:$SLURM_MYSQL_PORT (default 127.0.0.1:3306, root,
# no password), dropped and made anew on every start.
# Preemption is off unless $SLURM_PREEMPT_TYPE is set (e.g. preempt/qos, with PreemptMode
# $SLURM_PREEMPT_MODE, default REQUEUE): native reclaim's live test turns it on.
#
# Everything lives in $SLURM_STATE_DIR (default /tmp/gpuportal-slurm) and is wiped on every start,
# so each run begins with an empty queue. Prints KEY=VALUE lines (also written to $STATE/env):
#   SLURM_CONF, SLURMRESTD_URL, SLURM_JWT, SLURM_USER, SLURM_BIN_DIR (scontrol, sbatch, sacctmgr,
#   sshare, ... for this fleet), SLURM_ACCT_DB, SLURM_VERSION
# Needs root (mknod, munged, slurmd) and scripts/slurm/install.sh run first.
set -euo pipefail

STATE=${SLURM_STATE_DIR:-/tmp/gpuportal-slurm}
NODES=${SLURM_NODES:-8}
CTLD_PORT=${SLURMCTLD_PORT:-16817}
# Two above slurmctld's by default, so a caller that moves slurmctld moves slurmdbd with it.
DBD_PORT=${SLURMDBD_PORT:-$((CTLD_PORT + 2))}
REST_PORT=${SLURMRESTD_PORT:-16820}
NODE_PORT_BASE=${SLURMD_PORT_BASE:-17000}
ROOT=${SLURM_ROOT:-}
# 22.05 needs each API version named (openapi/dbv0.0.3x serve the slurmdb endpoints); 24.11 loads
# every plugin it has when none is named.
REST_PLUGINS=${SLURMRESTD_PLUGINS-openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38,openapi/dbv0.0.36,openapi/dbv0.0.37,openapi/dbv0.0.38}
PING_VERSION=${SLURMRESTD_PING_VERSION:-v0.0.38}
ACCOUNTS=${SLURM_ACCOUNTS:-vision llm hpo}
MYSQL_HOST=${SLURM_MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${SLURM_MYSQL_PORT:-3306}
ACCT_DB=${SLURM_ACCT_DB:-gpuportal_slurm_acct_$(printf '%s' "$STATE" | sha256sum | cut -c1-10)}
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "start.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd, munged and mknod need it)"
for bin in slurmctld slurmd slurmrestd slurmdbd munged scontrol sinfo sacctmgr; do
    [ -x "$ROOT/usr/sbin/$bin" ] || [ -x "$ROOT/usr/bin/$bin" ] || die "$bin missing in ${ROOT:-/}: run scripts/slurm/install.sh${ROOT:+ (install-trixie.sh)}"
done
ls "$ROOT"/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so >/dev/null 2>&1 || die "the auth/jwt plugin is missing in ${ROOT:-/}"
command -v mariadb >/dev/null || die "mariadb client missing: run scripts/slurm/install.sh"
mysql_root() { mariadb -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u root --batch "$@"; }
mysql_root -e 'SELECT 1' >/dev/null 2>&1 || die "MariaDB not reachable at $MYSQL_HOST:$MYSQL_PORT as root"

# A previous fleet from this state dir would hold the ports: stop it first.
"$HERE/stop.sh" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE"/{etc,spool/ctld,spool/slurmd,log,run,dev,munge,jwt,bin}
chmod 755 "$STATE" "$STATE/etc" "$STATE/bin"
mysql_root -e "DROP DATABASE IF EXISTS \`$ACCT_DB\`; CREATE DATABASE \`$ACCT_DB\`"

# --- every daemon and client of this fleet runs through $STATE/bin/in-root: straight on this system,
# or chrooted into $ROOT in a private mount namespace (its /proc, /dev, /sys and this state dir are
# mounted there and vanish with the process, so the shared root is never changed; a state dir outside
# /tmp leaves only its empty mount point behind in the root).
if [ -z "$ROOT" ]; then
    printf '#!/bin/sh\nexec "$@"\n' >"$STATE/bin/in-root"
else
    cat >"$STATE/bin/in-root" <<WRAP
#!/bin/sh
exec /usr/bin/unshare --mount --propagation private -- /bin/sh -ec '
    mount -t proc proc "$ROOT/proc"
    mount --rbind /dev "$ROOT/dev"
    mount --rbind /sys "$ROOT/sys"
    mount -t tmpfs tmpfs "$ROOT/tmp"
    mkdir -p "$ROOT$STATE"
    mount --bind "$STATE" "$ROOT$STATE"
    exec /usr/sbin/chroot "$ROOT" "\$@"' in-root "\$@"
WRAP
fi
for tool in scontrol sinfo squeue sbatch scancel sacctmgr sshare sacct sreport sprio; do
    printf '#!/bin/sh\nexec %s/in-root %s "$@"\n' "$STATE/bin" "/usr/bin/$tool" >"$STATE/bin/$tool"
done
chmod 755 "$STATE"/bin/*
IN_ROOT="$STATE/bin/in-root"
export PATH="$STATE/bin:$PATH"

# --- munge: a private daemon and key so we never touch the system's /run/munge.
chmod 700 "$STATE/munge"
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$STATE/munge/munge.key"
MUNGE_SOCKET="$STATE/munge/munge.socket.2"
"$IN_ROOT" /usr/sbin/munged --force --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munge.seed"
# slurmrestd drops to the slurm user and must still reach the socket directory.
chmod 711 "$STATE/munge"

# --- JWT key for AuthAltTypes=auth/jwt (slurmrestd clients send X-SLURM-USER-TOKEN).
dd if=/dev/urandom of="$STATE/jwt/jwt_hs256.key" bs=32 count=1 status=none
chmod 600 "$STATE/jwt/jwt_hs256.key"

# --- fake GPUs: slurmd drops file-less GPUs and rejects regular files, so make char devices
# with the NVIDIA major number (195). Nothing ever opens them.
for i in 0 1 2 3 4 5 6 7; do
    mknod "$STATE/dev/nvidia$i" c 195 "$i"
done

last=$(printf "%02d" "$NODES")
{
    echo "# generated by scripts/slurm/start.sh: $NODES virtual DGX nodes with fake GPUs, loopback only"
    echo "ClusterName=gpuportal"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$MUNGE_SOCKET"
    echo "CredType=cred/munge"
    echo "AuthAltTypes=auth/jwt"
    echo "AuthAltParameters=jwt_key=$STATE/jwt/jwt_hs256.key"
    echo "StateSaveLocation=$STATE/spool/ctld"
    echo "SlurmdSpoolDir=$STATE/spool/slurmd/%n"
    echo "SlurmctldPidFile=$STATE/run/slurmctld.pid"
    echo "SlurmdPidFile=$STATE/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$STATE/log/slurmctld.log"
    echo "SlurmdLogFile=$STATE/log/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "MailProg=/bin/true"
    echo "MpiDefault=none"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "# accounting: slurmdbd, enforced, GPUs tracked as a TRES (GrpTRES=gres/gpu=N caps a team)"
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageHost=localhost"
    echo "AccountingStoragePort=$DBD_PORT"
    echo "# the munge socket for slurmdbd connections (AuthInfo covers slurmctld's only)"
    echo "AccountingStoragePass=$MUNGE_SOCKET"
    echo "AccountingStorageEnforce=associations,limits,qos"
    echo "AccountingStorageTRES=gres/gpu"
    echo "PriorityType=priority/multifactor"
    if [ -n "${SLURM_PREEMPT_TYPE:-}" ]; then
        echo "# native reclaim (docs/governance.md): slurmctld requeues a borrower's job for an owner's"
        echo "PreemptType=$SLURM_PREEMPT_TYPE"
        echo "PreemptMode=${SLURM_PREEMPT_MODE:-REQUEUE}"
    fi
    echo "PriorityWeightFairshare=10000"
    echo "PriorityWeightAge=1000"
    echo "JobCompType=jobcomp/none"
    echo "SchedulerType=sched/backfill"
    echo "SchedulerParameters=bf_interval=1"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "DefMemPerCPU=4000"
    echo "GresTypes=gpu"
    echo "TopologyPlugin=topology/tree"
    echo "# report the configured (fake) CPUs/memory instead of the small host's"
    echo "SlurmdParameters=config_overrides"
    echo "# 1: an admin-set DOWN node stays DOWN until resumed"
    echo "ReturnToService=1"
    echo "SlurmdTimeout=60"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "MinJobAge=300"
    echo
    echo "NodeName=DEFAULT CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2000000 Gres=gpu:h100:8 Feature=h100,dgx State=UNKNOWN"
    for n in $(seq 1 "$NODES"); do
        printf "NodeName=dgx%02d NodeAddr=127.0.2.%d Port=%d\n" "$n" "$n" $((NODE_PORT_BASE + n))
    done
    echo
    echo "PartitionName=gpu Nodes=dgx[01-$last] Default=YES DefaultTime=04:00:00 MaxTime=7-00:00:00 State=UP"
    echo "PartitionName=debug Nodes=dgx[01-02] DefaultTime=00:30:00 MaxTime=01:00:00 PriorityTier=10 State=UP"
} >"$STATE/etc/slurm.conf"

cat >"$STATE/etc/gres.conf" <<GRES
AutoDetect=off
NodeName=dgx[01-$last] Name=gpu Type=h100 File=$STATE/dev/nvidia[0-7]
GRES

half=$((NODES / 2))
cat >"$STATE/etc/topology.conf" <<TOPO
SwitchName=leaf1 Nodes=dgx[01-$(printf "%02d" "$half")]
SwitchName=leaf2 Nodes=dgx[$(printf "%02d" $((half + 1)))-$last]
SwitchName=spine Switches=leaf[1-2]
TOPO
chmod 644 "$STATE"/etc/*.conf

cat >"$STATE/etc/slurmdbd.conf" <<DBD
# generated by scripts/slurm/start.sh: accounting in MariaDB database $ACCT_DB
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$STATE/jwt/jwt_hs256.key
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=$MYSQL_HOST
StoragePort=$MYSQL_PORT
StorageUser=root
StorageLoc=$ACCT_DB
DBD
chmod 600 "$STATE/etc/slurmdbd.conf"

export SLURM_CONF="$STATE/etc/slurm.conf"

# slurmdbd first: slurmctld registers the cluster with it and reads the associations it enforces.
# A slurmdbd of another fleet on our port would answer our sacctmgr with the wrong munge key and
# database: refuse to start beside it rather than write into it.
holder=$(ss -Hltnp "sport = :$DBD_PORT" 2>/dev/null | head -n1)
[ -z "$holder" ] || die "slurmdbd port $DBD_PORT is taken ($holder): set SLURMDBD_PORT"
"$IN_ROOT" /usr/sbin/slurmdbd
# Each try is bounded: a client that cannot reach slurmdbd retries on its own for minutes. Ours, not
# another's: the pid it wrote must be alive.
dbd_answers() {
    kill -0 "$(cat "$STATE/run/slurmdbd.pid" 2>/dev/null || echo 0)" 2>/dev/null \
        && timeout 5 sacctmgr -n -P list cluster >/dev/null 2>&1
}
for _ in $(seq 1 100); do
    dbd_answers && break
    sleep 0.2
done
dbd_answers || die "slurmdbd did not answer; see $STATE/log/slurmdbd.log: $(tail -n 3 "$STATE/log/slurmdbd.log" 2>/dev/null)"
sacctmgr -i add cluster gpuportal >/dev/null
# shellcheck disable=SC2086
for account in $ACCOUNTS; do
    sacctmgr -i add account "$account" cluster=gpuportal parent=root >/dev/null
done
# root (the JWT user of the tests and the portal) may submit to each of them.
[ -z "$ACCOUNTS" ] || sacctmgr -i add user root cluster=gpuportal account="$(echo $ACCOUNTS | tr ' ' ,)" >/dev/null

# Started by the "slurmctld" name (not slurmctld-wlm, which skips the JWT alt-auth plugin).
"$IN_ROOT" /usr/sbin/slurmctld -c
for _ in $(seq 1 100); do
    scontrol ping >/dev/null 2>&1 && break
    sleep 0.1
done
scontrol ping >/dev/null 2>&1 || die "slurmctld did not answer; see $STATE/log/slurmctld.log"

for n in $(seq 1 "$NODES"); do
    node=$(printf "dgx%02d" "$n")
    # slurmd does not create its spool dir; without it slurmstepd has no socket, the node cannot
    # account for its running steps and jobs end early or report from the wrong node.
    mkdir -p "$STATE/spool/slurmd/$node"
    "$IN_ROOT" /usr/sbin/slurmd -N "$node"
done

# slurmrestd refuses root; SLURM_JWT=daemon makes it authenticate clients by their JWT over TCP.
SLURM_JWT=daemon nohup "$IN_ROOT" /usr/sbin/slurmrestd -f "$SLURM_CONF" -u slurm -a rest_auth/jwt \
    ${REST_PLUGINS:+-s "$REST_PLUGINS"} "127.0.0.1:$REST_PORT" \
    >"$STATE/log/slurmrestd.log" 2>&1 &
echo $! >"$STATE/run/slurmrestd.pid"

# Ready = every node registered (no longer UNKNOWN/not responding) and slurmrestd answering. Up to 60 s:
# on a loaded machine eight slurmd (chrooted ones especially) can take a while; a ready fleet exits at once.
for _ in $(seq 1 600); do
    idle=$(sinfo -h -N -p gpu -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$NODES" ] && break
    sleep 0.1
done
[ "$idle" -ge "$NODES" ] || die "only $idle/$NODES nodes idle; see $STATE/log/slurmd-*.log"

TOKEN=$(scontrol token username=root lifespan=86400 | sed -n 's/^SLURM_JWT=//p')
[ -n "$TOKEN" ] || die "scontrol token gave no JWT"
URL="http://127.0.0.1:$REST_PORT"
for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-NAME: root" \
        -H "X-SLURM-USER-TOKEN: $TOKEN" "$URL/slurm/$PING_VERSION/ping" || true)
    [ "$code" = 200 ] && break
    sleep 0.1
done
[ "$code" = 200 ] || die "slurmrestd not ready (HTTP $code); see $STATE/log/slurmrestd.log"

{
    echo "SLURM_CONF=$SLURM_CONF"
    echo "SLURMRESTD_URL=$URL"
    echo "SLURM_JWT=$TOKEN"
    echo "SLURM_USER=root"
    echo "SLURM_BIN_DIR=$STATE/bin"
    echo "SLURM_ACCT_DB=$ACCT_DB"
    echo "SLURM_VERSION=$(scontrol --version | awk '{print $2}')"
} | tee "$STATE/env"
