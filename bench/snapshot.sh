#!/usr/bin/env bash
# Snapshot benchmark (issue 23, server half): for one account of N records seeded by SQL
# (bench/seed.sh: one user, its tags and todos, then the app's own daily stats and change feed),
# the time and size of the first GET /api/v1/sync/snapshot (the build), the time of cached
# downloads (nginx sends the file), and the responder's CPU per build per 1,000 records (its
# process CPU before and after the build, and todosync_snapshot_build_seconds_total); then the
# gzip variant: the first gzip request (which compresses the cached file once), its size against
# the file's, cached gzip downloads, and a check that it decodes to the file. A measurement, not
# a test.
#
#   bench/snapshot.sh                          # 65,000 records (635 tags + 64,000 todos + stats)
#   SNAP_BENCH_TODOS=1000000 SNAP_BENCH_TAGS=635 bench/snapshot.sh
#
# Knobs: SNAP_BENCH_TAGS (635), SNAP_BENCH_TODOS (64000), SNAP_BENCH_RUNS (3 cached downloads),
# SNAP_BENCH_STATE_DIR (.state/bench-snapshot), SNAP_BENCH_HTTP_PORT (19380),
# SNAP_BENCH_HTTPS_PORT (19743), SNAP_BENCH_SKIP_BUILD (0: `stack.sh build` first),
# SNAP_BENCH_EDITS (0: that many todos, every 7th from the first, edited through the API after
# the seed, so the feed's version order is no longer id order, as in an account that is used).
#
# Before/after on one seeded database, the two binaries alternating (a shared box's load drifts;
# alternating spreads it over both):
#   SNAP_BENCH_COMPARE="before=/path/to/old/todosync after=.build/release/todosync" \
#   SNAP_BENCH_ROUNDS=3 bench/snapshot.sh
# restarts the responder with each binary in turn, removes the cached file and times one build
# (raise SNAP_BENCH_BUDGET_MS when the box is so loaded that a build runs out of the budget: 503),
# SNAP_BENCH_ROUNDS times; prints each build and the medians per binary (wall, responder CPU and
# MariaDB's CPU, both from /proc/<pid>/stat), with `uptime` before and after.
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"

export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$(realpath -m "${SNAP_BENCH_STATE_DIR:-.state/bench-snapshot}")
export TODOSYNC_HTTP_PORT=${SNAP_BENCH_HTTP_PORT:-19380} TODOSYNC_HTTPS_PORT=${SNAP_BENCH_HTTPS_PORT:-19743}
export TODOSYNC_RESPONDERS=1 TODOSYNC_ENABLE_TEST_HOOKS=0
# A million records take longer than the default budget on a loaded box: measure the build itself.
export TODOSYNC_REQUEST_BUDGET_MS=${SNAP_BENCH_BUDGET_MS:-28000}
export BENCH_USERS=1 BENCH_TAGS=${SNAP_BENCH_TAGS:-635} BENCH_TODOS=${SNAP_BENCH_TODOS:-64000}
export BENCH_DAYS=365 BENCH_START_DATE=2025-01-01 BENCH_TOKEN_SALT=snap BENCH_SEED_JOBS=2
RUNS=${SNAP_BENCH_RUNS:-3}
BASE=http://127.0.0.1:$TODOSYNC_HTTP_PORT
STACK=scripts/stack.sh

[[ ${SNAP_BENCH_SKIP_BUILD:-0} == 1 ]] || "$STACK" build
trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
"$STACK" down >/dev/null 2>&1 || true
rm -rf "$TODOSYNC_STATE_DIR"
"$STACK" up >/dev/null
while IFS= read -r line; do
    [[ $line == TODOSYNC_*=* ]] && export "${line?}"
done < <("$STACK" env)
TODOSYNC_DB_PASSWORD=${TODOSYNC_DB_PASSWORD:-$(head -n1 "$TODOSYNC_DB_PASSWORD_FILE")}
export TODOSYNC_DB_PASSWORD
bench/seed.sh | grep -E '^seed:' || true
for ((i = 0; i < ${SNAP_BENCH_EDITS:-0}; i++)); do
    curl -s -o /dev/null -w '%{http_code}\n' -X PATCH "$BASE/api/v1/todos/$((1 + 7 * i))" -H 'Authorization: Bearer bench-snap-1' \
        -H 'Content-Type: application/json' -d "{\"title\":\"edited after the seed $i\"}"
done | sort | uniq -c | sed 's/^/edits: /'

if [[ -n ${SNAP_BENCH_COMPARE:-} ]]; then
    uptime
    python3 - "$BASE" "$TODOSYNC_SNAPSHOT_DIR/1" "${SNAP_BENCH_ROUNDS:-3}" $SNAP_BENCH_COMPARE <<'PY'
import glob, os, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.request
base, cache, rounds, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), [a.split("=", 1) for a in sys.argv[4:]]
ticks = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks

mariadb = int(subprocess.run(["pgrep", "-o", "-f", f"mariadbd.*{os.environ['TODOSYNC_STATE_DIR']}"],
                             capture_output=True, text=True).stdout.split()[0])
results = {name: [] for name, _ in pairs}
for round_ in range(rounds):
    for name, binary in pairs:
        env = dict(os.environ, TODOSYNC_BIN=os.path.abspath(binary))
        subprocess.run(["scripts/stack.sh", "responders-restart"], env=env, check=True, capture_output=True)
        pid = int(subprocess.run(["scripts/stack.sh", "responder-pids"], env=env, capture_output=True,
                                 text=True).stdout.split()[0])
        # The cached file, and the mark of a build that ran out of the budget (a loaded box).
        for path in glob.glob(f"{cache}/*.sqlite") + glob.glob(f"{cache}/.too-slow-*"):
            os.unlink(path)
        req = urllib.request.Request(f"{base}/api/v1/sync/snapshot?schemaVersion=2",
                                     headers={"Authorization": "Bearer bench-snap-1"})
        c0, m0, t0 = cpu(pid), cpu(mariadb), time.perf_counter()
        with urllib.request.urlopen(req, timeout=120) as r:
            body = r.read()
        wall, responder, db = time.perf_counter() - t0, cpu(pid) - c0, cpu(mariadb) - m0
        with tempfile.NamedTemporaryFile(suffix=".sqlite") as f:
            f.write(body)
            f.flush()
            records = int(sqlite3.connect(f.name).execute(
                "SELECT value FROM snapshot_meta WHERE key = 'recordCount'").fetchone()[0])
        results[name].append((wall, responder, db, len(body), 1e6 * responder / records))
        print(f"round {round_ + 1} {name}: {records} records, build {wall:.2f} s, responder CPU {responder:.2f} s "
              f"({1e6 * responder / records:.2f} ms per 1,000 records), MariaDB CPU {db:.2f} s, "
              f"file {len(body) / 1e6:.1f} MB", flush=True)
for name, rows in results.items():
    med = lambda i: statistics.median(r[i] for r in rows)
    print(f"median {name}: build {med(0):.2f} s, responder CPU {med(1):.2f} s ({med(4):.2f} ms per 1,000 records), "
          f"MariaDB CPU {med(2):.2f} s, file {med(3) / 1e6:.1f} MB")
PY
    uptime
    exit 0
fi

python3 - "$BASE" "bench-snap-1" "$RUNS" "$("$STACK" responder-pids | head -n1)" <<'PY'
import hashlib, json, statistics, sys, time, urllib.request
base, token, runs, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ticks = 100  # os.sysconf("SC_CLK_TCK") on Linux

def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks

def get(encoding="identity"):
    req = urllib.request.Request(f"{base}/api/v1/sync/snapshot?schemaVersion=2",
                                 headers={"Authorization": f"Bearer {token}", "Accept-Encoding": encoding})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        body = r.read()
        headers = dict(r.headers)
    return time.perf_counter() - t0, body, headers

c0 = cpu()
build_s, body, headers = get()
build_cpu = cpu() - c0
import sqlite3, tempfile, os
with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as f:
    f.write(body)
db = sqlite3.connect(f.name)
records = int(db.execute("SELECT value FROM snapshot_meta WHERE key = 'recordCount'").fetchone()[0])
db.close(); os.unlink(f.name)
assert headers["Repr-Digest"].startswith("sha-256=:")
cached, cached_cpu = [], []
for _ in range(runs):
    c0 = cpu()
    seconds, again, _ = get()
    cached_cpu.append(cpu() - c0)
    assert again == body
    cached.append(seconds)
print(f"records {records}: first request (build) {build_s:.2f} s, file {len(body) / 1e6:.1f} MB "
      f"({len(body) / records:.0f} B/record)")
print(f"  responder CPU for the build {build_cpu:.2f} s = {1000 * build_cpu / records * 1000:.1f} ms per 1,000 records")
print(f"  cached download median of {runs}: {statistics.median(cached):.3f} s "
      f"(responder CPU {statistics.median(cached_cpu) * 1000:.0f} ms; nginx sends the file)")
# The gzip variant: the first request that accepts gzip compresses the cached file once (its
# companion), later ones are sent by nginx from disk like the file.
import gzip, zlib
c0 = cpu()
gz_first_s, gz_body, gz_headers = get("gzip")
gz_first_cpu = cpu() - c0
assert gz_headers.get("Content-Encoding") == "gzip", gz_headers
t0 = time.perf_counter()
decoded = zlib.decompress(gz_body, 31)
gunzip_s = time.perf_counter() - t0
assert decoded == body, "the gzip variant does not decode to the file"
del decoded
gz_cached, gz_cached_cpu = [], []
for _ in range(runs):
    c0 = cpu()
    seconds, again, _ = get("gzip")
    gz_cached_cpu.append(cpu() - c0)
    assert again == gz_body
    gz_cached.append(seconds)
print(f"  gzip: first request (compresses the cached file) {gz_first_s:.2f} s, responder CPU {gz_first_cpu:.2f} s; "
      f"{len(gz_body) / 1e6:.1f} MB = {100 * len(gz_body) / len(body):.1f} % of the file; "
      f"cached gzip download median of {runs}: {statistics.median(gz_cached):.3f} s "
      f"(responder CPU {statistics.median(gz_cached_cpu) * 1000:.0f} ms); gunzip here {gunzip_s:.2f} s")
print("SNAPSHOT_JSON " + json.dumps({"records": records, "build_s": round(build_s, 3), "bytes": len(body),
      "build_cpu_s": round(build_cpu, 3), "cached_s": [round(s, 3) for s in cached],
      "gzip_first_s": round(gz_first_s, 3), "gzip_first_cpu_s": round(gz_first_cpu, 3), "gzip_bytes": len(gz_body),
      "gzip_cached_s": [round(s, 3) for s in gz_cached]}))
PY

# SNAP_BENCH_CLIENT=1: the device's side too (issue 23's 1,000,000-record targets: first sync
# <= 10 s including the build, client RSS <= 300 MB). The seeded user gets a real password (a
# registered donor's hash: seed.sh writes a placeholder); then `todosync-client sync` into an empty
# store, SNAP_BENCH_CLIENT_RUNS (3) times for each of:
#   building  the seeded account as loaded, its cached file removed first: the build included
#             (its rows come in id order, so the file is written compact in one pass);
#   edited    after one REST edit (a todo moves to the end of the feed): the build included, and
#             it takes the VACUUM INTO path (rows out of id order), as in an account in use;
#   cached    the file already built.
# Wall time, CPU and peak RSS from /usr/bin/time, the responder's CPU during the sync
# (/proc/<pid>/stat: the build, or the token checks of a cached download), and the client's own
# phase times (`--timing`); medians per case at the end.
# SNAP_BENCH_CLIENTS="before=/path/to/old/todosync-client after=/path/to/new" runs each case with
# each client in turn (alternating, on the same seeded account), and prints medians per client;
# SNAP_BENCH_CASES="building cached" runs only those cases.
if [[ ${SNAP_BENCH_CLIENT:-0} == 1 ]]; then
    [[ ${SNAP_BENCH_SKIP_BUILD:-0} == 1 ]] || swift build -c release --product todosync-client --quiet
    CLIENTS=${SNAP_BENCH_CLIENTS:-client=$(swift build -c release --show-bin-path)/todosync-client}
    RESPONDER=$("$STACK" responder-pids | head -n1)
    responder_cpu() { awk '{ print $14 + $15 }' "/proc/$RESPONDER/stat"; }
    command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
    PASSWORD='snapshot bench password'
    curl -s -o /dev/null -w 'register: %{http_code}\n' -X POST "$BASE/api/v1/auth/register" -H 'Content-Type: application/json' \
        -d "{\"email\":\"snap-donor@example.com\",\"password\":\"$PASSWORD\"}"
    mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root "$TODOSYNC_DB_NAME" -e \
        "SELECT password_hash INTO @h FROM users WHERE email = 'snap-donor@example.com';
         UPDATE users SET password_hash = @h WHERE id = 1;"
    WORK=$TODOSYNC_STATE_DIR/client
    mkdir -p "$WORK"
    RESULTS=$WORK/runs.txt
    : >"$RESULTS"
    echo "uptime before the client runs: $(uptime)"
    # Every "building" round first: after the first edit the feed is out of id order for good.
    for run in ${SNAP_BENCH_CASES:-building edited cached}; do
        for ((round = 1; round <= ${SNAP_BENCH_CLIENT_RUNS:-3}; round++)); do
            for named in $CLIENTS; do
                name=${named%%=*} CLIENT=${named#*=}
                case $run in
                    # The seeded account's file is gone: the next request builds it again.
                    building) rm -f "$TODOSYNC_SNAPSHOT_DIR/1/"*.sqlite* ;;
                    # An edit (not a create: the seeded account is over the records quota).
                    edited) curl -s -o /dev/null -X PATCH "$BASE/api/v1/todos/1" -H 'Authorization: Bearer bench-snap-1' \
                                -H 'Content-Type: application/json' -d "{\"title\":\"edited in round $round for $name\"}" ;;
                esac
                db=$WORK/$run.sqlite
                rm -f "$db"*
                TODOSYNC_SERVER=$BASE TODOSYNC_PASSWORD=$PASSWORD "$CLIENT" login --db "$db" --email bench1@example.com >/dev/null
                c0=$(responder_cpu)
                out=$(TODOSYNC_SERVER=$BASE /usr/bin/time -f 'wall=%e rss_kb=%M user=%U sys=%S' "$CLIENT" sync --db "$db" --quiet --timing 2>&1)
                responder=$(echo "scale=2; ($(responder_cpu) - $c0) / 100" | bc)
                line="$run:$name responder_cpu=$responder load=$(cut -d' ' -f1 /proc/loadavg) $(tr '\n' ' ' <<<"$out" | sed 's/Synced: .*downloaded)\. //')"
                echo "$line" >>"$RESULTS"
                echo "client first sync: $line"
                rm -f "$db"*
            done
        done
    done
    echo "uptime after the client runs: $(uptime)"
    python3 - "$RESULTS" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kind = line.split()[0].replace(":client", "")
    values = dict(re.findall(r"(\w+)=([\d.]+)", line))
    runs.setdefault(kind, []).append(values)
for kind, values in runs.items():
    keys = [k for k in values[0] if k != "rss_kb"]
    med = {k: statistics.median(float(v[k]) for v in values if k in v) for k in keys}
    rss = max(int(v["rss_kb"]) for v in values) / 1024
    print(f"client first sync, {kind} (median of {len(values)}): wall {med['wall']:.2f} s, sync {med['sync_seconds']:.2f} s, "
          f"cpu {med['user'] + med['sys']:.2f} s, peak RSS {rss:.0f} MB, responder cpu {med['responder_cpu']:.2f} s, "
          f"load {min(float(v['load']) for v in values):.2f}-{max(float(v['load']) for v in values):.2f}; phases "
          + " ".join(f"{k}={med[k]:.3f}" for k in keys
                     if k not in ("wall", "sync_seconds", "user", "sys", "responder_cpu", "load", "pull_bytes")))
PY
fi
