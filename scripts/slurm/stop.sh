#!/usr/bin/env bash
# Stop the fleet started by start.sh: only the processes whose pid files live in its state dir.
set -uo pipefail

STATE=${SLURM_STATE_DIR:-/tmp/gpuportal-slurm}
[ -d "$STATE/run" ] || { echo "no fleet in $STATE"; exit 0; }

stop_pidfile() {
    local file=$1 pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$file"
}

# Order: the REST front end, the node daemons, the controller, then munge they all talk to.
stop_pidfile "$STATE/run/slurmrestd.pid"
for f in "$STATE"/run/slurmd-*.pid; do
    stop_pidfile "$f"
done
stop_pidfile "$STATE/run/slurmctld.pid"
stop_pidfile "$STATE/run/munged.pid"
echo "stopped fleet in $STATE"
