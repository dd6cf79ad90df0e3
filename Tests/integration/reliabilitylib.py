"""Helpers for the reliability, hostile-input and isolation tests.

Black-box like the rest of the suite: HTTP through tsapi / synclib, stack control through
$TODOSYNC_TEST_STACK (`responder-pids`, `db-stop`, `db-start`), process facts from /proc.
Nothing here imports project code.

What lives here
  report(capsys, title, **figures)   print one line of figures, visible without `-s` too
  Counters                          thread-safe counters / maxima for load generators
  proc_alive / rss_kb               /proc facts about a responder process
  require_responders / wait_responders / PidGuard
                                    responder pids: how many, replaced after a kill, unchanged
  send_until_ok                     one request, resent unchanged until acknowledged; 503 (and,
                                    for a write, 504 outcome_unknown) are the only acceptable
                                    failures (a 500 or another status fails)
  pull_to_end                       a device's incremental pull that rides out 503s
  PushDevice                        a device that pushes batches of operations on its own records,
                                    retrying each batch with the same opIds, with a model of what
                                    the server must hold afterwards
  check_user_against_devices        exactly-once / nothing-lost / no-duplicate verification
  seed_user / Baseline              a user with data and a proof that none of it changed
  check_reply                       a hostile request's answer: never 5xx, errors in contract shape
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from typing import Any, Callable, Iterable

import pytest
import requests

import synclib
import tsapi
from tsapi import assert_error, assert_json, short

STATE_DIR = os.environ.get("TODOSYNC_TEST_STATE_DIR", "").strip()


# --------------------------------------------------------------------------- reporting

def report(capsys, title: str, **figures: Any) -> str:
    """Print `[figures] title: k=v, ...` straight to the terminal (also when output is captured)."""
    parts = ", ".join(f"{k}={v}" for k, v in figures.items())
    line = f"[figures] {title}: {parts}"
    if capsys is None:
        print(line, flush=True)
    else:
        with capsys.disabled():
            print("\n" + line, flush=True)
    return line


class Counters:
    """Named counters and maxima shared by load threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.values: dict[str, float] = {}

    def inc(self, name: str, n: float = 1) -> None:
        with self._lock:
            self.values[name] = self.values.get(name, 0) + n

    def max(self, name: str, value: float) -> None:
        with self._lock:
            if value > self.values.get(name, float("-inf")):
                self.values[name] = value

    def get(self, name: str, default: float = 0) -> float:
        with self._lock:
            return self.values.get(name, default)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.values)


# --------------------------------------------------------------------------- processes

proc_alive = tsapi.proc_alive


def rss_kb(pid: int) -> int | None:
    """VmRSS of a process in KiB, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def require_stack() -> None:
    if not tsapi.STACK:
        pytest.skip("TODOSYNC_TEST_STACK not set: stack control unavailable")


_EXPECTED: list[int] = []


def expected_responders() -> int:
    """TODOSYNC_RESPONDERS of the stack under test (from `stack env`), 1 if it cannot be read."""
    if not _EXPECTED:
        n = 1
        try:
            m = re.search(r"^TODOSYNC_RESPONDERS=(\d+)\s*$", tsapi.stack("env", timeout=60), re.M)
            if m:
                n = int(m.group(1))
        except (AssertionError, OSError, subprocess.SubprocessError):
            pass
        _EXPECTED.append(n)
    return _EXPECTED[0]


def require_responders(minimum: int = 1) -> set[int]:
    """The running responder pids, once all the stack's responders are up again (an earlier test
    may just have killed some: the supervisor's restart backoff grows to 10 s)."""
    require_stack()
    pids, _ = wait_responders(expected_responders(), timeout=45)
    if len(pids) < minimum:
        pytest.skip(f"needs at least {minimum} responders behind nginx, the stack runs {len(pids)} "
                    f"(scripts/test.sh runs 2: TODOSYNC_TEST_RESPONDERS)")
    for pid in pids:
        if not os.path.exists(f"/proc/{pid}"):
            pytest.skip("responder processes are not visible in this /proc (another pid namespace)")
    return pids


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def wait_responders(count: int, gone: Iterable[int] = (), timeout: float = 30.0) -> tuple[set[int], float]:
    """Wait until `count` responders run and none of `gone` is among them; then /healthz must
    answer.  Returns (pids, seconds waited)."""
    gone = set(gone)
    t0 = time.monotonic()
    last: set[int] = set()
    while time.monotonic() - t0 < timeout:
        last = tsapi.responder_pids()
        if len(last) >= count and not (last & gone) and all(proc_alive(p) for p in last):
            tsapi.wait_healthy(max(1.0, timeout - (time.monotonic() - t0)))
            return last, time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"the supervisor did not bring back {count} responder(s) within {timeout}s "
                         f"(killed {sorted(gone)}, running {sorted(last)})")


class PidGuard:
    """Asserts on exit that the responder processes are the same ones (none crashed and was
    silently restarted by its supervisor).  A no-op without $TODOSYNC_TEST_STACK."""

    def __init__(self, what: str = ""):
        self.what = what
        self.before: set[int] | None = None

    def __enter__(self):
        if tsapi.STACK:
            self.before = tsapi.responder_pids()
        return self

    def check(self) -> None:
        if self.before is None:
            return
        after = tsapi.responder_pids()
        assert after == self.before, (
            f"{self.what}: responder processes changed from {sorted(self.before)} to {sorted(after)} — "
            f"a responder died (crash?) and was restarted; see {STATE_DIR or '<state>'}/log/responder-*.log")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.check()
        return False


# --------------------------------------------------------------------------- retrying requests

RETRY_SLEEP_S = 0.05


def send_until_ok(call: Callable[[], Any], counters: Counters, deadline: float, ok: Iterable[int] = (200,),
                  what: str = "request", max_latency_s: float | None = None):
    """Send one request (`call`) until its status is in `ok`.  Connection errors, 503
    `unavailable` and, for a write, 504 `outcome_unknown` (nginx lost the responder it had handed
    the write to: the contract's "retry only with the same opId/clientId", which this does) are
    retried with the *same* request; anything else (a 500, a 4xx, a 504 on a read) fails.
    Counts attempts, 503s, 504s, connection errors and the slowest answer."""
    ok = tuple(ok)
    while True:
        t0 = time.monotonic()
        counters.inc("attempts")
        try:
            r = call()
        except requests.RequestException as exc:
            took = time.monotonic() - t0
            counters.inc("conn_errors")
            counters.max("max_latency_s", took)
            last = repr(exc)
        else:
            took = time.monotonic() - t0
            counters.max("max_latency_s", took)
            if max_latency_s is not None:
                assert took <= max_latency_s, f"{what}: answered after {took:.1f}s (> {max_latency_s}s): {short(r)}"
            if r.status_code in ok:
                return r
            if r.status_code == 504 and r.request.method not in ("GET", "HEAD"):
                assert_error(r, 504, "outcome_unknown")
                counters.inc("status_504")
            else:
                assert r.status_code == 503, f"{what}: unexpected answer (only 503 may be retried): {short(r)}"
                assert_error(r, 503, "unavailable")
                counters.inc("status_503")
            last = short(r)
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not acknowledged at the deadline; last: {last}")
        time.sleep(RETRY_SLEEP_S)


def pull_to_end(api: tsapi.Api, store: synclib.ClientStore, counters: Counters, deadline: float,
                limit: int = 500) -> int:
    """Pull from the store's cursor until hasMore is false, retrying 503s.  Returns the number of
    records received."""
    cursor = store.cursor
    received = 0
    for _ in range(10_000):
        params = {"limit": str(limit), "schemaVersion": str(tsapi.CURRENT_SCHEMA)}
        if cursor:
            params["cursor"] = cursor
        r = send_until_ok(lambda: api.get("/sync/pull", params=params), counters, deadline, what="pull")
        body = assert_json(r)
        synclib.check_page_shape(body, limit, first_pull=not cursor)
        store.apply_page(body)
        received += sum(1 for _ in synclib.page_records(body))
        cursor = body["cursor"]
        if not body["hasMore"]:
            return received
    raise AssertionError("pull did not finish within 10000 pages")


# --------------------------------------------------------------------------- pushing devices

DATES = [f"2032-03-{d:02d}" for d in range(1, 8)]


def _cid() -> str:
    return str(uuid.uuid4())


class PushDevice:
    """One device of a user.  It only touches records it created itself, so what the server must
    hold afterwards follows from its own acknowledged operations alone:

      tags       clientId -> {"name", "color"}
      todos      clientId -> expected fields (None once deleted), tag named by its clientId
      anon       titles of todos created *without* clientId: only the opId protects these from
                 being created twice, so each must exist exactly once

    Every batch is pushed until acknowledged, each retry byte-identical (same opIds)."""

    def __init__(self, api: tsapi.Api, name: str, seed: int):
        self.api = tsapi.Api(api.token, api.base_url)
        self.name = name
        self.rng = random.Random(seed)
        self.device_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self.tags: dict[str, dict] = {}
        self.todos: dict[str, dict | None] = {}
        self.anon: list[str] = []
        self.acked: list[tuple[dict, list[dict]]] = []  # (request body, acknowledged results)
        self.store = synclib.ClientStore()
        self.ops_acked = 0
        self._n = 0

    def _title(self, what: str) -> str:
        self._n += 1
        return f"{self.name} {what} {self._n}"

    def make_batch(self, size: int) -> dict:
        ops: list[dict] = []
        for _ in range(size):
            live = sorted(c for c, t in self.todos.items() if t is not None)
            roll = self.rng.random()
            if not self.tags or roll < 0.07:
                cid = _cid()
                data = {"name": self._title("tag")[-50:], "color": self.rng.choice(["#AA0000", "#00AA00", "#0000AA"])}
                self.tags[cid] = dict(data)
                ops.append(synclib.op("tag", "create", clientId=cid, data=data))
            elif roll < 0.42 or len(live) < 3:
                cid = _cid()
                tag_cid = self.rng.choice(sorted(self.tags)) if self.rng.random() < 0.4 else None
                data = {"title": self._title("todo"), "deadline": self.rng.choice(DATES),
                        "difficulty": self.rng.randint(0, 5), "estimatedTime": self.rng.choice([0, 15, 30, 90]),
                        "isLife": self.rng.random() < 0.3}
                if tag_cid:
                    data["tagClientId"] = tag_cid
                self.todos[cid] = {"title": data["title"], "deadline": data["deadline"],
                                   "difficulty": data["difficulty"], "estimatedTime": data["estimatedTime"],
                                   "isLife": data["isLife"], "isCompleted": False, "isImportant": False,
                                   "tag": tag_cid}
                ops.append(synclib.op("todo", "create", clientId=cid, data=data))
            elif roll < 0.52:
                title = self._title("anon")
                self.anon.append(title)
                ops.append(synclib.op("todo", "create", data={"title": title, "deadline": self.rng.choice(DATES)}))
            elif roll < 0.88:
                cid = self.rng.choice(live)
                data: dict[str, Any] = {}
                for field in self.rng.sample(["title", "isCompleted", "isImportant", "difficulty", "deadline"], 2):
                    if field == "title":
                        data[field] = self._title("edit")
                    elif field in ("isCompleted", "isImportant"):
                        data[field] = not self.todos[cid][field]
                    elif field == "difficulty":
                        data[field] = (self.todos[cid][field] + 1) % 6
                    else:
                        data[field] = self.rng.choice(DATES)
                self.todos[cid].update(data)
                ops.append(synclib.op("todo", "update", clientId=cid, data=data))
            else:
                cid = self.rng.choice(live)
                self.todos[cid] = None
                ops.append(synclib.op("todo", "delete", clientId=cid))
        return {"deviceId": self.device_id, "conflictPolicy": "client-wins", "operations": ops,
                "schemaVersion": tsapi.CURRENT_SCHEMA}

    def push_until_acked(self, body: dict, counters: Counters, deadline: float) -> list[dict]:
        r = send_until_ok(lambda: self.api.post("/sync/push", body), counters, deadline,
                          what=f"push by {self.device_id}")
        out = assert_json(r)
        results = out["results"]
        assert len(results) == len(body["operations"]), short(r)
        for o, res in zip(body["operations"], results):
            synclib.check_result(res, o, schema=tsapi.CURRENT_SCHEMA)
            assert res["status"] == "applied", f"{self.device_id}: operation {o} not applied: {res}"
        self.acked.append((body, results))
        self.ops_acked += len(results)
        return results

    def live_expected(self) -> int:
        return sum(1 for t in self.todos.values() if t is not None)


def check_user_against_devices(api: tsapi.Api, devices: list[PushDevice]) -> dict:
    """The server's state of one user against what its devices' acknowledged operations imply:
    every acknowledged create present exactly once (by clientId, and by title for creates
    without one), edits and deletes applied, nothing else there, no clientId twice.
    Returns counts for the report."""
    server = synclib.fresh_state(api)
    todos = list(server.todos.values())
    tags = list(server.tags.values())

    def dup_client_ids(recs):
        seen: dict[str, int] = {}
        for rec in recs:
            if rec["clientId"] is not None:
                key = rec["clientId"].lower()
                seen[key] = seen.get(key, 0) + 1
        return {k: n for k, n in seen.items() if n > 1}

    assert not dup_client_ids(todos), f"todo clientIds stored more than once: {dup_client_ids(todos)}"
    assert not dup_client_ids(tags), f"tag clientIds stored more than once: {dup_client_ids(tags)}"

    tag_cid_by_id = {t["id"]: t["clientId"].lower() for t in tags if t["clientId"]}
    todo_by_cid = {t["clientId"].lower(): t for t in todos if t["clientId"]}
    tag_by_cid = {t["clientId"].lower(): t for t in tags if t["clientId"]}
    anon_titles: dict[str, int] = {}
    for t in todos:
        if t["clientId"] is None:
            anon_titles[t["title"]] = anon_titles.get(t["title"], 0) + 1

    expected_live_todos = expected_tags = expected_anon = 0
    problems: list[str] = []
    for dev in devices:
        for cid, want in dev.tags.items():
            expected_tags += 1
            got = tag_by_cid.get(cid)
            if got is None or got["name"] != want["name"] or got["color"] != want["color"]:
                problems.append(f"tag {cid} of {dev.name}: expected {want}, server has {got}")
        for cid, want in dev.todos.items():
            got = todo_by_cid.get(cid)
            if want is None:
                if got is not None:
                    problems.append(f"todo {cid} of {dev.name} was deleted (acknowledged) but is live: {got}")
                continue
            expected_live_todos += 1
            if got is None:
                problems.append(f"todo {cid} of {dev.name} is acknowledged but missing on the server")
                continue
            have = {k: got[k] for k in want if k != "tag"}
            have["tag"] = tag_cid_by_id.get(got["tagId"]) if got["tagId"] is not None else None
            if have != want:
                problems.append(f"todo {cid} of {dev.name}: expected {want}, server has {have}")
        for title in dev.anon:
            expected_anon += 1
            n = anon_titles.get(title, 0)
            if n != 1:
                problems.append(f"todo {title!r} (created without clientId) is on the server {n} times")
        # every acknowledged create maps to the record that is there now
        for body, results in dev.acked:
            for o, res in zip(body["operations"], results):
                if o["action"] == "create" and o.get("clientId"):
                    rec = (tag_by_cid if o["entity"] == "tag" else todo_by_cid).get(o["clientId"].lower())
                    if rec is not None and rec["id"] != res["id"]:
                        problems.append(f"create {o['opId']} acknowledged id {res['id']} but the record is {rec['id']}")
    extra_todos = len(todos) - expected_live_todos - expected_anon
    extra_tags = len(tags) - expected_tags
    if extra_todos:
        problems.append(f"{extra_todos} live todo(s) on the server that no acknowledged operation explains")
    if extra_tags:
        problems.append(f"{extra_tags} tag(s) on the server that no acknowledged operation explains")
    assert not problems, "server state does not match the acknowledged operations:\n  " + "\n  ".join(problems[:40])
    return {"todos": len(todos), "tags": len(tags), "stats": len(server.stats), "anon": expected_anon,
            "snapshot": server.snapshot()}


def replay_all(devices: list[PushDevice], counters: Counters, deadline: float) -> int:
    """Resend every acknowledged batch unchanged: each must return exactly the stored results."""
    n = 0
    for dev in devices:
        for body, results in dev.acked:
            r = send_until_ok(lambda: dev.api.post("/sync/push", body), counters, deadline, what="replay")
            again = assert_json(r)["results"]
            assert again == results, (
                f"replaying {dev.device_id}'s batch returned different results than first acknowledged:\n"
                f"first {json.dumps(results)[:800]}\nnow   {json.dumps(again)[:800]}")
            n += len(results)
    return n


def assert_no_changes_since(api: tsapi.Api, cursor: str, what: str) -> None:
    body = synclib.pull(api, cursor=cursor)
    changed = [(k, rec["id"], rec["version"], "deleted" if d else "upserted")
               for k, rec, d in synclib.page_records(body)]
    assert not changed, f"{what}: records changed: {changed[:20]}"


# --------------------------------------------------------------------------- seeded users

def seed_user(api: tsapi.Api, date: str = "2033-04-05") -> dict:
    """A few records of every kind (tag with clientId, todos with and without tag, a completed
    one, a deleted one, so a daily stat and tombstones exist)."""
    tag_cid, todo_cid = _cid(), _cid()
    tag = api.create_tag(name="Seed tag", color="#123456", clientId=tag_cid)
    other_tag = api.create_tag(name="Other seed tag", color="#654321")
    todo = api.create_todo(title="Seed todo", deadline=date, tagId=tag["id"], clientId=todo_cid,
                           difficulty=3, estimatedTime=60)
    done = api.create_todo(title="Seed done", deadline=date, isCompleted=True, estimatedTime=30, isLife=True)
    later = api.create_todo(title="Seed later", deadline=tsapi.days_from(date, 1))
    gone = api.create_todo(title="Seed deleted", deadline=date)
    r = api.delete(f"/todos/{gone['id']}")
    assert r.status_code == 204, short(r)
    return {"tag": tag, "other_tag": other_tag, "todo": todo, "done": done, "later": later, "deleted": gone,
            "tag_cid": tag_cid, "todo_cid": todo_cid, "date": date}


class Baseline:
    """A user's complete state (first pull) and the cursor after it: `assert_unchanged` proves
    that no record was created, changed or deleted since."""

    def __init__(self, api: tsapi.Api):
        self.api = api
        self.store = synclib.fresh_state(api)
        self.cursor = self.store.cursor

    def assert_unchanged(self, what: str = "hostile requests") -> None:
        assert_no_changes_since(self.api, self.cursor, what)
        now = synclib.fresh_state(self.api).snapshot()
        assert now == self.store.snapshot(), f"{what}: the user's data differs from before"


# --------------------------------------------------------------------------- answers to hostile requests

def check_reply(r, what: str, allowed: Iterable[int] | None = None, json_required: bool = True):
    """A hostile request's answer: never a 5xx; an error is the contract's JSON error shape and
    leaks no internals (SQL, paths, stack traces)."""
    assert r.status_code < 500, f"{what}: server error {short(r)}"
    if allowed is not None:
        allowed = set(allowed)
        assert r.status_code in allowed, f"{what}: expected one of {sorted(allowed)}: {short(r)}"
    if r.status_code >= 400:
        if json_required or tsapi.media_type(r) == "application/json":
            assert_error(r, r.status_code)
        else:
            tsapi.assert_no_leak(r.text)
    return r
