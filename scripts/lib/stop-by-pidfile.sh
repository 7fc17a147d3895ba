#!/usr/bin/env bash
# stop-by-pidfile.sh FILE...: stop each process named by a pid file (TERM, then KILL after 5 s) and remove
# the file. Only the processes our start scripts wrote down: never a search by name.
set -uo pipefail
for file in "$@"; do
    [ -f "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$file"
done
