#!/usr/bin/env python3
"""A minimal FastCGI client that drives a fixed number of requests straight at a responder's
unix socket (no nginx), for profiling with valgrind (bench/profile.sh).

    fcgi_client.py SOCKET KIND COUNT [--user U] [--concurrency C] [--gzip]

KIND: fastcgi (GET /__bench/fastcgi), db (GET /__bench/db: the same plus the token check, the
benchmark's ceiling 2), date (GET /api/v1/todos?date=...), month
(GET /api/v1/daily-stats?month=...), pull (GET /api/v1/sync/pull from the cursor that starts
the user's second page, i.e. a page of 500 todos), firstpull (GET /api/v1/sync/pull, no cursor),
push (POST /api/v1/sync/push of BENCH_PUSH_OPS operations, half creates, half updates).
--gzip sends `Accept-Encoding: gzip` with every request.
Users and tokens as bench/seed.sh made them (BENCH_TOKEN_SALT, BENCH_TODOS, ...). Prints a
one-line summary; exits non-zero if any response is not 200.
"""

import argparse
import gzip
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import uuid

BEGIN_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT, STDERR = 1, 3, 4, 5, 6, 7


def record(kind, request_id, content=b""):
    out = b""
    # Content longer than 65535 bytes is split into several records.
    chunks = [content[i:i + 65535] for i in range(0, len(content), 65535)] or [b""]
    for chunk in chunks:
        padding = (8 - len(chunk) % 8) % 8
        out += struct.pack(">BBHHBB", 1, kind, request_id, len(chunk), padding, 0) + chunk + b"\0" * padding
    return out


def name_value(name, value):
    def length(n):
        return struct.pack(">B", n) if n < 128 else struct.pack(">I", n | 0x80000000)
    name, value = name.encode(), value.encode()
    return length(len(name)) + length(len(value)) + name + value


def fcgi_request(sock_path, method, uri, headers=None, body=b""):
    path, _, query = uri.partition("?")
    params = {
        "REQUEST_METHOD": method, "REQUEST_URI": uri, "DOCUMENT_URI": path, "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1", "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)) if body else "", "CONTENT_TYPE": "application/json" if body else "",
    }
    for name, value in (headers or {}).items():
        params["HTTP_" + name.upper().replace("-", "_")] = value
    payload = b"".join(name_value(k, v) for k, v in params.items())
    message = (record(BEGIN_REQUEST, 1, struct.pack(">HB5x", 1, 0)) + record(PARAMS, 1, payload)
               + record(PARAMS, 1) + (record(STDIN, 1, body) if body else b"") + record(STDIN, 1))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(300)
    s.connect(sock_path)
    s.sendall(message)
    data = bytearray()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    out, pos = bytearray(), 0
    while pos + 8 <= len(data):
        _, kind, _, length, padding, _ = struct.unpack(">BBHHBB", data[pos:pos + 8])
        if kind == STDOUT:
            out += data[pos + 8:pos + 8 + length]
        pos += 8 + length + padding
    head, _, response_body = bytes(out).partition(b"\r\n\r\n")
    status = 200
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"status:"):
            status = int(line.split()[1])
    return status, response_body


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("kind", choices=["fastcgi", "db", "date", "month", "pull", "firstpull", "push"])
    parser.add_argument("count", type=int)
    parser.add_argument("--user", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    salt = os.environ.get("BENCH_TOKEN_SALT", "s0")
    todos = int(os.environ.get("BENCH_TODOS", "5000"))
    days = int(os.environ.get("BENCH_DAYS", "365"))
    push_ops = int(os.environ.get("BENCH_PUSH_OPS", "100"))
    start = time.strptime(os.environ.get("BENCH_START_DATE", "2025-01-01"), "%Y-%m-%d")

    def date_plus(n):
        t = time.mktime((start.tm_year, start.tm_mon, start.tm_mday + n, 12, 0, 0, 0, 0, -1))
        return time.strftime("%Y-%m-%d", time.localtime(t))

    auth = {"Authorization": f"Bearer bench-{salt}-{args.user}"}
    if args.gzip:
        auth["Accept-Encoding"] = "gzip"
    cursor = None
    if args.kind == "pull":
        status, body = fcgi_request(args.socket, "GET", "/api/v1/sync/pull", auth)
        if status != 200:
            sys.exit(f"first page: HTTP {status} {body[:200]!r}")
        if body[:2] == b"\x1f\x8b":  # --gzip: the responder compressed the first page too
            body = gzip.decompress(body)
        cursor = json.loads(body)["cursor"]
    rng = random.Random(7)
    lock = threading.Lock()
    failures, done = [], [0]

    def one(i):
        if args.kind == "fastcgi":
            return fcgi_request(args.socket, "GET", "/__bench/fastcgi")
        if args.kind == "db":
            return fcgi_request(args.socket, "GET", "/__bench/db", auth)
        if args.kind == "date":
            return fcgi_request(args.socket, "GET", f"/api/v1/todos?date={date_plus(rng.randrange(days))}", auth)
        if args.kind == "month":
            return fcgi_request(args.socket, "GET", f"/api/v1/daily-stats?month={date_plus(rng.randrange(days))[:7]}", auth)
        if args.kind == "pull":
            return fcgi_request(args.socket, "GET", f"/api/v1/sync/pull?cursor={cursor}", auth)
        if args.kind == "firstpull":
            return fcgi_request(args.socket, "GET", "/api/v1/sync/pull", auth)
        ops = []
        for k in range(push_ops):
            if k % 2 == 0:
                ops.append({"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                            "data": {"title": f"Profiled {i}.{k}", "deadline": date_plus(rng.randrange(days)),
                                     "difficulty": 2, "estimatedTime": 30}})
            else:
                ops.append({"opId": str(uuid.uuid4()), "entity": "todo", "action": "update",
                            "id": (args.user - 1) * todos + rng.randrange(1, todos + 1),
                            "data": {"isCompleted": rng.random() < 0.5, "title": f"Profiled edit {i}.{k}"}})
        body = json.dumps({"deviceId": "profile", "conflictPolicy": "merge", "operations": ops}).encode()
        return fcgi_request(args.socket, "POST", "/api/v1/sync/push", dict(auth, **{"Content-Type": "application/json"}), body)

    def worker(indexes):
        for i in indexes:
            status, body = one(i)
            with lock:
                done[0] += 1
                if status != 200:
                    failures.append(f"HTTP {status}: {body[:200]!r}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(range(c, args.count, args.concurrency),))
               for c in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    print(f"{args.kind}: {done[0]} requests in {elapsed:.2f} s, {len(failures)} failures"
          + (f" (first: {failures[0]})" if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
