#!/usr/bin/env python3
"""Bystander latency under an attack: a measurement that prints numbers, not a test.

One "attacker" runs a scenario for --seconds while a bystander (another user) sends GET /todos
one after the other; prints the bystander's latency (median, p95, max) and the attacker's
answers by status. Run it against a running stack (scripts/stack.sh up), e.g.

  .state/venv/bin/python scripts/bystander-latency.py --base http://127.0.0.1:38180 login
  .state/venv/bin/python scripts/bystander-latency.py --fcgi-socket <sock dir>/fcgi-1.sock stall
  .state/venv/bin/python scripts/bystander-latency.py push

Scenarios (from the hostile reviews, issues 12 and 19):
  baseline  no attack
  login     one address, 16 concurrent logins (unknown emails: each costs a full Argon2 hash)
  stall     N connections to the FastCGI socket, each sends one 16-byte record, then nothing
  push      12 concurrent 500-operation pushes from one account
  account   one account's flood (issue 19, item 3): 16 connections sending 500-operation pushes
            with 20 tokens of the account (20 logins) and odd spellings of `Authorization`
            (case, extra spaces, a header padded past 255 bytes), no back-off; with
            --hold-lock-ms N one more connection keeps the account's row lock held (test hooks)
  yearlist  one account's heavy reads (issue 34, item 6): an account with --todos todos spread over
            a year (seeded once per run by pushes) and --tokens tokens; 16 connections of
            `GET /todos?from=2031-01-01&to=2031-12-31` (gzip accepted) with the tokens in turn, no
            back-off

--compare runs a scenario and `baseline` interleaved (--runs each, default 3) and prints each
run's bystander p99 and the median of each, e.g. (the limit is met when the attack's median p99
is within 2x + 20 ms of the baseline's):

  .state/venv/bin/python scripts/bystander-latency.py --base http://127.0.0.1:38180 --compare account

Loopback only (--base must be 127.0.0.1 or localhost), bounded by --seconds per run.
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
import multiprocessing
import os
import resource
import socket
import urllib.parse
import statistics
import threading
import time
import uuid
from urllib.parse import urlsplit

import requests


def register(base: str, credentials: dict | None = None) -> str:
    body = credentials if credentials is not None else {
        "email": f"by-{uuid.uuid4().hex[:12]}@example.test", "password": "pw-" + uuid.uuid4().hex}
    for _ in range(50):
        r = requests.post(f"{base}/api/v1/auth/register", timeout=30, json=body)
        if r.status_code == 201:
            return r.json()["token"]
        time.sleep(1)
    raise SystemExit(f"could not register: {r.status_code} {r.text[:200]}")


def account_tokens(base: str, count: int) -> list[str]:
    """A new account and `count` tokens of it: one from register, the rest from logins (the
    per-address auth limit applies: a 429 waits its Retry-After)."""
    credentials = {"email": f"flood-{uuid.uuid4().hex[:12]}@example.test", "password": "pw-" + uuid.uuid4().hex}
    tokens = [register(base, credentials)]
    while len(tokens) < count:
        r = requests.post(f"{base}/api/v1/auth/login", json=credentials, timeout=30)
        if r.status_code == 200:
            tokens.append(r.json()["token"])
        elif r.status_code == 429:
            time.sleep(float(r.headers.get("Retry-After", "1")))
        else:
            raise SystemExit(f"login failed: {r.status_code} {r.text[:200]}")
    return tokens


def odd_spellings(token: str) -> list[str]:
    """`Authorization` values the responder accepts for one token (issue 19: each spelling was a
    key of its own for nginx's per-token limit, and a header over 255 bytes skipped it)."""
    return [f"Bearer {token}", f"bearer {token}", f"BEARER {token}", f"Bearer   {token}",
            f"bEaReR {token}", "Bearer " + " " * 300 + token]


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


# A 500-operation push whose opIds and clientIds all carry one placeholder, so each request's
# body is a fresh one for the price of a replace (json.dumps of 500 new UUIDs per request made the
# attacking client, not the server, the box's busiest process).
PUSH_TEMPLATE = json.dumps({"deviceId": "flood", "operations": [
    {"opId": f"RANDOMPLACEHOLD-{i}", "entity": "todo", "action": "create",
     "clientId": f"RANDOMPL-ACEH-4OLD-8000-{i:012x}", "data": {"title": f"t{i}", "deadline": "2031-01-01"}}
    for i in range(500)]}).encode()


def push_body_bytes() -> bytes:
    fresh = uuid.uuid4().hex
    return (PUSH_TEMPLATE.replace(b"RANDOMPLACEHOLD", fresh[:15].encode())
            .replace(b"RANDOMPL-ACEH-4OLD", f"{fresh[:8]}-{fresh[8:12]}-4{fresh[13:16]}".encode()))


def attack_account(base: str, headers: list[str], offset: int, stop: threading.Event,
                   statuses: collections.Counter, lock: threading.Lock):
    """One connection of the account flood: every request with the next token and spelling."""
    session = requests.Session()
    i = offset
    while not stop.is_set():
        authorization = headers[i % len(headers)]
        i += 7
        try:
            r = session.post(f"{base}/api/v1/sync/push", data=push_body_bytes(), timeout=120,
                             headers={"Authorization": authorization, "Content-Type": "application/json"})
            key = r.status_code
        except requests.RequestException as exc:
            key = type(exc).__name__
        with lock:
            statuses[key] += 1


YEAR_FROM, YEAR_TO = "2031-01-01", "2031-12-31"


def seed_year(base: str, token: str, todos: int) -> None:
    """`todos` todos of the account spread evenly over YEAR_FROM..YEAR_TO, by 500-operation pushes."""
    made = 0
    while made < todos:
        n = min(500, todos - made)
        ops = [{"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                "data": {"title": f"year todo {made + i} " + "x" * 40,
                         "deadline": time.strftime("%Y-%m-%d", time.gmtime(1924992000 + 86400 * ((made + i) % 365))),
                         "isImportant": (made + i) % 3 == 0, "difficulty": 1 + (made + i) % 5, "estimatedTime": 30}}
               for i in range(n)]
        r = requests.post(f"{base}/api/v1/sync/push", json={"deviceId": "seed", "operations": ops},
                          headers={"Authorization": f"Bearer {token}"}, timeout=120)
        if r.status_code == 429:
            time.sleep(float(r.headers.get("Retry-After", "1")))
            continue
        if r.status_code != 200:
            raise SystemExit(f"seeding failed: {r.status_code} {r.text[:200]}")
        made += n


def attack_yearlist(base: str, tokens: list[str], offset: int, stop: threading.Event,
                    statuses: collections.Counter, lock: threading.Lock):
    """One connection of the heavy-read flood: year-long lists, every request with the next token."""
    session = requests.Session()
    i = offset
    while not stop.is_set():
        token = tokens[i % len(tokens)]
        i += 7
        try:
            r = session.get(f"{base}/api/v1/todos?from={YEAR_FROM}&to={YEAR_TO}", timeout=120,
                            headers={"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip"})
            key = r.status_code
        except requests.RequestException as exc:
            key = type(exc).__name__
        with lock:
            statuses[key] += 1


def hold_row_lock(base: str, token: str, hold_ms: int, stop: threading.Event, statuses: collections.Counter,
                  lock: threading.Lock):
    """Keeps the account's row lock held (test hook `POST /api/v1/__test/slow-todo?hold_ms=N`)."""
    session = requests.Session()
    while not stop.is_set():
        try:
            r = session.post(f"{base}/api/v1/__test/slow-todo?hold_ms={hold_ms}", timeout=120,
                             json={"title": "held", "deadline": "2031-01-02"},
                             headers={"Authorization": f"Bearer {token}"})
            key = f"hold {r.status_code}"
        except requests.RequestException as exc:
            key = f"hold {type(exc).__name__}"
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


def attack(scenario: str, args, n: int, attacker_token: str | None, flood_tokens: list[str],
           stop, results) -> None:
    """The attackers of `scenario` (in a child process) until `stop`; their answers to `results`.
    At nice 19: on loopback the attacking client's own CPU is taken from the server and the
    bystander, which a remote attacker's is not (the server's work for it runs at normal priority)."""
    os.nice(19)
    statuses: collections.Counter = collections.Counter()
    lock = threading.Lock()
    done = threading.Event()
    if scenario == "login":
        threads = [threading.Thread(target=attack_login, args=(args.base, done, statuses, lock)) for _ in range(n)]
    elif scenario == "push":
        threads = [threading.Thread(target=attack_push, args=(args.base, attacker_token, done, statuses, lock))
                   for _ in range(n)]
    elif scenario == "yearlist":
        threads = [threading.Thread(target=attack_yearlist, args=(args.base, flood_tokens, i, done, statuses, lock))
                   for i in range(n)]
    else:
        headers = [spelling for token in flood_tokens for spelling in odd_spellings(token)]
        threads = [threading.Thread(target=attack_account, args=(args.base, headers, i, done, statuses, lock))
                   for i in range(n)]
        if args.hold_lock_ms:
            threads.append(threading.Thread(target=hold_row_lock, args=(
                args.base, flood_tokens[0], args.hold_lock_ms, done, statuses, lock)))
    for t in threads:
        t.start()
    stop.wait()
    done.set()
    for t in threads:
        t.join()
    results.put(dict(statuses))


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]
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
    return (f"{name}: n={len(samples)} median={statistics.median(samples):.1f} ms "
            f"p95={percentile(ordered, 0.95):.1f} ms p99={percentile(ordered, 0.99):.1f} ms max={ordered[-1]:.1f} ms")


def run(args, scenario: str, bystander_token: str) -> float | None:
    """One run of `scenario` with the bystander watching; prints its summary; returns its p99."""
    n = args.concurrency or {"login": 16, "push": 12, "stall": 8, "account": 16, "yearlist": 16,
                             "baseline": 0}[scenario]
    attacker_token = register(args.base) if scenario == "push" else None
    if scenario == "yearlist":
        # One heavy account for every run of the process (seeding it is most of a run's time).
        if not getattr(args, "year_tokens", None):
            args.year_tokens = account_tokens(args.base, args.tokens)
            seed_year(args.base, args.year_tokens[0], args.todos)
        flood_tokens = args.year_tokens
    else:
        flood_tokens = account_tokens(args.base, args.tokens) if scenario == "account" else []
    stop = threading.Event()
    latencies: list[float] = []
    errors: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    held: list[socket.socket] = []
    attacker = None
    if scenario in ("login", "push", "account", "yearlist"):
        # The attackers run in a process of their own: in this one they would hold the GIL
        # the bystander's timing needs.
        attacker_stop, results = multiprocessing.Event(), multiprocessing.Queue()
        attacker = multiprocessing.Process(target=attack, args=(
            scenario, args, n, attacker_token, flood_tokens, attacker_stop, results))
        attacker.start()
    elif scenario == "stall":
        if not args.fcgi_socket:
            raise SystemExit("stall needs --fcgi-socket")
        held = stall_connections(args.fcgi_socket, n)
    time.sleep(0.5)  # let the attack get going
    watcher = threading.Thread(target=bystander, args=(args.base, bystander_token, stop, latencies, errors))
    watcher.start()
    time.sleep(args.seconds)
    stop.set()
    watcher.join()
    if attacker is not None:
        attacker_stop.set()
        statuses.update(results.get(timeout=180))
        attacker.join()
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
    print(f"scenario={scenario} attackers={n} seconds={args.seconds}"
          + (f" tokens={len(flood_tokens)}" if flood_tokens else ""), flush=True)
    print(summary("bystander GET /todos", latencies))
    if errors:
        print(f"bystander non-200: {dict(errors)}")
    if statuses:
        print(f"attacker answers: {dict(sorted(statuses.items(), key=str))}")
    if held:
        print(f"stalled connections closed by the responder: {closed_by_server}/{len(held)}")
    return percentile(sorted(latencies), 0.99) if latencies else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["baseline", "login", "stall", "push", "account", "yearlist", "slowpost"])
    parser.add_argument("--base", default="http://127.0.0.1:38180")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--concurrency", type=int, default=None, help="attackers (login 16, push 12, stall 8, account 16)")
    parser.add_argument("--fcgi-socket", help="the responder's FastCGI socket (stall)")
    parser.add_argument("--tokens", type=int, default=20, help="account: tokens of the flooding account (logins)")
    parser.add_argument("--todos", type=int, default=3650, help="yearlist: todos of the heavy account, over a year")
    parser.add_argument("--hold-lock-ms", type=int, default=0, help="account: also keep its row lock held (test hooks)")
    parser.add_argument("--compare", action="store_true", help="interleave with baseline runs; print median p99s")
    parser.add_argument("--runs", type=int, default=3, help="--compare: runs of each")
    parser.add_argument("--connections", type=int, default=8200, help="slowpost: attack sockets (at most 20,000)")
    parser.add_argument("--interval", type=float, default=7, help="slowpost: seconds between body bytes")
    parser.add_argument("--content-length", type=int, default=200, help="slowpost: declared body size")
    parser.add_argument("--attacker-address", default="127.0.0.2", help="slowpost: loopback source address")
    args = parser.parse_args()
    if args.scenario == "slowpost":
        run_slowpost(args)
        return
    host = urlsplit(args.base).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"{args.base}: loopback only (this script floods the server it points at)")
    if not 1 <= args.runs <= 10 or not 0 < args.seconds <= 120:
        raise SystemExit("--runs 1..10 and --seconds up to 120")

    bystander_token = register(args.base)
    if not args.compare:
        run(args, args.scenario, bystander_token)
        return
    p99s: dict[str, list[float]] = {"baseline": [], args.scenario: []}
    for i in range(args.runs):
        for scenario in ("baseline", args.scenario):
            print(f"--- run {i + 1} of {args.runs}: {scenario}")
            p99 = run(args, scenario, bystander_token)
            if p99 is not None:
                p99s[scenario].append(p99)
            time.sleep(2)  # let the last run's requests drain
    base, attack = (statistics.median(p99s[s]) if p99s[s] else float("nan") for s in ("baseline", args.scenario))
    bound = 2 * base + 20
    print(f"bystander p99 per run (ms): baseline {[round(x, 1) for x in p99s['baseline']]}, "
          f"{args.scenario} {[round(x, 1) for x in p99s[args.scenario]]}")
    print(f"median p99: baseline {base:.1f} ms, {args.scenario} {attack:.1f} ms; bound 2x + 20 ms = {bound:.1f} ms: "
          + ("within" if attack <= bound else "EXCEEDED"))


if __name__ == "__main__":
    main()
