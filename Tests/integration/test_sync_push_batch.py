"""POST /sync/push as one batch (issue 25): the server reads a push's todos up front, changes them
in memory operation by operation, and writes them in a few multi-row statements, before a tag
operation and at the end. These tests pin what a user sees when that batching has edges to get
right: one todo created and changed several times in one push, a push larger than one multi-row
statement (each result must name the todo its own operation wrote), a tag operation between todo
operations (the tag's delete must see the todos written before it), a rejected operation among
staged ones, and replays of such pushes.
"""

from __future__ import annotations

import synclib
from synclib import create_tag_op, create_todo_op, fresh_state, op, pull_all, push, rejected, uid
from tsapi import assert_error

D = "2031-06-06"


def applied_versions(results):
    return [r["version"] for r in results if r["status"] in ("applied", "merged")]


def test_one_todo_created_and_changed_many_times_in_one_push(client):
    cid = uid()
    ops = [
        create_todo_op("first", deadline=D, client_id=cid),
        op("todo", "update", clientId=cid, data={"title": "second", "isCompleted": True}),
        create_todo_op("ignored: the clientId exists", deadline=D, client_id=cid.upper()),
        op("todo", "update", clientId=cid, baseVersion=0, data={"title": "stale"}),  # reject: conflict
        op("todo", "update", clientId=cid, data={"title": "second", "isCompleted": True}),  # changes nothing
        op("todo", "delete", clientId=cid),
        op("todo", "update", clientId=cid, data={"title": "after delete"}),  # reject: conflict (deleted)
        op("todo", "delete", clientId=cid),  # delete of deleted: applied
    ]
    cursor = synclib.pull(client)["cursor"]
    res = push(client, ops, policy="reject")
    assert [r["status"] for r in res] == ["applied", "applied", "applied", "conflict", "applied", "applied",
                                          "conflict", "applied"], res
    ids = {r["id"] for r in res}
    assert len(ids) == 1 and next(iter(ids)) > 0, res
    todo_id = res[0]["id"]
    for r in res:
        assert r["record"]["id"] == todo_id and r["clientId"] == cid, r
    first, second, existing, conflict, unchanged, deleted, conflict2, deleted2 = res
    assert first["record"]["title"] == "first" and first["record"]["isCompleted"] is False
    assert second["record"]["title"] == "second" and second["version"] > first["version"]
    # the create of a known clientId, the conflict and the no-op all answer the state the second op left
    assert existing["record"] == second["record"] == conflict["record"] == unchanged["record"]
    assert deleted["version"] > second["version"] and deleted["record"]["deletedAt"] is not None
    assert conflict2["record"] == deleted["record"] == deleted2["record"]
    # the server holds that last state: gone from GET, a tombstone in a pull, no todo on the date
    assert_error(client.get(f"/todos/{todo_id}"), 404, "not_found")
    body = synclib.pull(client, cursor)
    deleted_ids = {t["id"]: t for t in body["changes"]["todos"]["deleted"]}
    assert deleted_ids[todo_id]["version"] == deleted["version"]
    assert todo_id not in {t["id"] for t in body["changes"]["todos"]["upserted"]}
    assert fresh_state(client).todos == {}
    stat = synclib.get_stat(client, D)
    assert stat is None or stat["todoCount"] == 0
    # a replay answers the same, with the same real id
    assert push(client, ops, policy="reject") == res


def test_push_larger_than_one_statement_each_result_names_its_own_todo(client):
    # 150 todos first (existing rows), then one push of 450 operations: 150 updates by id of those,
    # 200 creates (on varied dates), 100 updates by clientId of todos created earlier in the push.
    existing = push(client, [create_todo_op(f"old {i}", deadline=f"2031-07-{i % 28 + 1:02d}")
                             for i in range(150)])
    assert all(r["status"] == "applied" for r in existing)
    cids = [uid() for _ in range(200)]
    ops = [op("todo", "update", id=r["id"], data={"title": f"old {i} edited", "isCompleted": i % 2 == 0})
           for i, r in enumerate(existing)]
    ops += [create_todo_op(f"new {i}", deadline=f"2031-08-{i % 28 + 1:02d}", client_id=cid, difficulty=i % 6)
            for i, cid in enumerate(cids)]
    ops += [op("todo", "update", clientId=cids[i], data={"title": f"new {i} edited", "isCompleted": True})
            for i in range(0, 200, 2)]
    res = push(client, ops)
    assert all(r["status"] == "applied" for r in res), [r for r in res if r["status"] != "applied"][:3]
    versions = applied_versions(res)
    assert versions == sorted(versions) and len(set(versions)) == len(versions) == 450
    updates, creates, edits = res[:150], res[150:350], res[350:]
    assert [r["id"] for r in updates] == [r["id"] for r in existing]
    created_ids = [r["id"] for r in creates]
    assert len(set(created_ids)) == 200 and min(created_ids) > 0
    assert not set(created_ids) & {r["id"] for r in existing}
    assert [r["id"] for r in edits] == created_ids[::2]
    # each result names the todo its own operation wrote, and the server holds each last state
    state = fresh_state(client).todos
    assert len(state) == 350
    for i, r in enumerate(updates):
        assert r["record"]["title"] == f"old {i} edited" and state[r["id"]] == r["record"]
    for i, r in enumerate(creates):
        assert (r["record"]["title"], r["record"]["clientId"], r["record"]["difficulty"]) == (f"new {i}", cids[i], i % 6)
        if i % 2:
            assert state[r["id"]] == r["record"]
    for j, r in enumerate(edits):
        assert r["record"]["title"] == f"new {2 * j} edited" and state[r["id"]] == r["record"]
    assert client.get_todo(created_ids[7])["title"] == "new 7"
    # the stats count what the push left: day 2031-08-01 has creates 0, 28, 56, ... (every 28th)
    day_creates = list(range(0, 200, 28))
    stat = synclib.get_stat(client, "2031-08-01")
    assert stat["todoCount"] == len(day_creates)
    assert stat["completedCount"] == sum(1 for i in day_creates if i % 2 == 0)
    # replayed, the whole batch answers the same and writes nothing
    assert push(client, ops) == res
    assert fresh_state(client).todos == state


def test_tag_operations_between_todo_operations_see_the_todos_written_before(client):
    tcid, xcid, ycid = uid(), uid(), uid()
    res = push(client, [
        create_tag_op("Gone soon", client_id=tcid),
        create_todo_op("x", deadline=D, client_id=xcid, tagClientId=tcid, estimatedTime=30),
        create_todo_op("y", deadline=D, client_id=ycid),
        op("todo", "update", clientId=ycid, data={"tagClientId": tcid}),
        op("tag", "delete", clientId=tcid),  # un-tags x and y, created and tagged earlier in this push
        op("todo", "update", clientId=xcid, data={"title": "x edited"}),
        op("todo", "update", clientId=ycid, data={"tagId": 999_999_999}),  # never the user's tag: rejected
        op("todo", "update", clientId=ycid, data={"title": "y edited"}),
    ])
    assert [r["status"] for r in res] == ["applied"] * 6 + ["rejected", "applied"], res
    rejected(res[6], "validation_failed", "tagId")
    x, y = client.get_todo(res[1]["id"]), client.get_todo(res[2]["id"])
    assert (x["title"], x["tagId"]) == ("x edited", None) and x == res[5]["record"]
    assert (y["title"], y["tagId"]) == ("y edited", None) and y == res[7]["record"]
    assert res[1]["record"]["tagId"] == res[3]["record"]["tagId"] == res[0]["id"]
    assert x["version"] > res[4]["version"] > res[3]["version"]
    stat = synclib.get_stat(client, D)
    assert (stat["todoCount"], stat["tagStats"]) == (2, [])
    store = synclib.ClientStore()
    pull_all(client, store)
    assert store.todos == {x["id"]: x, y["id"]: y} and store.tags == {}
