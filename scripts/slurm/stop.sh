#!/usr/bin/env bash
# Stop the fleet started by start.sh: its jobs, then only the processes whose pid files live in its
# state dir, then any job step left behind (recognised by this fleet's SLURM_CONF in its environment).
set -uo pipefail

STATE=${SLURM_STATE_DIR:-/tmp/gpuportal-slurm}
CONF="$STATE/etc/slurm.conf"
[ -d "$STATE/run" ] || { echo "no fleet in $STATE"; exit 0; }
# This fleet's own clients (a chrooted Slurm 24.11 fleet's, when start-trixie.sh made it).
[ -d "$STATE/bin" ] && export PATH="$STATE/bin:$PATH"

# Cancel every job first: slurmstepd and the job's processes outlive a stopped slurmd otherwise.
if [ -f "$CONF" ] && SLURM_CONF=$CONF timeout 5 scontrol ping >/dev/null 2>&1; then
    jobs=$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null | sort -u)
    if [ -n "$jobs" ]; then
        # shellcheck disable=SC2086
        SLURM_CONF=$CONF scancel --quiet $jobs 2>/dev/null || true
        for _ in $(seq 1 30); do
            [ -z "$(SLURM_CONF=$CONF squeue -h -t R,CG -o %A 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
fi

pids=()
for file in "$STATE"/run/slurmrestd.pid "$STATE"/run/slurmd-*.pid "$STATE"/run/slurmctld.pid "$STATE"/run/slurmdbd.pid; do
    [ -f "$file" ] || continue
    pid=$(cat "$file" 2>/dev/null || true)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$file"
done
# Wait for all daemons together (up to 5 s), then force what is left.
for _ in $(seq 1 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
done
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null; done

# Leftover steps: only processes whose environment points at this fleet's slurm.conf.
for environ in /proc/[0-9]*/environ; do
    if grep -qsxaz "SLURM_CONF=$CONF" "$environ" 2>/dev/null; then
        pid=${environ#/proc/}
        pid=${pid%/environ}
        [ "$pid" != "$$" ] && kill -9 "$pid" 2>/dev/null
    fi
done

if [ -f "$STATE/run/munged.pid" ]; then
    pid=$(cat "$STATE/run/munged.pid")
    kill "$pid" 2>/dev/null
    rm -f "$STATE/run/munged.pid"
fi
# The accounting database belongs to this fleet alone (start.sh named it after the state dir).
db=$(sed -n 's/^SLURM_ACCT_DB=//p' "$STATE/env" 2>/dev/null)
if [ -n "$db" ]; then
    mariadb -h "${SLURM_MYSQL_HOST:-127.0.0.1}" -P "${SLURM_MYSQL_PORT:-3306}" -u root \
        -e "DROP DATABASE IF EXISTS \`$db\`" 2>/dev/null || true
fi
echo "stopped fleet in $STATE"
