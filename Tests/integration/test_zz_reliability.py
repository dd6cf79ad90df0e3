"""Reliability under faults: a responder killed with SIGKILL under push load, the database
restarted under load, two responders behind one upstream, and memory under a mixed load.

Runs after test_zz_lifecycle.py (module name): it kills responders and stops the database, and
restores the stack (supervised restart, db-start, /healthz) before every test returns.

Figures are printed as `[figures] ...` lines (visible with and without -s).

Assumptions where API.md / the README are silent:
- "Acknowledged" means a push answered 200 with a result per operation. A push cut off by a
  fault is answered 503 `unavailable` (nginx maps 502/504 to it) or the connection fails; the
  client then resends the byte-identical request (same opIds) until it is acknowledged.
  Any other answer — above all a 500 — is a failure.
- The supervisor restarts a killed responder within a few seconds (its backoff starts at
  0.25 s and doubles while a responder lives less than 30 s); the tests allow 30 s.
- While the database is down, every API request is answered 503 `unavailable` within 5 s (the
  lifecycle test's bound); within 10 s of the database accepting connections again every
  request succeeds, with the same responder processes (no restart), and from 2 s after that
  point on no request fails at all.
- With two responders, nginx retries idempotent requests (GET) on the other responder when one
  dies (`fastcgi_next_upstream error timeout`), so a read load sees no failed request at all.
  It never retries a POST that reached a responder; the client's resend is covered by opIds.
- Memory: after a warm-up, the median VmRSS of each responder over the last third of the
  measurement is at most 15% (or 4 MiB, whichever is larger) above the median of the first
  third. TODOSYNC_TEST_MEMORY_SECONDS (default 40) sets the default run's load duration;
  TODOSYNC_TEST_SOAK_SECONDS=N additionally runs a soak of N seconds with the same rule.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import re
import statistics
import threading
import time
import uuid

import pytest
import requests

import reliabilitylib as rl
import synclib
import tsapi
from tsapi import assert_error, assert_json, short

OUTAGE_MAX_REQUEST_S = 5.0
RECOVERY_S = 10.0
RESTART_TIMEOUT_S = 30.0


def _run_threads(fns, stop: threading.Event):
    """Run callables in threads; the first failure stops the others and is re-raised."""
    errors: list[BaseException] = []

    def wrap(fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in fns]
    for th in threads:
        th.start()
    return threads, errors


def _join(threads, errors, timeout: float):
    deadline = time.monotonic() + timeout
    for th in threads:
        th.join(max(0.1, deadline - time.monotonic()))
    alive = [th for th in threads if th.is_alive()]
    if errors:
        raise errors[0]
    assert not alive, f"{len(alive)} load thread(s) still running after {timeout}s"


# --------------------------------------------------------------------------- kill -9 under push load

N_USERS = 4
DEVICES_PER_USER = 4  # 16 concurrent clients
BATCHES = 24
BATCH_SIZE = 20
KILL_AT = (0.2, 0.45, 0.7)  # fractions of all batches acknowledged


def test_kill9_responder_under_push_load_loses_and_duplicates_nothing(capsys):
    pids0 = rl.require_responders(1)
    users = [tsapi.new_user() for _ in range(N_USERS)]
    devices: list[tuple[tsapi.Api, rl.PushDevice]] = []
    for u, api in enumerate(users):
        for d in range(DEVICES_PER_USER):
            devices.append((api, rl.PushDevice(api, f"u{u}d{d}", seed=1000 + 10 * u + d)))
    counters = rl.Counters()
    deadline = time.monotonic() + 100
    for _, dev in devices:
        rl.pull_to_end(dev.api, dev.store, counters, deadline)

    total = len(devices) * BATCHES
    stop = threading.Event()
    done = threading.Event()
    kills_done = threading.Event()
    kills: list[dict] = []
    t_start = time.monotonic()

    def run_device(dev: rl.PushDevice):
        def run():
            # At least BATCHES batches, and on until every kill has happened: a fast stack must not
            # finish its load between two kills (each waits for the supervisor's restart).
            b = 0
            while b < BATCHES or (not kills_done.is_set() and b < 4 * BATCHES):
                if stop.is_set():
                    return
                body = dev.make_batch(BATCH_SIZE)
                dev.push_until_acked(body, counters, deadline)
                counters.inc("batches_acked")
                if b % 3 == 2:
                    rl.pull_to_end(dev.api, dev.store, counters, deadline)
                b += 1
        return run

    def killer():
        try:
            kill_all()
        finally:
            kills_done.set()

    def kill_all():
        for i, frac in enumerate(KILL_AT):
            while counters.get("batches_acked") < frac * total and not stop.is_set() and not done.is_set():
                time.sleep(0.01)
            if stop.is_set() or done.is_set():
                return
            running = sorted(tsapi.responder_pids())
            victim = running[i % len(running)]
            attempts_before = counters.get("attempts")
            t0 = time.monotonic()
            rl.kill9(victim)
            _, waited = rl.wait_responders(len(pids0), gone={victim}, timeout=RESTART_TIMEOUT_S)
            kills.append({"pid": victim, "at_batches": int(counters.get("batches_acked")),
                          "restart_s": round(time.monotonic() - t0, 2),
                          "attempts_during": int(counters.get("attempts") - attempts_before)})

    threads, errors = _run_threads([run_device(dev) for _, dev in devices], stop)
    kth, kerr = _run_threads([killer], stop)
    try:
        _join(threads, errors, 110)
    finally:
        done.set()
        _join(kth, kerr, RESTART_TIMEOUT_S + 10)
    load_s = time.monotonic() - t_start
    assert len(kills) == len(KILL_AT), f"the load ended before every kill happened: {kills}"

    # Every device catches up; every one of a user's devices then holds exactly the server's state.
    for _, dev in devices:
        rl.pull_to_end(dev.api, dev.store, counters, deadline)
    verified = {"todos": 0, "tags": 0, "stats": 0, "anon": 0}
    for api in users:
        mine = [dev for a, dev in devices if a is api]
        facts = rl.check_user_against_devices(api, mine)
        for dev in mine:
            assert dev.store.snapshot() == facts["snapshot"], (
                f"device {dev.device_id} did not converge with the server: "
                f"{_diff(dev.store.snapshot(), facts['snapshot'])}")
        for k in verified:
            verified[k] += facts[k]

    # Replaying every acknowledged batch (same opIds) returns the stored results and changes nothing.
    cursors = {id(api): [dev for a, dev in devices if a is api][0].store.cursor for api in users}
    replayed = rl.replay_all([dev for _, dev in devices], counters, time.monotonic() + 60)
    for api in users:
        rl.assert_no_changes_since(api, cursors[id(api)], "replaying acknowledged pushes")

    c = counters.snapshot()
    rl.report(capsys, "kill -9 under push load",
              clients=len(devices), users=N_USERS, load_s=round(load_s, 1),
              ops_acked=sum(dev.ops_acked for _, dev in devices), batches=int(counters.get("batches_acked")),
              responders=len(pids0), kills=len(kills),
              restart_s="/".join(str(k["restart_s"]) for k in kills),
              retried_503=int(c.get("status_503", 0)), retried_504=int(c.get("status_504", 0)),
              conn_errors=int(c.get("conn_errors", 0)),
              live_todos=verified["todos"], tags=verified["tags"], stats=verified["stats"],
              no_clientid_creates=verified["anon"], replayed_ops=replayed, lost=0, duplicated=0)


def _diff(a: dict, b: dict) -> str:
    out = []
    for kind in synclib.KINDS:
        for i in sorted(set(a[kind]) | set(b[kind])):
            if a[kind].get(i) != b[kind].get(i):
                out.append(f"{kind} {i}: device {a[kind].get(i)} server {b[kind].get(i)}")
    return "; ".join(out[:5]) or "no difference"


# --------------------------------------------------------------------------- database restart under load

def test_database_restart_under_load_503_fast_then_recovers_without_restarts(capsys, stack_cmd):
    pids0 = rl.require_responders(1)
    users = [tsapi.new_user() for _ in range(2)]
    writers = [rl.PushDevice(api, f"db-u{u}w{w}", seed=50 + 10 * u + w)
               for u, api in enumerate(users) for w in range(3)]
    counters = rl.Counters()
    stop = threading.Event()
    phase = {"name": "before"}
    last_ok: dict[int, float] = {}
    lock = threading.Lock()
    bad: list[str] = []
    deadline = time.monotonic() + 110

    def record(key: int, r, took: float):
        name = phase["name"]
        counters.inc(f"{name}_requests")
        counters.max(f"{name}_max_s", took)
        if name in ("outage",):
            if took > OUTAGE_MAX_REQUEST_S:
                bad.append(f"a request took {took:.1f}s during the outage: {short(r) if r is not None else 'no answer'}")
        if r is None:
            counters.inc(f"{name}_conn_errors")
            if name == "after":
                bad.append("connection error after recovery")
            return
        if r.status_code in (200, 201):
            with lock:
                last_ok[key] = time.monotonic()
            return
        if r.status_code == 504 and key >= 100 and name in ("outage", "recovery"):
            # A push whose COMMIT was under way when MariaDB went away: its outcome is unknown
            # (the contract's 504); the writer resends the same batch, and the exactly-once
            # check below proves the retry was safe.
            try:
                assert_error(r, 504, "outcome_unknown")
            except AssertionError as exc:
                bad.append(f"phase {name}: bad 504 body: {exc}")
            counters.inc(f"{name}_504")
            return
        if r.status_code != 503:
            bad.append(f"phase {name}: {short(r)}")
            return
        try:
            assert_error(r, 503, "unavailable")
        except AssertionError as exc:
            bad.append(f"phase {name}: bad 503 body: {exc}")
        counters.inc(f"{name}_503")
        if name in ("before", "after"):
            bad.append(f"phase {name}: 503 while the database is up: {short(r)}")

    def reader(key: int, api: tsapi.Api):
        api = tsapi.Api(api.token)
        paths = ["/tags", "/todos?date=2033-04-05", "/sync/pull?limit=50", "/daily-stats?month=2033-04",
                 "/todos?from=2033-04-01&to=2033-04-30"]

        def run():
            i = 0
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    r = api.get(paths[i % len(paths)], timeout=OUTAGE_MAX_REQUEST_S + 5)
                except requests.RequestException:
                    r = None
                record(key, r, time.monotonic() - t0)
                i += 1
                time.sleep(0.01)
        return run

    def writer(key: int, dev: rl.PushDevice):
        def run():
            while not stop.is_set():
                body = dev.make_batch(4)
                while True:  # the same batch until acknowledged
                    t0 = time.monotonic()
                    try:
                        r = dev.api.post("/sync/push", body, timeout=OUTAGE_MAX_REQUEST_S + 5)
                    except requests.RequestException:
                        r = None
                    record(key, r, time.monotonic() - t0)
                    if r is not None and r.status_code == 200:
                        results = assert_json(r)["results"]
                        for o, res in zip(body["operations"], results):
                            synclib.check_result(res, o, schema=body.get("schemaVersion") or 1)
                            assert res["status"] == "applied", res
                        dev.acked.append((body, results))
                        dev.ops_acked += len(results)
                        break
                    assert time.monotonic() < deadline, "push never acknowledged"
                    time.sleep(0.05)
        return run

    fns = [reader(i, users[i % 2]) for i in range(6)] + [writer(100 + i, w) for i, w in enumerate(writers)]
    keys = list(range(6)) + [100 + i for i in range(len(writers))]
    threads, errors = _run_threads(fns, stop)
    db_stopped = False
    timeline: dict[str, float] = {}
    try:
        time.sleep(2.0)
        assert counters.get("before_requests") > 0
        phase["name"] = "outage"
        t0 = time.monotonic()
        stack_cmd("db-stop")
        db_stopped = True
        timeline["db_stop_cmd_s"] = time.monotonic() - t0
        # /healthz says so quickly
        t1 = time.monotonic()
        while True:
            r = requests.get(tsapi.BASE_URL + "/healthz", timeout=OUTAGE_MAX_REQUEST_S + 5)
            if r.status_code == 503:
                assert_error(r, 503, "unavailable")
                break
            assert time.monotonic() - t1 < 10, f"/healthz still {r.status_code} 10 s after db-stop"
            time.sleep(0.1)
        time.sleep(3.0)
        outage_503 = counters.get("outage_503")
        assert outage_503 > 0, "no request saw the outage"

        t2 = time.monotonic()
        stack_cmd("db-start")
        db_stopped = False
        timeline["db_start_cmd_s"] = time.monotonic() - t2
        phase["name"] = "recovery"
        t_up = time.monotonic()
        while True:
            with lock:
                recovered = all(last_ok.get(k, 0) > t_up for k in keys)
            if recovered:
                break
            assert not stop.is_set(), "load thread failed"
            assert time.monotonic() - t_up < RECOVERY_S, (
                f"not every client succeeded within {RECOVERY_S}s of the database returning "
                f"({sum(1 for k in keys if last_ok.get(k, 0) > t_up)}/{len(keys)} did)")
            time.sleep(0.05)
        timeline["recovery_s"] = time.monotonic() - t_up
        time.sleep(2.0)
        phase["name"] = "after"
        time.sleep(2.0)
    finally:
        stop.set()
        try:
            _join(threads, errors, 30)
        finally:
            if db_stopped:
                stack_cmd("db-start")
            tsapi.wait_healthy(30)
    assert not bad, "during the database restart:\n  " + "\n  ".join(bad[:20])
    assert counters.get("after_requests") > 0
    assert tsapi.responder_pids() == pids0, "responders were restarted to recover"

    # Pushes retried through the outage were applied exactly once.
    for api in users:
        rl.check_user_against_devices(api, [w for w in writers if w.api.token == api.token])
    replayed = rl.replay_all(writers, counters, time.monotonic() + 60)
    c = counters.snapshot()
    rl.report(capsys, "database restart under load",
              clients=len(fns), requests_before=int(c.get("before_requests", 0)),
              requests_outage=int(c.get("outage_requests", 0)), outage_503=int(c.get("outage_503", 0)),
              outage_504=int(c.get("outage_504", 0) + c.get("recovery_504", 0)),
              outage_max_latency_s=round(c.get("outage_max_s", 0), 2),
              db_stop_s=round(timeline["db_stop_cmd_s"], 1),
              recovery_s=round(timeline["recovery_s"], 2),
              requests_recovery=int(c.get("recovery_requests", 0)),
              requests_after=int(c.get("after_requests", 0)), errors_after=0,
              push_ops_acked=sum(w.ops_acked for w in writers), replayed_ops=replayed,
              responders_restarted=0, status_500=0)


# --------------------------------------------------------------------------- two responders

def _access_log_upstreams(request_ids: set[str], wait_s: float = 2.0) -> dict[str, str]:
    """request id -> $upstream_addr from nginx's access log (flushed every second)."""
    if not rl.STATE_DIR:
        return {}
    path = os.path.join(rl.STATE_DIR, "log", "nginx-access.log")
    if not os.path.exists(path):
        return {}
    time.sleep(wait_s)
    out = {}
    with open(path, "r", errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)  # one JSON object per line (log_format todosync)
            except ValueError:
                continue
            if entry.get("request_id") in request_ids:
                out[entry["request_id"]] = entry.get("upstream", "")
    return out


def test_two_responders_reads_survive_kill9_of_either(capsys):
    pids0 = rl.require_responders(2)
    api = tsapi.new_user()
    rl.seed_user(api)
    stop = threading.Event()
    counters = rl.Counters()
    failures: list[str] = []
    slow_ids: set[str] = set()
    all_ids: set[str] = set()
    lock = threading.Lock()
    delay_ms = 400

    def reader(i: int):
        local = tsapi.Api(api.token)
        paths = ["/tags", "/todos?date=2033-04-05", "/sync/pull", "/daily-stats/2033-04-05",
                 "/daily-stats?month=2033-04", f"/healthz?delay_ms={delay_ms}"]

        def run():
            n = i
            while not stop.is_set():
                path = paths[n % len(paths)]
                t0 = time.monotonic()
                try:
                    r = local.get(path, timeout=15)
                except requests.RequestException as exc:
                    with lock:
                        failures.append(f"GET {path}: {exc!r}")
                    n += 1
                    continue
                took = time.monotonic() - t0
                counters.inc("reads")
                rid = r.headers.get("X-Request-Id", "")
                with lock:
                    all_ids.add(rid)
                    if "delay_ms" in path and took > 1.8 * delay_ms / 1000:
                        slow_ids.add(rid)
                if r.status_code != 200:
                    with lock:
                        failures.append(f"GET {path}: {short(r)}")
                n += 1
        return run

    threads, errors = _run_threads([reader(i) for i in range(8)], stop)
    kills = []
    try:
        time.sleep(1.5)
        for i in range(2):
            victim = sorted(tsapi.responder_pids())[i % 2]
            t0 = time.monotonic()
            rl.kill9(victim)
            rl.wait_responders(len(pids0), gone={victim}, timeout=RESTART_TIMEOUT_S)
            kills.append(round(time.monotonic() - t0, 2))
            # nginx's fail_timeout (2 s) must pass before the restarted responder gets traffic
            # again; only then is it safe to take the other one away.
            time.sleep(3.0)
    finally:
        stop.set()
        _join(threads, errors, 30)
    assert not failures, f"{len(failures)} read(s) failed while a responder was killed:\n  " + "\n  ".join(failures[:15])
    ups = _access_log_upstreams(all_ids)
    retried = sum(1 for v in ups.values() if "," in v)
    rl.report(capsys, "two responders, kill -9 under read load",
              readers=8, reads=int(counters.get("reads")), failed_reads=0, kills=len(kills),
              restart_s="/".join(map(str, kills)),
              reads_retried_by_nginx=retried if ups else "n/a",
              slow_in_flight_reads=len(slow_ids))


def _anon_batch(tag: str, n: int) -> dict:
    return {"deviceId": f"dev-{tag}", "operations": [
        synclib.op("todo", "create", data={"title": f"{tag} #{i}", "deadline": "2034-01-0%d" % (1 + i % 9)})
        for i in range(n)]}


def _titles_count(api: tsapi.Api) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in synclib.fresh_state(api).todos.values():
        counts[t["title"]] = counts.get(t["title"], 0) + 1
    return counts


def test_retried_push_never_applied_twice_across_responders(capsys):
    pids0 = rl.require_responders(2)
    api = tsapi.new_user()
    counters = rl.Counters()

    # 1. The same push sent 12 times at once: nginx spreads it over both responders.
    body = _anon_batch("same-" + uuid.uuid4().hex[:6], 30)

    def send(_):
        local = tsapi.Api(api.token)
        try:
            return local.post("/sync/push", body)
        finally:
            local.session.close()

    with cf.ThreadPoolExecutor(12) as ex:
        answers = list(ex.map(send, range(12)))
    for r in answers:
        assert r.status_code == 200, short(r)
    first = answers[0].json()["results"]
    assert all(r.json()["results"] == first for r in answers), "concurrent identical pushes answered differently"
    counts = _titles_count(api)
    assert all(counts.get(o["data"]["title"]) == 1 for o in body["operations"]), (
        f"an operation was applied more than once: {[(o['data']['title'], counts.get(o['data']['title'])) for o in body['operations'] if counts.get(o['data']['title']) != 1]}")

    # 2. Big pushes in flight when a responder is killed: cut-off ones are resent until acknowledged.
    rounds = cut = sent = 0
    while rounds < 3 and cut == 0:
        rounds += 1
        bodies = [_anon_batch(f"cut-{rounds}-{k}-" + uuid.uuid4().hex[:6], 400) for k in range(6)]
        first_status: dict[int, str] = {}
        deadline = time.monotonic() + 60

        def push(k):
            local = tsapi.Api(api.token)
            try:
                try:
                    r = local.post("/sync/push", bodies[k], timeout=30)
                    first_status[k] = str(r.status_code)
                    if r.status_code == 200:
                        return r.json()["results"]
                    # Cut off by the kill: 504 outcome_unknown when nginx had handed it over
                    # (it may be applied: resent with the same opIds), else 503 (nothing applied).
                    if r.status_code == 504:
                        assert_error(r, 504, "outcome_unknown")
                    else:
                        assert_error(r, 503, "unavailable")
                except requests.RequestException as exc:
                    first_status[k] = type(exc).__name__
                r = rl.send_until_ok(lambda: local.post("/sync/push", bodies[k], timeout=30), counters, deadline,
                                     what="resent push")
                return r.json()["results"]
            finally:
                local.session.close()

        running = sorted(tsapi.responder_pids())
        with cf.ThreadPoolExecutor(6) as ex:
            futs = [ex.submit(push, k) for k in range(6)]
            time.sleep(0.25)
            victim = running[rounds % 2]
            rl.kill9(victim)
            results = [f.result() for f in futs]
        rl.wait_responders(len(pids0), gone={victim}, timeout=RESTART_TIMEOUT_S)
        cut += sum(1 for s in first_status.values() if s != "200")
        sent += len(bodies)
        counts = _titles_count(api)
        for b, res in zip(bodies, results):
            wrong = [(o["data"]["title"], counts.get(o["data"]["title"], 0)) for o in b["operations"]
                     if counts.get(o["data"]["title"], 0) != 1]
            assert not wrong, f"operations not applied exactly once after a resend: {wrong[:10]}"
            assert [r["status"] for r in res] == ["applied"] * len(res)
            again = rl.send_until_ok(lambda: api.post("/sync/push", b, timeout=30), counters, deadline, what="replay")
            assert again.json()["results"] == res, "a replay returned other results than the acknowledged ones"
        time.sleep(3.0)  # nginx fail_timeout before the next round
    assert _titles_count(api) == counts, "replays changed the data"
    rl.report(capsys, "retried push across two responders",
              identical_concurrent_pushes=12, ops_each=30, applied_once=True,
              big_pushes=sent, ops_each_big=400, cut_off_by_kill=cut, kill_rounds=rounds,
              resend_503=int(counters.get("status_503")), resend_504=int(counters.get("status_504")),
              resend_conn_errors=int(counters.get("conn_errors")),
              duplicates=0)


# --------------------------------------------------------------------------- memory

def _total_rss(pids) -> int:
    return sum(rl.rss_kb(p) or 0 for p in pids)


def _saturate_password_hashing(users, pids, max_rounds: int = 6) -> str:
    """Warm-up for the memory measurement.  A worker thread that has hashed a password once
    keeps that Argon2 buffer (19 MiB) in its malloc arena for reuse: RSS steps up by that much
    the first time each worker handles a login or registration, then stays flat.  That plateau
    is not a leak, but with a few logins a second it takes minutes to reach and would look like
    growth.  So: rounds of concurrent logins (enough to occupy every worker) until a round no
    longer raises RSS.  Returns the RSS after each round (MiB), for the report."""
    steps = [_total_rss(pids)]
    concurrency = max(16, 16 * len(pids))

    def one(k):
        u = users[k % len(users)]
        r = tsapi.login(u.email, u.password)
        assert r.status_code == 200, short(r)
        tsapi.Api(r.json()["token"]).post("/auth/logout")

    for _ in range(max_rounds):
        with cf.ThreadPoolExecutor(concurrency) as ex:
            list(ex.map(one, range(concurrency)))
        time.sleep(1.0)  # also lets nginx's per-address auth bucket refill
        steps.append(_total_rss(pids))
        if len(steps) >= 3 and steps[-1] - steps[-2] < 4096 and steps[-2] - steps[-3] < 4096:
            break
    return "->".join(str(v // 1024) for v in steps)


def _mixed_load(duration_s: float, warmup_s: float, capsys, label: str):
    pids = rl.require_responders(1)
    users = [tsapi.new_user() for _ in range(4)]
    hash_rounds = _saturate_password_hashing(users, pids)
    stop = threading.Event()
    counters = rl.Counters()
    unexpected: list[str] = []
    samples: dict[int, list[tuple[float, int]]] = {p: [] for p in pids}
    t_start = time.monotonic()

    def expect(r, statuses, what):
        counters.inc("requests")
        if r.status_code not in statuses and len(unexpected) < 50:
            unexpected.append(f"{what}: {short(r)}")

    def worker(i: int):
        base = users[i % len(users)]
        api = tsapi.Api(base.token)
        rng = random.Random(i)
        store = synclib.ClientStore()
        dev = f"mem-{i}"

        def run():
            n = 0
            while not stop.is_set():
                n += 1
                k = rng.randrange(10)
                date = f"2035-0{1 + rng.randrange(9)}-1{rng.randrange(10)}"
                if k <= 1:
                    r = api.post("/todos", {"title": f"mem {i} {n}", "raw": "x" * rng.randrange(2000),
                                            "deadline": date, "difficulty": rng.randrange(6),
                                            "estimatedTime": rng.randrange(120)})
                    expect(r, (201,), "create todo")
                    if r.status_code == 201:
                        tid = r.json()["id"]
                        expect(api.patch(f"/todos/{tid}", {"isCompleted": True}), (200,), "patch todo")
                        expect(api.get(f"/todos/{tid}"), (200,), "get todo")
                        expect(api.delete(f"/todos/{tid}"), (204,), "delete todo")
                elif k == 2:
                    r = api.post("/tags", {"name": f"m{i}-{n}"[-50:], "color": "#00ff00"})
                    expect(r, (201,), "create tag")
                    if r.status_code == 201:
                        tid = r.json()["id"]
                        expect(api.patch(f"/tags/{tid}", {"color": "#0000FF"}), (200,), "patch tag")
                        expect(api.delete(f"/tags/{tid}"), (204,), "delete tag")
                elif k == 3:
                    r = api.post("/todos/quick-add", {"date": date,
                                                      "text": "\n".join(f"!q{j} 30m *2 @life" for j in range(5))})
                    expect(r, (201,), "quick-add")
                    if r.status_code == 201:
                        ops = [synclib.op("todo", "delete", id=t["id"]) for t in r.json()["items"]]
                        expect(api.post("/sync/push", {"deviceId": dev, "operations": ops}), (200,), "push deletes")
                elif k == 4:
                    body = {"deviceId": dev, "operations": [
                        synclib.create_todo_op(f"p{i}-{n}-{j}", deadline=date) for j in range(8)]}
                    r = api.post("/sync/push", body)
                    expect(r, (200,), "push")
                    expect(api.post("/sync/push", body), (200,), "push replay")
                    if r.status_code == 200:
                        ops = [synclib.op("todo", "delete", id=x["id"]) for x in r.json()["results"]]
                        expect(api.post("/sync/push", {"deviceId": dev, "operations": ops}), (200,), "push deletes")
                elif k == 5:
                    params = {"limit": "200"}
                    if store.cursor:
                        params["cursor"] = store.cursor
                    r = api.get("/sync/pull", params=params)
                    expect(r, (200,), "pull")
                    if r.status_code == 200:
                        store.cursor = r.json()["cursor"]
                elif k == 6:
                    expect(api.get("/todos", params={"from": "2035-01-01", "to": "2035-12-31"}), (200,), "range")
                    expect(api.get("/daily-stats", params={"month": date[:7]}), (200,), "month stats")
                    expect(api.get("/tags"), (200,), "tags")
                elif k == 7:
                    expect(api.get("/todos/999999999"), (404,), "404")
                    expect(api.post("/todos", {"title": "", "deadline": "x"}), (422,), "422")
                    expect(api.request("POST", "/todos", data=b'{"title": ', headers={"Content-Type": "application/json"}),
                           (400,), "400")
                    expect(tsapi.Api("bogus-token-" + "x" * 30).get("/tags"), (401,), "401")
                    expect(api.request("PUT", "/todos"), (405,), "405")
                elif k == 8 and i % 4 == 0:
                    # logins hash passwords (Argon2id, 19 MiB each): at most a few per second
                    r = tsapi.login(base.email, base.password)
                    expect(r, (200,), "login")
                    if r.status_code == 200:
                        expect(tsapi.Api(r.json()["token"]).post("/auth/logout"), (204,), "logout")
                    time.sleep(0.3)
                else:
                    expect(api.get("/healthz"), (200,), "healthz")
        return run

    def sampler():
        while not stop.is_set():
            now = time.monotonic() - t_start
            for p in pids:
                v = rl.rss_kb(p)
                assert v is not None, f"responder {p} disappeared during the memory load (crash?)"
                samples[p].append((now, v))
            time.sleep(0.5)

    threads, errors = _run_threads([worker(i) for i in range(8)] + [sampler], stop)
    try:
        deadline = t_start + duration_s
        while time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.2)
    finally:
        stop.set()
        _join(threads, errors, 60)
    assert not unexpected, f"{len(unexpected)} unexpected answer(s) under load:\n  " + "\n  ".join(unexpected[:10])
    assert tsapi.responder_pids() == pids, "a responder was restarted during the memory load"
    elapsed = time.monotonic() - t_start
    verdicts = []
    lines = []
    for p, series in samples.items():
        measured = [v for t, v in series if t >= warmup_s]
        assert len(measured) >= 9, f"too few RSS samples after warm-up: {len(measured)}"
        third = len(measured) // 3
        first, last = statistics.median(measured[:third]), statistics.median(measured[-third:])
        allowed = max(first * 0.15, 4096)
        lines.append(f"pid {p}: start {series[0][1] // 1024} MiB, after warm-up {measured[0] // 1024} MiB, "
                     f"first third median {first / 1024:.1f} MiB, last third median {last / 1024:.1f} MiB, "
                     f"max {max(v for _, v in series) // 1024} MiB, growth {100 * (last - first) / first:+.1f}%")
        verdicts.append((p, first, last, allowed))
    rl.report(capsys, label, seconds=round(elapsed, 1), hash_warmup_rss_mib=hash_rounds, warmup_s=warmup_s, clients=8,
              requests=int(counters.get("requests")), req_per_s=round(counters.get("requests") / elapsed),
              unexpected=0, rss=" | ".join(lines))
    for p, first, last, allowed in verdicts:
        assert last - first <= allowed, (
            f"responder {p}: RSS keeps growing: median {first / 1024:.1f} MiB in the first third after warm-up, "
            f"{last / 1024:.1f} MiB in the last third (> +{allowed / 1024:.1f} MiB)")


def test_memory_flat_under_mixed_load(capsys):
    duration = float(os.environ.get("TODOSYNC_TEST_MEMORY_SECONDS", "40"))
    _mixed_load(duration, warmup_s=min(12.0, duration / 4), capsys=capsys, label="memory under mixed load")


SOAK_S = float(os.environ.get("TODOSYNC_TEST_SOAK_SECONDS", "0") or 0)


@pytest.mark.skipif(SOAK_S <= 0, reason="soak runs only with TODOSYNC_TEST_SOAK_SECONDS=N")
@pytest.mark.timeout(SOAK_S + 180 if SOAK_S > 0 else 120)
def test_memory_soak(capsys):
    _mixed_load(SOAK_S, warmup_s=min(60.0, SOAK_S / 5), capsys=capsys, label=f"memory soak ({SOAK_S:.0f} s)")
