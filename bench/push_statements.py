#!/usr/bin/env python3
"""Where a push's statement time goes, per responder binary, on a kept bench data set.

Usage (the bench stack up on its kept data, its environment exported as bench/run.sh does):
    bench/push_statements.py --count 20 before=/path/to/old/todosync after=/path/to/new/todosync

For each binary in turn (a label may repeat: before1=… after1=… before2=… interleaves): restarts the responders with it (`scripts/stack.sh responders-restart`),
sends 3 unmeasured pushes, then COUNT pushes of BENCH_PUSH_OPS (100) operations one after another
(users 1..COUNT, half creates on random dates, half updates of the user's seeded todos, as the
push phase sends them) with MariaDB's slow log at long_query_time = 0, and prints per statement
shape: executions and milliseconds of statement time per push, and its share; then MariaDB's
handler and command counters per push. Statement time is the server's own clock for each
statement, so it is far less sensitive to a busy box than throughput is.
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import subprocess
import sys
import time
import uuid

USERS = int(os.environ.get("BENCH_USERS", "200"))
TODOS = int(os.environ.get("BENCH_TODOS", "5000"))
DAYS = int(os.environ.get("BENCH_DAYS", "365"))
OPS = int(os.environ.get("BENCH_PUSH_OPS", "100"))
STATE = os.environ["TODOSYNC_STATE_DIR"]
SOCKET = os.environ["TODOSYNC_DB_SOCKET"]
DB = os.environ.get("TODOSYNC_DB_NAME", "todosync")
PORT = int(os.environ["TODOSYNC_HTTP_PORT"])
STACK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "stack.sh")
COUNTERS = ("Handler_read_key", "Handler_read_next", "Handler_read_rnd_next", "Handler_write", "Handler_update",
            "Com_stmt_execute", "Questions")


def sql(statement):
    return subprocess.run(["mariadb", "--no-defaults", f"--socket={SOCKET}", "--user=root", "--batch",
                           "--skip-column-names", DB, "-e", statement],
                          check=True, capture_output=True, text=True).stdout


def counters():
    rows = sql("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(f"'{c}'" for c in COUNTERS))
    return {k: int(v) for k, v in (line.split("\t") for line in rows.splitlines())}


def push(salt, user, rng, label):
    ops = []
    for k in range(OPS):
        if k % 2 == 0:
            day = time.strftime("%Y-%m-%d", time.gmtime(time.mktime((2025, 1, 1 + rng.randrange(DAYS), 12, 0, 0, 0, 0, 0))))
            ops.append({"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                        "data": {"title": f"{label} {k}", "deadline": day, "difficulty": rng.randrange(6),
                                 "estimatedTime": 15 * rng.randrange(9), "isLife": rng.random() < 0.3}})
        else:
            todo = (rng.randrange(1, TODOS + 1) - 1) * USERS + user  # bench/seed.sh's interleaved ids
            ops.append({"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": todo,
                        "data": {"isCompleted": rng.random() < 0.5, "title": f"{label} edit {rng.randrange(10**9)}"}})
    body = json.dumps({"deviceId": str(uuid.uuid4()), "operations": ops}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    conn.request("POST", "/api/v1/sync/push", body=body,
                 headers={"Authorization": f"Bearer bench-{salt}-{user}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    if response.status != 200:
        sys.exit(f"push: HTTP {response.status} {data[:200]!r}")
    statuses = collections.Counter(r["status"] for r in json.loads(data)["results"])
    if set(statuses) - {"applied", "merged"}:
        sys.exit(f"push: statuses {dict(statuses)}")


def shape(statement):
    text = re.sub(r"\s+", " ", statement).strip()
    text = re.sub(r"'(?:[^'\\]|\\.)*'", "?", text)
    text = re.sub(r"\b\d+\b", "?", text)
    text = re.sub(r"(\?, )+\?", "?…", text)
    text = re.sub(r"(\(\?…\), )+\(\?…\)", "(?…)…", text)
    return text[:110]


def measure(label, binary, count, salt):
    # A session takes long_query_time from the global at connect: set before the responders
    # (re)connect, or pushes served by older connections go unlogged.
    sql("SET GLOBAL long_query_time = 0")
    subprocess.run([STACK, "responders-restart"], env={**os.environ, "TODOSYNC_BIN": binary}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rng = random.Random(11)
    for user in range(count + 1, count + 4):
        push(salt, user, rng, "warm-up")
    # In MariaDB's data dir: the server's OS user may write nothing else of the state dir.
    name = f"push-statements-{label}.log"
    log = os.path.join(sql("SELECT @@datadir").strip(), name)
    if os.path.exists(log):
        os.remove(log)
    sql(f"SET GLOBAL slow_query_log_file = '{name}'")
    before = counters()
    sql("SET GLOBAL slow_query_log = 1")
    t0 = time.monotonic()
    for user in range(1, count + 1):
        push(salt, user, rng, label)
    wall = time.monotonic() - t0
    sql("SET GLOBAL slow_query_log = 0")
    sql("SET GLOBAL long_query_time = 10")
    after = counters()
    per = collections.defaultdict(lambda: [0, 0.0])
    with open(log, errors="replace") as f:
        entry_time, lines = None, []
        for line in f.read().splitlines() + ["# Time: end"]:
            if line.startswith("# Query_time:"):
                entry_time = float(line.split()[2])
            elif line.startswith("#") or line.startswith("SET timestamp") or line.startswith("use "):
                if lines and entry_time is not None:
                    statement = shape(" ".join(lines))
                    if not statement.startswith(("SET GLOBAL", "SHOW")):
                        per[statement][0] += 1
                        per[statement][1] += entry_time
                    lines, entry_time = [], None
            elif entry_time is not None:
                lines.append(line)
    total = sum(t for _, t in per.values())
    print(f"== {label}: {binary}\n{count} pushes of {OPS} operations in {wall:.1f} s; statement time "
          f"{total / count * 1000:.1f} ms per push ({total / count / OPS * 1e6:.0f} µs per operation)")
    print(f"{'calls/push':>10} {'ms/push':>8} {'share':>6}  statement")
    for statement, (calls, seconds) in sorted(per.items(), key=lambda kv: -kv[1][1])[:14]:
        print(f"{calls / count:>10.1f} {seconds / count * 1000:>8.2f} {seconds / total:>6.1%}  {statement}")
    print("per push: " + ", ".join(f"{c} {(after[c] - before[c]) / count:,.0f}" for c in COUNTERS))
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("binaries", nargs="+", help="label=path of a todosync binary")
    args = parser.parse_args()
    with open(os.path.join(STATE, "mariadb.seed")) as f:
        salt = f.read().splitlines()[1]
    for item in args.binaries:
        label, _, binary = item.partition("=")
        measure(label, binary, args.count, salt)


if __name__ == "__main__":
    main()
