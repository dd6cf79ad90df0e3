#!/usr/bin/env bash
# TodoSync benchmark suite: builds the release binary, brings up a PRIVATE stack (own state dir and
# ports), seeds it, runs every scenario against loopback, prints a results table with each route as a
# fraction of its own ceiling (1: FastCGI constant, 2: plus the token check, 3: a pull page from
# memory; bench/README.md), the ratio to the peer, CPU microseconds per request of nginx, the
# responders and MariaDB, and PASS/MISS per target, and always tears the stack down.
#
# Usage: bench/run.sh                 full size (200 users x 50 tags x 5,000 todos; ~4-5 minutes)
#        BENCH_QUICK=1 bench/run.sh   smoke run (5 users x 10 tags x 1,000 todos, 3 s phases; ~1 minute)
#
# Options (environment; defaults in brackets, BENCH_QUICK=1 changes the starred ones):
#   BENCH_USERS [200*]  BENCH_TAGS [50*]  BENCH_TODOS [5000*]  BENCH_DAYS [365]   data set size
#   BENCH_START_DATE [2025-01-01]    first deadline date of the seeded year
#   BENCH_DURATION [20*]             seconds per measured wrk phase (ceilings, GETs, pull pages, mixed)
#   BENCH_PUSH_DURATION [20*]        seconds of the push phase
#   BENCH_WARMUP [2*]                unmeasured seconds before each wrk phase
#   BENCH_CONNECTIONS [32]           concurrent connections (wrk) / devices (push)
#   BENCH_THREADS [2]                wrk threads
#   BENCH_PULL_USERS [20*]           users whose first full pull is timed (their cursors feed the pull-page phase)
#   BENCH_INCREMENTAL_USERS [20*]    users for the incremental pull (100 changes, then pull)
#   BENCH_PUSH_OPS [100]             operations per push in the push phase
#   BENCH_MIXED_PUSH_OPS [10]        operations per push in the mixed phase
#   BENCH_WORKERS [8]                responder worker threads (TODOSYNC_WORKERS; the stack's default on 2 cores)
#   BENCH_RESPONDERS [1]             responder processes (TODOSYNC_RESPONDERS)
#   BENCH_NGINX_WORKERS [2]          nginx worker processes
#   BENCH_HTTP_PORT [19080]  BENCH_HTTPS_PORT [19443]
#   BENCH_STATE_DIR [.state/bench]   the private stack's state dir (data, logs, results)
#   BENCH_MARIADB_ARGS [--innodb-buffer-pool-size=1G --innodb-log-file-size=512M]
#   BENCH_SEED_JOBS [2]              parallel `todosync recompute-stats --user` processes while seeding
#   BENCH_SEED_LAYOUT [interleaved]  interleaved: users' rows interleave in id order as in production;
#                                    blocks: each user's rows have contiguous ids (flatters id lookups)
#   BENCH_VARIANTS [plain,gzip]      every scenario runs once per variant: plain (identity bodies) and
#                                    gzip (Accept-Encoding: gzip on every request, as URLSession sends)
#   BENCH_PEER_DIR [../shared/peer]  the PHP-FPM peer (its README); run in the same bench run on the same
#                                    data shape, each comparable figure printed as a ratio to it
#   BENCH_PEER [auto]                0: skip the peer; auto: run it when BENCH_PEER_DIR exists
#   BENCH_PEER_PORT [18280]  BENCH_PEER_RUN_DIR [<state>/peer]
#   BENCH_BIG_USER_RECORDS [65000*]  one extra user with this many records (tags, a stat a day, todos)
#                                    for the "first full pull of a big user" figure (0: none)
#   BENCH_SKIP_BUILD [0]             1: use the existing release binary
#   BENCH_KEEP_DATA [0]              1: keep the MariaDB data dir after teardown (for bench/profile.sh)
#   BENCH_REUSE_DATA [0]             1: reuse the data set a previous run kept (same size parameters)
#                                    instead of seeding again; implies BENCH_KEEP_DATA=1. For quick
#                                    before/after runs while working; earlier pushes stay in the data.
#   BENCH_SCENARIOS [all]            comma list: ceilings,todos_by_date,stats_by_month,full_pull,pull_pages,
#                                    incremental_pull,push,mixed,push_compare (ceilings: nginx and ceiling 1, once;
#                                    ceiling 2 runs inside todos_by_date and ceiling 3 inside pull_pages, per variant)
#   BENCH_PUSH_BEFORE_BIN [unset]    push_compare: another responder binary ("before"), its push phase
#                                    alternating with this run's binary's ("after"); unset: skipped
#   BENCH_PUSH_ROUNDS [3]            push_compare: rounds of one "before" and one "after" phase each
# Results: <state>/results/*.json and <state>/results/table.txt. Exit status 0 even when targets
# are missed (this is a measurement, not a test); non-zero when the run itself failed.
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${BENCH_QUICK:=0}"
if [[ $BENCH_QUICK == 1 ]]; then
    : "${BENCH_USERS:=5}" "${BENCH_TAGS:=10}" "${BENCH_TODOS:=1000}" "${BENCH_DURATION:=3}"
    : "${BENCH_PUSH_DURATION:=3}" "${BENCH_WARMUP:=1}" "${BENCH_PULL_USERS:=3}" "${BENCH_INCREMENTAL_USERS:=3}"
    : "${BENCH_BIG_USER_RECORDS:=3000}"
fi
: "${BENCH_BIG_USER_RECORDS:=65000}"
: "${BENCH_USERS:=200}" "${BENCH_TAGS:=50}" "${BENCH_TODOS:=5000}" "${BENCH_DAYS:=365}"
: "${BENCH_START_DATE:=2025-01-01}"
: "${BENCH_DURATION:=20}" "${BENCH_PUSH_DURATION:=20}" "${BENCH_WARMUP:=2}"
: "${BENCH_CONNECTIONS:=32}" "${BENCH_THREADS:=2}"
: "${BENCH_PULL_USERS:=20}" "${BENCH_INCREMENTAL_USERS:=20}"
: "${BENCH_PUSH_OPS:=100}" "${BENCH_MIXED_PUSH_OPS:=10}"
: "${BENCH_WORKERS:=8}" "${BENCH_RESPONDERS:=1}" "${BENCH_NGINX_WORKERS:=2}"
: "${BENCH_HTTP_PORT:=19080}" "${BENCH_HTTPS_PORT:=19443}"
: "${BENCH_STATE_DIR:=.state/bench}"
: "${BENCH_BUFFER_POOL:=2G}"
: "${BENCH_MARIADB_ARGS:=--innodb-buffer-pool-size=$BENCH_BUFFER_POOL --innodb-log-file-size=512M}"
: "${BENCH_SEED_JOBS:=2}" "${BENCH_GZIP:=0}" "${BENCH_SKIP_BUILD:=0}" "${BENCH_KEEP_DATA:=0}"
: "${BENCH_REUSE_DATA:=0}"
[[ $BENCH_REUSE_DATA == 1 ]] && BENCH_KEEP_DATA=1
: "${BENCH_SCENARIOS:=all}"
: "${BENCH_SEED_LAYOUT:=interleaved}"
: "${BENCH_VARIANTS:=plain,gzip}" "${BENCH_PEER:=auto}" "${BENCH_PEER_PORT:=18280}"
: "${BENCH_PEER_DIR:=$REPO_ROOT/../shared/peer}"
export BENCH_USERS BENCH_TAGS BENCH_TODOS BENCH_DAYS BENCH_START_DATE BENCH_DURATION BENCH_PUSH_DURATION \
    BENCH_WARMUP BENCH_CONNECTIONS BENCH_THREADS BENCH_PULL_USERS BENCH_INCREMENTAL_USERS BENCH_PUSH_OPS \
    BENCH_MIXED_PUSH_OPS BENCH_WORKERS BENCH_RESPONDERS BENCH_GZIP BENCH_SEED_JOBS BENCH_SCENARIOS BENCH_QUICK \
    BENCH_SEED_LAYOUT BENCH_VARIANTS BENCH_BIG_USER_RECORDS BENCH_PEER_PORT

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
RESULTS=$STATE/results

# --- teardown, always -------------------------------------------------------------------------
STACK_STARTED=0
PEER_STARTED=0
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if ((PEER_STARTED)); then
        log "stopping the peer"
        PEER_RUN_DIR=$PEER_RUN "$BENCH_PEER_DIR/php/stop.sh" --purge >>"$STATE/bench-peer.log" 2>&1 ||
            log "WARNING: peer stop failed (see $STATE/bench-peer.log)"
    fi
    ((STACK_STARTED)) && bench_stack_down
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- tools ------------------------------------------------------------------------------------
ensure_tools() {
    local missing=()
    command -v wrk >/dev/null 2>&1 || missing+=(wrk)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    if ((${#missing[@]})); then
        log "installing ${missing[*]} (apt-get)"
        local sudo=()
        ((EUID == 0)) || sudo=(sudo)
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
    "${STACK[@]}" deps
}

# The PHP-FPM peer (BENCH_PEER_DIR, see its README), seeded with the same shape: the same users,
# todos per user, days and start date (its content is its own: no tags, all todos live). Its
# MariaDB gets the same buffer pool as ours (resized at run time), so both data sets are resident.
PEER_RUN=${BENCH_PEER_RUN_DIR:-$STATE/peer}
start_peer() {
    export BENCH_PEER_URL="" BENCH_PEER_TOKENS=""
    if [[ $BENCH_PEER == 0 ]]; then return; fi
    if [[ ! -x $BENCH_PEER_DIR/php/start.sh ]]; then
        [[ $BENCH_PEER == auto ]] || die "BENCH_PEER_DIR=$BENCH_PEER_DIR has no php/start.sh"
        log "no peer at $BENCH_PEER_DIR: ratios to it are left out"
        return
    fi
    log "starting the PHP-FPM peer on 127.0.0.1:$BENCH_PEER_PORT and seeding it ($BENCH_USERS users x $BENCH_TODOS todos over $BENCH_DAYS days)"
    PEER_STARTED=1
    : >"$STATE/bench-peer.log"
    PEER_RUN_DIR=$PEER_RUN "$BENCH_PEER_DIR/php/stop.sh" --purge >>"$STATE/bench-peer.log" 2>&1 || true
    PEER_RUN_DIR=$PEER_RUN PEER_PORT=$BENCH_PEER_PORT PEER_RESEED=1 SEED_USERS=$BENCH_USERS SEED_TODOS=$BENCH_TODOS \
        SEED_DAYS=$BENCH_DAYS SEED_DATE_START=$BENCH_START_DATE "$BENCH_PEER_DIR/php/start.sh" >>"$STATE/bench-peer.log" 2>&1 ||
        { tail -n 30 "$STATE/bench-peer.log" >&2; die "the peer did not come up"; }
    mariadb --no-defaults --socket="$PEER_RUN/mysqld.sock" -uroot \
        -e "SET GLOBAL innodb_buffer_pool_size = $(numfmt --from=iec "$BENCH_BUFFER_POOL"); ANALYZE TABLE peer.todos, peer.tokens" \
        >>"$STATE/bench-peer.log" 2>&1 || log "WARNING: could not resize the peer's buffer pool"
    export BENCH_PEER_URL=http://127.0.0.1:$BENCH_PEER_PORT BENCH_PEER_TOKENS=$PEER_RUN/tokens.txt BENCH_PEER_RUN=$PEER_RUN
}

main() {
    local t_start=$SECONDS
    mkdir -p "$STATE"
    : >"$STATE/bench-stack.log"
    log "machine: $(nproc) cores; uptime before: $(uptime)"
    local uptime_before
    uptime_before=$(uptime)
    ensure_tools
    if [[ $BENCH_SKIP_BUILD != 1 ]]; then
        log "building the release binary (scripts/stack.sh build)"
        "${STACK[@]}" build >"$STATE/build.log" 2>&1 || { tail -n 40 "$STATE/build.log" >&2; die "build failed"; }
    fi
    
    # A fresh data set every run unless a kept one of the same size may be reused: stop a stack
    # left over by a killed run, drop its data. `mariadb.seed` records what a data dir holds.
    "${STACK[@]}" down >>"$STATE/bench-stack.log" 2>&1 || true
    local seed_key="users=$BENCH_USERS tags=$BENCH_TAGS todos=$BENCH_TODOS days=$BENCH_DAYS start=$BENCH_START_DATE layout=$BENCH_SEED_LAYOUT big=$BENCH_BIG_USER_RECORDS"
    local reuse=0
    if [[ $BENCH_REUSE_DATA == 1 && -d $STATE/mariadb && -f $STATE/mariadb.seed ]] &&
        [[ $(sed -n 1p "$STATE/mariadb.seed") == "$seed_key" ]]; then
        reuse=1
        BENCH_TOKEN_SALT=$(sed -n 2p "$STATE/mariadb.seed")
    else
        rm -rf "$STATE/mariadb" "$STATE/mariadb.seed"
    fi
    rm -rf "$STATE/log" "$RESULTS"
    mkdir -p "$RESULTS"
    STACK_STARTED=1
    log "starting the private stack on 127.0.0.1:$BENCH_HTTP_PORT ($BENCH_RESPONDERS responder(s) x $BENCH_WORKERS workers, state $STATE)"
    "${STACK[@]}" up >>"$STATE/bench-stack.log" 2>&1 || { tail -n 30 "$STATE/bench-stack.log" >&2; die "stack did not come up"; }
    # TODOSYNC_DB_SOCKET, TODOSYNC_BIN, ... as the stack computed them
    local line
    while IFS= read -r line; do
        [[ $line == TODOSYNC_*=* ]] && export "${line?}"
    done < <("${STACK[@]}" env)

    export BENCH_TOKEN_SALT=${BENCH_TOKEN_SALT:-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')}
    if ((reuse)); then
        log "reusing the kept data set ($seed_key)"
        cp "$STATE/mariadb.seed.json" "$RESULTS/seed.json"
    else
        log "seeding $BENCH_USERS users x $BENCH_TAGS tags x $BENCH_TODOS todos"
        "$BENCH_DIR/seed.sh" >"$RESULTS/seed.out" || die "seeding failed"
        grep '^SEED_JSON ' "$RESULTS/seed.out" | sed 's/^SEED_JSON //' >"$RESULTS/seed.json"
        cp "$RESULTS/seed.json" "$STATE/mariadb.seed.json"
        printf '%s\n%s\n' "$seed_key" "$BENCH_TOKEN_SALT" >"$STATE/mariadb.seed"
    fi
    { echo "SET @token = 'bench-$BENCH_TOKEN_SALT-2';"; cat "$BENCH_DIR/explain.sql"; } |
        mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root --table "$TODOSYNC_DB_NAME" \
            >"$RESULTS/explain.txt" 2>&1 || log "WARNING: EXPLAIN failed (see $RESULTS/explain.txt)"

    start_peer

    BENCH_BASE_URL=http://127.0.0.1:$BENCH_HTTP_PORT BENCH_RESULTS=$RESULTS BENCH_WRK_DIR=$BENCH_DIR/wrk \
        BENCH_UPTIME_BEFORE=$uptime_before \
        timeout --signal=TERM 3600 python3 "$BENCH_DIR/bench.py" --stack "$REPO_ROOT/scripts/stack.sh"
    log "done in $((SECONDS - t_start)) s; uptime after: $(uptime)"
}

main "$@"
