"""Friends, the server side (issue 37; contract "Friends"; docs/FRIENDS.md).

Every test talks to the real stack: nginx (with nchan), the responders and MariaDB. Expiry and
the 500-friend limit are set up through the test database socket (backdated rows, inserted
friendship rows), everything else through the API.
"""
from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time
import urllib.parse

import pytest

import tsapi

LIVE = "/api/v1/sync/live"
EVENT_WITHIN = 1.0  # the contract's "within a second"
MONTH = "2030-06"


class EventStream:
    """A live stream that keeps each SSE event's type and data (`event:` lines included)."""

    def __init__(self, token: str, query: str = ""):
        url = urllib.parse.urlsplit(tsapi.BASE_URL)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        self.conn.request("GET", LIVE + query, headers={"Accept": "text/event-stream",
                                                        "Authorization": f"Bearer {token}"})
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.events: queue.Queue = queue.Queue()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()
        else:
            self.body = self.resp.read()

    def _read(self):
        kind = "message"
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return
                text = line.decode().rstrip("\r\n")
                if text.startswith("event:"):
                    kind = text[6:].strip()
                elif text.startswith("data:"):
                    self.events.put((kind, json.loads(text[5:].strip())))
                elif text == "":
                    kind = "message"
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            return

    def next(self, kind: str, timeout: float = EVENT_WITHIN):
        """The data of the next event of `kind` within `timeout` (others are skipped), or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                got_kind, data = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if got_kind == kind:
                return data

    def friend_events(self, wait: float = 0.5) -> list:
        """Every friend event that arrives within `wait` seconds."""
        out = []
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            try:
                kind, data = self.events.get(timeout=left)
            except queue.Empty:
                break
            if kind == "friend":
                out.append(data)
        return out

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.conn.close()


@pytest.fixture
def streams():
    opened: list[EventStream] = []

    def _open(api: tsapi.Api, friends: bool = True) -> EventStream:
        s = EventStream(api.token, "?friends=1" if friends else "")
        assert s.status == 200, getattr(s, "body", b"")
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


def request(api: tsapi.Api, email: str):
    return api.post("/friends/requests", {"email": email})


def requests_of(api: tsapi.Api) -> dict:
    r = api.get("/friends/requests")
    assert r.status_code == 200, tsapi.short(r)
    return r.json()


def friend_ids(api: tsapi.Api) -> list[int]:
    r = api.get("/friends")
    assert r.status_code == 200, tsapi.short(r)
    return [f["id"] for f in r.json()["items"]]


def befriend(a: tsapi.Api, b: tsapi.Api) -> None:
    assert request(a, b.email).status_code == 202
    incoming = requests_of(b)["incoming"]
    r = b.post(f"/friends/requests/{incoming[0]['id']}/accept")
    assert r.status_code == 200, tsapi.short(r)


# ---------------------------------------------------------------------------------- account

def test_nickname_rules(client):
    r = client.get("/account")
    assert r.status_code == 200, tsapi.short(r)
    me = r.json()
    assert set(me) == {"id", "email", "nickname", "createdAt"} and me["nickname"] is None
    assert me["id"] == client.user["id"] and me["email"] == client.email
    r = client.patch("/account", {"nickname": "  Jö 🐱 ‍ 김\u200d  "})
    assert r.status_code == 200, tsapi.short(r)
    assert r.json()["nickname"] == "Jö 🐱 ‍ 김\u200d"
    for bad in ["", "   ", "x" * 41, "a\u0007b", "a\u200bb", "a\u202eb", 7]:
        tsapi.assert_error(client.patch("/account", {"nickname": bad}), 422, "validation_failed", ["nickname"])
    assert client.get("/account").json()["nickname"] == "Jö 🐱 ‍ 김\u200d", "a refused change kept the old value"
    assert client.patch("/account", {"nickname": "é" * 40}).json()["nickname"] == "é" * 40
    assert client.patch("/account", {}).json()["nickname"] == "é" * 40
    assert client.patch("/account", {"nickname": None}).json()["nickname"] is None


# ---------------------------------------------------------------------------------- requests

def test_requests_never_tell_whether_an_account_exists(make_client):
    a, b = make_client(), make_client()
    nobody = tsapi.unique_email()
    answers = [request(a, e) for e in (b.email, nobody, b.email, nobody)]
    assert {(r.status_code, r.content) for r in answers} == {(202, b"{}")}
    outgoing = requests_of(a)["outgoing"]
    assert [o["email"] for o in outgoing] == [nobody, b.email], "newest first, repeats changed nothing"
    assert set(outgoing[0]) == {"id", "email", "createdAt"}
    incoming = requests_of(b)["incoming"]
    assert len(incoming) == 1 and incoming[0]["id"] == outgoing[1]["id"]
    assert incoming[0]["from"] == {"id": a.user["id"], "email": a.email, "nickname": None}
    # Own email, in any spelling login accepts: 422; a malformed one: 422.
    for own in (a.email, "  " + a.email.upper() + " "):
        tsapi.assert_error(request(a, own), 422, "validation_failed", ["email"])
    tsapi.assert_error(request(a, "no-at-sign"), 422, "validation_failed", ["email"])


def test_accept_decline_cancel_and_unfriend(make_client, db):
    a, b, c = make_client(), make_client(), make_client()
    assert request(a, b.email).status_code == 202 and request(c, b.email).status_code == 202
    incoming = {i["from"]["id"]: i["id"] for i in requests_of(b)["incoming"]}
    # Only the recipient accepts or declines; only the sender cancels.
    tsapi.assert_error(a.post(f"/friends/requests/{incoming[a.user['id']]}/accept"), 404, "not_found")
    tsapi.assert_error(b.delete(f"/friends/requests/{incoming[a.user['id']]}"), 404, "not_found")
    r = b.post(f"/friends/requests/{incoming[a.user['id']]}/accept")
    assert r.status_code == 200, tsapi.short(r)
    friend = r.json()
    assert set(friend) == {"id", "email", "nickname", "since"} and friend["id"] == a.user["id"]
    assert friend_ids(a) == [b.user["id"]] and friend_ids(b) == [a.user["id"]]
    assert requests_of(a)["outgoing"] == [] and len(requests_of(b)["incoming"]) == 1
    # Decline: gone for the recipient, still pending and cancellable for the sender.
    assert b.post(f"/friends/requests/{incoming[c.user['id']]}/decline").status_code == 204
    assert requests_of(b)["incoming"] == []
    assert [o["id"] for o in requests_of(c)["outgoing"]] == [incoming[c.user["id"]]]
    tsapi.assert_error(b.post(f"/friends/requests/{incoming[c.user['id']]}/accept"), 404, "not_found")
    assert request(c, b.email).status_code == 202 and requests_of(b)["incoming"] == [], "a repeat changed nothing"
    assert c.delete(f"/friends/requests/{incoming[c.user['id']]}").status_code == 204
    assert requests_of(c)["outgoing"] == []
    tsapi.assert_error(c.delete(f"/friends/requests/{incoming[c.user['id']]}"), 404, "not_found")
    # Asking a friend changes nothing; unfriend ends it both ways.
    assert request(a, b.email).status_code == 202 and requests_of(a)["outgoing"] == []
    assert a.delete(f"/friends/{b.user['id']}").status_code == 204
    assert friend_ids(a) == [] and friend_ids(b) == []
    tsapi.assert_error(a.delete(f"/friends/{b.user['id']}"), 404, "not_found")


def test_crossed_requests_make_friends_at_once(make_client):
    a, b = make_client(), make_client()
    assert request(a, b.email.upper()).status_code == 202
    assert request(b, a.email).status_code == 202
    assert friend_ids(a) == [b.user["id"]] and friend_ids(b) == [a.user["id"]]
    assert requests_of(a) == {"incoming": [], "outgoing": []} == requests_of(b)


def test_a_request_reaches_an_account_registered_later(make_client):
    a = make_client()
    email = tsapi.unique_email()
    assert request(a, email).status_code == 202
    b = make_client(email=email)
    incoming = requests_of(b)["incoming"]
    assert [i["from"]["id"] for i in incoming] == [a.user["id"]]


def test_requests_expire_exactly_30_days_after_sending(make_client, db):
    a, b = make_client(), make_client()
    assert request(a, b.email).status_code == 202
    rid = requests_of(a)["outgoing"][0]["id"]
    # 30 days minus a second ago: still pending.
    db(f"UPDATE friend_requests SET created_at = NOW(3) - INTERVAL 30 DAY + INTERVAL 2 SECOND, "
       f"expires_at = NOW(3) + INTERVAL 2 SECOND WHERE id = {rid}")
    assert [i["id"] for i in requests_of(b)["incoming"]] == [rid]
    time.sleep(2.2)
    assert requests_of(b)["incoming"] == [] and requests_of(a)["outgoing"] == []
    tsapi.assert_error(b.post(f"/friends/requests/{rid}/accept"), 404, "not_found")
    tsapi.assert_error(a.delete(f"/friends/requests/{rid}"), 404, "not_found")
    assert db(f"SELECT COUNT(*) FROM friend_requests WHERE id = {rid}").strip() == b"1", "reads decide; rows stay"
    # A new request after expiry starts afresh.
    assert request(a, b.email).status_code == 202
    assert [i["from"]["id"] for i in requests_of(b)["incoming"]] == [a.user["id"]]


def test_twenty_requests_per_hour_then_429(make_client, db):
    a = make_client()
    for i in range(20):
        r = request(a, tsapi.unique_email())
        assert r.status_code == 202, (i, tsapi.short(r))
    r = request(a, tsapi.unique_email())
    tsapi.assert_error(r, 429, "rate_limited")
    assert 3500 <= int(r.headers["Retry-After"]) <= 3600, r.headers
    assert len(requests_of(a)["outgoing"]) == 20, "the refused request was not stored"
    # Sliding: once the oldest is over an hour old, one more fits (and only one).
    db(f"UPDATE friend_request_sends SET sent_at = NOW(3) - INTERVAL 61 MINUTE WHERE user_id = {a.user['id']} "
       f"ORDER BY sent_at LIMIT 1")
    assert request(a, tsapi.unique_email()).status_code == 202
    tsapi.assert_error(request(a, tsapi.unique_email()), 429, "rate_limited")


def test_friend_limit_is_409_and_changes_nothing(make_client, db):
    a, b = make_client(), make_client()
    assert request(a, b.email).status_code == 202
    rid = requests_of(b)["incoming"][0]["id"]
    base = 4_000_000_000 + b.user["id"] * 1000
    db("INSERT INTO friendships (user_id, friend_id, since) VALUES "
       + ",".join(f"({b.user['id']}, {base + i}, NOW(3))" for i in range(500)))
    tsapi.assert_error(b.post(f"/friends/requests/{rid}/accept"), 409, "friend_limit")
    tsapi.assert_error(request(b, a.email), 409, "friend_limit")
    assert [i["id"] for i in requests_of(b)["incoming"]] == [rid], "nothing changed"
    assert friend_ids(a) == []
    db(f"DELETE FROM friendships WHERE user_id = {b.user['id']} AND friend_id = {base}")
    assert b.post(f"/friends/requests/{rid}/accept").status_code == 200
    db(f"DELETE FROM friendships WHERE user_id = {b.user['id']} AND friend_id >= {base}")


# ---------------------------------------------------------------------------------- a friend's month

def test_a_friends_month_and_the_unknown_id_answer(make_client):
    a, b, stranger = make_client(), make_client(), make_client()
    befriend(a, b)
    tag = b.create_tag("work 💼", "#FF8800")
    t1 = b.create_todo("Zeta 日本", "2030-06-03", tagId=tag["id"], notes="secret", isImportant=True, difficulty=3)
    b.create_todo("alpha", "2030-06-03", raw="alpha #raw", estimatedTime=30)
    b.create_todo("next month", "2030-07-01")
    r = a.get(f"/friends/{b.user['id']}/todos?month={MONTH}")
    assert r.status_code == 200, tsapi.short(r)
    items = r.json()["items"]
    own = b.list_todos(**{"from": "2030-06-01", "to": "2030-06-30"})
    assert [i["id"] for i in items] == [t["id"] for t in own], "the order of GET /todos"
    keys = {"id", "title", "deadline", "isCompleted", "isImportant", "isLife", "difficulty", "estimatedTime", "tag"}
    for item, todo in zip(items, own):
        assert set(item) == keys, item
        assert {k: item[k] for k in keys - {"tag"}} == {k: todo[k] for k in keys - {"tag"}}
    assert items[0]["id"] == t1["id"] and items[0]["tag"] == {"name": "work 💼", "color": "#FF8800"}
    assert items[1]["tag"] is None
    stats = a.get(f"/friends/{b.user['id']}/daily-stats?month={MONTH}")
    assert stats.status_code == 200 and stats.content == b.get(f"/daily-stats?month={MONTH}").content
    # month first: 400 for anyone.
    for who in (b.user["id"], stranger.user["id"]):
        tsapi.assert_error(a.get(f"/friends/{who}/todos?month=2030-13"), 400)
        tsapi.assert_error(a.get(f"/friends/{who}/daily-stats"), 400)
    # The one unknown-id answer: stranger, former friend, deleted account, self, unknown, junk.
    c = make_client()
    befriend(a, c)
    assert a.delete(f"/friends/{c.user['id']}").status_code == 204
    d = make_client()
    befriend(a, d)
    r = d.post("/account/delete", {"password": d.password})
    assert r.status_code == 204, tsapi.short(r)
    assert d.user["id"] not in friend_ids(a), "a deleted account's friendships end at once"
    bodies = set()
    for who in (stranger.user["id"], c.user["id"], d.user["id"], a.user["id"], 999_999_999_999, 0, "x"):
        for path in (f"/friends/{who}/todos?month={MONTH}", f"/friends/{who}/daily-stats?month={MONTH}"):
            r = a.get(path)
            assert r.status_code == 404, (who, tsapi.short(r))
            bodies.add(r.content)
        r = a.delete(f"/friends/{who}")
        assert r.status_code == 404
        bodies.add(r.content)
    assert len(bodies) == 1, bodies


def test_account_delete_ends_friends_and_sent_requests_keeps_requests_to_it(make_client):
    a, b, c, e = make_client(), make_client(), make_client(), make_client()
    befriend(a, b)
    assert request(b, c.email).status_code == 202       # sent by b: goes with b
    assert request(e, b.email).status_code == 202       # sent to b: stays listed for e
    assert b.post("/account/delete", {"password": b.password}).status_code == 204
    assert friend_ids(a) == []
    assert requests_of(c)["incoming"] == []
    assert [o["email"] for o in requests_of(e)["outgoing"]] == [b.email]
    # An account registered again with b's email does not receive what was sent to b.
    b2 = make_client(email=b.email)
    assert requests_of(b2)["incoming"] == []


def test_export_has_nickname_friends_and_requests(make_client):
    a, b = make_client(), make_client()
    befriend(a, b)
    a.patch("/account", {"nickname": "Ann"})
    nobody = tsapi.unique_email()
    request(a, nobody)
    r = a.get("/account/export")
    assert r.status_code == 200, tsapi.short(r)
    body = r.json()
    assert body["user"]["nickname"] == "Ann"
    assert [f["id"] for f in body["friends"]] == [b.user["id"]]
    assert body["friendRequests"] == requests_of(a)


# ---------------------------------------------------------------------------------- live

def test_friend_events_with_friends_1_only(make_client, streams):
    a, b = make_client(), make_client()
    befriend(a, b)
    with_friends, plain = streams(a), streams(a, friends=False)
    todo = b.create_todo("seen by a", "2030-06-10")
    assert with_friends.next("friend") == {"friendId": b.user["id"]}
    assert plain.friend_events(0.5) == [], "no friend events without friends=1"
    # The friend's own stream keeps its pokes; a's own write pokes a's streams as before.
    a.create_todo("mine", "2030-06-10")
    # (Pokes' own timing is test_live_sync's; 3 s here: the box may be loaded.)
    assert with_friends.next("message", 3.0) is not None and plain.next("message", 3.0) is not None
    # The list changes: nickname, unfriend.
    b.patch("/account", {"nickname": "Bee"})
    assert with_friends.next("friend") == {"friendId": None}
    assert b.delete(f"/friends/{a.user['id']}").status_code == 204
    assert with_friends.next("friend") == {"friendId": None}
    b.patch(f"/todos/{todo['id']}", {"title": "no longer seen"})
    assert with_friends.friend_events(0.7) == [], "a former friend's writes announce nothing"
    assert plain.friend_events(0.1) == []


def test_a_stream_opened_before_the_friendship_picks_it_up(make_client, streams):
    a, b = make_client(), make_client()
    s = streams(a)
    assert request(b, a.email).status_code == 202
    assert s.next("friend") == {"friendId": None}, "an incoming request changes a's requests"
    rid = requests_of(a)["incoming"][0]["id"]
    assert a.post(f"/friends/requests/{rid}/accept").status_code == 200
    assert s.next("friend") == {"friendId": None}
    start = time.monotonic()
    b.create_todo("new friend's todo", "2030-06-11")
    assert s.next("friend") == {"friendId": b.user["id"]}
    assert time.monotonic() - start < EVENT_WITHIN + 0.5
