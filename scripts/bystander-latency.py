#!/usr/bin/env python3
"""Bystander latency under an attack: a measurement that prints numbers, not a test.

One "attacker" runs a scenario for --seconds while a bystander (another user) sends GET /todos
one after the other; prints the bystander's latency (median, p95, max) and the attacker's
answers by status. Run it against a running stack (scripts/stack.sh up), e.g.

  .state/venv/bin/python scripts/bystander-latency.py --base http://127.0.0.1:38180 login
  .state/venv/bin/python scripts/bystander-latency.py --fcgi-socket <sock dir>/fcgi-1.sock stall
  .state/venv/bin/python scripts/bystander-latency.py push

Scenarios (from the hostile review, issue 12):
  baseline  no attack
  login     one address, 16 concurrent logins (unknown emails: each costs a full Argon2 hash)
  stall     N connections to the FastCGI socket, each sends one 16-byte record, then nothing
  push      12 concurrent 500-operation pushes from one account
  slowpost  (issue 19, item 4) --connections sockets from --attacker-address (127.0.0.2), each a POST
            header with Content-Length: 200, then one body byte every --interval (7) s; the
            bystander (127.0.0.1) opens a new connection for each GET /healthz (5 s timeout), so
            it needs a free connection slot in nginx. Loopback only, at most 20,000 sockets and
            120 s. E.g. .state/venv/bin/python scripts/bystander-latency.py --base
            http://127.0.0.1:38080 --seconds 40 slowpost
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import ipaddress
import json
import resource
import socket
import urllib.parse
import statistics
import threading
import time
import uuid

import requests


def register(base: str) -> str:
    for _ in range(50):
        r = requests.post(f"{base}/api/v1/auth/register", timeout=30,
                          json={"email": f"by-{uuid.uuid4().hex[:12]}@example.test", "password": "pw-" + uuid.uuid4().hex})
        if r.status_code == 201:
            return r.json()["token"]
        time.sleep(1)
    raise SystemExit(f"could not register: {r.status_code} {r.text[:200]}")


def bystander(base: str, token: str, stop: threading.Event, out: list[float], errors: collections.Counter):
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            r = session.get(f"{base}/api/v1/todos?date=2030-01-01", headers=headers, timeout=60)
            out.append((time.monotonic() - t0) * 1000)
            if r.status_code != 200:
                errors[r.status_code] += 1
        except requests.RequestException as exc:
            errors[type(exc).__name__] += 1
        time.sleep(0.02)


def attack_login(base: str, stop: threading.Event, statuses: collections.Counter, lock: threading.Lock):
    session = requests.Session()
    while not stop.is_set():
        body = {"email": f"guess-{uuid.uuid4().hex[:12]}@example.test", "password": "wrong-password"}
        try:
            r = session.post(f"{base}/api/v1/auth/login", json=body, timeout=60)
            key = r.status_code
        except requests.RequestException as exc:
            key = type(exc).__name__
        with lock:
            statuses[key] += 1


def attack_push(base: str, token: str, stop: threading.Event, statuses: collections.Counter, lock: threading.Lock):
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set():
        ops = [{"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                "data": {"title": f"t{i}", "deadline": "2031-01-01"}} for i in range(500)]
        try:
            r = session.post(f"{base}/api/v1/sync/push", json={"deviceId": "flood", "operations": ops},
                             headers=headers, timeout=120)
            key = r.status_code
        except requests.RequestException as exc:
            key = type(exc).__name__
        with lock:
            statuses[key] += 1


def stall_connections(path: str, count: int) -> list[socket.socket]:
    # FCGI_BEGIN_REQUEST (type 1), request id 1, content length 8: the header alone is 8 bytes,
    # plus the 8-byte body: 16 bytes, then nothing more (no params, no stdin).
    record = bytes([1, 1, 0, 1, 0, 8, 0, 0]) + bytes([0, 1, 1, 0, 0, 0, 0, 0])
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(record)
        held.append(s)
    return held


def slowpost_open(host: str, port: int, source: str, count: int, content_length: int) -> list[socket.socket]:
    """Opens `count` connections from `source`, each sending a complete POST header and no body."""
    head = (f"POST /api/v1/sync/push HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {content_length}\r\n\r\n").encode()
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.bind((source, 0))
            s.connect((host, port))
            s.sendall(head)
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        held.append(s)
    return held


def slowpost_trickle(held: list[socket.socket], interval: float, stop: threading.Event, closed: list[float],
                     answers: collections.Counter, t0: float) -> None:
    """One body byte per open socket every `interval` seconds; notes when the server closes one."""
    open_socks = set(held)
    while open_socks and not stop.wait(interval):
        for s in list(open_socks):
            gone = False
            try:
                try:
                    data = s.recv(4096)  # non-blocking
                    if data:
                        answers[data.split(b" ", 2)[1].decode(errors="replace") if data.startswith(b"HTTP/") else "?"] += 1
                    gone = not data
                except BlockingIOError:
                    pass
                if not gone:
                    s.send(b"x")
            except OSError:
                gone = True
            if gone:
                closed.append(time.monotonic() - t0)
                open_socks.discard(s)


def slowpost_bystander(host: str, port: int, stop: threading.Event, results: list[tuple[float, float, object]],
                       t0: float) -> None:
    """A new connection for each GET /healthz: (time since start, latency, status or error)."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            r = requests.get(f"http://{host}:{port}/healthz", timeout=5, headers={"Connection": "close"})
            outcome: object = r.status_code
        except requests.RequestException as exc:
            outcome = type(exc).__name__
        results.append((started - t0, time.monotonic() - started, outcome))
        stop.wait(0.5)


def run_slowpost(args) -> None:
    url = urllib.parse.urlsplit(args.base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    if not ipaddress.ip_address(host).is_loopback or not ipaddress.ip_address(args.attacker_address).is_loopback:
        raise SystemExit("slowpost runs against loopback only")
    count = min(args.connections, 20_000)
    seconds = min(args.seconds, 120)
    want = count + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    t0 = time.monotonic()
    held = slowpost_open(host, port, args.attacker_address, count, args.content_length)
    opened_in = time.monotonic() - t0
    stop = threading.Event()
    closed: list[float] = []
    answers: collections.Counter = collections.Counter()
    results: list[tuple[float, float, object]] = []
    trickler = threading.Thread(target=slowpost_trickle, args=(held, args.interval, stop, closed, answers, t0))
    watcher = threading.Thread(target=slowpost_bystander, args=(host, port, stop, results, t0))
    trickler.start()
    watcher.start()
    time.sleep(seconds)
    stop.set()
    watcher.join()
    trickler.join()
    for s in held:
        s.close()
    ok = [r for r in results if r[2] == 200]
    times = [t for t, _, _ in ok]
    points = [opened_in] + times + [opened_in + seconds]
    longest_gap = max(b - a for a, b in zip(points, points[1:]))
    print(f"scenario=slowpost connections={count} from={args.attacker_address} interval={args.interval}s "
          f"content_length={args.content_length} seconds={seconds}")
    print(f"attack sockets connected: {len(held)} of {count} in {opened_in:.1f} s; closed by the server during "
          f"the run: {len(closed)}" + (f" (first after {min(closed):.1f} s, last after {max(closed):.1f} s)" if closed else ""))
    if answers:
        print(f"answers the attack sockets received: {dict(answers)}")
    print(f"bystander (new connection per GET /healthz): {len(ok)} of {len(results)} answered 200; "
          f"longest stretch without an answer: {longest_gap:.1f} s")
    print(summary("bystander latency (answered)", [lat * 1000 for _, lat, _ in ok]))
    others = collections.Counter(str(o) for _, _, o in results if o != 200)
    if others:
        print(f"bystander failures: {dict(others)}")


def summary(name: str, samples: list[float]) -> str:
    if not samples:
        return f"{name}: no samples"
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (f"{name}: n={len(samples)} median={statistics.median(samples):.1f} ms "
            f"p95={p95:.1f} ms max={ordered[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["baseline", "login", "stall", "push", "slowpost"])
    parser.add_argument("--base", default="http://127.0.0.1:38180")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--concurrency", type=int, default=None, help="attackers (login 16, push 12, stall 8)")
    parser.add_argument("--fcgi-socket", help="the responder's FastCGI socket (stall)")
    parser.add_argument("--connections", type=int, default=8200, help="slowpost: attack sockets (at most 20,000)")
    parser.add_argument("--interval", type=float, default=7, help="slowpost: seconds between body bytes")
    parser.add_argument("--content-length", type=int, default=200, help="slowpost: declared body size")
    parser.add_argument("--attacker-address", default="127.0.0.2", help="slowpost: loopback source address")
    args = parser.parse_args()
    if args.scenario == "slowpost":
        run_slowpost(args)
        return
    n = args.concurrency or {"login": 16, "push": 12, "stall": 8, "baseline": 0}[args.scenario]

    bystander_token = register(args.base)
    attacker_token = register(args.base) if args.scenario == "push" else None
    stop = threading.Event()
    latencies: list[float] = []
    errors: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    lock = threading.Lock()
    held: list[socket.socket] = []
    threads = []
    if args.scenario == "login":
        threads = [threading.Thread(target=attack_login, args=(args.base, stop, statuses, lock)) for _ in range(n)]
    elif args.scenario == "push":
        threads = [threading.Thread(target=attack_push, args=(args.base, attacker_token, stop, statuses, lock))
                   for _ in range(n)]
    elif args.scenario == "stall":
        if not args.fcgi_socket:
            raise SystemExit("stall needs --fcgi-socket")
        held = stall_connections(args.fcgi_socket, n)
    for t in threads:
        t.start()
    time.sleep(0.5)  # let the attack get going
    watcher = threading.Thread(target=bystander, args=(args.base, bystander_token, stop, latencies, errors))
    watcher.start()
    time.sleep(args.seconds)
    stop.set()
    watcher.join()
    for t in threads:
        t.join()
    closed_by_server = 0
    for s in held:
        s.setblocking(False)
        try:
            closed_by_server += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed_by_server += 1
        s.close()
    print(f"scenario={args.scenario} attackers={n} seconds={args.seconds}")
    print(summary("bystander GET /todos", latencies))
    if errors:
        print(f"bystander non-200: {dict(errors)}")
    if statuses:
        print(f"attacker answers: {dict(sorted(statuses.items(), key=str))}")
    if held:
        print(f"stalled connections closed by the responder: {closed_by_server}/{len(held)}")


if __name__ == "__main__":
    main()
