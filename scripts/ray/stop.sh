#!/usr/bin/env bash
# Stop the cluster started by start.sh: only processes carrying its GPUPORTAL_RAY_CLUSTER marker
# (never `ray stop`, which would end every Ray process on the host).
set -uo pipefail

STATE=${RAY_STATE_DIR:-/tmp/gpuportal-ray}
marker="GPUPORTAL_RAY_CLUSTER=$STATE"

ours() {
    for environ in /proc/[0-9]*/environ; do
        if grep -qsxaz "$marker" "$environ" 2>/dev/null; then
            pid=${environ#/proc/}
            pid=${pid%/environ}
            [ "$pid" != "$$" ] && echo "$pid"
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
