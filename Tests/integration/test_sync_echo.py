"""GET /sync/pull?deviceId=…: echo suppression (API.md, "Sync: pull").

A device that pulls with its deviceId does not get back the records whose latest change was an
operation it pushed itself (it holds them from its push results). Everything else is sent: other
devices' changes, REST writes, and changes the server derived (daily stats, todos un-tagged by a
tag delete). Paging and hasMore are exactly as without deviceId, so a page may be empty while
hasMore is true, and a parent tag the device changed itself counts as held by it.
"""

from __future__ import annotations

import pytest

import synclib
from synclib import KINDS, create_tag_op, create_todo_op, op, page_records, pull, pull_all, push, uid
from tsapi import assert_error, short

DATE = "2031-07-07"


def ids(run_or_pages, kind: str) -> set[int]:
    pages = run_or_pages.pages if hasattr(run_or_pages, "pages") else run_or_pages
    return {rec["id"] for body in pages for k, rec, _ in page_records(body) if k == kind}


def records(run) -> dict[tuple[str, int], dict]:
    return {(k, rec["id"]): rec for body in run.pages for k, rec, _ in page_records(body)}


def test_own_pushed_changes_are_left_out_derived_and_others_are_sent(client):
    dev_a, dev_b = f"phone-{uid()}", f"tablet-{uid()}"
    tag_op = create_tag_op("Mine")
    res = push(client, [tag_op, create_todo_op("from A", deadline=DATE, tagClientId=tag_op["clientId"],
                                               isCompleted=True)], device=dev_a)
    tag_a, todo_a = res[0]["record"], res[1]["record"]
    todo_b = push(client, [create_todo_op("from B", deadline=DATE)], device=dev_b)[0]["record"]
    todo_rest = client.create_todo("from REST", deadline=DATE)

    everything = pull_all(client, limit=1000)
    stat_ids = ids(everything, "dailyStats")
    assert len(stat_ids) == 1, everything.pages
    stat = next(rec for body in everything.pages for k, rec, _ in page_records(body) if k == "dailyStats")
    assert [t["tagId"] for t in stat["tagStats"]] == [tag_a["id"]], stat

    as_a = pull_all(client, limit=1000, device=dev_a)
    assert ids(as_a, "tags") == set(), "A's own tag came back to A (its stat's parent tag counts as held)"
    assert ids(as_a, "todos") == {todo_b["id"], todo_rest["id"]}, as_a.pages
    assert ids(as_a, "dailyStats") == stat_ids, "a derived daily stat must reach the device that caused it"

    as_b = pull_all(client, limit=1000, device=dev_b)
    assert ids(as_b, "tags") == {tag_a["id"]}
    assert ids(as_b, "todos") == {todo_a["id"], todo_rest["id"]}
    assert ids(as_b, "dailyStats") == stat_ids
    # B's page is referentially complete: A's tag came with the stat and todo that refer to it.
    store = synclib.ClientStore()
    for body in as_b.pages:
        store.apply_page(body)
    assert not store.missing_refs()

    # A device that never pushed, and an unknown one, get everything.
    for device in (f"new-{uid()}", "x"):
        assert records(pull_all(client, limit=1000, device=device)) == records(everything)

    # Only the *latest* change counts: a REST edit of A's todo, then a B edit of A's tag, come back to A.
    edited = client.patch(f"/todos/{todo_a['id']}", {"title": "edited on the web"})
    assert edited.status_code == 200, short(edited)
    push(client, [op("tag", "update", id=tag_a["id"], data={"name": "Renamed by B"})], device=dev_b)
    again = pull_all(client, cursor=as_a.pages[-1]["cursor"], device=dev_a)
    got = records(again)
    assert got[("todos", todo_a["id"])]["title"] == "edited on the web"
    assert got[("tags", tag_a["id"])]["name"] == "Renamed by B"
    # ...and the stat, whose tagStats show the new name (derived, so sent to everyone).
    assert got[("dailyStats", stat["id"])]["tagStats"][0]["name"] == "Renamed by B"


def test_incremental_pull_leaves_out_own_updates_and_deletes_but_not_derived_untagging(client):
    dev_a = f"phone-{uid()}"
    tag = client.create_tag("Work")
    todos = [client.create_todo(f"t{i}", deadline=DATE, tagId=tag["id"]) for i in range(3)]
    start = pull_all(client, device=dev_a).pages[-1]["cursor"]

    push(client, [op("todo", "update", id=todos[0]["id"], baseVersion=todos[0]["version"], data={"title": "A1"}),
                  op("todo", "delete", id=todos[1]["id"])], device=dev_a)
    got = records(pull_all(client, cursor=start, device=dev_a))
    assert ("todos", todos[0]["id"]) not in got and ("todos", todos[1]["id"]) not in got, got.keys()
    assert {k for k, _ in got} == {"dailyStats"}, got.keys()

    # A deletes the tag: the tombstone is A's own, the todos it un-tags are the server's doing.
    cursor = pull_all(client, cursor=start, device=dev_a).pages[-1]["cursor"]
    push(client, [op("tag", "delete", id=tag["id"])], device=dev_a)
    run = pull_all(client, cursor=cursor, device=dev_a)
    deleted_tags = [rec for body in run.pages for rec in body["changes"]["tags"]["deleted"]]
    assert deleted_tags == [], "A's own tag delete came back to A"
    untagged = {rec["id"]: rec for body in run.pages for rec in body["changes"]["todos"]["upserted"]}
    assert set(untagged) == {todos[0]["id"], todos[2]["id"]}, untagged
    assert all(rec["tagId"] is None for rec in untagged.values())
    # Without deviceId the tombstone is there.
    plain = pull_all(client, cursor=cursor)
    assert [rec["id"] for body in plain.pages for rec in body["changes"]["tags"]["deleted"]] == [tag["id"]]


def test_paging_and_has_more_are_the_same_with_and_without_device_id(client):
    dev_a, dev_b = f"phone-{uid()}", f"tablet-{uid()}"
    # Versions 1-6 are A's (five todos, then one derived stat for the date), then B's and REST's.
    push(client, [create_todo_op(f"a{i}", deadline=DATE) for i in range(5)], device=dev_a)
    push(client, [create_todo_op(f"b{i}", deadline="2031-07-08") for i in range(3)], device=dev_b)
    client.create_todo("rest", deadline="2031-07-09")
    for limit in (1, 2, 3, 7):
        plain = pull_all(client, limit=limit)
        as_a = pull_all(client, limit=limit, device=dev_a)
        assert [b["cursor"] for b in as_a.pages] == [b["cursor"] for b in plain.pages], limit
        assert [b["hasMore"] for b in as_a.pages] == [b["hasMore"] for b in plain.pages], limit
        # Each page is the plain page minus A's own records (parent tags aside: there are none).
        for mine, theirs in zip(as_a.pages, plain.pages):
            expected = [(k, r["id"]) for k, r, _ in page_records(theirs)
                        if not (k == "todos" and r["title"].startswith("a"))]
            assert [(k, r["id"]) for k, r, _ in page_records(mine)] == expected
    # With limit 2, the first pages hold only A's todos: empty, and hasMore is still true.
    first = pull(client, limit=2, device=dev_a)
    assert first["hasMore"] is True
    assert all(first["changes"][k][s] == [] for k in KINDS for s in ("upserted", "deleted")), first


def test_device_id_is_validated_like_push(client):
    for bad in ("", "x" * 101):
        r = client.get("/sync/pull", params={"deviceId": bad})
        assert_error(r, 400)
    r = client.get("/sync/pull", params={"deviceId": "é" * 100})
    assert r.status_code == 200, short(r)
    # A push with the same 100-character id works, and its change is then left out.
    device = "é" * 99 + "z"
    push(client, [create_todo_op("mine", deadline=DATE)], device=device)
    body = pull(client, device=device)
    assert body["changes"]["todos"]["upserted"] == []
    assert len(pull(client)["changes"]["todos"]["upserted"]) == 1


def test_device_ids_are_per_user(client, other_client):
    device = f"shared-name-{uid()}"
    push(client, [create_todo_op("user 1", deadline=DATE)], device=device)
    push(other_client, [create_todo_op("user 2", deadline=DATE)], device=device)
    assert pull(client, device=device)["changes"]["todos"]["upserted"] == []
    # The same deviceId text on another account is another device: nothing of user 1 leaks, and
    # user 2's own op is left out for user 2 only.
    assert pull(other_client, device=device)["changes"]["todos"]["upserted"] == []
    assert [t["title"] for t in pull(other_client)["changes"]["todos"]["upserted"]] == ["user 2"]


def test_device_ids_compare_exactly_trailing_spaces_included(client):
    """A deviceId names one local store exactly as sent: `tab` and `tab ` are two devices (MariaDB's
    PAD SPACE comparison once made them one, so each hid the other's changes from it)."""
    device = f"tab-{uid()}"
    mine = push(client, [create_todo_op("padded device", deadline=DATE)], device=device + " ")[0]["record"]
    plain = push(client, [create_todo_op("plain device", deadline=DATE)], device=device)[0]["record"]
    assert ids(pull_all(client, limit=1000, device=device), "todos") == {mine["id"]}
    assert ids(pull_all(client, limit=1000, device=device + " "), "todos") == {plain["id"]}
