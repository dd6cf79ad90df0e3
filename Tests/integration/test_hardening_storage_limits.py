"""Issue 34, items 3 and 4: what is stored for a record and for an Idempotency-Key answer.

Item 3. A todo within every limit of the contract (title 200, raw 2,000 and notes 10,000
characters, all U+0001: each a 6-byte `\\u0001` escape in its JSON) renders to about 73 KB, more
than todo_list's 64 KB column held: `POST /todos` was 500, and a push carrying it rolled back whole
on every retry, so the device was stuck for good. Sql/028 sizes the column from the bound derived
in Swift (`Todo.maximumRenderedBytes`).

Item 4. 20 keyed pushes (250 no-op updates of a 54 KB todo each) stored 272 MB of answers, of
which the per-account quota counted 1.7 MB; a keyed answer over 16 MB was 503 on every retry. A
keyed push's answer is now rebuilt from its stored op results instead of stored; every answer
that is stored counts against the account's stored bytes, and the account's keys have a ceiling.
"""

from __future__ import annotations

import json
import uuid

from synclib import op, push_raw, uid
from tsapi import short

WIDE = "\u0001"


def _largest_todo(title: str, deadline: str) -> dict:
    return {"title": title + WIDE * (200 - len(title)), "raw": WIDE * 2000, "notes": WIDE * 10000,
            "deadline": deadline, "difficulty": 5, "estimatedTime": 1440}


def _int(db, query: str) -> int:
    return int(db(query).strip() or 0)


def test_the_largest_valid_todo_is_created_listed_and_updated(client):
    body = _largest_todo("big", "2031-07-01")
    r = client.post("/todos", body)
    assert r.status_code == 201, short(r)
    todo = r.json()
    assert len(r.content) > 65_535
    assert todo["notes"] == body["notes"] and todo["raw"] == body["raw"]
    listed = client.list_todos(date="2031-07-01")
    assert [t["id"] for t in listed] == [todo["id"]] and listed[0] == todo
    assert client.list_todos(**{"from": "2031-07-01", "to": "2031-07-02"}) == [todo]
    r = client.patch(f"/todos/{todo['id']}", {"isCompleted": True})
    assert r.status_code == 200, short(r)
    assert client.get(f"/todos/{todo['id']}").json() == r.json()


def test_a_batch_with_the_largest_todo_applies_whole_and_retries_idempotently(client):
    existing = client.create_todo(title="existing", deadline="2031-07-02")
    tag_client = uid()
    operations = [
        op("tag", "create", clientId=tag_client, data={"name": "big batch", "color": "#112233"}),
        op("todo", "create", clientId=uid(), data=_largest_todo("huge", "2031-07-02")),
        op("todo", "create", clientId=uid(), data={"title": "normal", "deadline": "2031-07-02",
                                                    "tagClientId": tag_client}),
        op("todo", "update", id=existing["id"], baseVersion=existing["version"], data={"isCompleted": True}),
    ]
    body = {"deviceId": "big-batch", "schemaVersion": 2, "operations": operations}
    first = push_raw(client, body)
    assert first.status_code == 200, short(first)
    results = first.json()["results"]
    assert [r["status"] for r in results] == ["applied"] * 4, [r.get("error") for r in results]
    assert results[1]["record"]["notes"] == WIDE * 10000
    titles = sorted(t["title"] for t in client.list_todos(date="2031-07-02"))
    assert titles == sorted(["existing", "normal", "huge" + WIDE * 196])
    again = push_raw(client, body)
    assert again.status_code == 200 and again.content == first.content, "a retry replays the stored results"
    assert len(client.list_todos(date="2031-07-02")) == 3
    # A device pulling from scratch gets it too.
    r = client.get("/sync/pull?limit=1000&schemaVersion=2")
    assert r.status_code == 200, short(r)
    assert any(t.get("notes") == WIDE * 10000 for t in r.json()["changes"]["todos"]["upserted"])


def test_a_date_whose_completed_todos_name_hundreds_of_wide_tags_is_stored(client):
    # 240 tags named with 45 escaped control characters: the date's stat renders to ~80 KB, more
    # than daily_stats.tag_stats (TEXT) held before Sql/028: the whole push was 500, each retry.
    operations = []
    for i in range(240):
        tag = uid()
        operations.append(op("tag", "create", clientId=tag, data={"name": WIDE * 45 + f"{i:05d}", "color": "#112233"}))
        operations.append(op("todo", "create", clientId=uid(), data={
            "title": f"t{i}", "deadline": "2031-07-07", "isCompleted": True, "tagClientId": tag}))
    body = {"deviceId": "many-tags", "operations": operations}
    first = push_raw(client, body)
    assert first.status_code == 200, short(first)
    assert {r["status"] for r in first.json()["results"]} == {"applied"}
    stat = client.get("/daily-stats/2031-07-07").json()
    assert len(stat["tagStats"]) == 240 and stat["completedCount"] == 240
    assert push_raw(client, body).content == first.content


def _keyed_push(client, key: str, body: dict):
    return client.post("/sync/push", body, headers={"Idempotency-Key": key}, timeout=120)


def _no_op_updates(todo: dict, count: int) -> dict:
    return {"deviceId": "amplifier", "schemaVersion": 2, "operations": [
        op("todo", "update", id=todo["id"], data={"isCompleted": False}) for _ in range(count)]}


def _stored(db, user_id: int) -> dict:
    u = int(user_id)
    return {
        "results": _int(db, f"SELECT COALESCE(SUM(LENGTH(result)), 0) FROM sync_operations WHERE user_id = {u}"),
        "records": _int(db, f"SELECT COALESCE(SUM(LENGTH(record)), 0) FROM sync_result_records WHERE user_id = {u}"),
        "answers": _int(db, "SELECT COALESCE(SUM(LENGTH(idem_key) + 32 + COALESCE(LENGTH(response_headers), 0)"
                            f" + COALESCE(LENGTH(response_body), 0)), 0) FROM idempotency_keys WHERE user_id = {u}"),
        "counted": _int(db, f"SELECT COALESCE(SUM(stored_bytes), 0) FROM account_usage WHERE user_id = {u}"),
    }


def test_keyed_pushes_store_no_copy_of_their_answer_and_every_stored_byte_is_counted(client, db):
    todo = client.create_todo(title="padded", raw=WIDE * 2000, notes=WIDE * 7000, deadline="2031-07-03")
    user = client.user["id"]
    before = _stored(db, user)
    sent = 0
    answers = []
    for _ in range(5):
        body = _no_op_updates(todo, 250)
        sent += len(json.dumps(body).encode())
        key = "amp-" + uuid.uuid4().hex
        r = _keyed_push(client, key, body)
        assert r.status_code == 200, short(r)
        assert len(r.content) > 250 * 50_000
        again = _keyed_push(client, key, body)
        assert again.status_code == 200 and again.content == r.content, "the key answers the same bytes"
        answers.append(len(r.content))
    after = _stored(db, user)
    stored = sum(after[k] - before[k] for k in ("results", "records", "answers"))
    assert after["answers"] - before["answers"] < 5 * 1_000, f"answers stored {after['answers'] - before['answers']} bytes"
    assert stored < 2 * sent, f"stored {stored} bytes for {sent} bytes sent"
    # Everything stored was counted against the account's stored bytes per hour.
    assert after["counted"] - before["counted"] >= stored, (after, before)
    # The same key with another body is still 422.
    other = _keyed_push(client, key, _no_op_updates(todo, 1))
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused", short(other)


def test_a_keyed_answer_over_16_mb_gets_a_definite_answer_every_time(client, db):
    # 61 KB rendered (it fit todo_list's column before Sql/028 too): 500 results of it are 31 MB.
    todo = client.create_todo(**{**_largest_todo("huge answer", "2031-07-04"), "notes": WIDE * 8000})
    body = _no_op_updates(todo, 500)
    key = "huge-" + uuid.uuid4().hex
    first = _keyed_push(client, key, body)
    assert first.status_code == 200, short(first)
    assert len(first.content) > 16 * 1024 * 1024
    assert [r["status"] for r in first.json()["results"]] == ["applied"] * 500
    again = _keyed_push(client, key, body)
    assert again.status_code == 200 and again.content == first.content
    assert client.get(f"/todos/{todo['id']}").json()["version"] == todo["version"], "no-op updates changed nothing"


def test_an_accounts_idempotency_keys_have_a_ceiling(client, db):
    u = int(client.user["id"])
    db(f"UPDATE users SET quota_idempotency_keys = 2 WHERE id = {u}")
    for i in range(2):
        r = client.post("/todos", {"title": f"keyed {i}", "deadline": "2031-07-05"},
                        headers={"Idempotency-Key": f"ceiling-{i}"})
        assert r.status_code == 201, short(r)
    third = {"title": "keyed 2", "deadline": "2031-07-05"}
    r = client.post("/todos", third, headers={"Idempotency-Key": "ceiling-2"})
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited", short(r)
    assert int(r.headers["Retry-After"]) > 3_600
    assert "Idempotency-Key" in r.json()["error"]["message"]
    assert len(client.list_todos(date="2031-07-05")) == 2, "the refused request applied nothing"
    # Stored keys still answer; a request without a key is not affected.
    assert client.post("/todos", {"title": "keyed 0", "deadline": "2031-07-05"},
                       headers={"Idempotency-Key": "ceiling-0"}).status_code == 201
    assert client.post("/todos", third).status_code == 201
    # An answer larger than the account may keep at all is a definite 422 on the key, each time.
    db(f"UPDATE users SET quota_idempotency_keys = NULL, quota_idempotency_bytes = 2000 WHERE id = {u}")
    big = {"title": "too big to keep", "raw": "x" * 2000, "deadline": "2031-07-06"}
    for _ in range(2):
        r = client.post("/todos", big, headers={"Idempotency-Key": "too-big"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_failed", short(r)
        assert r.json()["error"]["details"][0]["field"] == "Idempotency-Key"
    assert client.list_todos(date="2031-07-06") == []
