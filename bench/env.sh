# Sourced by bench/run.sh, profile.sh and the standalone benchmarks (live.sh, friends.sh, friends-live.sh): the private stack's configuration (every
# TODOSYNC_* variable scripts/stack.sh reads), from the BENCH_* settings.
STATE=$(realpath -m "$BENCH_STATE_DIR")
export TODOSYNC_CONFIG=/dev/null # a developer's todosync.env must not leak into the benchmark
export TODOSYNC_STATE_DIR=$STATE
export TODOSYNC_HTTP_PORT=$BENCH_HTTP_PORT TODOSYNC_HTTPS_PORT=$BENCH_HTTPS_PORT
export TODOSYNC_LISTEN_ADDRESS=127.0.0.1
export TODOSYNC_BENCH_LOCATIONS=1
export TODOSYNC_AUTH_RATE=100000 TODOSYNC_AUTH_BURST=100000
# wrk's 32 connections pick users at random, so a few tokens have more than the default 4
# requests in flight at once; nginx would answer those 429 in microseconds (counted as served,
# flattering req/s) and the peer has no such limit. The benchmark measures throughput, not it.
export TODOSYNC_ACCOUNT_CONCURRENCY=1000 TODOSYNC_ADDRESS_CONCURRENCY=65535  # nginx: limit_conn < 65536
# The same in the responder: its per-account in-flight count (default 2) turned a share of the
# random users' requests into instant 429s (wrk's "status" errors, counted in req/s).
export TODOSYNC_ACCOUNT_IN_FLIGHT=1024
# Nor a CPU share per account: wrk's random users would be held to it (waits and 429s).
export TODOSYNC_ACCOUNT_CPU_SHARE_MS=0
export TODOSYNC_WORKERS=$BENCH_WORKERS TODOSYNC_RESPONDERS=$BENCH_RESPONDERS
export TODOSYNC_NGINX_WORKERS=$BENCH_NGINX_WORKERS
export TODOSYNC_MARIADB_ARGS=$BENCH_MARIADB_ARGS
export TODOSYNC_ENABLE_TEST_HOOKS=1 TODOSYNC_LOG_LEVEL=info
unset TODOSYNC_SOCKET_DIR TODOSYNC_DB_PORT TODOSYNC_BIN TODOSYNC_NGINX_TEMPLATE

# The private stack down (its output in <state>/bench-stack.log) and, unless BENCH_KEEP_DATA=1, the
# bulky part of its state dropped: the data set and the access log (errors stay). For the EXIT
# traps of run.sh and live.sh; `log` and STACK are the caller's.
bench_stack_down() {
    log "tearing the private stack down"
    "${STACK[@]}" down >>"$STATE/bench-stack.log" 2>&1 || log "WARNING: stack down failed (see $STATE/bench-stack.log)"
    if [[ ${BENCH_KEEP_DATA:-0} != 1 ]]; then
        rm -rf "$STATE/mariadb" "$STATE/mariadb.seed" "$STATE/mariadb.seed.json" "$STATE/log/nginx-access.log"
    fi
}

# bench_private_stack SKIP_BUILD [client]: what a standalone benchmark (live.sh, friends.sh,
# friends-live.sh) does before it measures: tears the stack down on exit (bench_stack_down),
# builds the release responder (and todosync-client with `client`) unless SKIP_BUILD is 1,
# and starts the private stack from an empty data set, with $RESULTS fresh. `log`, `die`, STACK,
# STATE and RESULTS are the caller's.
bench_private_stack() {
    local skip_build=$1 with_client=${2:-}
    STACK_STARTED=0
    trap 'rc=$?; trap - EXIT INT TERM; ((STACK_STARTED)) && bench_stack_down; exit "$rc"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mkdir -p "$STATE"
    : >"$STATE/bench-stack.log"
    "${STACK[@]}" deps >/dev/null
    if [[ $skip_build != 1 ]]; then
        log "building the release binaries (todosync${with_client:+, todosync-client})"
        { "${STACK[@]}" build && { [[ -z $with_client ]] || swift build -c release --product todosync-client --quiet; }; } \
            >"$STATE/build.log" 2>&1 || { tail -n 40 "$STATE/build.log" >&2; die "build failed"; }
    fi
    "${STACK[@]}" down >>"$STATE/bench-stack.log" 2>&1 || true
    rm -rf "$STATE/mariadb" "$STATE/log" "$RESULTS"
    mkdir -p "$RESULTS"
    STACK_STARTED=1
    log "starting the private stack on 127.0.0.1:$BENCH_HTTP_PORT (state $STATE)"
    "${STACK[@]}" up >>"$STATE/bench-stack.log" 2>&1 || { tail -n 30 "$STATE/bench-stack.log" >&2; die "stack did not come up"; }
}
