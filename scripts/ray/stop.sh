#!/usr/bin/env bash
# Stop the cluster started by start.sh: only processes carrying its GPUPORTAL_RAY_CLUSTER marker or
# holding files in its state dir
# (never `ray stop`, which would end every Ray process on the host).
set -uo pipefail

STATE=${RAY_STATE_DIR:-/tmp/gpuportal-ray}
marker="GPUPORTAL_RAY_CLUSTER=$STATE"

# Ours = the marker in its environment, or (for Ray's agents, whose setproctitle overwrites the
# start of /proc/PID/environ) an open file inside this cluster's state dir.
ours() {
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [ "$pid" = "$$" ] && continue
        if grep -qsxaz "$marker" "$proc/environ" 2>/dev/null \
            || ls -l "$proc/fd" 2>/dev/null | grep -qF -- "$STATE/"; then
            echo "$pid"
        fi
    done
}

pids=$(ours)
[ -n "$pids" ] || { echo "no Ray cluster for $STATE"; exit 0; }
# shellcheck disable=SC2086
kill $pids 2>/dev/null
# Wait on the pids we found (cheap), not on a fresh /proc scan each time.
for _ in $(seq 1 50); do
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    sleep 0.1
done
# shellcheck disable=SC2086
[ -n "$alive" ] && kill -9 $alive 2>/dev/null
# Anything the daemons started while stopping (one last scan).
left=$(ours)
# shellcheck disable=SC2086
[ -n "$left" ] && kill -9 $left 2>/dev/null
echo "stopped Ray cluster in $STATE"
