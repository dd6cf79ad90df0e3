#!/usr/bin/env bash
# Client binaries side by side in ONE run (issue 23): a first sync into an empty store from the
# server's snapshot, RUNS times per binary, alternating, against a stack that is already up and
# an account that already exists (bench/snapshot.sh's or bench/client-snapshot.sh's, or any).
# One warm-up sync first (the server builds the file then; reported on its own), so every timed
# run downloads a cached file. Per run: `sync --timing` (the whole sync and its snapshot phases),
# CPU user/sys and peak RSS (/usr/bin/time), the store's size; the load before and after; medians.
# CPU time per run is the figure that survives a loaded box; wall time does not.
#
#   BASE=http://127.0.0.1:18312 EMAIL=bench1@example.com PASSWORD='snapshot bench password' \
#       bench/client-compare.sh 3 before=/tmp/todosync-client.old after=.build/release/todosync-client
#
# Knobs: BASE, EMAIL, PASSWORD (the account), WORK (store files; .state/client-compare).
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
RUNS=${1:?usage: client-compare.sh RUNS LABEL=BINARY...}
shift
WORK=${WORK:-$REPO_ROOT/.state/client-compare}
mkdir -p "$WORK"
export TODOSYNC_SERVER=${BASE:?BASE=http://host:port} TODOSYNC_PASSWORD=${PASSWORD:?}
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null

# One first sync: prints "LABEL wall=… user=… sys=… rss_kb=… store_mb=… sync_seconds=… PHASES".
first_sync() {
    local label=$1 binary=$2 db=$WORK/$1.sqlite out
    rm -f "$db"*
    "$binary" login --db "$db" --email "${EMAIL:?}" >/dev/null
    out=$(/usr/bin/time -f 'wall=%e user=%U sys=%S rss_kb=%M' "$binary" sync --db "$db" --quiet --timing 2>&1)
    [[ $out == *"after installing a snapshot"* ]] || { echo "$label did not install the snapshot: $out" >&2; exit 1; }
    printf '%s %s store_mb=%s %s %s\n' "$label" "$(grep -o 'wall=.*' <<<"$out")" "$(du -m "$db" | cut -f1)" \
        "$(grep -o 'sync_seconds=[0-9.]*' <<<"$out")" "$(sed -n 's/^snapshot_phases //p' <<<"$out")"
    rm -f "$db"*
}

echo "load before: $(uptime)"
first_sync warm-up "${1#*=}"
lines=()
for run in $(seq 1 "$RUNS"); do
    for pair in "$@"; do
        line=$(first_sync "${pair%%=*}" "${pair#*=}")
        echo "run $run: $line"
        lines+=("$line")
    done
done
echo "load after: $(uptime)"
printf '%s\n' "${lines[@]}" | python3 -c '
import re, statistics, sys
by = {}
for line in sys.stdin:
    label, rest = line.split(" ", 1)
    run = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([0-9.]+)", rest))
    run["cpu"] = run["user"] + run["sys"]
    by.setdefault(label, []).append(run)
for label, runs in by.items():
    keys = [k for k in runs[0] if k not in ("wall",)]
    print(f"median of {len(runs)} {label}: " + " ".join(
        f"{k}={statistics.median(r[k] for r in runs):.3f}" if k != "rss_kb" else f"rss_mb={statistics.median(r[k] for r in runs) / 1024:.0f}"
        for k in keys))
'
