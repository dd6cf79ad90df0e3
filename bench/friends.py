#!/usr/bin/env python3
"""Friends benchmarks (issue 37, "Benchmarks"; docs/FRIENDS.md). Run by bench/friends.sh against a
private stack seeded by bench/seed.sh (60 todos in June 2030 per account, so ~30 daily stats);
standard library only. Phases, in order:

1. month reads: the owner's own `GET /todos?from=2030-06-01&to=2030-06-30` against a friend's
   `GET /friends/{owner}/todos?month=2030-06` (and the two daily-stats reads), closed loop on
   CONCURRENCY connections for FRIENDS_BENCH_SECONDS each, alternated twice: requests per second.
2. fan-out: writer 3 has 500 friends (4..503, friendship rows inserted by SQL), each with one
   `friends=1` stream open; writer 504 has none. One PATCH of a todo at a time, alternated
   between them: each write's latency (request sent to response read), and for writer 3 the
   time from its response to its `event: friend` on the streams (first stream, median stream,
   last stream). The response goes out after the commit, so "response -> event" is a lower
   bound of "commit -> event" by the response's last leg (loopback: tens of microseconds).
3. enumeration timing: 100 senders (505..604) send 20 requests each, alternating an existing
   email (bench<k>@example.com) and one with no account: latency of each 202 by kind.
"""

import asyncio
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

BASE = urllib.parse.urlsplit(os.environ.get("BENCH_BASE_URL", "http://127.0.0.1:19480"))
HOST, PORT = BASE.hostname, BASE.port or 80
SALT = os.environ.get("BENCH_TOKEN_SALT", "s0")
RESULTS = os.environ.get("BENCH_RESULTS", "/tmp/todosync-bench-friends")
SECONDS = int(os.environ.get("FRIENDS_BENCH_SECONDS", "10"))
WRITES = int(os.environ.get("FRIENDS_BENCH_WRITES", "200"))
CONCURRENCY = int(os.environ.get("FRIENDS_BENCH_CONCURRENCY", "8"))
DB_SOCKET = os.environ.get("TODOSYNC_DB_SOCKET", "")
DB_NAME = os.environ.get("TODOSYNC_DB_NAME", "todosync")
VIEWER, OWNER, WRITER, WRITER_FRIENDS, LONER = 1, 2, 3, range(4, 504), 504
SENDERS = range(505, 605)


def log(message):
    print(f"[friends {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def token(user):
    return f"bench-{SALT}-{user}"


def sql(statement):
    subprocess.run(["mariadb", f"--socket={DB_SOCKET}", "-uroot", "-N", "-B", "-e", statement, DB_NAME],
                   check=True, capture_output=True)


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def call(conn, method, path, user, body=None, expect=(200,)):
    headers = {"Authorization": f"Bearer {token(user)}"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status not in expect:
        raise RuntimeError(f"{method} {path} -> {response.status}: {data[:200]!r}")
    return data


def closed_loop(path, user, seconds):
    """Requests per second of `path` on CONCURRENCY keep-alive connections for `seconds`: wrk
    (2 threads) when installed, else Python threads (slower: the client may be the limit)."""
    if shutil.which("wrk"):
        out = subprocess.run(["wrk", "-t2", f"-c{CONCURRENCY}", f"-d{seconds}s", "-H", f"Authorization: Bearer {token(user)}",
                              f"http://{HOST}:{PORT}{path}"], check=True, capture_output=True, text=True).stdout
        if "Non-2xx" in out:
            raise RuntimeError(f"wrk saw errors on {path}: {out}")
        return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    counts = [0] * CONCURRENCY
    stop = time.monotonic() + seconds

    def run(i):
        conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
        while time.monotonic() < stop:
            call(conn, "GET", path, user)
            counts[i] += 1
        conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONCURRENCY)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def month_reads():
    pairs = {
        "todos": ("/api/v1/todos?from=2030-06-01&to=2030-06-30", f"/api/v1/friends/{OWNER}/todos?month=2030-06"),
        "daily-stats": ("/api/v1/daily-stats?month=2030-06", f"/api/v1/friends/{OWNER}/daily-stats?month=2030-06"),
    }
    conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
    todos = json.loads(call(conn, "GET", pairs["todos"][1], VIEWER))["items"]
    stats = json.loads(call(conn, "GET", pairs["daily-stats"][1], VIEWER))["items"]
    log(f"the friend's month: {len(todos)} todos, {len(stats)} stats")
    result = {"todos": len(todos), "stats": len(stats)}
    for name, (own, friend) in pairs.items():
        owner_rates, friend_rates = [], []
        for _ in range(2):
            owner_rates.append(closed_loop(own, OWNER, SECONDS))
            friend_rates.append(closed_loop(friend, VIEWER, SECONDS))
        o, f = statistics.mean(owner_rates), statistics.mean(friend_rates)
        result[name] = {"owner_rps": owner_rates, "friend_rps": friend_rates, "ratio": f / o}
        print(f"{name:12s} owner's own month {o:8.0f} req/s   friend's month {f:8.0f} req/s   ratio {f / o:.2f}"
              f"   (rounds: owner {['%.0f' % r for r in owner_rates]}, friend {['%.0f' % r for r in friend_rates]})")
    return result


async def open_stream(user, arrivals, ready):
    # Spread over source addresses 127.0.0.2..251: nginx caps connections per address.
    reader, writer = await asyncio.open_connection(HOST, PORT, local_addr=(f"127.0.0.{2 + user % 250}", 0))
    writer.write((f"GET /api/v1/sync/live?friends=1 HTTP/1.1\r\nHost: {HOST}\r\nAccept: text/event-stream\r\n"
                  f"Authorization: Bearer {token(user)}\r\n\r\n").encode())
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"stream of {user}: {status!r}")
    ready.append(user)
    kind = None
    while True:
        line = await reader.readline()
        if not line:
            return
        text = line.decode().rstrip("\r\n")
        if text.endswith("event: friend") or text == "event: friend":
            kind = "friend"
        elif "data:" in text and kind == "friend":
            arrivals.append((time.monotonic(), json.loads(text.split("data:", 1)[1])))
            kind = None
        elif text == "":
            kind = None


def fan_out():
    sql("INSERT IGNORE INTO friendships (user_id, friend_id, since) VALUES "
        + ",".join(f"({WRITER},{f},NOW(3)),({f},{WRITER},NOW(3))" for f in WRITER_FRIENDS))
    conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
    todo_of = {}
    for user in (WRITER, LONER):
        items = json.loads(call(conn, "GET", "/api/v1/todos?from=2030-06-01&to=2030-06-30", user))["items"]
        todo_of[user] = items[0]["id"]
    loop = asyncio.new_event_loop()
    arrivals, ready = [], []
    tasks = [loop.create_task(open_stream(f, arrivals, ready)) for f in WRITER_FRIENDS]

    async def wait_ready():
        while len(ready) < len(tasks):
            await asyncio.sleep(0.05)
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
        await asyncio.sleep(1.0)

    loop.run_until_complete(wait_ready())
    log(f"{len(ready)} friends=1 streams open")
    latencies = {WRITER: [], LONER: []}
    first, median, last, delivered = [], [], [], []

    async def write(user, n):
        def patch():
            sent = time.monotonic()
            call(conn, "PATCH", f"/api/v1/todos/{todo_of[user]}", user, {"title": f"bench write {n}"})
            return sent, time.monotonic()
        return await loop.run_in_executor(None, patch)

    async def run():
        for n in range(WRITES):
            for user in ((WRITER, LONER) if n % 2 == 0 else (LONER, WRITER)):
                arrivals.clear()
                sent, answered = await write(user, n)
                latencies[user].append((answered - sent) * 1000)
                if user == WRITER:
                    deadline = time.monotonic() + 2.0
                    while len(arrivals) < len(tasks) and time.monotonic() < deadline:
                        await asyncio.sleep(0.002)
                    times = sorted((at - answered) * 1000 for at, data in arrivals if data == {"friendId": WRITER})
                    delivered.append(len(times))
                    if times:
                        first.append(times[0])
                        median.append(times[len(times) // 2])
                        last.append(times[-1])
                else:
                    await asyncio.sleep(0.05)  # a friendless write: nothing to wait for

    loop.run_until_complete(run())
    # The write latencies above include the load generator's own work: its one Python process
    # reads the 500 streams' events while the write waits for its answer. Measured again with the
    # event loop stopped (the streams' events wait in the sockets, read afterwards): the server's
    # cost alone, including its queued publish competing with the next write.
    quiet = {WRITER: [], LONER: []}
    for n in range(WRITES):
        for user in ((WRITER, LONER) if n % 2 == 0 else (LONER, WRITER)):
            sent = time.monotonic()
            call(conn, "PATCH", f"/api/v1/todos/{todo_of[user]}", user, {"title": f"bench quiet write {n}"})
            quiet[user].append((time.monotonic() - sent) * 1000)
            time.sleep(0.02)
        if n % 10 == 9:
            loop.run_until_complete(asyncio.sleep(0.2))  # drain the sockets now and then
    for t in tasks:
        t.cancel()
    result = {
        "write_ms": {str(u): {"p50": pct(v, 50), "p90": pct(v, 90), "mean": statistics.mean(v)} for u, v in latencies.items()},
        "event_ms": {"first_p50": pct(first, 50), "median_stream_p50": pct(median, 50), "last_p50": pct(last, 50),
                     "median_stream_p90": pct(median, 90), "last_p90": pct(last, 90)},
        "delivered_min": min(delivered) if delivered else 0,
    }
    result["quiet_write_ms"] = {str(u): {"p50": pct(v, 50), "p90": pct(v, 90), "mean": statistics.mean(v)}
                                for u, v in quiet.items()}
    qw, ql = result["quiet_write_ms"][str(WRITER)], result["quiet_write_ms"][str(LONER)]
    print(f"write latency (load generator idle)   500 friends p50 {qw['p50']:.2f} ms mean {qw['mean']:.2f}   "
          f"none p50 {ql['p50']:.2f} ms mean {ql['mean']:.2f}   ratio p50 {qw['p50'] / ql['p50']:.3f} "
          f"mean {qw['mean'] / ql['mean']:.3f}")
    w, l = result["write_ms"][str(WRITER)], result["write_ms"][str(LONER)]
    print(f"write latency (events read meanwhile)   500 friends p50 {w['p50']:.2f} ms mean {w['mean']:.2f}   none p50 {l['p50']:.2f} ms "
          f"mean {l['mean']:.2f}   ratio p50 {w['p50'] / l['p50']:.3f} mean {w['mean'] / l['mean']:.3f}")
    e = result["event_ms"]
    print(f"response->event first stream p50 {e['first_p50']:.1f} ms, median stream p50 {e['median_stream_p50']:.1f} ms "
          f"(p90 {e['median_stream_p90']:.1f}), last of 500 p50 {e['last_p50']:.1f} ms (p90 {e['last_p90']:.1f}); "
          f"every write reached at least {result['delivered_min']} of 500 streams")
    return result


def enumeration_timing():
    existing, missing = [], []
    conns = {s: http.client.HTTPConnection(HOST, PORT, timeout=30) for s in SENDERS}
    k = 0
    for round_ in range(20):
        for s in SENDERS:
            k += 1
            exists = (k % 2 == 0) ^ (round_ % 2 == 0)
            email = f"bench{605 + (k % 496)}@example.com" if exists else f"nobody-{SALT}-{k}@example.com"
            started = time.monotonic()
            call(conns[s], "POST", "/api/v1/friends/requests", s, {"email": email}, expect=(202,))
            (existing if exists else missing).append((time.monotonic() - started) * 1000)
    result = {}
    for name, values in (("existing", existing), ("missing", missing)):
        result[name] = {"n": len(values), "p50": pct(values, 50), "p90": pct(values, 90), "mean": statistics.mean(values),
                        "stdev": statistics.stdev(values)}
    e, m = result["existing"], result["missing"]
    # Welch's t of the means: |t| under ~2 is no difference these samples can show.
    t = (e["mean"] - m["mean"]) / ((e["stdev"] ** 2 / e["n"] + m["stdev"] ** 2 / m["n"]) ** 0.5)
    result["welch_t"] = t
    print(f"202 latency     existing email n={e['n']} p50 {e['p50']:.2f} ms mean {e['mean']:.2f} (p90 {e['p90']:.2f})   "
          f"no account n={m['n']} p50 {m['p50']:.2f} ms mean {m['mean']:.2f} (p90 {m['p90']:.2f})   Welch t {t:.2f}")
    return result


def main():
    os.makedirs(RESULTS, exist_ok=True)
    sql(f"INSERT IGNORE INTO friendships (user_id, friend_id, since) VALUES ({VIEWER},{OWNER},NOW(3)),"
        f"({OWNER},{VIEWER},NOW(3))")
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    result = {"month": month_reads(), "fan_out": fan_out(), "enumeration": enumeration_timing()}
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    with open(os.path.join(RESULTS, "friends.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
