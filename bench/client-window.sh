#!/usr/bin/env bash
# A device that holds a window of its account (issue 36, client half): one account of 1,000,000
# todos over 10 years (ending today) seeded by SQL (bench/seed.sh, as bench/snapshot.sh does:
# 635 tags, the app's own daily stats and change feed), a real password given to it, then the
# release `todosync-client`:
#   window   `sync --window-days 90` into an empty store (the window's snapshot, then the
#            tail): the first run builds the window's file, the next RUNS use the cached one;
#            `--timing` (the whole sync, login excluded), peak RSS, the store's size;
#   edits    1,000 edits to old todos (all outside the window) pushed as another device, then
#            the window device's `sync --timing`: seconds, records pulled, bytes received;
#            RUNS rounds;
#   whole    last, one first sync of the whole account (its snapshot built by that request),
#            for the store-size ratio (WINDOW_BENCH_WHOLE=0 skips it).
# Medians and `uptime` before and after. A measurement, not a test.
#
#   bench/client-window.sh
#   WINDOW_BENCH_TODOS=100000 bench/client-window.sh     # smaller
#
# Knobs: WINDOW_BENCH_TODOS (1000000), WINDOW_BENCH_TAGS (635), WINDOW_BENCH_DAYS (3650),
# WINDOW_BENCH_WINDOW_DAYS (90), WINDOW_BENCH_EDITS (1000), WINDOW_BENCH_RUNS (3),
# WINDOW_BENCH_WHOLE (1), WINDOW_BENCH_STATE_DIR (.state/bench-client-window),
# WINDOW_BENCH_HTTP_PORT (23080), WINDOW_BENCH_HTTPS_PORT (23443), WINDOW_BENCH_SKIP_BUILD (0).
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"

export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$(realpath -m "${WINDOW_BENCH_STATE_DIR:-.state/bench-client-window}")
export TODOSYNC_HTTP_PORT=${WINDOW_BENCH_HTTP_PORT:-23080} TODOSYNC_HTTPS_PORT=${WINDOW_BENCH_HTTPS_PORT:-23443}
export TODOSYNC_RESPONDERS=1 TODOSYNC_ENABLE_TEST_HOOKS=0
# A whole-account build of a million records takes longer than the default budget on a loaded box.
export TODOSYNC_REQUEST_BUDGET_MS=${WINDOW_BENCH_BUDGET_MS:-60000}
DAYS=${WINDOW_BENCH_DAYS:-3650} WINDOW=${WINDOW_BENCH_WINDOW_DAYS:-90} EDITS=${WINDOW_BENCH_EDITS:-1000}
RUNS=${WINDOW_BENCH_RUNS:-3}
export BENCH_USERS=1 BENCH_TAGS=${WINDOW_BENCH_TAGS:-635} BENCH_TODOS=${WINDOW_BENCH_TODOS:-1000000}
export BENCH_DAYS=$DAYS BENCH_START_DATE=$(date -d "-$((DAYS - 1)) days" +%F) BENCH_TOKEN_SALT=win BENCH_SEED_JOBS=2
BASE=http://127.0.0.1:$TODOSYNC_HTTP_PORT
STACK=scripts/stack.sh
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null

if [[ ${WINDOW_BENCH_SKIP_BUILD:-0} != 1 ]]; then
    "$STACK" build
    swift build -c release --product todosync-client --quiet
fi
CLIENT=$(swift build -c release --show-bin-path)/todosync-client
trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
"$STACK" down >/dev/null 2>&1 || true
rm -rf "$TODOSYNC_STATE_DIR"
"$STACK" up >/dev/null
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <("$STACK" env)
TODOSYNC_DB_PASSWORD=${TODOSYNC_DB_PASSWORD:-$(head -n1 "$TODOSYNC_DB_PASSWORD_FILE")}
export TODOSYNC_DB_PASSWORD
echo "seeding $BENCH_TODOS todos from $BENCH_START_DATE over $DAYS days"
bench/seed.sh | grep -E '^seed:' || true

# The seeded user gets a real password (a registered donor's hash: seed.sh writes a placeholder).
PASSWORD='window bench password'
curl -s -o /dev/null -w 'register: %{http_code}\n' -X POST "$BASE/api/v1/auth/register" -H 'Content-Type: application/json' \
    -d "{\"email\":\"win-donor@example.com\",\"password\":\"$PASSWORD\"}"
mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root "$TODOSYNC_DB_NAME" -e \
    "SELECT password_hash INTO @h FROM users WHERE email = 'win-donor@example.com';
     UPDATE users SET password_hash = @h WHERE id = 1;"
export TODOSYNC_SERVER=$BASE TODOSYNC_PASSWORD=$PASSWORD
WORK=$TODOSYNC_STATE_DIR/client
mkdir -p "$WORK"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2" | head -n1; }

# One first sync into a new store: "SECONDS RSS_KB STORE_KB CPU_SECONDS SUMMARY" (CPU: user + sys of
# the whole process; on a loaded box the wall time says more about the box than about the code).
first_sync() {
    local db=$WORK/$1.sqlite
    shift
    rm -f "$db"*
    "$CLIENT" login --db "$db" --email bench1@example.com >/dev/null
    local out
    out=$(/usr/bin/time -f 'wall=%e rss_kb=%M user=%U sys=%S' "$CLIENT" sync --db "$db" --quiet --timing "$@" 2>&1)
    [[ -n $(field sync_seconds "$out") ]] || { echo "sync failed: $out" >&2; exit 1; }
    "$CLIENT" status --db "$db" >/dev/null  # the WAL checkpointed into the file
    printf '%s %s %s %s %s\n' "$(field sync_seconds "$out")" "$(field rss_kb "$out")" "$(du -k "$db" | cut -f1)" \
        "$(echo "$(field user "$out") + $(field sys "$out")" | bc)" "$(grep '^Synced' <<<"$out" | tr '\n' ' ')"
}

echo "uptime before: $(uptime)"
read -r wall rss kb cpu summary < <(first_sync window-build --window-days "$WINDOW")
printf 'window %d days, first request (the server builds the window file): sync %.3f s, RSS %.1f MB, store %.1f MB\n  %s\n' \
    "$WINDOW" "$wall" "$(echo "$rss / 1024" | bc -l)" "$(echo "$kb / 1024" | bc -l)" "$summary"
win=() win_kb=()
for run in $(seq 1 "$RUNS"); do
    read -r wall rss kb cpu summary < <(first_sync "window-$run" --window-days "$WINDOW")
    [[ $summary == *"after installing a snapshot"* ]] || echo "run $run did not use the snapshot: $summary" >&2
    printf 'window first sync run %d: sync %.3f s, CPU %.2f s, RSS %.1f MB, store %.2f MB\n' "$run" "$wall" "$cpu" \
        "$(echo "$rss / 1024" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
    win+=("$wall") win_kb+=("$kb")
done

# The device that follows the window with its cursor: window-1. Each round: EDITS edits to the
# oldest todos (ids 1, 8, 15, …; all due years before the window), pushed as another device.
inc=() inc_bytes=()
for round in $(seq 1 "$RUNS"); do
    python3 - "$BASE" "$EDITS" "$round" <<'PY'
import json, sys, uuid, urllib.request
base, edits, round_ = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ops = [{"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": 1 + 7 * i,
        "data": {"title": f"edited in round {round_} #{i}"}} for i in range(edits)]
for at in range(0, len(ops), 500):
    req = urllib.request.Request(base + "/api/v1/sync/push", method="POST",
                                 data=json.dumps({"deviceId": "bench-other-device", "operations": ops[at:at + 500]}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer bench-win-1"})
    with urllib.request.urlopen(req, timeout=120) as r:
        bad = [x for x in json.loads(r.read())["results"] if x["status"] != "applied"]
        assert not bad, bad[0]
PY
    out=$("$CLIENT" sync --db "$WORK/window-1.sqlite" --quiet --timing 2>&1)
    seconds=$(field sync_seconds "$out") bytes=$(field pull_bytes "$out")
    printf 'incremental window sync after %d edits outside it, round %d: %.4f s, %s bytes received; %s\n' \
        "$EDITS" "$round" "$seconds" "$bytes" "$(grep '^Synced' <<<"$out")"
    inc+=("$seconds") inc_bytes+=("$bytes")
done
whole_kb=
if [[ ${WINDOW_BENCH_WHOLE:-1} == 1 ]]; then
    read -r wall rss whole_kb cpu summary < <(first_sync whole)
    printf 'whole account first sync: sync %.3f s, RSS %.1f MB, store %.1f MB\n  %s\n' "$wall" "$(echo "$rss / 1024" | bc -l)" \
        "$(echo "$whole_kb / 1024" | bc -l)" "$summary"
fi

echo "uptime after: $(uptime)"

printf 'WINDOW FIRST SYNC (%d-day window of %d todos over %d days), median of %d: %.3f s [target <= 0.5 s]; store %.2f MB' \
    "$WINDOW" "$BENCH_TODOS" "$DAYS" "$RUNS" "$(median "${win[@]}")" "$(echo "$(median "${win_kb[@]}") / 1024" | bc -l)"
if [[ -n $whole_kb ]]; then
    printf ' = %.2f %% of the whole account'"'"'s %.1f MB [target <= 5 %%]' "$(echo "100 * $(median "${win_kb[@]}") / $whole_kb" | bc -l)" \
        "$(echo "$whole_kb / 1024" | bc -l)"
fi
printf '\nINCREMENTAL WINDOW SYNC after %d edits outside the window, median of %d: %.1f ms [target <= 50 ms], %s bytes received\n' \
    "$EDITS" "$RUNS" "$(echo "$(median "${inc[@]}") * 1000" | bc -l)" "$(median "${inc_bytes[@]}")"
