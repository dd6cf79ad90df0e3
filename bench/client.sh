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
CLIENT_BENCH_NAME=bench-client CLIENT_BENCH_DEFAULT_HTTP_PORT=19280 CLIENT_BENCH_DEFAULT_HTTPS_PORT=19643
source "$REPO_ROOT/bench/client-common.sh"
walls=() rsss=()
for run in $(seq 1 "$RUNS"); do
    db=$WORK/first-$run.sqlite
    rm -f "$db"*
    "$CLIENT" login --db "$db" --email "$EMAIL" >/dev/null
    out=$(/usr/bin/time -f 'wall=%e rss_kb=%M' "$CLIENT" sync --db "$db" --quiet --timing --page-size "$PAGE" 2>&1)
    wall=$(sed -n 's/.*sync_seconds=\([0-9.]*\).*/\1/p' <<<"$out")
    proc=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' <<<"$out")
    rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' <<<"$out")
    # The records the store received: a snapshot's (installed) plus the pages pulled after it.
    # Counting only "pulled N" printed "0 records" for a first sync served by a snapshot.
    pulled=$(sed -n 's/.*pulled \([0-9]*\) record.*/\1/p' <<<"$out")
    installed=$(sed -n 's/.*installing a snapshot of \([0-9]*\) record.*/\1/p' <<<"$out")
    pulled=$((${pulled:-0} + ${installed:-0}))
    ((pulled > 0)) || { echo "first sync run $run received no record: $out" >&2; exit 1; }
    ((pulled == RECORDS)) || echo "note: first sync run $run received $pulled records, $RECORDS were seeded" >&2
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
