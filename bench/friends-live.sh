#!/usr/bin/env bash
# A friend's month, live (issue 37, client half): the delay from a friend's write (the PATCH
# sent) to the watcher's view showing it, through the real client (`todosync-client friends
# month ID --watch --json`, a FriendsLiveView on a SyncEngine's stream with friends=1), and the
# raw `event: friend` delay on a plain SSE stream beside it. Builds the release binaries, brings
# up a PRIVATE stack (own state dir and ports), runs bench/friends_live.py against loopback,
# prints p50/p90/p99/max and the load average, and always tears the stack down. A measurement,
# not a test (exit 0 whether or not the figures please).
#
# Usage: bench/friends-live.sh                               300 writes
#        FRIENDS_BENCH_WRITES=100 bench/friends-live.sh       fewer
# Options (environment; defaults in brackets):
#   FRIENDS_BENCH_WRITES [300]   friend writes timed (a title change of one of the friend's 60 todos)
#   FRIENDS_BENCH_GAP_MS [100]   pause after each write has shown (so that writes do not coalesce)
#   FRIENDS_BENCH_SKIP_BUILD [0] 1: use the existing release binaries
#   BENCH_HTTP_PORT [19480]  BENCH_HTTPS_PORT [19843]  BENCH_STATE_DIR [.state/bench-friends]
#   BENCH_WORKERS [8]  BENCH_RESPONDERS [1]  BENCH_NGINX_WORKERS [2]   as for bench/run.sh
# Results: <state>/results/friends-live.json and report.txt.
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${FRIENDS_BENCH_SKIP_BUILD:=0}"
: "${BENCH_HTTP_PORT:=19480}" "${BENCH_HTTPS_PORT:=19843}" "${BENCH_STATE_DIR:=.state/bench-friends}"
: "${BENCH_WORKERS:=8}" "${BENCH_RESPONDERS:=1}" "${BENCH_NGINX_WORKERS:=2}"
: "${BENCH_MARIADB_ARGS:=--innodb-buffer-pool-size=256M}"

log() { printf '[friends %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
RESULTS=$STATE/results

bench_private_stack "$FRIENDS_BENCH_SKIP_BUILD" client
export FRIENDS_BENCH_CLIENT=${FRIENDS_BENCH_CLIENT:-$(swift build -c release --show-bin-path)/todosync-client}
[[ -x $FRIENDS_BENCH_CLIENT ]] || die "no client binary at $FRIENDS_BENCH_CLIENT"

export BENCH_BASE_URL=http://127.0.0.1:$BENCH_HTTP_PORT BENCH_RESULTS=$RESULTS
python3 "$BENCH_DIR/friends_live.py" | tee "$RESULTS/report.txt"
