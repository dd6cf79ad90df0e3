#!/usr/bin/env bash
# First sync of a new device, snapshot vs paged pull (issue 23, client half): one account of
# 65,000 records seeded through push (bench/client_seed.py), then the release `todosync-client`
# syncing an empty store through nginx, end to end in the client process (`sync --timing`: the
# whole sync, login excluded): the first snapshot request (the server builds the file) reported
# on its own, then RUNS cached-snapshot syncs and RUNS paged syncs (`--no-snapshot`),
# alternating, in one run. Medians, peak RSS (`/usr/bin/time`). A measurement, not a test.
#
#   bench/client-snapshot.sh                          # 635 tags + 64,000 todos (+ 365 daily stats)
#   CLIENT_BENCH_TODOS=5000 bench/client-snapshot.sh  # smaller
#
# Knobs: CLIENT_BENCH_TAGS (635), CLIENT_BENCH_TODOS (64000), CLIENT_BENCH_RUNS (3),
# CLIENT_BENCH_STATE_DIR (.state/bench-client-snapshot), CLIENT_BENCH_HTTP_PORT (19290),
# CLIENT_BENCH_HTTPS_PORT (19653), CLIENT_BENCH_PAGE_SIZE (1000), CLIENT_BENCH_SKIP_BUILD (0).
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
CLIENT_BENCH_NAME=bench-client-snapshot CLIENT_BENCH_DEFAULT_HTTP_PORT=19290 CLIENT_BENCH_DEFAULT_HTTPS_PORT=19653
source "$REPO_ROOT/bench/client-common.sh"

# One first sync into a new store: prints "SECONDS RSS_KB STORE_MB SUMMARY".
first_sync() {
    local db=$WORK/$1.sqlite
    shift
    rm -f "$db"*
    "$CLIENT" login --db "$db" --email "$EMAIL" >/dev/null
    local out wall rss
    out=$(/usr/bin/time -f 'wall=%e rss_kb=%M' "$CLIENT" sync --db "$db" --quiet --timing --page-size "$PAGE" "$@" 2>&1)
    wall=$(sed -n 's/.*sync_seconds=\([0-9.]*\).*/\1/p' <<<"$out")
    rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' <<<"$out")
    [[ -n $wall ]] || { echo "sync failed: $out" >&2; exit 1; }
    printf '%s %s %s %s\n' "$wall" "$rss" "$(du -m "$db" | cut -f1)" "$(grep '^Synced' <<<"$out")"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

read -r wall rss mb summary < <(first_sync building)
printf 'snapshot, first request (the server builds the file): sync %.3f s, peak RSS %.1f MB, store %s MB\n  %s\n' \
    "$wall" "$(echo "$rss / 1024" | bc -l)" "$mb" "$summary"
snap=() snap_rss=() paged=() paged_rss=()
for run in $(seq 1 "$RUNS"); do
    read -r wall rss mb summary < <(first_sync "snapshot-$run")
    [[ $summary == *"after installing a snapshot"* ]] || { echo "run $run did not use the snapshot: $summary" >&2; exit 1; }
    printf 'snapshot (cached) run %d: sync %.3f s, peak RSS %.1f MB, store %s MB\n' "$run" "$wall" "$(echo "$rss / 1024" | bc -l)" "$mb"
    snap+=("$wall") snap_rss+=("$rss")
    read -r wall rss mb summary < <(first_sync "paged-$run" --no-snapshot)
    printf 'paged pull run %d:        sync %.3f s, peak RSS %.1f MB, store %s MB\n' "$run" "$wall" "$(echo "$rss / 1024" | bc -l)" "$mb"
    paged+=("$wall") paged_rss+=("$rss")
done
printf 'FIRST SYNC (%d records), median of %d: snapshot (cached) %.3f s (RSS %.1f MB)   [target <= 0.7 s]; paged pull %.3f s (RSS %.1f MB)\n' \
    "$RECORDS" "$RUNS" "$(median "${snap[@]}")" "$(echo "$(median "${snap_rss[@]}") / 1024" | bc -l)" \
    "$(median "${paged[@]}")" "$(echo "$(median "${paged_rss[@]}") / 1024" | bc -l)"
