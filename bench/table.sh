#!/usr/bin/env bash
# The whole benchmark table in one command (issue 39, item 5): the routes against the PHP-FPM peer
# (bench/run.sh: ceilings 1-3, GET todos by date and pull pages of 500, plain and gzip, each with
# req/s, p99, the ratio to the peer and the fraction of its own ceiling), a new device's first sync
# (bench/client-snapshot.sh: the records the snapshot installed, cached and building, against the
# paged pull), and live sync (bench/live.sh, its propagation phase only: a push's acknowledgement and a local write on
# device A to B's store, single writes and bursts of 50), with the box's load before and after
# each part and the whole. Each part brings up its own private stack and tears it down. A
# measurement, not a test: exit 0 whether targets are met or not; non-zero when a part failed.
#
#   bench/table.sh                    # ~12 minutes on 2 cores (most of it seeding 400,000 todos twice)
#   TABLE_MILLION=1 bench/table.sh    # plus the 1,000,000-record first sync (bench/snapshot.sh)
#
# Knobs (defaults in brackets): TABLE_STATE_DIR [.state/bench-table] (each part's state dir and the
# printed table, table.txt, under it); TABLE_REUSE [1]: reuse the route data a previous table run
# kept; TABLE_SKIP_BUILD [0]; TABLE_MILLION [0]; the parts' own knobs (bench/run.sh's BENCH_*, the
# client's CLIENT_BENCH_*, live's LIVE_BENCH_*) pass through, but the sizes below are the table's:
# 200 users x 2,000 todos, 10 s phases, 32 connections (issue 39's comparison with the peer).
set -euo pipefail
BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${TABLE_STATE_DIR:=.state/bench-table}" "${TABLE_REUSE:=1}" "${TABLE_SKIP_BUILD:=0}" "${TABLE_MILLION:=0}"
T=$(realpath -m "$TABLE_STATE_DIR")
mkdir -p "$T"
LOADS=$T/loads.txt
: >"$LOADS"
load() { printf '%s %s\n' "$1" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOADS"; }
log() { printf '[table %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

load "table-before"
if [[ $TABLE_SKIP_BUILD != 1 ]]; then
    log "building the release binaries"
    { scripts/stack.sh build && swift build -c release --product todosync-client; } >"$T/build.log" 2>&1 ||
        { tail -n 40 "$T/build.log" >&2; exit 1; }
fi

log "routes against the peer (bench/run.sh; log: $T/routes.log)"
load "routes-before"
env BENCH_USERS=200 BENCH_TODOS=2000 BENCH_DURATION=10 BENCH_BIG_USER_RECORDS=0 \
    BENCH_SCENARIOS=ceilings,todos_by_date,pull_pages BENCH_VARIANTS=plain,gzip BENCH_STATE_DIR="$T/routes" \
    BENCH_KEEP_DATA=1 BENCH_REUSE_DATA="$TABLE_REUSE" BENCH_SKIP_BUILD=1 "$BENCH_DIR/run.sh" >"$T/routes.log" 2>&1 ||
    { tail -n 30 "$T/routes.log" >&2; exit 1; }
load "routes-after"

log "first sync, 65,000 records (bench/client-snapshot.sh; log: $T/first-sync.log)"
load "first-sync-before"
env CLIENT_BENCH_STATE_DIR="$T/first-sync" CLIENT_BENCH_SKIP_BUILD=1 "$BENCH_DIR/client-snapshot.sh" >"$T/first-sync.log" 2>&1 ||
    { tail -n 30 "$T/first-sync.log" >&2; exit 1; }
load "first-sync-after"

if [[ $TABLE_MILLION == 1 ]]; then
    log "first sync, 1,000,000 records (bench/snapshot.sh; log: $T/million.log)"
    load "million-before"
    env SNAP_BENCH_TODOS=999000 SNAP_BENCH_CLIENT=1 SNAP_BENCH_STATE_DIR="$T/million" SNAP_BENCH_SKIP_BUILD=1 \
        "$BENCH_DIR/snapshot.sh" >"$T/million.log" 2>&1 || { tail -n 30 "$T/million.log" >&2; exit 1; }
    load "million-after"
fi

log "live sync (bench/live.sh, 200 subscribers; log: $T/live.log)"
load "live-before"
env LIVE_BENCH_SUBSCRIBERS=200 LIVE_BENCH_IDLE=100 LIVE_BENCH_WRITES=100 LIVE_BENCH_DEBOUNCE_WRITES=15 LIVE_BENCH_ONLY_PROPAGATION=1 \
    LIVE_BENCH_SKIP_BUILD=1 BENCH_STATE_DIR="$T/live" "$BENCH_DIR/live.sh" >"$T/live.log" 2>&1 ||
    { tail -n 30 "$T/live.log" >&2; exit 1; }
load "live-after"
load "table-after"

python3 "$BENCH_DIR/table.py" "$T" | tee "$T/table.txt"
