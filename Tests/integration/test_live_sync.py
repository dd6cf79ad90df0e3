"""Live sync, the server side (issue 22; contract "Sync: live (pokes)").

`GET /api/v1/sync/live` is authenticated by the responder and handed to nginx's nchan subscriber
location; after each commit that changes what the user's pull returns, the responder publishes
`{"version", "deviceId"}` to that user's channel through a publisher on a Unix socket no client
reaches. Every test here talks to the real stack: nginx (with nchan), responders, MariaDB.
"""
from __future__ import annotations

import http.client
import json
import os
import queue
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

import synclib
import tsapi
from test_metrics import scrape, total

LIVE = "/api/v1/sync/live"
POKE_WITHIN = 1.0  # seconds: the contract's "within a second" of the commit


class Stream:
    """One live-sync stream over its own connection: its status, headers and the pokes it got."""

    def __init__(self, token: str | None, *, query: str = "", accept: str = "text/event-stream",
                 base_url: str = tsapi.BASE_URL):
        url = urllib.parse.urlsplit(base_url)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        headers = {"Accept": accept}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.conn.request("GET", LIVE + query, headers=headers)
        self.sock = self.conn.sock  # getresponse() may drop its own reference (the response keeps it)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        self.pokes: queue.Queue = queue.Queue()
        self.comments: list[str] = []
        self.ended = threading.Event()  # the server closed the stream (or close() was called)
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()
            self.body = b""
        else:
            self.body = self.resp.read()

    def _read(self):
        try:
            self._read_lines()
        finally:
            self.ended.set()

    def _read_lines(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return
                text = line.decode().rstrip("\r\n")
                if text.startswith("data:"):
                    self.pokes.put((time.monotonic(), json.loads(text[5:].strip())))
                elif text.startswith(":"):
                    self.comments.append(text)
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            return  # closed (close() may clear the response's file under readline: AttributeError)

    def poke(self, timeout: float = POKE_WITHIN):
        """The next poke's (arrival time, body), or None when none came within `timeout`."""
        try:
            return self.pokes.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self):
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        self.resp.close()
        self.conn.close()


@pytest.fixture
def streams():
    opened: list[Stream] = []

    def _open(token, **kw) -> Stream:
        s = Stream(token, **kw)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


def token_of(api: tsapi.Api) -> str:
    return api.token


def newest_version(api: tsapi.Api, cursor: str | None = None) -> int:
    """The newest version a pull shows (from `cursor`: tombstones too, which a first pull leaves out)."""
    run = synclib.pull_all(api, cursor=cursor)
    return max(rec["version"] for page in run.pages for _, rec, _ in synclib.page_records(page))


def cursor_now(api: tsapi.Api) -> str:
    return synclib.pull_all(api).pages[-1]["cursor"]


def live_stream_limit() -> int:
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "nginx", "limits.env")) as f:
        for line in f:
            if line.startswith("TODOSYNC_LIVE_STREAMS="):
                return int(line.split("=", 1)[1])
    raise AssertionError("TODOSYNC_LIVE_STREAMS not in nginx/limits.env")


def test_a_rest_write_pokes_the_users_stream_within_a_second(client, streams):
    s = streams(token_of(client))
    assert s.status == 200, s.body
    assert s.headers["content-type"].startswith("text/event-stream"), s.headers
    assert s.headers.get("x-accel-buffering") == "no", s.headers
    start = time.monotonic()
    todo = client.create_todo("live rest")
    got = s.poke()
    assert got is not None, "no poke within a second of a REST write"
    arrived, body = got
    assert arrived - start < POKE_WITHIN
    # The user's newest version: the todo's day stat (derived in the same commit) comes after it.
    assert body == {"version": newest_version(client), "deviceId": None} and body["version"] >= todo["version"]
    # Every write pokes: an update too, with the newer version.
    r = client.patch(f"/todos/{todo['id']}", {"isCompleted": True})
    assert r.status_code == 200, tsapi.short(r)
    arrived, body = s.poke()
    assert body["version"] == newest_version(client) and body["version"] > todo["version"], body


def test_a_push_pokes_with_the_pushing_device(client, streams):
    s = streams(token_of(client))
    assert s.status == 200, s.body
    start = time.monotonic()
    synclib.push(client, [synclib.create_todo_op("live push a"), synclib.create_todo_op("live push b")],
                 device="phone-live")
    got = s.poke()
    assert got is not None, "no poke within a second of a push"
    assert got[0] - start < POKE_WITHIN
    assert got[1] == {"version": newest_version(client), "deviceId": "phone-live"}, got


def test_quick_add_and_an_idempotency_key_write_poke_after_their_commit(client, streams):
    s = streams(token_of(client))
    assert s.status == 200, s.body
    r = client.post("/todos/quick-add", {"text": "buy milk\ncall mum", "date": "2030-02-02"})
    assert r.status_code == 201, tsapi.short(r)
    got = s.poke()
    assert got is not None and got[1] == {"version": newest_version(client), "deviceId": None}, got
    # An Idempotency-Key write commits in its own outer transaction: the poke follows that commit,
    # and a replay of the stored answer changes nothing and pokes nothing.
    key = {"Idempotency-Key": tsapi.unique("live-key")}
    r = client.post("/todos", {"title": "keyed", "deadline": "2030-02-03"}, headers=key)
    assert r.status_code == 201, tsapi.short(r)
    got = s.poke()
    assert got is not None and got[1] == {"version": newest_version(client), "deviceId": None}, got
    replay = client.post("/todos", {"title": "keyed", "deadline": "2030-02-03"}, headers=key)
    assert replay.status_code == 201 and replay.json() == r.json()
    assert s.poke(timeout=1.0) is None, "a replayed answer poked"


def test_a_derived_change_pokes_untagging_by_a_tag_delete(client, streams):
    tag = client.create_tag("live tag")
    client.create_todo("tagged", tagId=tag["id"])
    cursor = cursor_now(client)
    s = streams(token_of(client))
    assert s.status == 200, s.body
    start = time.monotonic()
    r = client.delete(f"/tags/{tag['id']}")
    assert r.status_code == 204, tsapi.short(r)
    got = s.poke()
    assert got is not None, "no poke within a second of a tag delete"
    assert got[0] - start < POKE_WITHIN
    # The poke names the newest version: the un-tagged todo (and its day's stat), not the tag's.
    newest = newest_version(client, cursor)
    assert got[1] == {"version": newest, "deviceId": None}, got
    todos = [rec for page in synclib.pull_all(client, cursor=cursor).pages for kind, rec, _ in synclib.page_records(page)
             if kind == "todos"]
    assert todos and todos[0]["tagId"] is None and todos[0]["version"] <= newest


def test_another_users_pokes_never_arrive(client, other_client, streams):
    mine = streams(token_of(client))
    theirs = streams(token_of(other_client))
    assert mine.status == theirs.status == 200
    other_client.create_todo("not yours")
    synclib.push(other_client, [synclib.create_todo_op("not yours either")], device="their-phone")
    assert theirs.poke() is not None and theirs.poke() is not None
    assert mine.poke(timeout=1.5) is None, "a poke of another user's write arrived"
    client.create_todo("mine")
    assert mine.poke() is not None


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic abc"])
def test_no_stream_without_a_valid_token(streams, authorization):
    s = Stream(None) if authorization is None else None
    if s is None:
        url = urllib.parse.urlsplit(tsapi.BASE_URL)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("GET", LIVE, headers={"Accept": "text/event-stream", "Authorization": authorization})
        resp = conn.getresponse()
        status, headers, body = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        conn.close()
    else:
        status, headers, body = s.status, s.headers, s.body
        s.close()
    assert status == 401
    assert headers["content-type"].startswith("application/json"), headers
    assert json.loads(body)["error"]["code"] == "unauthorized"


def test_a_schema_version_below_the_minimum_is_426_before_any_stream(client, streams):
    s = streams(token_of(client), query="?schemaVersion=0")
    assert s.status == 426, s.body
    assert json.loads(s.body)["error"]["code"] == "upgrade_required"
    assert streams(token_of(client), query="?schemaVersion=abc").status == 400


@pytest.mark.parametrize("accept", ["*/*", "application/json", None])
def test_a_request_that_does_not_ask_for_an_event_stream_is_a_json_400(client, streams, accept):
    url = urllib.parse.urlsplit(tsapi.BASE_URL)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    headers = {"Authorization": f"Bearer {token_of(client)}"}
    if accept is not None:
        headers["Accept"] = accept
    conn.request("GET", LIVE, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 400, (resp.status, body)
    assert resp.getheader("Content-Type").startswith("application/json")
    assert json.loads(body)["error"]["code"] == "bad_request"


def test_too_many_open_streams_for_one_account_is_429_json(client, other_client, streams):
    limit = live_stream_limit()
    opened = [streams(token_of(client)) for _ in range(limit)]
    assert [s.status for s in opened] == [200] * limit
    over = streams(token_of(client))
    assert over.status == 429, over.body
    assert over.headers["content-type"].startswith("application/json"), over.headers
    assert json.loads(over.body)["error"]["code"] == "rate_limited"
    assert int(over.headers["retry-after"]) >= 1
    # Per account: another user still gets a stream; one closed stream frees a place.
    assert streams(token_of(other_client)).status == 200
    opened[0].close()
    deadline = time.monotonic() + 5
    while True:
        again = streams(token_of(client))
        if again.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert again.status == 200


def test_a_client_cannot_publish_or_subscribe_directly(client, streams):
    s = streams(token_of(client))
    assert s.status == 200
    for uid in range(1, 50):
        for method, path in [("POST", f"/__live/publish/{uid}"), ("GET", f"/__live/subscribe/{uid}"),
                             ("POST", f"/__live/subscribe/{uid}"), ("POST", f"/api/v1/sync/live")]:
            if path.startswith("/api") and uid > 1:
                continue
            r = requests.request(method, tsapi.BASE_URL + path, data='{"version":999999,"deviceId":"forged"}',
                                 headers={"Accept": "text/event-stream", "Content-Type": "application/json",
                                          "Authorization": f"Bearer {token_of(client)}"},
                                 timeout=3, stream=True)
            assert r.status_code in (404, 405), (method, path, r.status_code)
            r.close()
    assert s.poke(timeout=1.0) is None, "a forged poke arrived"


def test_a_write_succeeds_when_the_publisher_is_down_and_is_counted(client, streams):
    publisher = tsapi.stack_env().get("TODOSYNC_LIVE_PUBLISHER")
    assert publisher and os.path.exists(publisher), publisher
    s = streams(token_of(client))
    assert s.status == 200
    before = total(scrape(), "todosync_live_publishes_total", result="failed")
    aside = publisher + ".down"
    os.rename(publisher, aside)  # nobody listens at the path now: connect fails at once
    try:
        start = time.monotonic()
        todo = client.create_todo("publisher down")
        elapsed = time.monotonic() - start
        synclib.push(client, [synclib.create_todo_op("publisher down push")], device="dev-down")
    finally:
        os.rename(aside, publisher)
    assert todo["title"] == "publisher down" and elapsed < 2.0
    assert s.poke(timeout=1.0) is None
    after = total(scrape(), "todosync_live_publishes_total", result="failed")
    assert after - before == 2, (before, after)
    # Back up: the next write pokes again.
    client.create_todo("publisher back")
    assert s.poke() is not None


def test_open_streams_do_not_count_against_requests_in_flight(client, streams):
    # More streams than nginx's per-token limit (4) and the responders' in-flight limit (2).
    opened = [streams(token_of(client)) for _ in range(6)]
    assert [s.status for s in opened] == [200] * 6
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda i: client.post("/todos", {"title": f"t{i}", "deadline": "2030-01-01"}),
                                range(2)))
    assert [r.status_code for r in results] == [201, 201], [tsapi.short(r) for r in results]
    assert client.get("/todos", params={"date": "2030-01-01"}).status_code == 200
    for s in opened:
        assert s.poke() is not None


def test_revoking_tokens_closes_the_accounts_open_streams(streams):
    """Issue 24: a password change, a revoked session and an account delete end the account's
    open streams at once (nchan's channel is deleted after the commit), so a revoked token's
    stream does not outlive it; a valid token reconnects and is authorized anew."""
    phone = tsapi.new_user()
    r = tsapi.login(phone.email, phone.password)
    assert r.status_code == 200, tsapi.short(r)
    laptop = tsapi.Api(r.json()["token"])
    on_phone, on_laptop = streams(phone.token), streams(laptop.token)
    assert (on_phone.status, on_laptop.status) == (200, 200)
    r = laptop.post("/account/password", {"currentPassword": phone.password, "newPassword": "another password 1"})
    assert r.status_code == 204, tsapi.short(r)
    assert on_phone.ended.wait(2), "the stream of a token the password change revoked stayed open"
    assert streams(phone.token).status == 401
    assert on_laptop.ended.wait(2)
    again = streams(laptop.token)
    assert again.status == 200, "the token that changed the password streams again"

    # A revoked session: the same, for the one token.
    r = tsapi.login(phone.email, "another password 1")
    assert r.status_code == 200, tsapi.short(r)
    tablet = tsapi.Api(r.json()["token"])
    on_tablet = streams(tablet.token)
    assert on_tablet.status == 200
    sessions = laptop.get("/account/sessions").json()["items"]
    tablet_session = next(s for s in sessions if not s["current"])  # the phone's was revoked above
    r = laptop.delete(f"/account/sessions/{tablet_session['id']}")
    assert r.status_code == 204, tsapi.short(r)
    assert on_tablet.ended.wait(2), "a revoked session's stream stayed open"
    assert streams(tablet.token).status == 401

    # The account deleted: every stream ends, none reopens.
    last = streams(laptop.token)
    assert last.status == 200
    r = laptop.post("/account/delete", {"password": "another password 1"})
    assert r.status_code == 204, tsapi.short(r)
    assert last.ended.wait(2), "a deleted account's stream stayed open"
    assert streams(laptop.token).status == 401
