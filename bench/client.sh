#!/usr/bin/env bash
# Client benchmark: the first sync of a 65,000-record account into an empty SQLite store, through
# nginx, with the real `todosync-client` (release build); then incremental syncs with nothing to
# do. Prints wall time and peak RSS of the client process. A measurement, not a test.
#
#   bench/client.sh                     # full size: 635 tags + 64,000 todos (+ 365 daily stats)
#   CLIENT_BENCH_TODOS=5000 bench/client.sh   # smaller
#
# Knobs: CLIENT_BENCH_TAGS (635), CLIENT_BENCH_TODOS (64000), CLIENT_BENCH_RUNS (3),
# CLIENT_BENCH_STATE_DIR (.state/bench-client), CLIENT_BENCH_HTTP_PORT (19280),
# CLIENT_BENCH_HTTPS_PORT (19643), CLIENT_BENCH_PAGE_SIZE (1000), CLIENT_BENCH_SKIP_BUILD (0).
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"

TAGS=${CLIENT_BENCH_TAGS:-635}
TODOS=${CLIENT_BENCH_TODOS:-64000}
RUNS=${CLIENT_BENCH_RUNS:-3}
PAGE=${CLIENT_BENCH_PAGE_SIZE:-1000}
export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$(realpath -m "${CLIENT_BENCH_STATE_DIR:-.state/bench-client}")
export TODOSYNC_HTTP_PORT=${CLIENT_BENCH_HTTP_PORT:-19280} TODOSYNC_HTTPS_PORT=${CLIENT_BENCH_HTTPS_PORT:-19643}
export TODOSYNC_AUTH_RATE=1000 TODOSYNC_AUTH_BURST=1000 TODOSYNC_ENABLE_TEST_HOOKS=0
BASE=http://127.0.0.1:$TODOSYNC_HTTP_PORT
STACK=scripts/stack.sh
WORK=$TODOSYNC_STATE_DIR/client
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null

"$STACK" deps >/dev/null
if [[ ${CLIENT_BENCH_SKIP_BUILD:-0} != 1 ]]; then
    "$STACK" build
    swift build -c release --product todosync-client --quiet
fi
CLIENT=$(swift build -c release --show-bin-path)/todosync-client
trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
"$STACK" down >/dev/null 2>&1 || true
rm -rf "$TODOSYNC_STATE_DIR"
"$STACK" up >/dev/null
mkdir -p "$WORK"

EMAIL=bench-$RANDOM$RANDOM@example.com
PASSWORD='client bench password'
t0=$(date +%s.%N)
RECORDS=$(python3 bench/client_seed.py "$BASE" "$EMAIL" "$PASSWORD" "$TAGS" "$TODOS")
printf 'seeded %d records (%d tags, %d todos, the rest daily stats) through push in %.1f s\n' \
    "$RECORDS" "$TAGS" "$TODOS" "$(echo "$(date +%s.%N) - $t0" | bc)"

export TODOSYNC_SERVER=$BASE TODOSYNC_PASSWORD=$PASSWORD
walls=() rsss=()
for run in $(seq 1 "$RUNS"); do
    db=$WORK/first-$run.sqlite
    rm -f "$db"*
    "$CLIENT" login --db "$db" --email "$EMAIL" >/dev/null
    out=$(/usr/bin/time -f 'wall=%e rss_kb=%M' "$CLIENT" sync --db "$db" --quiet --timing --page-size "$PAGE" 2>&1)
    wall=$(sed -n 's/.*sync_seconds=\([0-9.]*\).*/\1/p' <<<"$out")
    proc=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' <<<"$out")
    rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' <<<"$out")
    pulled=$(sed -n 's/.*pulled \([0-9]*\) record.*/\1/p' <<<"$out")
    printf 'first sync run %d: %s records, sync %.3f s (process %.2f s), peak RSS %.1f MB, store %.1f MB\n' \
        "$run" "$pulled" "$wall" "$proc" "$(echo "$rss / 1024" | bc -l)" "$(du -m "$db" | cut -f1)"
    walls+=("$wall") rsss+=("$rss")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'FIRST SYNC (%d records): median %.3f s, peak RSS median %.1f MB   [target <= 3 s, <= 150 MB]\n' \
    "$RECORDS" "$(median "${walls[@]}")" "$(echo "$(median "${rsss[@]}") / 1024" | bc -l)"

incs=()
for run in $(seq 1 10); do
    out=$("$CLIENT" sync --db "$WORK/first-1.sqlite" --quiet --timing)
    incs+=("$(sed -n 's/.*sync_seconds=\([0-9.]*\).*/\1/p' <<<"$out")")
done
printf 'INCREMENTAL SYNC, nothing to do (1 pull request, no push): median %.1f ms, max %.1f ms over 10   [target <= 20 ms]\n' \
    "$(echo "$(median "${incs[@]}") * 1000" | bc -l)" "$(echo "$(printf '%s\n' "${incs[@]}" | sort -g | tail -1) * 1000" | bc -l)"
