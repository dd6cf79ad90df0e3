#!/usr/bin/env python3
"""A friend's month, live: from a friend's write to the watcher's view (bench/friends-live.sh).

Two accounts become friends over REST. The friend (A) has 60 todos over 30 days of 2026-11 (so
30 daily stats). The watcher (B) runs the real client, `todosync-client friends month A
--month 2026-11 --watch --json`, which prints the month each time its FriendsLiveView changes;
a plain SSE reader on B's `sync/live?friends=1` records when each `event: friend` arrives.
Each write renames one of A's todos (PATCH); its delay is from the PATCH being sent (the event,
and so the view, can come before its answer is read) to the first client line that shows the new
title, beside the raw event's and the PATCH's own time. Prints p50/p90/p99/max.
"""
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

BASE = os.environ["BENCH_BASE_URL"]
CLIENT = os.environ["FRIENDS_BENCH_CLIENT"]
WRITES = int(os.environ.get("FRIENDS_BENCH_WRITES", "300"))
GAP = int(os.environ.get("FRIENDS_BENCH_GAP_MS", "100")) / 1000
RESULTS = os.environ.get("BENCH_RESULTS", ".")
PASSWORD = "correct horse battery"
URL = urllib.parse.urlparse(BASE)


def call(method, path, token=None, body=None):
    conn = http.client.HTTPConnection(URL.hostname, URL.port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data) if data else None


def register(name):
    email = f"{name}-{random.randrange(1 << 40):x}@example.com"
    return email, call("POST", "/api/v1/auth/register", body={"email": email, "password": PASSWORD})["token"]


class SSE(threading.Thread):
    """A raw `sync/live?friends=1` stream: the arrival time of each friend event."""

    def __init__(self, token):
        super().__init__(daemon=True)
        self.token = token
        self.events = []
        self.lock = threading.Lock()
        self.opened = threading.Event()

    def run(self):
        sock = socket.create_connection((URL.hostname, URL.port))
        sock.sendall((f"GET /api/v1/sync/live?friends=1 HTTP/1.1\r\nHost: {URL.hostname}\r\n"
                      f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n").encode())
        buffer = b""
        name = None
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            now = time.monotonic()
            buffer += chunk
            if not self.opened.is_set() and b"\r\n\r\n" in buffer:
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                if b" 200 " not in head.split(b"\r\n")[0]:
                    raise RuntimeError(f"live stream refused: {head[:200]!r}")
                self.opened.set()
            while self.opened.is_set() and b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                line = line.rstrip(b"\r")
                if line.startswith(b"event:"):
                    name = line[6:].strip()
                elif line.startswith(b"data:") and name == b"friend":
                    with self.lock:
                        self.events.append(now)
                elif not line:
                    name = None

    def first_after(self, t):
        with self.lock:
            return next((e for e in self.events if e >= t), None)


class Watcher(threading.Thread):
    """The client's stdout: (arrival time, titles) per month document."""

    def __init__(self, process):
        super().__init__(daemon=True)
        self.process = process
        self.lines = []
        self.lock = threading.Condition()

    def run(self):
        for raw in self.process.stdout:
            now = time.monotonic()
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            titles = {t["title"] for d in doc.get("days", []) for t in d.get("todos", [])}
            with self.lock:
                self.lines.append((now, titles))
                self.lock.notify_all()

    def wait_for(self, title, since, timeout=10):
        end = time.monotonic() + timeout
        with self.lock:
            while True:
                hit = next((t for t, titles in self.lines if t >= since and title in titles), None)
                if hit is not None or time.monotonic() > end:
                    return hit
                self.lock.wait(0.05)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    a_email, a_token = register("friend")
    b_email, b_token = register("watcher")
    call("POST", "/api/v1/friends/requests", a_token, {"email": b_email})
    incoming = call("GET", "/api/v1/friends/requests", b_token)["incoming"]
    friend_id = call("POST", f"/api/v1/friends/requests/{incoming[0]['id']}/accept", b_token)["id"]
    ids = []
    for i in range(60):
        todo = call("POST", "/api/v1/todos", a_token,
                    {"title": f"todo {i}", "deadline": f"2026-11-{i % 30 + 1:02d}", "estimatedTime": 30, "difficulty": 2})
        ids.append(todo["id"])

    workdir = tempfile.mkdtemp(prefix="friends-bench-")
    db = os.path.join(workdir, "b.sqlite")
    env = dict(os.environ, TODOSYNC_SERVER=BASE, TODOSYNC_PASSWORD=PASSWORD)
    subprocess.run([CLIENT, "login", "--email", b_email, "--db", db], env=env, check=True, capture_output=True)
    sse = SSE(b_token)
    sse.start()
    process = subprocess.Popen([CLIENT, "friends", "month", str(friend_id), "--month", "2026-11", "--watch", "--json",
                                "--db", db], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watcher = Watcher(process)
    watcher.start()
    try:
        if watcher.wait_for("todo 0", 0, timeout=20) is None or not sse.opened.wait(10):
            raise RuntimeError("the watcher or the raw stream did not start")
        time.sleep(2)  # the client's stream reopens with friends=1 once its view watches
        load_before = os.getloadavg()
        view, raw, writes, missed = [], [], [], 0
        for i in range(WRITES):
            title = f"renamed {i}"
            # From the PATCH being sent: the event (and so the view) may come before its answer is read.
            sent = time.monotonic()
            call("PATCH", f"/api/v1/todos/{ids[i % len(ids)]}", a_token, {"title": title})
            writes.append((time.monotonic() - sent) * 1000)
            shown = watcher.wait_for(title, sent)
            if shown is None:
                missed += 1
            else:
                view.append((shown - sent) * 1000)
            event = sse.first_after(sent)
            if event is not None:
                raw.append((event - sent) * 1000)
            time.sleep(GAP)
        load_after = os.getloadavg()
    finally:
        process.terminate()
        process.wait(10)

    def summary(values):
        if not values:
            return {}
        return {"n": len(values), "p50": round(statistics.median(values), 1), "p90": round(percentile(values, 90), 1),
                "p99": round(percentile(values, 99), 1), "max": round(max(values), 1)}

    result = {"writes": WRITES, "missed": missed, "view_ms": summary(view), "event_ms": summary(raw),
              "write_ms": summary(writes),
              "load_before": load_before, "load_after": load_after, "cpus": os.cpu_count()}
    with open(os.path.join(RESULTS, "friends-live.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"friend's write (PATCH sent) -> watcher's view shows it (todosync-client friends month --watch), ms: "
          f"{result['view_ms']}; not shown within 10 s: {missed}")
    print(f"friend's write (PATCH sent) -> raw `event: friend` on a friends=1 stream, ms: {result['event_ms']}")
    print(f"the PATCH itself (sent -> answered), ms: {result['write_ms']}")
    print(f"month: 60 todos over 30 days; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    sys.exit(main())
