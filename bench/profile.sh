#!/usr/bin/env bash
# Instruction-level profile of one request kind: a responder started by hand under valgrind's
# callgrind (few workers) against a seeded private database, driven with a fixed number of requests
# straight over its FastCGI socket (no nginx), plus MariaDB's handler counters and EXPLAIN for the
# queries involved. Instruction counts do not depend on how busy the shared machine is.
#
# Usage: bench/profile.sh KIND [COUNT]      KIND: fastcgi db date month pull firstpull push (default COUNT 50)
#        BENCH_PROFILE_GZIP=1 bench/profile.sh ...   every request with Accept-Encoding: gzip
#        BENCH_PROFILE_KEEP=1 bench/profile.sh ...   leave the profiling stack up (faster next time)
#        BENCH_PROFILE_BIN=path/to/todosync bench/profile.sh ...   profile another build on the same data
#
# Data: BENCH_USERS [5] x BENCH_TAGS [50] x BENCH_TODOS [5000] over BENCH_DAYS [365] (per-user shape
# as in the full benchmark), seeded once into its own state dir BENCH_STATE_DIR [.state/bench-profile]
# on ports 19180/19543 and reused while the parameters match. Output: <state>/profile/KIND.* and a
# summary on stdout (Ir per request, top functions inclusive and self, DB rows read per request).
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

KIND=${1:?usage: bench/profile.sh KIND [COUNT]}
COUNT=${2:-50}
: "${BENCH_USERS:=5}" "${BENCH_TAGS:=50}" "${BENCH_TODOS:=5000}" "${BENCH_DAYS:=365}" "${BENCH_START_DATE:=2025-01-01}"
: "${BENCH_STATE_DIR:=.state/bench-profile}" "${BENCH_HTTP_PORT:=19180}" "${BENCH_HTTPS_PORT:=19543}"
: "${BENCH_WORKERS:=4}" "${BENCH_RESPONDERS:=1}" "${BENCH_NGINX_WORKERS:=1}"
: "${BENCH_MARIADB_ARGS:=--innodb-buffer-pool-size=256M}"
: "${BENCH_PROFILE_WORKERS:=2}" "${BENCH_PROFILE_KEEP:=0}" "${BENCH_PUSH_OPS:=100}" "${BENCH_SEED_JOBS:=2}"
: "${BENCH_SKIP_BUILD:=0}"
export BENCH_USERS BENCH_TAGS BENCH_TODOS BENCH_DAYS BENCH_START_DATE BENCH_PUSH_OPS BENCH_SEED_JOBS
source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
OUT=$STATE/profile
log() { printf '[profile %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v valgrind >/dev/null 2>&1 || {
    log "installing valgrind (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends valgrind >/dev/null
}
VG_PID=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $VG_PID ]] && kill -0 "$VG_PID" 2>/dev/null; then
        kill -TERM "$VG_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$VG_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$VG_PID" 2>/dev/null || true
    fi
    if [[ $BENCH_PROFILE_KEEP != 1 ]]; then "${STACK[@]}" down >>"$STATE/bench-stack.log" 2>&1 || true; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$STATE" "$OUT"
[[ $BENCH_SKIP_BUILD == 1 ]] || "${STACK[@]}" build >/dev/null 2>&1 || die "build failed"
"${STACK[@]}" up >>"$STATE/bench-stack.log" 2>&1 || { tail -n 30 "$STATE/bench-stack.log" >&2; die "stack did not come up"; }
while IFS= read -r line; do [[ $line == TODOSYNC_*=* ]] && export "${line?}"; done < <("${STACK[@]}" env)
# BENCH_PROFILE_BIN: profile another build (e.g. a candidate fix) against the same data.
[[ -z ${BENCH_PROFILE_BIN:-} ]] || TODOSYNC_BIN=$(realpath "$BENCH_PROFILE_BIN")
# valgrind 3.19 gives up on the release binary's DWARF 5 debug info ("unhandled dwarf2 abbrev form
# code 0x1b"): profile a copy without it (`strip --strip-debug` keeps the symbol table, so
# callgrind still names every function; only file and line numbers are lost).
strip --strip-debug -o "$OUT/todosync.nodebug" "$TODOSYNC_BIN"
TODOSYNC_BIN=$OUT/todosync.nodebug

params="$BENCH_USERS $BENCH_TAGS $BENCH_TODOS $BENCH_DAYS $BENCH_START_DATE"
if [[ ! -f $STATE/seed.params || ! -d $STATE/mariadb/data/$TODOSYNC_DB_NAME || $(head -n1 "$STATE/seed.params") != "$params" ]]; then
    export BENCH_TOKEN_SALT=prof$RANDOM
    log "seeding $BENCH_USERS users x $BENCH_TAGS tags x $BENCH_TODOS todos"
    TODOSYNC_LOG_LEVEL=warning "$BENCH_DIR/seed.sh" >/dev/null
    printf '%s\n%s\n' "$params" "$BENCH_TOKEN_SALT" >"$STATE/seed.params"
fi
export BENCH_TOKEN_SALT=$(sed -n 2p "$STATE/seed.params")

db() { mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root --batch "$TODOSYNC_DB_NAME" "$@"; }
handler_status() {
    db --skip-column-names -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Handler_read_key','Handler_read_next','Handler_read_prev','Handler_read_rnd_next','Handler_write','Handler_update','Com_select','Com_insert','Com_update','Com_stmt_execute','Questions')"
}

SOCK=$TODOSYNC_SOCKET_DIR/profile.sock
rm -f "$SOCK" "$OUT/$KIND".callgrind.*
# --enable-test-hooks: the ceilings' routes (`fastcgi`, `db`) exist only with the test hooks on.
log "starting the responder under callgrind ($BENCH_PROFILE_WORKERS workers, socket $SOCK)"
valgrind --tool=callgrind --callgrind-out-file="$OUT/$KIND.callgrind.%p" --dump-instr=no --collect-atstart=yes \
    "$TODOSYNC_BIN" serve --socket "$SOCK" --workers "$BENCH_PROFILE_WORKERS" --enable-test-hooks >"$OUT/$KIND.valgrind.log" 2>&1 &
VG_PID=$!
for _ in $(seq 1 600); do [[ -S $SOCK ]] && break; sleep 0.1; done
[[ -S $SOCK ]] || { tail "$OUT/$KIND.valgrind.log" >&2; die "responder socket did not appear"; }

# Warm-up (connections, prepared statements, caches), then count only the measured requests.
gzip_flag=()
[[ ${BENCH_PROFILE_GZIP:-0} == 1 ]] && gzip_flag=(--gzip)
python3 "$BENCH_DIR/fcgi_client.py" "$SOCK" "$KIND" 5 --user 2 "${gzip_flag[@]}" >/dev/null
callgrind_control -z "$VG_PID" >/dev/null
before=$(handler_status)
t0=$(date +%s.%N)
python3 "$BENCH_DIR/fcgi_client.py" "$SOCK" "$KIND" "$COUNT" --user 2 "${gzip_flag[@]}"
t1=$(date +%s.%N)
after=$(handler_status)
callgrind_control -d "$VG_PID" >/dev/null
sleep 1
kill -TERM "$VG_PID"
wait "$VG_PID" 2>/dev/null || true
VG_PID=""

demangle() { if command -v swift-demangle >/dev/null 2>&1; then swift-demangle --simplified; elif command -v swift >/dev/null 2>&1; then swift demangle --simplified; else cat; fi; }
dump=$(ls "$OUT/$KIND".callgrind.*.1 | head -n1)  # the dump taken right after the measured requests
ir=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
{
    echo "== $KIND: $COUNT requests under callgrind in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
    echo "responder instructions: total $ir, per request $((ir / COUNT))"
    echo
    echo "MariaDB counters per request (global deltas / $COUNT):"
    join <(sort <<<"$before") <(sort <<<"$after") | awk -v n="$COUNT" '{ printf "  %-22s %10.1f\n", $1, ($3 - $2) / n }'
    echo
    echo "top functions, inclusive (share of all responder instructions):"
    callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null | sed -n '/file:function/,$p' |
        grep -v '^ *[0-9,]* *([ 0-9.]*%)  /work' | sed -n '2,61p' | cut -c1-220
    echo
    echo "top functions, self (per request):"
    python3 "$BENCH_DIR/callgrind_top.py" "$dump" 30 --per "$COUNT" | cut -c1-220
} | demangle | tee "$OUT/$KIND.txt"
log "full dump: $dump (callgrind_annotate --inclusive=yes $dump)"
