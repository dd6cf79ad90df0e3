#!/usr/bin/env bash
# The account export's memory: seeds ONE account with a million todos by SQL (bench/seed.sh),
# then, for each responder binary given (typically main's and this branch's) and each encoding
# (identity, gzip), starts the private stack with ONE responder process, calls
# GET /api/v1/account/export once and reports that responder's peak resident memory (VmHWM from
# /proc/<pid>/status: the process is fresh for every call, so the peak is that export's, or
# start-up's when higher; and VmRSS sampled during the export), the export's time, time to first
# byte and bytes. Always tears the stack down.
#
# Usage: EXPORT_BINS="before=/work/main/.build/release/todosync after=.build/release/todosync" bench/export_rss.sh
#
# Options (environment; defaults in brackets):
#   EXPORT_BINS [after=<repo>/.build/release/todosync]   label=binary pairs, space-separated
#   EXPORT_ENCODINGS [identity gzip]  Accept-Encoding of each call
#   EXPORT_HASH [0]   1: keep each body on disk and print its SHA-256 (before and after must agree)
#   BENCH_TODOS [1000000]  BENCH_TAGS [50]  BENCH_DAYS [365]   the account's size
#   BENCH_WORKERS [8]  BENCH_HTTP_PORT [19180]  BENCH_HTTPS_PORT [19543]
#   BENCH_STATE_DIR [.state/export-bench]
#   BENCH_REUSE_DATA [0]   1: reuse the data set a previous run kept (same size), and keep it
# Prints one `EXPORT_JSON {...}` line per call and a table at the end.
set -euo pipefail

BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${EXPORT_BINS:=after=$REPO_ROOT/.build/release/todosync}" "${EXPORT_ENCODINGS:=identity gzip}" "${EXPORT_HASH:=0}"
: "${BENCH_TODOS:=1000000}" "${BENCH_TAGS:=50}" "${BENCH_DAYS:=365}" "${BENCH_START_DATE:=2025-01-01}"
: "${BENCH_WORKERS:=8}" "${BENCH_HTTP_PORT:=19180}" "${BENCH_HTTPS_PORT:=19543}"
: "${BENCH_STATE_DIR:=.state/export-bench}" "${BENCH_REUSE_DATA:=0}" "${BENCH_SEED_JOBS:=1}"
: "${BENCH_BUFFER_POOL:=1G}"
BENCH_RESPONDERS=1 BENCH_NGINX_WORKERS=1 BENCH_USERS=1 BENCH_BIG_USER_RECORDS=0
BENCH_MARIADB_ARGS=${BENCH_MARIADB_ARGS:---innodb-buffer-pool-size=$BENCH_BUFFER_POOL --innodb-log-file-size=512M}
export BENCH_USERS BENCH_TAGS BENCH_TODOS BENCH_DAYS BENCH_START_DATE BENCH_SEED_JOBS BENCH_BIG_USER_RECORDS
source "$BENCH_DIR/env.sh"
STACK=("$REPO_ROOT/scripts/stack.sh")
log() { echo "[export-bench $(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for pair in $EXPORT_BINS; do
    [[ $pair == *=* && -x ${pair#*=} ]] || die "EXPORT_BINS: '$pair' is not label=executable"
done

STARTED=0
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if ((STARTED)); then
        "${STACK[@]}" down >>"$STATE/stack.log" 2>&1 || log "WARNING: stack down failed (see $STATE/stack.log)"
        [[ $BENCH_REUSE_DATA == 1 ]] || rm -rf "$STATE/mariadb" "$STATE/mariadb.seed"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$STATE"
: >"$STATE/stack.log"
seed_key="todos=$BENCH_TODOS tags=$BENCH_TAGS days=$BENCH_DAYS start=$BENCH_START_DATE"
reuse=0
if [[ $BENCH_REUSE_DATA == 1 && -f $STATE/mariadb.seed && $(cat "$STATE/mariadb.seed") == "$seed_key" ]]; then
    reuse=1
else
    rm -rf "$STATE/mariadb" "$STATE/mariadb.seed"
fi

# up BINARY: the stack with one responder running BINARY.
up() {
    "${STACK[@]}" down >>"$STATE/stack.log" 2>&1 || true
    STARTED=1
    TODOSYNC_BIN=$1 "${STACK[@]}" up >>"$STATE/stack.log" 2>&1 || { tail -n 30 "$STATE/stack.log" >&2; die "stack did not come up"; }
}

first_bin=${EXPORT_BINS%% *}
up "${first_bin#*=}"
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <(TODOSYNC_BIN=${first_bin#*=} "${STACK[@]}" env)
export TODOSYNC_BIN=${first_bin#*=} BENCH_TOKEN_SALT=s0
if ((reuse)); then
    log "reusing the kept data set ($seed_key)"
else
    log "seeding one account: $BENCH_TAGS tags, $BENCH_TODOS todos over $BENCH_DAYS days"
    BENCH_SEED_FEED=0 "$BENCH_DIR/seed.sh" >"$STATE/seed.out" || die "seeding failed"
    # The export reads the rendered todo list (todo_list), which `todosync rebuild-feed` cannot
    # render for a million todos of one user in one transaction within the connection's 10 s
    # read timeout: rendered here by SQL in the contract's Todo shape and field order (what the
    # bench needs is the bytes' size and the rows' order; the integration tests check the JSON).
    log "rendering the todo list by SQL"
    mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root "$TODOSYNC_DB_NAME" <<'SQL'
INSERT INTO todo_list (user_id, deadline, is_important, created_at, title_key, id, body)
SELECT user_id, deadline, is_important, created_at, CAST(LOWER(title) AS BINARY), id, CONCAT(
    '{"id":', id, ',"clientId":', IFNULL(JSON_QUOTE(client_id), 'null'), ',"title":', JSON_QUOTE(title),
    ',"raw":', JSON_QUOTE(raw), ',"notes":', IFNULL(JSON_QUOTE(notes), 'null'),
    ',"isImportant":', IF(is_important, 'true', 'false'), ',"isLife":', IF(is_life, 'true', 'false'),
    ',"tagId":', IFNULL(tag_id, 'null'), ',"difficulty":', difficulty, ',"estimatedTime":', estimated_time,
    ',"deadline":"', deadline, '","isCompleted":', IF(is_completed, 'true', 'false'), ',"version":', version,
    ',"createdAt":"', LEFT(DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%f'), 23), 'Z","updatedAt":"',
    LEFT(DATE_FORMAT(updated_at, '%Y-%m-%dT%H:%i:%s.%f'), 23), 'Z","deletedAt":null}')
  FROM todos WHERE deleted_at IS NULL;
ANALYZE TABLE todo_list;
SQL
    echo "$seed_key" >"$STATE/mariadb.seed"
fi
token=bench-$BENCH_TOKEN_SALT-1
url=http://127.0.0.1:$BENCH_HTTP_PORT/api/v1/account/export

kb() { awk -v k="$1" '$1 == k ":" { print $2 }' "/proc/$2/status"; }
rows=()
for pair in $EXPORT_BINS; do
    label=${pair%%=*} bin=${pair#*=}
    for encoding in $EXPORT_ENCODINGS; do
        up "$bin"  # a fresh responder: its peak is this export's
        pid=$("${STACK[@]}" responder-pids | head -n 1)
        [[ -n $pid ]] || die "no responder pid"
        # One warm-up request (the worker's connection, prepared statements), then the export.
        curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$BENCH_HTTP_PORT/api/v1/tags"
        # VmHWM is the process's peak since it started, which includes start-up's (the decoy
        # Argon2 hash: 19 MiB); VmRSS sampled every 50 ms while the export runs shows the
        # export's own working set when that stays below the start-up peak.
        idle=$(kb VmHWM "$pid") idle_rss=$(kb VmRSS "$pid")
        body=/dev/null
        [[ $EXPORT_HASH == 1 ]] && body=$STATE/body.json
        curl -s -o "$body" -H "Authorization: Bearer $token" -H "Accept-Encoding: $encoding" \
            -w '%{http_code} %{size_download} %{time_starttransfer} %{time_total}' "$url" >"$STATE/curl.out" &
        curl_pid=$! max_rss=$idle_rss
        while kill -0 "$curl_pid" 2>/dev/null; do
            rss=$(kb VmRSS "$pid")
            ((rss > max_rss)) && max_rss=$rss
            sleep 0.05
        done
        wait "$curl_pid" || die "$label $encoding: curl failed"
        read -r code bytes ttfb total <"$STATE/curl.out" || true  # no newline after curl -w
        [[ $code == 200 ]] || die "$label $encoding: export answered $code"
        peak=$(kb VmHWM "$pid")
        if [[ $EXPORT_HASH == 1 ]]; then
            echo "EXPORT_SHA256 $label $encoding $(sha256sum <"$body" | cut -d' ' -f1)"
            rm -f "$body"
        fi
        json=$(printf '{"binary":"%s","encoding":"%s","status":%s,"bytes":%s,"ttfb_s":%s,"total_s":%s,"vmhwm_idle_kb":%s,"vmhwm_kb":%s,"vmrss_idle_kb":%s,"vmrss_max_kb":%s}' \
            "$label" "$encoding" "$code" "$bytes" "$ttfb" "$total" "$idle" "$peak" "$idle_rss" "$max_rss")
        echo "EXPORT_JSON $json"
        rows+=("$(printf '%-8s %-9s %12s %8.2f %8.2f %10s %10s %10s %10s' "$label" "$encoding" "$bytes" "$ttfb" "$total" \
            "$((idle / 1024)) MB" "$((peak / 1024)) MB" "$((idle_rss / 1024)) MB" "$((max_rss / 1024)) MB")")
    done
done
printf '%-8s %-9s %12s %8s %8s %10s %10s %10s %10s\n' binary encoding bytes ttfb_s total_s hwm_idle hwm_after rss_idle rss_max
printf '%s\n' "${rows[@]}"
