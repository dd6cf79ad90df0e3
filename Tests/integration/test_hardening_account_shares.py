"""Issue 34, item 7b: per-account shares of the snapshot build slots and the export slot.

Each responder process builds `TODOSYNC_SNAPSHOT_MAX_BUILDS` (2) snapshot files and runs one
account export at once. Before, whoever asked first took them: two accounts rebuilding their
snapshots in a loop denied snapshots to everyone (503 on 80 of 121 requests), and one account
exporting back to back held the export slot (429 on 57 of 59). Now each account holds at most one
of each per process (`HashSlots.perClientLimit`: its next request is refused at once), and another
account's request waits in a short fair queue for the next free slot (the account that used them
least lately first) instead of being refused. Through the test stack (2 responders behind nginx),
with real concurrency: flooders in threads, a bystander measuring what it gets.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import threading
import time

import requests

import synclib
import tsapi

SECONDS = 15


def hammer(stop: threading.Event, token: str, path: str, write: bool, counts: collections.Counter) -> None:
    """Until `stop`: (a write, so the next snapshot is a new build, then) GET `path`."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    while not stop.is_set():
        if write:
            session.post(tsapi.BASE_URL + "/api/v1/todos", json={"title": "again", "deadline": "2031-07-01"}, timeout=30)
        r = session.get(tsapi.BASE_URL + "/api/v1" + path, timeout=60)
        counts[r.status_code] += 1


def bystander_run(stop: threading.Event, api: tsapi.Api, path: str, write: bool) -> tuple[collections.Counter, list[float]]:
    counts, waits = collections.Counter(), []
    while not stop.is_set():
        if write:
            api.create_todo(title="mine", deadline="2031-07-02")
        started = time.monotonic()
        r = api.get(path, timeout=60)
        waits.append(time.monotonic() - started)
        counts[r.status_code] += 1
        time.sleep(0.1)
    return counts, waits


def run(path: str, flooders: list[tsapi.Api], threads: int, write: bool, bystander: tsapi.Api):
    stop = threading.Event()
    flood = collections.Counter()
    with cf.ThreadPoolExecutor(len(flooders) * threads + 1) as pool:
        futures = [pool.submit(hammer, stop, f.token, path, write, flood) for f in flooders for _ in range(threads)]
        time.sleep(1)  # the flood is on
        mine = pool.submit(bystander_run, stop, bystander, path, write)
        time.sleep(SECONDS)
        stop.set()
        for f in futures:
            f.result()
        counts, waits = mine.result()
    waits.sort()
    print(f"{path}: bystander {dict(counts)}, waits median {waits[len(waits) // 2] * 1000:.0f} ms, "
          f"max {waits[-1] * 1000:.0f} ms; flooders {dict(flood)}")
    return counts, flood


def test_two_accounts_rebuilding_snapshots_in_a_loop_leave_builds_for_others():
    flooders = [tsapi.new_user() for _ in range(2)]
    bystander = tsapi.new_user()
    for api in flooders + [bystander]:
        synclib.push(api, [synclib.create_todo_op(f"t{i}", deadline="2031-07-03") for i in range(200)])
    # Each flooder build is held open 700 ms (test hook): the slots are busy all the time.
    counts, flood = run("/sync/snapshot?__test_hold_ms=700", flooders, 4, True, bystander)
    total = sum(counts.values())
    assert total >= 8, counts
    assert counts[200] >= total * 0.95, f"the bystander's snapshots: {dict(counts)}"
    # The flooders still build (one file at a time per process each); the rest of theirs is 503.
    assert flood[200] > 0, flood


def test_one_account_exporting_back_to_back_leaves_the_export_slot_for_others():
    flooder = tsapi.new_user()
    for batch in range(8):
        synclib.push(flooder, [synclib.create_todo_op(f"todo {batch}-{i} " + "x" * 150, deadline="2031-07-04",
                                                      notes="n" * 1000) for i in range(500)])
    bystander = tsapi.new_user()
    bystander.create_todo(title="mine")
    started = time.monotonic()
    assert flooder.get("/account/export", timeout=60).status_code == 200
    print(f"one export of the flooder: {(time.monotonic() - started) * 1000:.0f} ms")
    counts, flood = run("/account/export", [flooder], 6, False, bystander)
    total = sum(counts.values())
    assert total >= 8, counts
    assert counts[200] >= total * 0.95, f"the bystander's exports: {dict(counts)}"
    assert flood[200] > 0, flood
