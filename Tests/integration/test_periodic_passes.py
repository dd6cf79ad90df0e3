"""Issue 39, item 2: the stack the README starts runs the periodic passes production's systemd
timers run (todosync-store-days.timer every minute, todosync-purge.timer hourly), so a measurement
on it is the shipped one. Before: no store-days pass ran, and dates marked by a large push read
their list rows on every request until someone ran `stack.sh store-days` by hand (GET todos by
date at 1.39x the PHP peer instead of 2.08x).

Each pass is a runit service (scripts/stack.sh, "periodic passes"): ./run is one pass, then
`exec sleep SECONDS`; when the sleep ends runsv starts ./run again. This test sees each pass's
own output in its log and each service asleep for its interval.
"""

from __future__ import annotations

import os
import re
import time

import tsapi


def read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_the_stack_runs_store_days_and_purge_on_their_intervals(stack_cmd):
    env = tsapi.stack_env()
    intervals = {"store-days": env["TODOSYNC_STORE_DAYS_SECONDS"], "purge": env["TODOSYNC_PURGE_SECONDS"]}
    assert intervals == {"store-days": "60", "purge": "3600"}, intervals
    state = os.environ.get("TODOSYNC_TEST_STATE_DIR") or env["TODOSYNC_STATE_DIR"]
    logs = {name: os.path.join(state, "log", f"periodic-{name}.log") for name in intervals}
    # The passes' own reports (what `todosync store-days` / `todosync purge` print).
    reports = {"store-days": r"store-days: \d+ dates rebuilt, \d+ skipped, \d+ not stored",
               "purge": r"\"msg\":\"purged\""}
    deadline = time.monotonic() + 90
    while True:
        missing = [name for name, pattern in reports.items() if not re.search(pattern, read(logs[name]))]
        if not missing:
            break
        assert time.monotonic() < deadline, {name: read(logs[name])[-1500:] for name in missing}
        time.sleep(0.5)
    # Then each sleeps its interval under its runsv, which starts the next pass when it ends.
    def command(name: str) -> str:  # what runsv runs for the service now
        pid = read(os.path.join(state, "sv", f"periodic-{name}", "supervise", "pid")).strip()
        return read(f"/proc/{pid}/cmdline").replace("\0", " ").strip() if pid else ""

    deadline = time.monotonic() + 30
    while True:
        now = {name: command(name) for name in intervals}
        if all(now[name] == f"sleep {seconds}" for name, seconds in intervals.items()):
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.5)
    status = tsapi.stack("status")
    for name in intervals:
        assert re.search(rf"periodic-{name}\s+running", status), status
