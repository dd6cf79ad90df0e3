"""Lifecycle: health check, database outage and recovery, graceful responder shutdown.

Runs last (module name) because it stops the database; every test restores the stack in a
`finally` and waits for /healthz before returning.

Assumptions where API.md / INTERFACES.md are silent:
- `/healthz` answers `{"status": "ok"}` (extra keys tolerated) with Content-Type JSON, and its
  503 uses the error shape with code `unavailable`.
- While the database is down, an API request answers 503 `unavailable` within ~5 s — including
  requests whose bearer token cannot be checked (they must not be 401: that would log users
  out), logins and registrations.
- "Recover by itself" means: within ~15 s of the database accepting connections again, every
  responder worker serves requests normally, without any responder being restarted.
- `responder-pids` prints the responder processes themselves (what SIGTERM is sent to); the
  test sends SIGTERM to all of them so that the in-flight request is certainly on one that is
  stopping.  A graceful stop finishes the in-flight request (200 after its full delay) and
  the process exits within ~5 s without needing further traffic.
- The test hooks are enabled in the test stack (`/healthz?delay_ms=N` really waits N ms).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import threading
import time

import pytest
import requests

import tsapi
from tsapi import assert_error, assert_json, short

OUTAGE_MAX_REQUEST_S = 5.0
RECOVERY_S = 15.0


def test_healthz_ok(base_url):
    r = requests.get(base_url + "/healthz", timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, short(r)
    body = assert_json(r)
    assert body.get("status") == "ok", body


def test_healthz_needs_no_auth_and_ignores_bad_auth(base_url):
    r = requests.get(base_url + "/healthz", headers={"Authorization": "Bearer garbage"}, timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, short(r)


def _timed(fn):
    t0 = time.monotonic()
    try:
        r = fn()
    except requests.RequestException as exc:
        raise AssertionError(f"request failed during outage after {time.monotonic() - t0:.1f}s: {exc!r}")
    return r, time.monotonic() - t0


def test_database_outage_503_then_recovers_without_restarts(make_client, stack_cmd):
    client = make_client()
    tag = client.create_tag(name="survives outage")
    todo = client.create_todo(title="survives outage", deadline="2031-09-09")
    pids_before = tsapi.responder_pids()
    assert pids_before, "responder-pids printed no pid"

    stopped = False
    try:
        stack_cmd("db-stop")
        stopped = True

        # /healthz turns 503 within a few seconds; no request may hang.
        deadline = time.monotonic() + 10
        while True:
            r, took = _timed(lambda: requests.get(tsapi.BASE_URL + "/healthz", timeout=tsapi.TIMEOUT))
            assert took <= OUTAGE_MAX_REQUEST_S, f"/healthz took {took:.1f}s during the outage"
            if r.status_code == 503:
                assert_error(r, 503, "unavailable")
                break
            assert time.monotonic() < deadline, f"/healthz still {r.status_code} 10 s after db-stop"
            time.sleep(0.2)

        calls = {
            "list tags": lambda: client.get("/tags"),
            "get todo": lambda: client.get(f"/todos/{todo['id']}"),
            "list todos": lambda: client.get("/todos", params={"date": "2031-09-09"}),
            "create todo": lambda: client.post("/todos", {"title": "during outage", "deadline": "2031-09-09"}),
            "patch tag": lambda: client.patch(f"/tags/{tag['id']}", {"name": "renamed in outage"}),
            "login": lambda: tsapi.login(client.email, client.password, retry_429=False),
            "register": lambda: tsapi.register(tsapi.unique_email(), tsapi.new_password(), retry_429=False),
        }
        for name, call in calls.items():
            r, took = _timed(call)
            assert took <= OUTAGE_MAX_REQUEST_S, f"{name} took {took:.1f}s during the outage"
            assert_error(r, 503, "unavailable")

        # Several concurrent requests (spread over workers): all 503, none slow.
        def one(_):
            api = tsapi.Api(client.token)
            try:
                return _timed(lambda: api.get("/tags"))
            finally:
                api.session.close()

        with cf.ThreadPoolExecutor(16) as ex:
            results = list(ex.map(one, range(32)))
        for r, took in results:
            assert took <= OUTAGE_MAX_REQUEST_S + 1, f"a request took {took:.1f}s during the outage"
            assert_error(r, 503, "unavailable")

        stack_cmd("db-start")
        stopped = False
        t_start = time.monotonic()
        while True:
            try:
                r = requests.get(tsapi.BASE_URL + "/healthz", timeout=5)
                if r.status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() - t_start < RECOVERY_S, f"/healthz not 200 {RECOVERY_S}s after db-start"
            time.sleep(0.2)

        # Every worker must have recovered its connection: many concurrent requests all succeed.
        def ok(_):
            api = tsapi.Api(client.token)
            try:
                for _ in range(50):
                    r = api.get("/tags")
                    if r.status_code == 200:
                        return r
                    assert time.monotonic() - t_start < RECOVERY_S, short(r)
                    time.sleep(0.2)
                return r
            finally:
                api.session.close()

        with cf.ThreadPoolExecutor(16) as ex:
            for r in ex.map(ok, range(64)):
                assert r.status_code == 200, short(r)
                assert [t["id"] for t in r.json()["items"]] == [tag["id"]]

        # Once recovered, it stays recovered: a second burst succeeds on the first try.
        def first_try(_):
            api = tsapi.Api(client.token)
            try:
                return api.get("/tags")
            finally:
                api.session.close()

        with cf.ThreadPoolExecutor(16) as ex:
            for r in ex.map(first_try, range(64)):
                assert r.status_code == 200, short(r)

        assert client.get_tag(tag["id"])["name"] == "survives outage"  # nothing half-written
        assert client.get_todo(todo["id"]) == todo
        created = client.create_todo(title="after outage", deadline="2031-09-09")
        assert {t["id"] for t in client.list_todos(date="2031-09-09")} == {todo["id"], created["id"]}
        assert tsapi.login(client.email, client.password).status_code == 200
        assert tsapi.responder_pids() == pids_before, "responders were restarted to recover"
    finally:
        if stopped:
            try:
                stack_cmd("db-start")
            finally:
                tsapi.wait_healthy(30)
        else:
            tsapi.wait_healthy(30)


def test_sigterm_finishes_in_flight_request_then_exits(stack_cmd):
    tsapi.wait_healthy(30)
    pids = tsapi.responder_pids()
    assert pids, "responder-pids printed no pid"
    result: dict = {}

    def in_flight():
        t0 = time.monotonic()
        try:
            result["resp"] = requests.get(tsapi.BASE_URL + "/healthz", params={"delay_ms": 1500},
                                          timeout=tsapi.TIMEOUT)
        except requests.RequestException as exc:
            result["exc"] = exc
        result["took"] = time.monotonic() - t0

    th = threading.Thread(target=in_flight, daemon=True)
    try:
        th.start()
        time.sleep(0.3)
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        th.join(tsapi.TIMEOUT + 2)
        assert not th.is_alive(), "in-flight request never finished"
        assert "exc" not in result, f"in-flight request failed: {result.get('exc')!r}"
        r = result["resp"]
        assert r.status_code == 200, f"in-flight request was cut off: {short(r)}"
        assert assert_json(r).get("status") == "ok"
        assert result["took"] >= 1.4, "delay_ms hook not honoured (test hooks disabled?)"

        deadline = time.monotonic() + 5.5
        while any(tsapi.proc_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        still = [p for p in pids if tsapi.proc_alive(p)]
        assert not still, f"responder(s) {still} still running 5 s after SIGTERM"
    finally:
        th.join(tsapi.TIMEOUT + 2)
        # The supervisor starts new responders; leave the stack healthy for anything after us.
        tsapi.wait_healthy(30)
    new_pids = tsapi.responder_pids()
    assert new_pids and not (new_pids & pids), (pids, new_pids)


def test_responder_dying_mid_body_never_looks_like_a_complete_response(stack_cmd):
    # `/healthz?die_mid_body_ms=N` (test hook) answers 200 with a 64 MiB JSON body and SIGKILLs its
    # own responder N ms later, while the body is still being written. The client must see the
    # response break off (an incomplete chunked/gzip stream or a 5xx), never a 200 that ends
    # cleanly with cut JSON: a phone would take a cut pull page for the whole page.
    # (With `fastcgi_keep_conn off`, nginx took the socket closing for the end of the response.)
    # Identity: a whole body sent with gzip is compressed before its first byte leaves, and igzip
    # compresses the 64 MiB of one repeated byte to a small fraction within the delay, so only an
    # identity body is still being written when the kill comes.
    for attempt in range(3):
        tsapi.wait_healthy(30)
        before = tsapi.responder_pids()
        outcome = ""
        try:
            r = requests.get(tsapi.BASE_URL + "/healthz", params={"die_mid_body_ms": 30},
                             headers={"Accept-Encoding": "identity"}, timeout=60)
            if r.status_code == 200:
                try:
                    body = r.json()
                except ValueError:
                    pytest.fail(f"attempt {attempt}: a cut body arrived as a complete 200 ({len(r.content)} bytes)")
                # The whole 64 MiB made it before the kill: the hook was too slow to cut it.
                assert len(body.get("padding", "")) > 60_000_000, short(r)
                outcome = "complete"
            else:
                assert r.status_code >= 500, short(r)
                outcome = f"status {r.status_code}"
        except requests.RequestException as exc:
            outcome = f"broken off: {type(exc).__name__}"
        finally:
            # The hook really killed a responder, and the supervisor replaces it.
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and (tsapi.responder_pids() & before) == before:
                time.sleep(0.1)
            assert (tsapi.responder_pids() & before) != before, "die_mid_body_ms hook killed no responder (test hooks off?)"
            tsapi.wait_healthy(30)
        assert outcome != "complete", "the body was complete before the kill; raise the hook's body size"
    _settle_after_kills()


def _settle_after_kills() -> None:
    tsapi.settle_responders("the responder kills")
