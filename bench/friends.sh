#!/usr/bin/env bash
# Friends benchmarks (issue 37; docs/FRIENDS.md): a friend's month against the owner's own month
# read, a write by a user with 500 friends (500 `friends=1` streams open) against one with none,
# and the timing of 202 for existing vs non-existing emails. Builds the release binary, brings up
# a PRIVATE stack (own state dir and ports), seeds it (bench/seed.sh: 60 todos in one month per
# account), runs bench/friends.py against loopback, prints the figures and always tears the stack
# down. A measurement, not a test (exit 0 whether targets are met or not).
#
# Options (environment; defaults in brackets):
#   FRIENDS_BENCH_SECONDS [10]       each read phase (owner's month, friend's month), run twice alternated
#   FRIENDS_BENCH_WRITES [200]       writes per writer (500 friends / none), alternated
#   FRIENDS_BENCH_SKIP_BUILD [0]     1: use the existing release binary
#   BENCH_HTTP_PORT [19480]  BENCH_HTTPS_PORT [19843]  BENCH_STATE_DIR [.state/bench-friends]
#   BENCH_WORKERS [8]  BENCH_RESPONDERS [1]  BENCH_NGINX_WORKERS [2]   as for bench/run.sh
# Results: <state>/results/friends.json and report.txt.
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${FRIENDS_BENCH_SKIP_BUILD:=0}"
# Viewer 1, owner 2, the 500-friend writer 3 and its friends 4..503, the friendless writer 504,
# 100 request senders 505..604, and the existing emails they ask (users 605..1100).
export BENCH_USERS=1100 BENCH_TAGS=4 BENCH_TODOS=60 BENCH_DAYS=30 BENCH_START_DATE=2030-06-01
export BENCH_SEED_JOBS=2 BENCH_BIG_USER_RECORDS=0
: "${BENCH_HTTP_PORT:=19480}" "${BENCH_HTTPS_PORT:=19843}" "${BENCH_STATE_DIR:=.state/bench-friends}"
: "${BENCH_WORKERS:=8}" "${BENCH_RESPONDERS:=1}" "${BENCH_NGINX_WORKERS:=2}"
: "${BENCH_MARIADB_ARGS:=--innodb-buffer-pool-size=256M}"

log() { printf '[friends %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
RESULTS=$STATE/results
ulimit -n "$(ulimit -Hn)"

bench_private_stack "$FRIENDS_BENCH_SKIP_BUILD"
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <("${STACK[@]}" env)

export BENCH_TOKEN_SALT=${BENCH_TOKEN_SALT:-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')}
log "seeding $BENCH_USERS accounts ($BENCH_TODOS todos in one month each)"
"$BENCH_DIR/seed.sh" >"$RESULTS/seed.out" || die "seeding failed"

export BENCH_BASE_URL=http://127.0.0.1:$BENCH_HTTP_PORT BENCH_RESULTS=$RESULTS
log "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$BENCH_DIR/friends.py" | tee "$RESULTS/report.txt"
log "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
