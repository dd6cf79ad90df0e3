"""Round 3, item 5: what a push may store, relative to what it changed.

A push of 500 no-op updates of a todo whose `raw` is 2,000 `\\u0001` (each written as a 6-byte
JSON escape) stored the whole record once per operation: 13.6 MB for a 67 KB request (203×).
Now a stored result keeps its record once per distinct record (Sql/019), and a replay still
answers byte for byte as first answered.
"""

from __future__ import annotations

import json

import synclib
from synclib import op, push_raw, uid


def _stored_bytes(db, user_id: int) -> int:
    results = db(f"SELECT COALESCE(SUM(LENGTH(result)), 0) FROM sync_operations WHERE user_id = {int(user_id)}")
    records = db(f"SELECT COALESCE(SUM(LENGTH(record)), 0) FROM sync_result_records WHERE user_id = {int(user_id)}")
    return int(results.strip() or 0) + int(records.strip() or 0)


def test_no_op_updates_store_the_record_once_and_replay_exactly(client, db):
    todo = client.create_todo(title="padded", raw="\u0001" * 2000, deadline="2031-03-03")
    before = _stored_bytes(db, client.user["id"])
    body = {"deviceId": "amplifier", "operations": [
        op("todo", "update", id=todo["id"], data={"isCompleted": False}) for _ in range(500)]}
    request_bytes = len(json.dumps(body).encode())
    first = push_raw(client, body)
    assert first.status_code == 200, first.text[:300]
    results = first.json()["results"]
    assert [r["status"] for r in results] == ["applied"] * 500
    assert all(r["record"]["raw"] == "\u0001" * 2000 for r in results)
    stored = _stored_bytes(db, client.user["id"]) - before
    assert stored <= 2 * request_bytes, f"stored {stored} bytes for a {request_bytes}-byte request"
    again = push_raw(client, body)
    assert again.status_code == 200 and again.content == first.content, "a replay answers exactly as first answered"


def test_conflict_results_replay_with_the_record_they_first_carried(client, db):
    todo = client.create_todo(title="v1", deadline="2031-03-04")
    stale = op("todo", "update", id=todo["id"], baseVersion=todo["version"], data={"title": "mine"})
    client.patch(f"/todos/{todo['id']}", {"title": "theirs"})
    first = synclib.push(client, [stale])[0]
    assert first["status"] == "conflict" and first["record"]["title"] == "theirs"
    client.patch(f"/todos/{todo['id']}", {"title": "later"})
    assert synclib.push(client, [stale])[0] == first, "the stored record, not today's"


def test_an_hours_stored_bytes_have_a_quota_and_a_refused_push_changes_nothing(client, db):
    db(f"UPDATE users SET quota_stored_bytes_per_hour = 20000 WHERE id = {int(client.user['id'])}")
    small = [op("todo", "create", clientId=uid(), data={"title": f"s{i}", "deadline": "2031-03-05"}) for i in range(5)]
    assert [r["status"] for r in synclib.push(client, small)] == ["applied"] * 5
    big = [op("todo", "create", clientId=uid(), data={"title": f"b{i}", "raw": "x" * 1500, "deadline": "2031-03-05"})
           for i in range(20)]
    r = push_raw(client, {"deviceId": "d", "operations": big})
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited", r.text[:300]
    assert int(r.headers["Retry-After"]) >= 1
    assert "stored bytes" in r.json()["error"]["message"]
    assert len(client.list_todos(date="2031-03-05")) == 5, "nothing of the refused push was applied"
    # Replays of what was stored still answer (they store nothing new).
    assert [x["status"] for x in synclib.push(client, small)] == ["applied"] * 5
