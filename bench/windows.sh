#!/usr/bin/env bash
# Window pull benchmark (issue 36, server half): one account of N records seeded by SQL
# (bench/seed.sh: one user, its tags and todos spread over 10 years, then the app's own daily
# stats and change feed), then WIN_BENCH_EDITS REST edits of old todos (outside the window, so
# that a window device's cursor pull over them is all `left`). Prints, side by side:
#   * the EXPLAIN plans and the rows read (Handler_read_*, session counters around the statement)
#     of a window pull's statements (the first pull's ordered range of sync_feed_window, at its
#     start and in the middle of the window; the cursor pull's primary-key range) and of the whole
#     pull's page, limit 500;
#   * the time of one page of 500, window against whole, for a first pull's page (a middle page)
#     and for a cursor page over the edits, medians of WIN_BENCH_REPEATS requests each, the two
#     alternating (the box's load drifts); the ratio window/whole (target <= 1.2).
# A measurement, not a test.
#
#   bench/windows.sh                              # 1,000,000 todos (635 tags), 90-day window
#   WIN_BENCH_TODOS=100000 bench/windows.sh       # smaller, quicker
#
# Knobs: WIN_BENCH_TAGS (635), WIN_BENCH_TODOS (1000000), WIN_BENCH_DAYS (3650, from 2017-01-01),
# WIN_BENCH_WINDOW_DAYS (90: the window is the last that many days of the span),
# WIN_BENCH_EDITS (1000), WIN_BENCH_REPEATS (200), WIN_BENCH_STATE_DIR (.state/bench-windows),
# WIN_BENCH_HTTP_PORT (19480), WIN_BENCH_HTTPS_PORT (19843), WIN_BENCH_SKIP_BUILD (0),
# WIN_BENCH_KEEP (0: 1 leaves the stack up and seeded for another run with WIN_BENCH_REUSE=1, which
# restarts the responder, so that a binary rebuilt since is measured, and makes 1,000 edits more).
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"

export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$(realpath -m "${WIN_BENCH_STATE_DIR:-.state/bench-windows}")
export TODOSYNC_HTTP_PORT=${WIN_BENCH_HTTP_PORT:-19480} TODOSYNC_HTTPS_PORT=${WIN_BENCH_HTTPS_PORT:-19843}
export TODOSYNC_RESPONDERS=1 TODOSYNC_ENABLE_TEST_HOOKS=0 TODOSYNC_ACCOUNT_CPU_SHARE_MS=0
export TODOSYNC_MARIADB_ARGS=${WIN_BENCH_MARIADB_ARGS:---innodb-buffer-pool-size=1536M}
export BENCH_USERS=1 BENCH_TAGS=${WIN_BENCH_TAGS:-635} BENCH_TODOS=${WIN_BENCH_TODOS:-1000000}
export BENCH_DAYS=${WIN_BENCH_DAYS:-3650} BENCH_START_DATE=2017-01-01 BENCH_TOKEN_SALT=win BENCH_SEED_JOBS=2
WINDOW_DAYS=${WIN_BENCH_WINDOW_DAYS:-90}
EDITS=${WIN_BENCH_EDITS:-1000}
BASE=http://127.0.0.1:$TODOSYNC_HTTP_PORT
STACK=scripts/stack.sh
TOKEN=bench-win-1
FROM=$(date -u -d "$BENCH_START_DATE + $((BENCH_DAYS - WINDOW_DAYS)) days" +%F)
TO=$(date -u -d "$BENCH_START_DATE + $((BENCH_DAYS - 1)) days" +%F)

if [[ ${WIN_BENCH_REUSE:-0} != 1 ]]; then
    [[ ${WIN_BENCH_SKIP_BUILD:-0} == 1 ]] || "$STACK" build
    "$STACK" down >/dev/null 2>&1 || true
    rm -rf "$TODOSYNC_STATE_DIR"
    "$STACK" up >/dev/null
else
    "$STACK" responders-restart >/dev/null  # a binary rebuilt since is the one measured
fi
[[ ${WIN_BENCH_KEEP:-0} == 1 ]] || trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <("$STACK" env)
TODOSYNC_DB_PASSWORD=${TODOSYNC_DB_PASSWORD:-$(head -n1 "$TODOSYNC_DB_PASSWORD_FILE")}
export TODOSYNC_DB_PASSWORD
db() { mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root "$TODOSYNC_DB_NAME" "$@"; }

if [[ ${WIN_BENCH_REUSE:-0} != 1 ]]; then
    bench/seed.sh | grep -E '^seed:' || true
fi
echo "account: $(db -N -e 'SELECT COUNT(*) FROM sync_feed WHERE user_id = 1') feed rows," \
     "window $FROM..$TO: $(db -N -e "SELECT COUNT(*) FROM sync_feed WHERE user_id = 1 AND live_day BETWEEN '$FROM' AND '$TO'") rows"
echo "load before: $(uptime)"
WIN_SEQ=$(db -N -e 'SELECT change_seq FROM users WHERE id = 1') WIN_EPOCH=$(db -N -e 'SELECT epoch FROM sync_epoch')
export WIN_SEQ WIN_EPOCH

WIN_RESPONDER=$("$STACK" responder-pids | head -n1)
WIN_MARIADB=$(pgrep -o -f "mariadbd.*$TODOSYNC_STATE_DIR")
export WIN_RESPONDER WIN_MARIADB
python3 - "$BASE" "$TOKEN" "$FROM" "$TO" "$EDITS" "${WIN_BENCH_REPEATS:-200}" "$BENCH_START_DATE" <<'PY'
import base64, http.client, json, os, statistics, sys, time, urllib.parse
base, token, lo, hi, edits, repeats, start = sys.argv[1:8]
responder, mariadb = int(os.environ["WIN_RESPONDER"]), int(os.environ["WIN_MARIADB"])

def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
edits, repeats = int(edits), int(repeats)
host = urllib.parse.urlsplit(base)
conn = http.client.HTTPConnection(host.hostname, host.port, timeout=120)
auth = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}

def get(params):
    conn.request("GET", "/api/v1/sync/pull?" + urllib.parse.urlencode(params), headers=auth)
    r = conn.getresponse()
    body = r.read()
    assert r.status == 200, (r.status, body[:300])
    return body

def page(params):
    body = json.loads(get(params))
    n = sum(len(v) for part in body["changes"].values() for v in part.values())
    return body, n

window = {"from": lo, "to": hi, "schemaVersion": "2"}
whole = {"schemaVersion": "2"}
# Cursors of a middle page of each first pull (the fifth page of 500).
def nth_cursor(params, n):
    cursor = None
    for _ in range(n):
        body, _ = page({**params, "limit": "500", **({"cursor": cursor} if cursor else {})})
        cursor = body["cursor"]
    return cursor
w_first, o_first = nth_cursor(window, 4), nth_cursor(whole, 4)
# Cursors at the end of each pull, then the edits (old todos: outside the window).
def end_cursor(params):
    cursor = None
    while True:
        body, _ = page({**params, "limit": "1000", **({"cursor": cursor} if cursor else {})})
        cursor = body["cursor"]
        if not body["hasMore"]:
            return cursor
w_end = end_cursor(window)
# The whole pull's end: following a million-record first pull is 1,000 pages; the cursor a
# whole pull ends with is the one the server makes at the top of the feed (SyncCursor's second
# format), made here from the user's change sequence and the database's epoch.
def whole_cursor(position, epoch):
    payload = f"2:1:{position}:{position}:{epoch:x}"
    h = 0xcbf29ce484222325
    for byte in f"todosync-cursor|{payload}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return base64.urlsafe_b64encode(f"{payload}:{h:x}".encode()).decode().rstrip("=")
o_end = whole_cursor(int(os.environ["WIN_SEQ"]), int(os.environ["WIN_EPOCH"]))
assert not json.loads(get({**whole, "limit": "1", "cursor": o_end}))["hasMore"], "the made cursor is not at the top"
run = int(time.time())  # a title new to every run: an edit that changes nothing is no change
t0 = time.perf_counter()
for i in range(edits):
    todo = 1 + 997 * i % 200000  # the oldest fifth of the span: far outside the window
    conn.request("PATCH", f"/api/v1/todos/{todo}", body=json.dumps({"title": f"edited {i} at {run}"}),
                 headers={**auth, "Content-Type": "application/json"})
    r = conn.getresponse(); r.read()
    assert r.status == 200, r.status
print(f"{edits} edits of old todos in {time.perf_counter() - t0:.1f} s")

cases = [
    ("first pull, middle page", {**window, "limit": "500", "cursor": w_first}, {**whole, "limit": "500", "cursor": o_first}),
    ("cursor page over the edits", {**window, "limit": "500", "cursor": w_end}, {**whole, "limit": "500", "cursor": o_end}),
]
# Wall time (median) and CPU per page (the responder's and MariaDB's, from /proc: the box is
# shared, and CPU is what a page costs the server whatever the load).
print(f"{'page of 500':<27} {'wall ms: window':>15} {'whole':>6} {'ratio':>5}  {'CPU ms: window':>14} {'whole':>6} {'ratio':>5}"
      f"  {'bytes: window':>13} {'whole':>8}")
for name, w, o in cases:
    wb, wn = page(w)
    ob, on = page(o)
    wall = {"w": [], "o": []}
    spent = {"w": 0.0, "o": 0.0}
    for _ in range(repeats):
        for key, params in (("w", w), ("o", o)):
            c = cpu(responder) + cpu(mariadb)
            t = time.perf_counter()
            get(params)
            wall[key].append(time.perf_counter() - t)
            spent[key] += cpu(responder) + cpu(mariadb) - c
    mw, mo = statistics.median(wall["w"]) * 1000, statistics.median(wall["o"]) * 1000
    cw, co = spent["w"] / repeats * 1000, spent["o"] / repeats * 1000
    print(f"{name:<27} {mw:>15.2f} {mo:>6.2f} {mw / mo:>5.2f}  {cw:>14.2f} {co:>6.2f} {cw / co if co else 0:>5.2f}"
          f"  {len(get(w)):>13,} {len(get(o)):>8,}   ({wn} vs {on} records)")
PY
echo "load after: $(uptime)"

# Plans and rows read (session Handler_read_* around each statement), for a page of 500.
S=$(db -N -e 'SELECT change_seq FROM users WHERE id = 1')
MID=$(date -u -d "$FROM + $((WINDOW_DAYS / 2)) days" +%F)
explain() { # title, statement
    echo "--- $1"
    db -t -e "EXPLAIN $2"
    db -N -e "FLUSH STATUS; $2; SHOW SESSION STATUS WHERE Variable_name IN
              ('Handler_read_key','Handler_read_next','Handler_read_rnd_next','Handler_read_first');" \
        | grep '^Handler' | tr '\t' ' ' | paste -sd ' ' | sed 's/^/rows read: /'
}
COLS="version, kind, record_id, device, deleted_at, parent_tags, body, live_day"
explain "window first pull, first page (tags first)" \
    "SELECT $COLS FROM sync_feed FORCE INDEX (sync_feed_window) WHERE user_id = 1 AND version <= $S AND ((live_day = '1000-01-01' AND version > 0) OR (live_day > '1000-01-01' AND live_day BETWEEN '$FROM' AND '$TO')) ORDER BY live_day, version LIMIT 501"
explain "window first pull, a page from the middle of the window" \
    "SELECT $COLS FROM sync_feed FORCE INDEX (sync_feed_window) WHERE user_id = 1 AND version <= $S AND ((live_day = '$MID' AND version > 0) OR (live_day > '$MID' AND live_day BETWEEN '$FROM' AND '$TO')) ORDER BY live_day, version LIMIT 501"
explain "window cursor pull (the 1,000 edits: primary key from the cursor)" \
    "SELECT $COLS FROM sync_feed WHERE user_id = 1 AND version > $((S - EDITS)) AND (deleted_at IS NULL OR version > 0) ORDER BY version LIMIT 501"
explain "whole pull page (primary key)" \
    "SELECT version, kind, record_id, device, deleted_at, parent_tags, body FROM sync_feed WHERE user_id = 1 AND version > $((S / 2)) AND (deleted_at IS NULL OR version > $S) ORDER BY version LIMIT 501"
