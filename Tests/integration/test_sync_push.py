"""POST /sync/push: creates / updates / deletes, idempotent creates, addressing, tagClientId,
conflict policies (reject, client-wins, merge three-way rule), tombstones, exactly-once replays,
limits, envelope validation, per-operation rejections, isolation between users, concurrency.

Every result goes through synclib.check_result: keys {opId, status, id, clientId, version, record}
(+ conflictingFields only when `merged`, sorted; + error only when `rejected`, with id, version and
record null), and for non-rejected results id/version/clientId equal the record's.

Decisions asserted (made by the team where API.md is open): clientId must be a UUID (else
rejected validation_failed); opId is any string compared exactly (code point for code point); the
whole request is 422 (nothing applied) for a bad envelope (deviceId missing/empty/>100, unknown
conflictPolicy, operations not an array, > 500 operations, an operation that is not an object or
lacks a string opId); other problems, an empty or over-long opId and a repeated opId included,
reject only that operation; entity `dailyStat` is rejected
validation_failed; create takes clientId at the op level (also inside data); tagClientId works
in create and update data; a replayed opId returns the byte-identical stored result, including a
stored rejection.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading

import pytest

import synclib
import tsapi
from synclib import create_tag_op, create_todo_op, fresh_state, op, pull, pull_all, push, push_raw, rejected, uid
from tsapi import assert_error, assert_json, short

D = "2031-05-05"


def results_of(resp):
    assert resp.status_code == 200, short(resp)
    return assert_json(resp)["results"]


def n_todos(api):
    return len(fresh_state(api).todos)


# --------------------------------------------------------------------------- create / update / delete

def test_create_tag_and_todo(client):
    tcid, ocid = uid(), uid()
    res = push(client, [
        op("tag", "create", clientId=tcid, data={"name": "Work", "color": "#ff8800"}),
        op("todo", "create", clientId=ocid, data={"title": "Report", "deadline": D, "isImportant": True,
                                                   "difficulty": 3, "estimatedTime": 45, "raw": "!Report"}),
    ])
    assert [r["status"] for r in res] == ["applied", "applied"]
    tag, todo = res[0]["record"], res[1]["record"]
    assert (tag["name"], tag["color"], tag["clientId"], tag["deletedAt"]) == ("Work", "#FF8800", tcid, None)
    assert (todo["title"], todo["raw"], todo["isImportant"], todo["difficulty"], todo["estimatedTime"],
            todo["deadline"], todo["clientId"], todo["tagId"]) == ("Report", "!Report", True, 3, 45, D, ocid, None)
    assert todo["version"] > tag["version"]
    assert client.get_tag(tag["id"]) == tag and client.get_todo(todo["id"]) == todo
    assert synclib.get_stat(client, D)["todoCount"] == 1


def test_create_client_id_inside_data(client):
    cid = uid()
    res = push(client, [op("todo", "create", data={"title": "x", "deadline": D, "clientId": cid})])
    assert res[0]["status"] == "applied" and res[0]["clientId"] == cid == res[0]["record"]["clientId"]


def test_create_without_client_id(client):
    res = push(client, [op("todo", "create", data={"title": "x", "deadline": D})])
    assert res[0]["status"] == "applied" and res[0]["clientId"] is None


def test_idempotent_create_by_client_id(client):
    cid = uid()
    res = push(client, [create_todo_op("first", client_id=cid),
                        create_todo_op("second", client_id=cid.upper()),
                        create_tag_op("tag", client_id=cid)])  # another kind: its own namespace
    assert [r["status"] for r in res] == ["applied"] * 3
    assert res[1]["id"] == res[0]["id"] and res[1]["record"] == res[0]["record"]
    assert res[1]["record"]["title"] == "first"
    assert res[2]["record"]["name"] == "tag"
    res2 = push(client, [create_todo_op("third", client_id=cid)])
    assert res2[0]["status"] == "applied" and res2[0]["record"] == res[0]["record"]
    assert n_todos(client) == 1
    # REST create with the same clientId finds it too (one write path)
    r = client.post("/todos", {"title": "rest", "deadline": D, "clientId": cid})
    assert r.status_code == 200 and assert_json(r) == res[0]["record"], short(r)


def test_create_of_deleted_client_id_returns_tombstone(client):
    cid = uid()
    created = push(client, [create_todo_op("x", client_id=cid)])[0]
    assert client.delete(f"/todos/{created['id']}").status_code == 204
    again = push(client, [create_todo_op("x again", client_id=cid)])[0]
    assert again["status"] == "applied" and again["id"] == created["id"]
    assert again["record"]["deletedAt"] is not None and again["version"] > created["version"]
    assert n_todos(client) == 0


def test_update_and_delete_by_id_and_by_client_id(client):
    tcid, a_cid, b_cid = uid(), uid(), uid()
    res = push(client, [create_tag_op("T", client_id=tcid), create_todo_op("a", client_id=a_cid),
                        create_todo_op("b", client_id=b_cid)])
    tag, a, b = (r["record"] for r in res)
    res = push(client, [
        op("todo", "update", id=a["id"], data={"title": "a by id", "isCompleted": True}),
        op("todo", "update", clientId=b_cid.upper(), data={"title": "b by cid", "tagId": tag["id"]}),
        op("tag", "update", clientId=tcid, data={"name": "T2", "color": "#00aa00"}),
    ])
    assert [r["status"] for r in res] == ["applied"] * 3
    assert res[0]["record"]["title"] == "a by id" and res[0]["record"]["isCompleted"] is True
    assert res[1]["record"]["title"] == "b by cid" and res[1]["record"]["tagId"] == tag["id"]
    assert res[1]["id"] == b["id"] and res[1]["clientId"] == b_cid
    assert (res[2]["record"]["name"], res[2]["record"]["color"]) == ("T2", "#00AA00")
    assert client.get_todo(a["id"]) == res[0]["record"]
    # deletes: by id and by clientId; the result record is the tombstone
    res = push(client, [op("todo", "delete", id=a["id"]), op("tag", "delete", clientId=tcid),
                        op("todo", "delete", clientId=b_cid)])
    assert [r["status"] for r in res] == ["applied"] * 3
    for r in res:
        assert r["record"]["deletedAt"] is not None
    assert_error(client.get(f"/todos/{a['id']}"), 404, "not_found")
    assert_error(client.get(f"/tags/{tag['id']}"), 404, "not_found")
    assert fresh_state(client).todos == {}


def test_tag_delete_clears_todo_tags_in_push(client):
    tcid = uid()
    res = push(client, [create_tag_op("T", client_id=tcid),
                        create_todo_op("a", tagClientId=tcid, isCompleted=True, estimatedTime=10)])
    todo = res[1]["record"]
    store = synclib.ClientStore()
    pull_all(client, store)
    res = push(client, [op("tag", "delete", clientId=tcid)])
    assert res[0]["status"] == "applied"
    got = client.get_todo(todo["id"])
    assert got["tagId"] is None and got["version"] > todo["version"]
    assert synclib.get_stat(client, D)["tagStats"] == []
    pull_all(client, store)
    assert store.todos[todo["id"]]["tagId"] is None and store.tags == {}


def test_no_op_update_keeps_version(client):
    created = push(client, [create_todo_op("same", estimatedTime=5)])[0]
    stat = synclib.get_stat(client, D)
    res = push(client, [op("todo", "update", id=created["id"], data={"title": "same", "estimatedTime": 5}),
                        op("todo", "update", id=created["id"], data={})])
    for r in res:
        assert r["status"] == "applied" and r["version"] == created["version"] and r["record"] == created["record"]
    assert synclib.get_stat(client, D) == stat


# --------------------------------------------------------------------------- tagClientId

def test_tag_client_id_resolves_tag_created_earlier_in_same_push(client):
    tcid, t2cid = uid(), uid()
    res = push(client, [
        create_tag_op("Home", client_id=tcid),
        create_todo_op("a", tagClientId=tcid.upper()),
        create_tag_op("Other", client_id=t2cid),
    ])
    tag, todo, other = (r["record"] for r in res)
    assert todo["tagId"] == tag["id"] and "tagClientId" not in todo
    res = push(client, [op("todo", "update", id=todo["id"], data={"tagClientId": t2cid})])
    assert res[0]["status"] == "applied" and res[0]["record"]["tagId"] == other["id"]
    res = push(client, [op("todo", "update", id=todo["id"], data={"tagClientId": None})])
    assert res[0]["status"] == "applied" and res[0]["record"]["tagId"] is None


def test_unknown_tag_client_id_rejected_and_later_ops_run(client):
    res = push(client, [
        create_todo_op("unknown tag", tagClientId=uid()),
        create_todo_op("not a uuid", tagClientId="nope"),
        create_todo_op("fine"),
    ])
    for r in res[:2]:
        rejected(r, field="tagClientId")
    assert res[2]["status"] == "applied"
    assert [t["title"] for t in fresh_state(client).todos.values()] == ["fine"]


def test_tag_id_and_tag_client_id_together_are_rejected(client):
    tcid = uid()
    tag = push(client, [create_tag_op("Both", client_id=tcid)])[0]["record"]
    res = push(client, [create_todo_op("both names", tagId=tag["id"], tagClientId=tcid)])
    rejected(res[0], field="tagClientId")
    assert n_todos(client) == 0


def deleted_tag(client, name="Gone"):
    """A tag of this user, deleted (by REST, as another device would); returns its record."""
    tag = push(client, [create_tag_op(name, client_id=uid())])[0]["record"]
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    return tag


def test_create_naming_a_deleted_tag_lands_untagged(client):
    """API.md push `create`: a tagId or tagClientId naming one of the user's deleted tags counts
    as null, so an offline create is never lost to a tag deleted on another device."""
    tag = deleted_tag(client)
    res = push(client, [
        create_todo_op("by clientId", tagClientId=tag["clientId"].upper()),
        create_todo_op("by id", tagId=tag["id"]),
    ])
    for r in res:
        assert r["status"] == "applied", r
        assert r["record"]["tagId"] is None, r
        assert client.get_todo(r["id"]) == r["record"]
    assert sorted(t["title"] for t in fresh_state(client).todos.values()) == ["by clientId", "by id"]


def test_rest_still_refuses_a_deleted_tag(client):
    tag = deleted_tag(client)
    r = client.post("/todos", {"title": "rest", "deadline": D, "tagId": tag["id"]})
    assert_error(r, 422, "validation_failed")
    todo = push(client, [create_todo_op("untagged")])[0]["record"]
    assert_error(client.patch(f"/todos/{todo['id']}", {"tagId": tag["id"]}), 422, "validation_failed")


def test_another_users_tag_is_still_rejected(client, other_client):
    """Only the user's own deleted tags count as null: another user's (deleted) tag never existed
    for this user."""
    theirs = deleted_tag(other_client, "Theirs")
    res = push(client, [create_todo_op("their id", tagId=theirs["id"]),
                        create_todo_op("their clientId", tagClientId=theirs["clientId"])])
    rejected(res[0], field="tagId")
    rejected(res[1], field="tagClientId")
    assert n_todos(client) == 0


@pytest.mark.parametrize("policy", ["reject", "merge", "client-wins"])
def test_update_naming_a_tag_deleted_meanwhile_applies_untagged(client, policy):
    """An update made offline that moves a todo to a tag deleted meanwhile keeps its other fields."""
    todo = push(client, [create_todo_op("mine")])[0]["record"]
    tag = deleted_tag(client)
    for name, value in (("tagId", tag["id"]), ("tagClientId", tag["clientId"])):
        res = push(client, [op("todo", "update", id=todo["id"], baseVersion=todo["version"],
                               data={name: value, "title": f"edited {name}"},
                               base={"tagId": None, "title": todo["title"]})], policy=policy)
        assert res[0]["status"] == "applied", res
        rec = res[0]["record"]
        assert (rec["title"], rec["tagId"]) == (f"edited {name}", None), rec
        todo = rec


def test_update_of_a_todo_whose_tag_was_deleted_meanwhile_merges(client):
    """The tag's delete un-tagged the todo (a new version); the offline edit re-names the same
    deleted tag: with merge the server and client agree (no tag), and the title goes through."""
    tag = push(client, [create_tag_op("Work", client_id=uid())])[0]["record"]
    todo = push(client, [create_todo_op("tagged", tagId=tag["id"])])[0]["record"]
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    res = push(client, [op("todo", "update", id=todo["id"], baseVersion=todo["version"],
                           data={"tagId": tag["id"], "title": "edited"},
                           base={"tagId": tag["id"], "title": "tagged"})], policy="merge")
    assert res[0]["status"] == "applied", res
    assert (res[0]["record"]["title"], res[0]["record"]["tagId"]) == ("edited", None)


def test_client_wins_restore_of_a_todo_whose_tag_is_gone(client):
    """A device re-tagged a todo offline while another deleted both the todo and the tag:
    client-wins restores the todo, untagged, with the device's other fields."""
    tag = push(client, [create_tag_op("Work", client_id=uid())])[0]["record"]
    todo = push(client, [create_todo_op("tagged", tagId=tag["id"])])[0]["record"]
    assert client.delete(f"/todos/{todo['id']}").status_code == 204
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    update = op("todo", "update", id=todo["id"], baseVersion=todo["version"],
                data={"tagClientId": tag["clientId"], "title": "restored"}, base={"tagId": tag["id"], "title": "tagged"})
    res = push(client, [update], policy="reject")
    assert res[0]["status"] == "conflict" and res[0]["record"]["deletedAt"] is not None, res
    res = push(client, [dict(update, opId=uid())], policy="client-wins")
    assert res[0]["status"] == "applied", res
    rec = res[0]["record"]
    assert (rec["title"], rec["tagId"], rec["deletedAt"]) == ("restored", None, None), rec
    assert client.get_todo(todo["id"]) == rec


# --------------------------------------------------------------------------- conflicts

def setup_stale(client, **fields):
    """A todo at version v0, then changed on the server by REST so that v0 is stale."""
    created = push(client, [create_todo_op("base", **fields)])[0]["record"]
    return created


def server_edit(client, todo_id, patch):
    r = client.patch(f"/todos/{todo_id}", patch)
    assert r.status_code == 200, short(r)
    return assert_json(r)


def test_reject_policy_conflict_changes_nothing(client):
    t = setup_stale(client)
    server = server_edit(client, t["id"], {"title": "server"})
    for policy in (None, "reject"):
        res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"],
                               data={"title": "client", "isCompleted": True}, base={"title": "base",
                                                                                     "isCompleted": False})],
                   policy=policy)
        assert res[0]["status"] == "conflict", res
        assert res[0]["record"] == server and res[0]["id"] == t["id"] and res[0]["version"] == server["version"]
    assert client.get_todo(t["id"]) == server


def test_not_stale_base_version_applies_under_reject(client):
    t = setup_stale(client)
    res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"], data={"title": "new"})],
               policy="reject")
    assert res[0]["status"] == "applied" and res[0]["record"]["title"] == "new"
    assert res[0]["version"] > t["version"]


def test_client_wins_overwrites(client):
    t = setup_stale(client)
    server_edit(client, t["id"], {"title": "server", "difficulty": 2})
    res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"],
                           data={"title": "client"}, base={"title": "base"})], policy="client-wins")
    assert res[0]["status"] == "applied"
    rec = res[0]["record"]
    assert (rec["title"], rec["difficulty"]) == ("client", 2), "only the client's fields are written"
    assert client.get_todo(t["id"]) == rec


def test_no_base_version_is_unconditional(client):
    t = setup_stale(client)
    server_edit(client, t["id"], {"title": "server"})
    for policy in ("reject", "merge"):
        res = push(client, [op("todo", "update", id=t["id"], data={"title": f"blind {policy}"})], policy=policy)
        assert res[0]["status"] == "applied" and res[0]["record"]["title"] == f"blind {policy}"


MERGE_CASES = [
    # (label, server patch, client data, client base, expected status, conflictingFields, expected values)
    ("disjoint fields: client field taken",
     {"title": "server"}, {"isCompleted": True}, {"isCompleted": False},
     "applied", None, {"title": "server", "isCompleted": True}),
    ("same field, server still at base: client taken",
     {"difficulty": 4}, {"title": "client"}, {"title": "base"},
     "applied", None, {"title": "client", "difficulty": 4}),
    ("same field changed differently: server kept",
     {"title": "server"}, {"title": "client"}, {"title": "base"},
     "merged", ["title"], {"title": "server"}),
    ("same field changed to the same value: no conflict",
     {"title": "same"}, {"title": "same"}, {"title": "base"},
     "applied", None, {"title": "same"}),
    ("field in data but not in base, values differ: conflicting",
     {"difficulty": 1}, {"estimatedTime": 99}, {},
     "merged", ["estimatedTime"], {"estimatedTime": 0}),
    ("field not in base but server already equal: not conflicting",
     {"estimatedTime": 99}, {"estimatedTime": 99}, {},
     "applied", None, {"estimatedTime": 99}),
    ("mixed: some taken, some kept; conflictingFields sorted",
     {"title": "server", "isLife": True, "difficulty": 5},
     {"title": "client", "isLife": False, "difficulty": 1, "isImportant": True, "raw": "raw!"},
     {"title": "base", "isLife": False, "difficulty": 0, "isImportant": False, "raw": "base"},
     "merged", ["difficulty", "isLife", "title"],
     {"title": "server", "isLife": True, "difficulty": 5, "isImportant": True, "raw": "raw!"}),
    ("deadline and tag-less fields merge like the rest",
     {"title": "server"}, {"deadline": "2031-05-06", "tagId": None}, {"deadline": D, "tagId": None},
     "applied", None, {"title": "server", "deadline": "2031-05-06", "tagId": None}),
    ("base value that looks like a color still compares exactly (title '#facade')",
     {"difficulty": 2}, {"title": "client"}, {"title": "#facade"},
     "applied", None, {"title": "client", "difficulty": 2}),
]


@pytest.mark.parametrize("label,server_patch,data,base,status,conflicting,expect", MERGE_CASES,
                         ids=[c[0][:45] for c in MERGE_CASES])
def test_merge_policy_three_way(client, label, server_patch, data, base, status, conflicting, expect):
    title = "#facade" if "#facade" in label else "base"
    t = push(client, [create_todo_op(title, raw="base")])[0]["record"]
    server = server_edit(client, t["id"], server_patch)
    res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"], data=data, base=base)],
               policy="merge")[0]
    assert res["status"] == status, f"{label}: {res}"
    assert res.get("conflictingFields") == conflicting, f"{label}: {res}"
    rec = res["record"]
    for k, v in expect.items():
        assert rec[k] == v, f"{label}: field {k}: {rec[k]!r} != {v!r}; {res}"
    assert client.get_todo(t["id"]) == rec
    if rec != server:
        assert rec["version"] > server["version"]
    else:
        assert rec["version"] == server["version"], "nothing taken: no new version"


def test_merge_tags_by_name_and_color(client):
    tag = push(client, [create_tag_op("base", color="#111111")])[0]["record"]
    r = client.patch(f"/tags/{tag['id']}", {"color": "#222222"})
    assert r.status_code == 200
    res = push(client, [op("tag", "update", id=tag["id"], baseVersion=tag["version"],
                           data={"name": "client", "color": "#333333"}, base={"name": "base", "color": "#111111"})],
               policy="merge")[0]
    assert res["status"] == "merged" and res["conflictingFields"] == ["color"]
    assert (res["record"]["name"], res["record"]["color"]) == ("client", "#222222")


def test_merge_without_base_keeps_server_values(client):
    t = setup_stale(client)
    server = server_edit(client, t["id"], {"isImportant": True})
    res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"],
                           data={"title": "client", "difficulty": 3})], policy="merge")[0]
    assert res["status"] == "merged" and res["conflictingFields"] == ["difficulty", "title"]
    assert res["record"] == server


@pytest.mark.parametrize("policy,status", [("reject", "conflict"), ("merge", "conflict"), ("client-wins", "applied")])
def test_stale_delete(client, policy, status):
    t = setup_stale(client)
    server = server_edit(client, t["id"], {"title": "server"})
    res = push(client, [op("todo", "delete", id=t["id"], baseVersion=t["version"])], policy=policy)[0]
    assert res["status"] == status, res
    if status == "conflict":
        assert res["record"] == server
        assert client.get_todo(t["id"]) == server
    else:
        assert res["record"]["deletedAt"] is not None and res["version"] > server["version"]
        assert_error(client.get(f"/todos/{t['id']}"), 404, "not_found")


def test_stale_tag_delete_conflict_keeps_todo_tags(client):
    tag = push(client, [create_tag_op("T")])[0]["record"]
    todo = client.create_todo("x", deadline=D, tagId=tag["id"])
    r = client.patch(f"/tags/{tag['id']}", {"name": "T2"})
    assert r.status_code == 200
    res = push(client, [op("tag", "delete", id=tag["id"], baseVersion=tag["version"])], policy="reject")[0]
    assert res["status"] == "conflict" and res["record"] == assert_json(r)
    assert client.get_todo(todo["id"]) == todo


@pytest.mark.parametrize("policy", ["reject", "merge"])
@pytest.mark.parametrize("with_base_version", [True, False])
def test_update_of_deleted_record_conflicts(client, policy, with_base_version):
    t = setup_stale(client)
    assert client.delete(f"/todos/{t['id']}").status_code == 204
    extra = {"baseVersion": t["version"]} if with_base_version else {}
    res = push(client, [op("todo", "update", id=t["id"], data={"title": "revive"}, **extra)], policy=policy)[0]
    assert res["status"] == "conflict", res
    assert res["record"]["deletedAt"] is not None and res["record"]["title"] == "base"
    assert_error(client.get(f"/todos/{t['id']}"), 404, "not_found")


@pytest.mark.parametrize("same_data", [False, True])
def test_client_wins_update_restores_deleted_record(client, same_data):
    tcid = uid()
    t = push(client, [create_todo_op("base", client_id=tcid, isCompleted=True, estimatedTime=10)])[0]["record"]
    store = synclib.ClientStore()
    pull_all(client, store)
    assert client.delete(f"/todos/{t['id']}").status_code == 204
    assert synclib.get_stat(client, D) is None
    pull_all(client, store)
    assert t["id"] not in store.todos
    data = {"title": "base"} if same_data else {"title": "restored"}
    res = push(client, [op("todo", "update", clientId=tcid, baseVersion=t["version"], data=data)],
               policy="client-wins")[0]
    assert res["status"] == "applied", res
    rec = res["record"]
    assert rec["deletedAt"] is None and rec["title"] == data["title"] and rec["id"] == t["id"]
    assert rec["isCompleted"] is True and rec["estimatedTime"] == 10
    assert client.get_todo(t["id"]) == rec
    assert [x["id"] for x in client.list_todos(date=D)] == [t["id"]]
    body = pull(client, store.cursor)
    assert [x["id"] for x in body["changes"]["todos"]["upserted"]] == [t["id"]]
    assert body["changes"]["todos"]["deleted"] == []
    assert synclib.get_stat(client, D)["completedCount"] == 1
    store.apply_page(body)


def test_client_wins_restores_deleted_tag(client):
    tag = push(client, [create_tag_op("T")])[0]["record"]
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    res = push(client, [op("tag", "update", id=tag["id"], data={"color": "#010101"})], policy="client-wins")[0]
    assert res["status"] == "applied" and res["record"]["deletedAt"] is None
    assert client.get_tag(tag["id"])["color"] == "#010101"


@pytest.mark.parametrize("policy", ["reject", "merge", "client-wins"])
def test_delete_of_deleted_is_applied(client, policy):
    t = setup_stale(client)
    first = push(client, [op("todo", "delete", id=t["id"])])[0]
    res = push(client, [op("todo", "delete", id=t["id"], baseVersion=1),
                        op("todo", "delete", id=t["id"], baseVersion=first["version"] + 100),
                        op("todo", "delete", id=t["id"])], policy=policy)
    for r in res:
        assert r["status"] == "applied", r
        assert r["record"] == first["record"] and r["version"] == first["version"]


# --------------------------------------------------------------------------- exactly once

def test_replay_same_request_identical_and_changes_nothing(client):
    body = {"deviceId": "dev-replay", "conflictPolicy": "reject", "operations": [
        create_tag_op("T", client_id=(tcid := uid())),
        create_todo_op("a", tagClientId=tcid),
        op("todo", "update", id=999_999_999, data={"title": "nope"}),
    ]}
    r1 = push_raw(client, body)
    before = fresh_state(client).snapshot()
    r2 = push_raw(client, body)
    assert r2.status_code == 200 and r2.content == r1.content, "replay must return the stored results byte for byte"
    assert fresh_state(client).snapshot() == before
    results = results_of(r1)
    assert [x["status"] for x in results] == ["applied", "applied", "rejected"]
    rejected(results[2], code="not_found")


def test_replay_after_lost_response(client):
    ops = [create_todo_op("lost 1"), create_todo_op("lost 2")]
    ops.append(op("todo", "update", clientId=ops[0]["clientId"], data={"isCompleted": True}))
    body = json.dumps({"deviceId": "dev-lost", "operations": ops}).encode()
    # 1) the reply is read and dropped
    first = push_raw(client, json.loads(body))
    assert first.status_code == 200
    second = push_raw(client, json.loads(body))
    assert second.content == first.content
    # 2) a different batch whose connection is closed before reading anything
    ops2 = [create_todo_op("lost 3"), op("todo", "update", clientId=ops[1]["clientId"], data={"title": "lost 2b"})]
    body2 = json.dumps({"deviceId": "dev-lost", "operations": ops2}).encode()
    sock = tsapi.raw_connect()
    sock.sendall(tsapi.build_raw("POST", "/api/v1/sync/push", {
        "Authorization": f"Bearer {client.token}", "Content-Type": "application/json"}, body2))
    sock.close()
    retry = push_raw(client, json.loads(body2))
    again = push_raw(client, json.loads(body2))
    assert retry.status_code == 200 and again.content == retry.content
    res = results_of(retry)
    assert [x["status"] for x in res] == ["applied", "applied"]
    titles = sorted(t["title"] for t in fresh_state(client).todos.values())
    assert titles == ["lost 1", "lost 2b", "lost 3"], "each create exactly once"


def test_replay_returns_stored_result_even_after_record_changed(client):
    t = push(client, [create_todo_op("orig")])[0]["record"]
    upd = op("todo", "update", id=t["id"], data={"title": "pushed"})
    first = push(client, [upd])[0]
    server = server_edit(client, t["id"], {"title": "rest later"})
    again = push(client, [upd])[0]
    assert again == first, "stored result, not a fresh one"
    assert client.get_todo(t["id"]) == server, "the replay must not re-apply the update"
    # opIds compare exactly: the same text in upper case is another operation, applied afresh
    again2 = push(client, [dict(upd, opId=upd["opId"].upper())])[0]
    assert again2["status"] == "applied" and again2["version"] > server["version"], again2
    assert client.get_todo(t["id"])["title"] == "pushed"


def test_rejected_result_is_final(client):
    tcid = uid()
    bad = create_todo_op("waits for tag", tagClientId=tcid)
    first = push(client, [bad])[0]
    rejected(first, field="tagClientId")
    push(client, [create_tag_op("now exists", client_id=tcid)])
    again = push(client, [bad])[0]
    assert again == first, "a rejected result is stored and replayed"
    assert n_todos(client) == 0


def test_same_op_id_twice_in_one_request(client):
    o = create_todo_op("once")
    res = push(client, [o, dict(o, data={"title": "twice", "deadline": D}, clientId=uid())])
    assert res[0]["status"] == "applied"
    rejected(res[1], field="opId")  # the contract: the later one is rejected, nothing else affected
    assert n_todos(client) == 1


def test_op_id_any_string_up_to_100(client):
    res = push(client, [create_todo_op("a", op_id="x"), create_todo_op("b", op_id="é" * 100),
                        create_todo_op("c", op_id="op 1 / 2 : 😀")])
    assert [r["status"] for r in res] == ["applied"] * 3


# --------------------------------------------------------------------------- limits and envelope

def test_500_operations_ok(client):
    ops = [create_todo_op(f"t{i}", deadline=f"2031-05-{i % 28 + 1:02d}") for i in range(500)]
    res = push(client, ops)
    assert all(r["status"] == "applied" for r in res)
    versions = [r["version"] for r in res]
    assert versions == sorted(versions) and len(set(versions)) == 500
    assert n_todos(client) == 500


def test_501_operations_422_nothing_applied(client):
    ops = [create_todo_op(f"t{i}") for i in range(501)]
    assert_error(push_raw(client, {"deviceId": "d", "operations": ops}), 422, "validation_failed",
                 fields=["operations"])
    assert n_todos(client) == 0
    # nothing was stored for those opIds either: the same ops (500 of them) now apply
    res = push(client, ops[:500])
    assert all(r["status"] == "applied" for r in res)


GOOD_OP = lambda: create_todo_op("should not exist")  # noqa: E731


@pytest.mark.parametrize("label,body,field", [
    ("no deviceId", lambda: {"operations": [GOOD_OP()]}, "deviceId"),
    ("empty deviceId", lambda: {"deviceId": "", "operations": [GOOD_OP()]}, "deviceId"),
    ("101-char deviceId", lambda: {"deviceId": "d" * 101, "operations": [GOOD_OP()]}, "deviceId"),
    ("numeric deviceId", lambda: {"deviceId": 5, "operations": [GOOD_OP()]}, "deviceId"),
    ("unknown policy", lambda: {"deviceId": "d", "conflictPolicy": "server-wins", "operations": [GOOD_OP()]},
     "conflictPolicy"),
    ("policy case", lambda: {"deviceId": "d", "conflictPolicy": "Reject", "operations": [GOOD_OP()]},
     "conflictPolicy"),
    ("operations object", lambda: {"deviceId": "d", "operations": {"0": GOOD_OP()}}, "operations"),
    ("operations missing", lambda: {"deviceId": "d"}, "operations"),
    ("operations string", lambda: {"deviceId": "d", "operations": "[]"}, "operations"),
    ("op not an object", lambda: {"deviceId": "d", "operations": [GOOD_OP(), "create"]}, None),
    ("op null", lambda: {"deviceId": "d", "operations": [GOOD_OP(), None]}, None),
    ("op without opId", lambda: {"deviceId": "d", "operations": [GOOD_OP(), {"entity": "todo", "action": "create",
                                                                              "data": {"title": "x", "deadline": D}}]},
     None),
    ("numeric opId", lambda: {"deviceId": "d", "operations": [GOOD_OP(), dict(GOOD_OP(), opId=7)]}, None),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_envelope_422_nothing_applied(client, label, body, field):
    r = push_raw(client, body())
    assert_error(r, 422, "validation_failed", fields=[field] if field else None)
    assert n_todos(client) == 0, label


def test_envelope_bounds_ok(client):
    res = push(client, [create_todo_op("x")], device="d" * 100)
    assert res[0]["status"] == "applied"
    res = push(client, [create_todo_op("y", op_id="o" * 100)], policy="client-wins")
    assert res[0]["status"] == "applied"
    r = push_raw(client, {"deviceId": "d", "operations": []})
    assert r.status_code == 200 and assert_json(r) == {"results": []}, short(r)


def test_push_not_json_and_no_auth(client):
    assert_error(client.post("/sync/push", data="{nope", headers={"Content-Type": "application/json"}), 400)
    anon = tsapi.Api(None)
    assert_error(anon.post("/sync/push", {"deviceId": "d", "operations": []}), 401, "unauthorized")


# --------------------------------------------------------------------------- per-operation rejections

def test_bad_operations_rejected_individually_later_ops_run(client):
    existing = push(client, [create_todo_op("exists")])[0]["record"]
    ops = [
        op("dailyStat", "create", data={"date": D}),                                    # 0 derived
        op("dailyStat", "update", id=1, data={"todoCount": 3}),                        # 1 derived
        op("note", "create", data={"title": "x"}),                                     # 2 unknown entity
        op("todo", "upsert", data={"title": "x", "deadline": D}),                     # 3 unknown action
        op("todo", "update", data={"title": "x"}),                                     # 4 no id / clientId
        op("todo", "create"),                                                          # 5 no data
        op("todo", "create", data={"deadline": D}),                                    # 6 no title
        op("todo", "create", data={"title": "x", "deadline": D, "difficulty": 9}),    # 7 bad value
        op("todo", "create", clientId="not-a-uuid", data={"title": "x", "deadline": D}),  # 8 bad clientId
        op("tag", "create", data={"name": "x", "color": "red"}),                      # 9 bad color
        op("todo", "update", id=existing["id"], data={"title": ""}),                  # 10 blank title
        op("todo", "update", id=existing["id"], baseVersion="1", data={"title": "x"}),  # 11 bad baseVersion
        op("todo", "update", id=existing["id"], data="title=x"),                      # 12 data not object
        op("todo", "update", id=999_999_999, data={"title": "x"}),                    # 13 not found
        op("todo", "delete", clientId=uid()),                                          # 14 not found
        op("todo", "create", data={"title": "x", "deadline": D, "tagId": 999_999_999}),  # 15 bad tag
        create_todo_op("still runs"),                                                  # 16
    ]
    res = push(client, ops)
    for i in range(13):
        rejected(res[i])
    for i, f in ((0, "entity"), (2, "entity"), (3, "action"), (6, "title"), (7, "difficulty"), (8, "clientId"),
                 (9, "color"), (10, "title"), (11, "baseVersion"), (15, "tagId")):
        rejected(res[i], field=f)
    rejected(res[13], code="not_found")
    rejected(res[14], code="not_found")
    rejected(res[15], field="tagId")
    assert res[16]["status"] == "applied"
    assert res[8]["clientId"] in (None, "not-a-uuid")
    assert client.get_todo(existing["id"]) == existing
    assert sorted(t["title"] for t in fresh_state(client).todos.values()) == ["exists", "still runs"]


def test_other_users_ids_not_found_nothing_leaks(client, other_client):
    their_tag = other_client.create_tag(name="secret-tag")
    tcid = uid()
    their = other_client.create_todo("secret", deadline=D, clientId=tcid, tagId=their_tag["id"])
    res = push(client, [
        op("todo", "update", id=their["id"], data={"title": "hijack"}),
        op("todo", "update", id=their["id"], baseVersion=0, data={"title": "hijack"}),
        op("todo", "update", clientId=tcid, data={"title": "hijack"}),
        op("todo", "delete", id=their["id"]),
        op("todo", "delete", clientId=tcid, baseVersion=0),
        op("tag", "update", id=their_tag["id"], data={"name": "hijack"}),
        op("tag", "delete", id=their_tag["id"]),
        create_todo_op("mine", tagId=their_tag["id"]),
    ], policy="client-wins")
    for r in res[:7]:
        rejected(r, code="not_found")
    rejected(res[7], field="tagId")
    text = json.dumps(res)
    assert "secret" not in text
    assert other_client.get_todo(their["id"]) == their
    assert other_client.get_tag(their_tag["id"]) == their_tag
    # the same clientId is free for this user: a new record of their own, not the other user's
    mine = push(client, [create_todo_op("own", client_id=tcid)])[0]
    assert mine["status"] == "applied" and mine["id"] != their["id"] and mine["record"]["title"] == "own"
    assert other_client.get_todo(their["id"]) == their


def test_versions_increase_across_kinds_in_push_and_rest(client):
    v = [client.create_tag(name="a")["version"]]
    res = push(client, [create_tag_op("b"), create_todo_op("c"), create_tag_op("d")])
    v += [r["version"] for r in res]
    v.append(client.create_todo("e")["version"])
    assert v == sorted(v) and len(set(v)) == len(v), v


# --------------------------------------------------------------------------- concurrency

def test_concurrent_updates_same_base_version_exactly_one_applied(client):
    t = push(client, [create_todo_op("race")])[0]["record"]
    n = 8
    barrier = threading.Barrier(n)

    def worker(i):
        api = tsapi.Api(client.token)
        try:
            barrier.wait(timeout=10)
            return push(api, [op("todo", "update", id=t["id"], baseVersion=t["version"],
                                 data={"title": f"writer {i}"})], policy="reject", device=f"dev-{i}")[0]
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(n) as ex:
        res = list(ex.map(worker, range(n)))
    statuses = sorted(r["status"] for r in res)
    assert statuses == ["applied"] + ["conflict"] * (n - 1), statuses
    winner = next(r for r in res if r["status"] == "applied")
    final = client.get_todo(t["id"])
    assert final == winner["record"]
    for r in res:
        if r["status"] == "conflict":
            assert r["record"] == final


# --------------------------------------------------------------------------- more isolation / races

def test_same_op_id_for_two_users_is_independent(client, other_client):
    op_id = uid()
    mine = push(client, [create_todo_op("mine", op_id=op_id)])[0]
    theirs = push(other_client, [create_todo_op("theirs", op_id=op_id)])[0]
    assert mine["status"] == theirs["status"] == "applied"
    assert theirs["id"] != mine["id"] and theirs["record"]["title"] == "theirs", "opIds are remembered per user"
    assert [t["title"] for t in fresh_state(other_client).todos.values()] == ["theirs"]


def test_concurrent_creates_same_client_id_one_record(client):
    cid = uid()
    n = 6
    barrier = threading.Barrier(n)

    def worker(i):
        api = tsapi.Api(client.token)
        try:
            barrier.wait(timeout=10)
            return push(api, [create_todo_op(f"c{i}", client_id=cid)], device=f"d{i}")[0]
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(n) as ex:
        res = list(ex.map(worker, range(n)))
    assert all(r["status"] == "applied" for r in res)
    assert len({r["id"] for r in res}) == 1
    assert n_todos(client) == 1


def test_concurrent_identical_replays(client):
    body = {"deviceId": "d", "operations": [create_todo_op("once"), create_tag_op("once")]}
    n = 6
    barrier = threading.Barrier(n)

    def worker(_):
        api = tsapi.Api(client.token)
        try:
            barrier.wait(timeout=10)
            r = push_raw(api, body)
            assert r.status_code == 200, short(r)
            return r.content
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(n) as ex:
        contents = list(ex.map(worker, range(n)))
    assert len(set(contents)) == 1
    st = fresh_state(client)
    assert len(st.todos) == 1 and len(st.tags) == 1


@pytest.mark.parametrize("fields", [
    {"id": 2 ** 64}, {"id": 0}, {"id": -5}, {"id": "abc"}, {"id": 1.5}, {"id": True},
    {"baseVersion": 2 ** 63}, {"baseVersion": -1}, {"baseVersion": 1.5}, {"baseVersion": True},
    {"data": {"tagId": 10 ** 30}}, {"data": {"tagId": 2 ** 63}}, {"data": {"deadline": "2031-02-30"}},
    {"data": {"tagClientId": 5}}, {"data": {"estimatedTime": 1441}}, {"data": {"title": "t" * 201}},
    {"base": []}, {"data": []}, {"data": {"isCompleted": "yes"}}, {"clientId": 12},
], ids=lambda f: json.dumps(f)[:40])
def test_hostile_operation_values_rejected_not_5xx(client, fields):
    t = push(client, [create_todo_op("target")])[0]["record"]
    o = op("todo", "update", id=t["id"], data={"title": "changed"})
    o.update(fields)
    res = push(client, [o, create_todo_op("after")], policy="merge")
    assert res[0]["status"] == "rejected", res[0]
    assert res[0]["error"]["code"] in ("validation_failed", "not_found"), res[0]
    assert res[1]["status"] == "applied"
    assert client.get_todo(t["id"]) == t


def test_update_with_other_users_tag_rejected(client, other_client):
    theirs = other_client.create_tag(name="theirs")
    t = push(client, [create_todo_op("mine")])[0]["record"]
    res = push(client, [op("todo", "update", id=t["id"], data={"tagId": theirs["id"]})], policy="client-wins")[0]
    rejected(res, field="tagId")
    assert client.get_todo(t["id"]) == t


def test_merge_with_tag_client_id_and_base_tag_id(client):
    old_cid, new_cid = uid(), uid()
    res = push(client, [create_tag_op("old", client_id=old_cid), create_tag_op("new", client_id=new_cid)])
    old, new = res[0]["record"], res[1]["record"]
    t = push(client, [create_todo_op("x", tagClientId=old_cid)])[0]["record"]
    server_edit(client, t["id"], {"title": "server"})
    res = push(client, [op("todo", "update", id=t["id"], baseVersion=t["version"],
                           data={"tagClientId": new_cid}, base={"tagId": old["id"]})], policy="merge")[0]
    assert res["status"] == "applied", res
    assert res["record"]["tagId"] == new["id"] and res["record"]["title"] == "server"


def test_client_clocks_are_not_trusted(client):
    """SYNC-NOTES pitfall 8: timestamps and versions a device sends are ignored."""
    skew = {"createdAt": "2099-01-01T00:00:00.000Z", "updatedAt": "2001-01-01T00:00:00.000Z",
            "deletedAt": "2001-01-01T00:00:00.000Z", "version": 999_999, "id": 1}
    first = push(client, [create_todo_op("early")])[0]["record"]
    res = push(client, [create_todo_op("skewed", **skew), create_tag_op("skewed")])
    rec = res[0]["record"]
    assert rec["deletedAt"] is None and rec["version"] < 999_999 and rec["id"] != 1
    tsapi.assert_timestamps(rec)  # within minutes of now, in UTC
    assert tsapi.parse_ts(rec["createdAt"]) >= tsapi.parse_ts(first["createdAt"])
    upd = push(client, [op("todo", "update", id=first["id"], data={"title": "later", **skew})])[0]
    assert upd["status"] == "applied" and upd["record"]["deletedAt"] is None
    assert upd["record"]["createdAt"] == first["createdAt"]
    assert upd["version"] > res[1]["version"], "versions follow the server's commit order only"
