"""Idempotency-Key (contract, Conventions): an authenticated POST carrying the header runs
exactly once per user and key. A repeat with the same method, path and body gets the stored
status and body and changes nothing; the same key with another request is 422
`idempotency_key_reused`; a repeat while the first still runs is 409 `request_in_progress`.
Keys are kept at least 24 hours and then removed by `todosync purge`.

The "first request still running" uses the test hook `X-TodoSync-Test-Hold-Ms: N` (test hooks
on only): the request's transaction stays open N ms after its handler ran.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import uuid

import tsapi
from tsapi import assert_error, short


def key() -> str:
    return "k-" + uuid.uuid4().hex


def count_todos(db, uid: int, title: str) -> int:
    return int(db(f"SELECT COUNT(*) FROM todos WHERE user_id = {uid} AND title = '{title}'").decode().strip())


def test_retry_with_the_same_key_returns_the_first_answer_and_creates_one_todo(client, db):
    k, title = key(), "idem " + uuid.uuid4().hex[:8]
    body = {"title": title, "deadline": "2030-09-01"}
    first = client.post("/todos", body, headers={"Idempotency-Key": k})
    assert first.status_code == 201, short(first)
    for _ in range(2):
        again = client.post("/todos", body, headers={"Idempotency-Key": k})
        assert again.status_code == 201, short(again)
        assert again.content == first.content
        assert again.json()["id"] == first.json()["id"]
        assert again.headers["ETag"] == first.headers["ETag"]
        assert again.headers["Content-Type"] == first.headers["Content-Type"]
    assert count_todos(db, int(client.user["id"]), title) == 1
    # The replay is the original answer, not the record as it is now.
    client.patch(f"/todos/{first.json()['id']}", {"title": title + " changed"})
    assert client.post("/todos", body, headers={"Idempotency-Key": k}).content == first.content
    # Without a key, the same body is a new todo.
    assert client.post("/todos", body).status_code == 201


def test_quick_add_and_tags_retry_safely(client):
    k = key()
    body = {"text": "one\ntwo\nthree", "date": "2030-09-02"}
    first = client.post("/todos/quick-add", body, headers={"Idempotency-Key": k})
    assert first.status_code == 201, short(first)
    again = client.post("/todos/quick-add", body, headers={"Idempotency-Key": k})
    assert again.status_code == 201 and again.content == first.content, short(again)
    assert len(client.list_todos(date="2030-09-02")) == 3
    tk = key()
    t1 = client.post("/tags", {"name": "idem", "color": "#112233"}, headers={"Idempotency-Key": tk})
    t2 = client.post("/tags", {"name": "idem", "color": "#112233"}, headers={"Idempotency-Key": tk})
    assert t1.status_code == 201 and t2.content == t1.content, short(t2)
    assert [t["name"] for t in client.list_tags()].count("idem") == 1


def test_same_key_with_another_request_is_422(client):
    k = key()
    assert client.post("/todos", {"title": "a", "deadline": "2030-09-03"},
                       headers={"Idempotency-Key": k}).status_code == 201
    r = client.post("/todos", {"title": "b", "deadline": "2030-09-03"}, headers={"Idempotency-Key": k})
    assert_error(r, 422, "idempotency_key_reused")
    r = client.post("/todos/quick-add", {"text": "a", "date": "2030-09-03"}, headers={"Idempotency-Key": k})
    assert_error(r, 422, "idempotency_key_reused")
    assert [t["title"] for t in client.list_todos(date="2030-09-03")] == ["a"]


def test_keys_are_per_user(client, other_client):
    k = key()
    body = {"title": "mine", "deadline": "2030-09-04"}
    a = client.post("/todos", body, headers={"Idempotency-Key": k})
    b = other_client.post("/todos", body, headers={"Idempotency-Key": k})
    assert a.status_code == 201 and b.status_code == 201, (short(a), short(b))
    assert a.json()["id"] != b.json()["id"]
    assert len(other_client.list_todos(date="2030-09-04")) == 1


def test_a_failed_request_does_not_use_up_its_key(client):
    k = key()
    r = client.post("/todos", {"title": "", "deadline": "2030-09-05"}, headers={"Idempotency-Key": k})
    assert_error(r, 422, "validation_failed")
    r = client.post("/todos", {"title": "fixed", "deadline": "2030-09-05"}, headers={"Idempotency-Key": k})
    assert r.status_code == 201, short(r)


def test_key_syntax(client, raw):
    assert client.post("/todos", {"title": "x", "deadline": "2030-09-06"},
                       headers={"Idempotency-Key": "k" * 100}).status_code == 201
    for bad in ["k" * 101, "tab\tinside"]:
        r = client.post("/todos", {"title": "x", "deadline": "2030-09-06"}, headers={"Idempotency-Key": bad})
        assert_error(r, 400, "bad_request")
    # Non-ASCII bytes in the header.
    r = tsapi.raw_request("POST", "/api/v1/todos", {
        "Authorization": f"Bearer {client.token}", "Content-Type": "application/json",
        "Idempotency-Key": "cl\u00e9".encode("utf-8").decode("latin-1"),
    }, b'{"title":"x","deadline":"2030-09-06"}')
    assert r.status_code == 400, (r.status_code, r.text)
    assert len(client.list_todos(date="2030-09-06")) == 1
    # The key needs a user: no token is 401 as usual.
    r = tsapi.Api().post("/todos", {"title": "x", "deadline": "2030-09-06"}, headers={"Idempotency-Key": key()})
    assert_error(r, 401, "unauthorized")


def test_repeat_while_the_first_runs_is_409_then_gets_the_answer(client, db):
    k, title = key(), "held " + uuid.uuid4().hex[:8]
    body = {"title": title, "deadline": "2030-09-07"}

    def first():
        api = tsapi.Api(token=client.token)
        return api.post("/todos", body, headers={"Idempotency-Key": k, "X-TodoSync-Test-Hold-Ms": "4000"},
                        timeout=60)

    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        held = pool.submit(first)
        time.sleep(1.0)
        r = client.post("/todos", body, headers={"Idempotency-Key": k})
        assert_error(r, 409, "request_in_progress")
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
        # A different request with the key in use is still 422.
        other = client.post("/todos", {"title": "other", "deadline": "2030-09-07"}, headers={"Idempotency-Key": k})
        assert_error(other, 422, "idempotency_key_reused")
        done = held.result()
    assert done.status_code == 201, short(done)
    again = client.post("/todos", body, headers={"Idempotency-Key": k})
    assert again.status_code == 201 and again.content == done.content, short(again)
    assert count_todos(db, int(client.user["id"]), title) == 1


def test_purge_removes_keys_older_than_24_hours(client, db):
    uid = int(client.user["id"])
    old, fresh = key(), key()
    for k in (old, fresh):
        assert client.post("/todos", {"title": k, "deadline": "2030-09-08"},
                           headers={"Idempotency-Key": k}).status_code == 201
    db(f"UPDATE idempotency_keys SET created_at = NOW(3) - INTERVAL 25 HOUR "
       f"WHERE user_id = {uid} AND idem_key = '{old}'")
    out = tsapi.stack("purge")
    assert "idempotencyKeys=" in out, out
    stored = db(f"SELECT idem_key FROM idempotency_keys WHERE user_id = {uid}").decode().split()
    assert old not in stored and fresh in stored, stored
    # The expired key is free again; the fresh one still protects its request.
    r = client.post("/todos", {"title": "new use", "deadline": "2030-09-08"}, headers={"Idempotency-Key": old})
    assert r.status_code == 201, short(r)
    r = client.post("/todos", {"title": "new use", "deadline": "2030-09-08"}, headers={"Idempotency-Key": fresh})
    assert_error(r, 422, "idempotency_key_reused")


def test_push_accepts_a_key(client):
    k = key()
    body = {"deviceId": "d1", "operations": [{"opId": str(uuid.uuid4()), "entity": "tag", "action": "create",
                                               "clientId": str(uuid.uuid4()),
                                               "data": {"name": "pushed", "color": "#445566"}}]}
    a = client.post("/sync/push", body, headers={"Idempotency-Key": k})
    b = client.post("/sync/push", body, headers={"Idempotency-Key": k})
    assert a.status_code == 200 and b.content == a.content, (short(a), short(b))
    assert [t["name"] for t in client.list_tags()].count("pushed") == 1


def test_logout_with_a_key_then_its_repeat_is_401(make_client):
    api = make_client()
    k = key()
    r = api.post("/auth/logout", headers={"Idempotency-Key": k})
    assert r.status_code == 204, short(r)
    # The token is gone: a repeat cannot be authenticated, key or not.
    assert_error(api.post("/auth/logout", headers={"Idempotency-Key": k}), 401, "unauthorized")
