#!/usr/bin/env bash
# Stop the control plane started by start.sh: only the processes whose pid files live in its state
# dir (controllers and scheduler first, etcd last, so the apiserver never loses its store while serving).
set -uo pipefail

STATE=${K8S_STATE_DIR:-/tmp/gpuportal-k8s}
[ -d "$STATE/run" ] || { echo "no cluster in $STATE"; exit 0; }

stop() {
    local file="$STATE/run/$1.pid" pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    rm -f "$file"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    # Only our own process: its command line names this state dir (a reused pid would not).
    grep -qaF -- "$STATE" "/proc/$pid/cmdline" 2>/dev/null || return 0
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        # Exited but not yet reaped (a zombie still answers kill -0): it holds no port or file.
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
}
stop kueue
stop kwok
stop kube-controller-manager
stop kube-scheduler
stop kube-apiserver
stop etcd
echo "stopped cluster in $STATE"
