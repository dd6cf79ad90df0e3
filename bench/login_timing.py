#!/usr/bin/env python3
"""Failed logins of known and unknown emails right after a restart: a measurement that prints
numbers, not a test (round 3, item 8). Timing must not tell which emails have accounts.

For each round: registers a new account, restarts the stack's responders (`scripts/stack.sh down`
and `up` with the caller's environment), then alternates 8 wrong-password logins of the known email
with 8 of unknown ones (fewer than the lockout's 10) and prints both medians. Loopback only.

  TODOSYNC_STATE_DIR=... TODOSYNC_HTTP_PORT=... .state/venv/bin/python bench/login_timing.py --base http://127.0.0.1:18280
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import requests

STACK = Path(__file__).resolve().parents[1] / "scripts" / "stack.sh"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:18280")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    api = f"{args.base}/api/v1"

    def attempt(email: str) -> float:
        started = time.monotonic()
        r = requests.post(f"{api}/auth/login", json={"email": email, "password": "wrong-password-x"}, timeout=30)
        assert r.status_code == 401, r.status_code
        return (time.monotonic() - started) * 1000

    for round_ in range(min(args.rounds, 10)):
        known = f"known-{uuid.uuid4().hex[:8]}@example.test"
        assert requests.post(f"{api}/auth/register", json={"email": known, "password": "right-password-1"},
                             timeout=30).status_code == 201
        subprocess.run([STACK, "down"], capture_output=True, check=True)
        subprocess.run([STACK, "up"], capture_output=True, check=True)
        known_ms, unknown_ms = [], []
        for _ in range(8):
            known_ms.append(attempt(known))
            unknown_ms.append(attempt(f"nobody-{uuid.uuid4().hex[:8]}@example.test"))
            time.sleep(0.2)
        print(f"round {round_ + 1}: median known {statistics.median(known_ms):.0f} ms, unknown "
              f"{statistics.median(unknown_ms):.0f} ms; known {[round(x) for x in known_ms]}, "
              f"unknown {[round(x) for x in unknown_ms]}")


if __name__ == "__main__":
    main()
