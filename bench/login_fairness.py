#!/usr/bin/env python3
"""Logins under a login flood: a measurement that prints numbers, not a test (round 3, item 8).

Ten attacker addresses (127.0.0.2-11) each send 5 logins/s of unknown emails (each costs a full
Argon2 hash) for --seconds, while one honest user on 127.0.0.1 logs in with the right password
every 0.5 s. Prints the honest logins' outcomes and latency, and the attackers' answers.
Loopback only, bounded in time. Run against a running stack, e.g.

  .state/venv/bin/python bench/login_fairness.py --base http://127.0.0.1:18080
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import statistics
import threading
import time
import urllib.parse
import uuid


def post(base: str, path: str, body: dict, source: str) -> tuple[int, float]:
    url = urllib.parse.urlsplit(base)
    started = time.monotonic()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        status = conn.getresponse().status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:18080")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--addresses", type=int, default=10)
    parser.add_argument("--rate", type=float, default=5, help="logins per second per attacker address")
    args = parser.parse_args()

    email, password = f"honest-{uuid.uuid4().hex[:10]}@example.test", "pw-" + uuid.uuid4().hex
    status, _ = post(args.base, "/api/v1/auth/register", {"email": email, "password": password}, "127.0.0.1")
    assert status == 201, status

    stop = time.monotonic() + args.seconds
    attacker_answers: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def attacker(source: str) -> None:
        while time.monotonic() < stop:
            tick = time.monotonic()
            threading.Thread(target=lambda: record(post(args.base, "/api/v1/auth/login", {
                "email": f"nobody-{uuid.uuid4().hex[:10]}@example.test", "password": "wrong-password"}, source))).start()
            time.sleep(max(0.0, 1 / args.rate - (time.monotonic() - tick)))

    def record(answer: tuple[int, float]) -> None:
        with lock:
            attacker_answers[answer[0]] += 1

    threads = [threading.Thread(target=attacker, args=(f"127.0.0.{2 + i}",)) for i in range(args.addresses)]
    for thread in threads:
        thread.start()
    time.sleep(1)  # let the flood build up
    honest: list[tuple[int, float]] = []
    while time.monotonic() < stop:
        honest.append(post(args.base, "/api/v1/auth/login", {"email": email, "password": password}, "127.0.0.1"))
        time.sleep(0.5)
    for thread in threads:
        thread.join()
    time.sleep(2)
    ok = [t for s, t in honest if s == 200]
    latencies = sorted(t * 1000 for _, t in honest)
    print(f"honest logins: {len(ok)}/{len(honest)} answered 200; "
          f"statuses {dict(collections.Counter(s for s, _ in honest))}; "
          f"latency ms p50 {statistics.median(latencies):.0f}, max {latencies[-1]:.0f}")
    print(f"attacker answers ({args.addresses} addresses x {args.rate}/s): {dict(attacker_answers)}")


if __name__ == "__main__":
    main()
