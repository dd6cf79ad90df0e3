#!/usr/bin/env bash
# Live-sync benchmarks (issue 22): propagation of a write to another device's store through its
# engine, the idle cost of subscribed streams, and a reconnect storm after an nginx restart.
# Builds the release binaries, brings up a PRIVATE stack (own state dir and ports), seeds one small
# account per subscriber, runs bench/live.py against loopback, prints the figures, and always
# tears the stack down. A measurement, not a test (exit 0 whether targets are met or not).
#
# Usage: bench/live.sh                                  10,000 subscribers, 500 writes (~10 minutes, 3 of them seeding)
#        LIVE_BENCH_SUBSCRIBERS=2000 LIVE_BENCH_WRITES=100 bench/live.sh   smaller
#
# Options (environment; defaults in brackets):
#   LIVE_BENCH_SUBSCRIBERS [10000]   streams for the idle-cost and storm phases, one account each
#   LIVE_BENCH_IDLE [1000]           idle streams open during the propagation phase (of the above)
#   LIVE_BENCH_WRITES [500]          writes timed from A's push acknowledgement to B's store
#   LIVE_BENCH_DEBOUNCE_WRITES [30]  local writes on A (`todosync-client add`) per debounce variant
#   LIVE_BENCH_SPREAD [250]          source addresses of the streams: 127.0.0.2 .. 127.0.0.(1+SPREAD)
#   LIVE_BENCH_PER_PROCESS [2500]    streams per subscriber process (asyncio, one core at most each)
#   LIVE_BENCH_HANDSHAKES [32]       stream handshakes in flight per subscriber process (the ramp)
#   LIVE_BENCH_BYSTANDER_RATE [100]  the bystander's GET todos by date per second (4 keep-alive connections)
#   LIVE_BENCH_BYSTANDER_SECONDS [20]  each bystander phase
#   LIVE_BENCH_RAMP_TIMEOUT [300]  LIVE_BENCH_STORM_TIMEOUT [300]   seconds
#   LIVE_BENCH_SKIP_BUILD [0]        1: use the existing release binaries
#   LIVE_BENCH_ONLY_PROPAGATION [0]  1: only the propagation phase (write -> other store; with
#                                    LIVE_BENCH_SUBSCRIBERS and LIVE_BENCH_IDLE small it takes minutes)
#   LIVE_BENCH_VARIANTS [now]        the local-write pair: now = poll every 20 ms vs inotify (watch's
#                                    default); session15 = the old 0.5 s check vs the 20 ms poll
#   LIVE_BENCH_BURSTS [5]  LIVE_BENCH_BURST [50]   bursts of `add`s per variant, and their size
#   BENCH_HTTP_PORT [19380]  BENCH_HTTPS_PORT [19743]  BENCH_STATE_DIR [.state/bench-live]
#   BENCH_WORKERS [8]  BENCH_RESPONDERS [1]  BENCH_NGINX_WORKERS [2]   as for bench/run.sh
# The stack's per-account stream limit (TODOSYNC_LIVE_STREAMS) stays at its default: every stream
# is its own account. nginx's worker_connections (65536) and worker_rlimit_nofile (140000) in
# nginx/todosync.conf.template already hold 10,000 streams; this script raises its own `ulimit -n`
# to the hard limit, which bounds the load generator (each stream is one descriptor on each side).
# Results: <state>/results/live.json and report.txt; docs/BENCHMARKS.md, "Live sync".
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${LIVE_BENCH_SUBSCRIBERS:=10000}" "${LIVE_BENCH_SKIP_BUILD:=0}"
export LIVE_BENCH_SUBSCRIBERS
# One account per subscriber plus the bystander's four (the last ids): 1 todo and its daily stat each.
export BENCH_USERS=$((LIVE_BENCH_SUBSCRIBERS + 4)) BENCH_TAGS=0 BENCH_TODOS=1 BENCH_DAYS=1
export BENCH_SEED_JOBS=1 BENCH_BIG_USER_RECORDS=0
: "${BENCH_START_DATE:=2025-01-01}"
: "${BENCH_HTTP_PORT:=19380}" "${BENCH_HTTPS_PORT:=19743}" "${BENCH_STATE_DIR:=.state/bench-live}"
: "${BENCH_WORKERS:=8}" "${BENCH_RESPONDERS:=1}" "${BENCH_NGINX_WORKERS:=2}"
: "${BENCH_MARIADB_ARGS:=--innodb-buffer-pool-size=256M}"
export BENCH_START_DATE

log() { printf '[live %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
RESULTS=$STATE/results
ulimit -n "$(ulimit -Hn)"

bench_private_stack "$LIVE_BENCH_SKIP_BUILD" client
export LIVE_BENCH_CLIENT=${LIVE_BENCH_CLIENT:-$(swift build -c release --show-bin-path)/todosync-client}
[[ -x $LIVE_BENCH_CLIENT ]] || die "no client binary at $LIVE_BENCH_CLIENT"
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <("${STACK[@]}" env)

export BENCH_TOKEN_SALT=${BENCH_TOKEN_SALT:-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')}
log "seeding $BENCH_USERS accounts (one todo each)"
"$BENCH_DIR/seed.sh" >"$RESULTS/seed.out" || die "seeding failed"

export BENCH_BASE_URL=http://127.0.0.1:$BENCH_HTTP_PORT BENCH_RESULTS=$RESULTS LIVE_BENCH_STACK=${STACK[0]}
python3 "$BENCH_DIR/live.py" | tee "$RESULTS/report.txt"
