"""Schema versions (API.md "Schema versions", issue 21) and the todo's `notes` (schema 2).

Version 1 is the shape without `notes`, 2 adds `notes`, 3 adds `remindAt`; absent means 1. Records sent to a version-N client carry
exactly version N's fields, and every pull page names the version it used. A version-1 push never
changes `notes`: not by sending it, not by `client-wins`, not by `merge`, not by restoring a
deleted todo; its creates leave it null. A stored push result replays exactly as first answered.
Any integer below the minimum (default 1: 0 and negatives) is 426 `upgrade_required` with
`minimum` and `current`, nothing applied; a non-integer is 400 (query) or 422 (push body); above
the current version is served at the current one. REST always uses the current version.

Decisions asserted where API.md is open: `"schemaVersion": null` in a push body counts as absent
(as for `conflictPolicy`); an empty `schemaVersion=` query is not an integer (400).
"""

from __future__ import annotations

import pytest

import synclib
import tsapi
from synclib import create_todo_op, fresh_state, op, pull, push, push_raw, uid
from tsapi import CURRENT_SCHEMA, TODO_KEYS_V1, TODO_KEYS_V2, TODO_KEYS_V3, assert_error, assert_json, short

D = "2031-07-07"
NOTES = "first line\r\nsecond line\n\n  indented\tand trailing  \n"


def rest_notes(api, todo_id: int):
    """GET /todos/{id}'s notes (without client.get_todo's strong-ETag check: nginx gzips answers
    over 1000 bytes and then weakens their ETag to W/"…", which If-Match accepts)."""
    r = api.get(f"/todos/{todo_id}")
    assert r.status_code == 200, short(r)
    return assert_json(r)["notes"]


def pulled_todo(api, todo_id: int, schema: int | None) -> dict:
    body = pull(api, schema=schema, limit=1000)
    [todo] = [t for t in body["changes"]["todos"]["upserted"] if t["id"] == todo_id]
    return todo


# --------------------------------------------------------------------------- pull

def test_pull_sends_exactly_the_fields_of_the_clients_version(client):
    todo = client.create_todo("with notes", D, notes=NOTES)
    assert todo["notes"] == NOTES  # REST: the current version, kept exactly
    for schema in (None, 1):  # None: no schemaVersion sent
        body = pull(client, schema=schema)
        assert body["schemaVersion"] == 1
        [t] = body["changes"]["todos"]["upserted"]
        assert set(t) == TODO_KEYS_V1, t
    body = pull(client, schema=2)
    assert body["schemaVersion"] == 2
    [t] = body["changes"]["todos"]["upserted"]
    assert set(t) == TODO_KEYS_V2 and t["notes"] == NOTES, t
    # Above the current version: served at the current one, and the page says so.
    body = pull(client, schema=99)
    assert body["schemaVersion"] == CURRENT_SCHEMA and body["changes"]["todos"]["upserted"][0]["notes"] == NOTES


def test_every_todo_carries_notes_at_version_two_even_untouched_ones(client):
    tag = client.create_tag("t")
    todo = client.create_todo("no notes", D, tagId=tag["id"])
    assert todo["notes"] is None
    assert pulled_todo(client, todo["id"], 2)["notes"] is None
    # Incremental pages too, and a parent tag sent for completeness changes nothing.
    first = pull(client, schema=2)
    client.patch(f"/todos/{todo['id']}", {"title": "renamed"})
    page = pull(client, cursor=first["cursor"], schema=2)
    [t] = page["changes"]["todos"]["upserted"]
    assert t["title"] == "renamed" and "notes" in t and t["notes"] is None
    page1 = pull(client, cursor=first["cursor"], schema=1)
    assert "notes" not in page1["changes"]["todos"]["upserted"][0]


def test_a_deleted_todos_tombstone_is_the_same_at_every_version(client):
    todo = client.create_todo("gone", D, notes="n")
    first = pull(client)
    assert client.delete(f"/todos/{todo['id']}").status_code == 204
    for schema in (1, 2, 3):
        page = pull(client, cursor=first["cursor"], schema=schema)
        [tomb] = page["changes"]["todos"]["deleted"]
        assert set(tomb) == {"id", "clientId", "version", "deletedAt"}, tomb


# --------------------------------------------------------------------------- push at version 1

def _todo_with_notes(client) -> dict:
    """A todo with notes, made by a version-2 push, then changed on the server (so a base is stale)."""
    cid = uid()
    [res] = push(client, [create_todo_op("shared", D, client_id=cid, notes="keep me")], schema=2)
    assert res["status"] == "applied" and res["record"]["notes"] == "keep me", res
    created = res["record"]
    r = client.patch(f"/todos/{created['id']}", {"isImportant": True})
    assert r.status_code == 200, short(r)
    return created


@pytest.mark.parametrize("policy", ["reject", "client-wins", "merge"])
def test_a_version_one_push_never_changes_notes_under_any_policy(client, policy):
    created = _todo_with_notes(client)
    # Stale (baseVersion is the create's): resolved by the policy.
    stale = op("todo", "update", id=created["id"], baseVersion=created["version"],
               data={"title": "edited on an old phone", "notes": "overwritten"},
               base={"title": "shared", "notes": "keep me"})
    # Not stale: an unconditional update naming notes.
    fresh = op("todo", "update", id=created["id"], data={"notes": None, "isLife": True})
    results = push(client, [stale, fresh], policy=policy, schema=None)  # an old app: no schemaVersion
    for res in results:
        assert "notes" not in res["record"], res
        assert res.get("conflictingFields", []) == [] or "notes" not in res["conflictingFields"], res
    expected_title = "shared" if policy == "reject" else "edited on an old phone"
    assert results[0]["status"] == ("conflict" if policy == "reject" else "applied"), results[0]
    now = client.get_todo(created["id"])
    assert (now["notes"], now["title"], now["isLife"]) == ("keep me", expected_title, True), now


def test_a_version_one_restore_keeps_the_notes(client):
    created = _todo_with_notes(client)
    assert client.delete(f"/todos/{created['id']}").status_code == 204
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=created["version"],
                             data={"title": "back", "notes": "from the old app"})], policy="client-wins", schema=1)
    assert res["status"] == "applied" and res["record"]["deletedAt"] is None and "notes" not in res["record"], res
    now = client.get_todo(created["id"])
    assert (now["title"], now["notes"]) == ("back", "keep me"), now


def test_a_version_one_create_leaves_notes_null(client):
    [res] = push(client, [create_todo_op("old app", D, notes="ignored")], schema=None)
    assert res["status"] == "applied" and set(res["record"]) == TODO_KEYS_V1, res
    assert client.get_todo(res["id"])["notes"] is None


def test_version_two_push_writes_and_merges_notes(client):
    created = _todo_with_notes(client)
    # merge: the server still has the base value → the client's is taken.
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=created["version"],
                             data={"notes": "new\nnotes"}, base={"notes": "keep me"})], policy="merge", schema=2)
    assert res["status"] == "applied" and res["record"]["notes"] == "new\nnotes", res
    # merge: the server changed it since the base → kept, listed as conflicting.
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=created["version"],
                             data={"notes": "mine"}, base={"notes": "keep me"})], policy="merge", schema=2)
    assert res["status"] == "merged" and res["conflictingFields"] == ["notes"], res
    assert client.get_todo(created["id"])["notes"] == "new\nnotes"


def test_a_version_one_result_replays_as_first_answered_after_the_upgrade(client):
    body = {"deviceId": "phone", "operations": [create_todo_op("before upgrade", D, notes="x")]}
    first = push_raw(client, body)
    assert first.status_code == 200, short(first)
    [res] = assert_json(first)["results"]
    assert set(res["record"]) == TODO_KEYS_V1, res
    assert client.get_todo(res["id"])["notes"] is None
    # The app is upgraded and sends its queue again, now at version 2: the stored answer, byte
    # for byte (no `notes`: "not known at this version", the client keeps its local value).
    again = push_raw(client, {**body, "schemaVersion": 2})
    assert again.status_code == 200 and again.content == first.content, (first.text, again.text)
    # A new operation at version 2 gets version 2's fields.
    [fresh] = push(client, [create_todo_op("after upgrade", D, notes="y")], schema=2)
    assert fresh["record"]["notes"] == "y"


# --------------------------------------------------------------------------- 426, bad versions

@pytest.mark.parametrize("version", [0, -1, -7, -99999999999999999999])
def test_below_the_minimum_is_426_and_nothing_is_applied(client, version):
    r = client.get("/sync/pull", params={"schemaVersion": str(version)})
    err = assert_error(r, 426, "upgrade_required")
    assert (err["minimum"], err["current"]) == (1, CURRENT_SCHEMA), err
    cid = uid()
    r = push_raw(client, {"deviceId": "old", "schemaVersion": version,
                          "operations": [create_todo_op("never", D, client_id=cid)]})
    err = assert_error(r, 426, "upgrade_required")
    assert (err["minimum"], err["current"]) == (1, CURRENT_SCHEMA), err
    assert fresh_state(client).todos == {}
    # nothing stored either: the same op at version 1 is applied now, not replayed
    [res] = push(client, [create_todo_op("now", D, client_id=cid)], schema=None)
    assert res["status"] == "applied" and res["record"]["title"] == "now", res


@pytest.mark.parametrize("text", ["abc", "1.5", "", "2x", "+2", " 2", "1e0"])
def test_a_query_version_that_is_not_an_integer_is_400(client, text):
    assert_error(client.get("/sync/pull", params={"schemaVersion": text}), 400, "bad_request")


@pytest.mark.parametrize("value", ["2", 1.5, True, [2], {"v": 2}])
def test_a_body_version_that_is_not_an_integer_is_422_nothing_applied(client, value):
    r = push_raw(client, {"deviceId": "d", "schemaVersion": value, "operations": [create_todo_op("never", D)]})
    assert_error(r, 422, "validation_failed", fields=["schemaVersion"])
    assert fresh_state(client).todos == {}


def test_a_null_body_version_is_version_one(client):
    r = push_raw(client, {"deviceId": "d", "schemaVersion": None, "operations": [create_todo_op("v1", D, notes="n")]})
    assert r.status_code == 200, short(r)
    [res] = assert_json(r)["results"]
    assert set(res["record"]) == TODO_KEYS_V1, res


# --------------------------------------------------------------------------- notes' rule

def test_notes_limits_and_exactness(client):
    longest = "é" * 9_999 + "😀"  # 10,000 characters (code points), more bytes
    todo = client.create_todo("long", D, notes=longest)
    assert todo["notes"] == longest and rest_notes(client, todo["id"]) == longest
    r = client.post("/todos", {"title": "too long", "deadline": D, "notes": "x" * 10_001})
    assert_error(r, 422, "validation_failed", fields=["notes"])
    r = client.patch(f"/todos/{todo['id']}", {"notes": "x" * 10_001})
    assert_error(r, 422, "validation_failed", fields=["notes"])
    for notes in ("", NOTES, "\n", "  ", "\r"):
        r = client.patch(f"/todos/{todo['id']}", {"notes": notes})
        assert r.status_code == 200 and assert_json(r)["notes"] == notes, short(r)
        assert rest_notes(client, todo["id"]) == notes
        assert pulled_todo(client, todo["id"], 2)["notes"] == notes
    r = client.patch(f"/todos/{todo['id']}", {"notes": None})
    assert r.status_code == 200 and assert_json(r)["notes"] is None, short(r)
    for bad in (5, True, ["a"]):
        assert_error(client.patch(f"/todos/{todo['id']}", {"notes": bad}), 422, "validation_failed", fields=["notes"])
    [res] = push(client, [create_todo_op("push", D, notes="x" * 10_001)], schema=2)
    synclib.rejected(res, "validation_failed", "notes")


# --------------------------------------------------------------------------- remindAt (schema 3)

R = "2031-07-07T09:30:00.000Z"


def test_remind_at_is_sent_from_version_three_on_only(client):
    todo = client.create_todo("remind me", D, remindAt="2031-07-07T11:30:00+02:00")
    assert todo["remindAt"] == R and set(todo) == TODO_KEYS_V3, todo  # REST: the current version
    for schema, keys in ((None, TODO_KEYS_V1), (1, TODO_KEYS_V1), (2, TODO_KEYS_V2), (3, TODO_KEYS_V3)):
        body = pull(client, schema=schema)
        assert body["schemaVersion"] == (schema or 1)
        [t] = body["changes"]["todos"]["upserted"]
        assert set(t) == keys, (schema, t)
    assert pulled_todo(client, todo["id"], 3)["remindAt"] == R
    # Untouched todos carry it too (null), and so does an incremental page.
    plain = client.create_todo("no reminder", D)
    assert plain["remindAt"] is None and pulled_todo(client, plain["id"], 3)["remindAt"] is None


def _todo_with_reminder(client) -> dict:
    """A todo with notes and a reminder, made by a version-3 push, then changed on the server."""
    [res] = push(client, [create_todo_op("shared", D, notes="keep me", remindAt=R)], schema=3)
    assert res["status"] == "applied" and res["record"]["remindAt"] == R, res
    created = res["record"]
    r = client.patch(f"/todos/{created['id']}", {"isImportant": True})
    assert r.status_code == 200, short(r)
    return created


@pytest.mark.parametrize("schema", [None, 1, 2])
@pytest.mark.parametrize("policy", ["reject", "client-wins", "merge"])
def test_an_older_push_never_changes_remind_at_under_any_policy(client, policy, schema):
    created = _todo_with_reminder(client)
    stale = op("todo", "update", id=created["id"], baseVersion=created["version"],
               data={"title": "edited on an old phone", "remindAt": "2040-01-01T00:00:00Z"},
               base={"title": "shared", "remindAt": R})
    fresh = op("todo", "update", id=created["id"], data={"remindAt": None, "isLife": True})
    results = push(client, [stale, fresh], policy=policy, schema=schema)
    for res in results:
        assert "remindAt" not in res["record"], res
        assert "remindAt" not in res.get("conflictingFields", []), res
    now = client.get_todo(created["id"])
    expected_title = "shared" if policy == "reject" else "edited on an old phone"
    assert (now["remindAt"], now["title"], now["isLife"], now["notes"]) == (R, expected_title, True, "keep me"), now
    # A restore from an older client keeps it as well.
    assert client.delete(f"/todos/{created['id']}").status_code == 204
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=now["version"],
                             data={"title": "back", "remindAt": None})], policy="client-wins", schema=schema)
    assert res["status"] == "applied" and res["record"]["deletedAt"] is None, res
    assert client.get_todo(created["id"])["remindAt"] == R


@pytest.mark.parametrize("schema", [None, 1, 2])
def test_an_older_create_leaves_remind_at_null(client, schema):
    [res] = push(client, [create_todo_op("old app", D, remindAt=R, notes="n")], schema=schema)
    assert res["status"] == "applied" and "remindAt" not in res["record"], res
    assert client.get_todo(res["id"])["remindAt"] is None


def test_version_three_push_writes_normalises_and_merges_remind_at(client):
    created = _todo_with_reminder(client)
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=created["version"],
                             data={"remindAt": "2031-07-08t00:00:00.5-00:30"}, base={"remindAt": R})],
                 policy="merge", schema=3)
    assert res["status"] == "applied" and res["record"]["remindAt"] == "2031-07-08T00:30:00.500Z", res
    [res] = push(client, [op("todo", "update", id=created["id"], baseVersion=created["version"],
                             data={"remindAt": "2031-07-09T00:00:00Z"}, base={"remindAt": R})], policy="merge", schema=3)
    assert res["status"] == "merged" and res["conflictingFields"] == ["remindAt"], res
    assert client.get_todo(created["id"])["remindAt"] == "2031-07-08T00:30:00.500Z"
    [res] = push(client, [op("todo", "update", id=created["id"], data={"remindAt": "2031-07-07T24:00:00Z"})], schema=3)
    synclib.rejected(res, "validation_failed", "remindAt")
    assert client.get_todo(created["id"])["remindAt"] == "2031-07-08T00:30:00.500Z"


def test_the_snapshot_has_remind_at_from_version_three_on(client):
    import test_sync_snapshot as snap
    todo = client.create_todo("snap", D, remindAt=R)
    for schema in (1, 2, 3):
        _, records, user_version = snap.read_file(snap.fetch(client, schema).content)
        assert user_version == schema
        row = records["todos"][todo["id"]]
        if schema >= 3:
            assert row["remindAt"] == R, row
        else:
            assert "remindAt" not in row, (schema, row)


def test_the_export_carries_remind_at(client):
    todo = client.create_todo("exported", D, remindAt=R)
    r = client.get("/account/export")
    assert r.status_code == 200, short(r)
    [t] = [t for t in assert_json(r)["todos"] if t["id"] == todo["id"]]
    assert t["remindAt"] == R and set(t) == TODO_KEYS_V3, t
