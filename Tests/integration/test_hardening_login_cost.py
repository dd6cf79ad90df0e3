"""Hardening, item 5: logins cannot take every worker and core.

A login costs an Argon2 hash (~20 ms of a core). One address doing 16 concurrent logins got no
rate-limit answer and made every other user 50x slower. Now each responder runs at most
TODOSYNC_HASH_CONCURRENCY hashes at once (default: half the cores) and turns the excess away at
once with 429 + Retry-After, and the default per-address limit on /auth/ fits the hash cost.
(Figures before/after: scripts/bystander-latency.py login.)
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import time
import uuid

import requests

import tsapi
from tsapi import assert_error, short


def test_concurrent_logins_beyond_the_hash_slots_get_a_quick_429():
    barrier_start = time.monotonic() + 0.5

    def one(_):
        time.sleep(max(0.0, barrier_start - time.monotonic()))
        t0 = time.monotonic()
        r = requests.post(f"{tsapi.API_URL}/auth/login", timeout=60,
                          json={"email": f"g-{uuid.uuid4().hex[:10]}@example.test", "password": "wrong-password"})
        return r, time.monotonic() - t0

    with cf.ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(one, range(24)))
    statuses = sorted(r.status_code for r, _ in answers)
    assert set(statuses) <= {401, 429}, statuses
    busy = [(r, t) for r, t in answers if r.status_code == 429]
    assert busy, f"24 simultaneous logins all waited for a hash: {statuses}"
    for r, _ in busy:
        assert_error(r, 429, "rate_limited")
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
    checked = [t for r, t in answers if r.status_code == 401]
    # Turned away without waiting for the hashes in progress: faster than the slowest check.
    assert min(t for _, t in busy) < max(checked), (busy, checked)
    time.sleep(2)


def test_default_per_address_auth_limit_fits_the_hash_cost():
    stack_sh = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "stack.sh")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TODOSYNC_")}
    env["TODOSYNC_CONFIG"] = "/dev/null"
    out = subprocess.run([stack_sh, "env"], env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    rate, burst = int(values["TODOSYNC_AUTH_RATE"]), int(values["TODOSYNC_AUTH_BURST"])
    # ~50 hashes/s on a 2-core box: one address may use at most a fifth of that.
    assert 1 <= rate <= 10 and burst <= 2 * rate + 10, values
    assert 1 <= int(values["TODOSYNC_HASH_CONCURRENCY"]) <= max(1, os.cpu_count() or 1), values
