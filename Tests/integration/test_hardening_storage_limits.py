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
