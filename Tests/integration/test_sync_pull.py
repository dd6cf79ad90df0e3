"""GET /sync/pull: first pulls, incremental pulls, tombstones, paging, writes while paging,
referential completeness, kind/version order, same-millisecond rows, cursor expiry and 400s.

Every page of every pull here goes through synclib.check_page_shape (exact shapes, kinds listed
tags -> todos -> dailyStats, each by version, no record twice in a page, at most `limit` records
plus parent tags) and, through ClientStore, a local-store simulation that fails when a page leaves
a todo's tagId or a stat's tagStats tagId unresolved.

Decisions asserted (made by the team where API.md is open): `limit` non-integer or outside
1..1000 -> 400; malformed / tampered / another user's cursor -> 400; `cursor=` (empty) is no
cursor; a first pull has no tombstones on any page for records deleted before it began, but
deletions made while paging are delivered; parent tags may exceed `limit` and then appear again in
their own version order; after `purge --retention-seconds 0` a cursor older than a purged tombstone
is 410 `cursor_expired`.
"""

from __future__ import annotations

import gzip
import json
import math
import time

import pytest

import synclib
from synclib import ClientStore, KINDS, create_todo_op, create_tag_op, fresh_state, page_records, pull, pull_all, push, uid
from tsapi import assert_error, assert_json, short


def bulk_todos(api, n, dates=("2031-06-01",), tag_ids=(None,), done_every=3):
    ops = [create_todo_op(f"todo {i}", deadline=dates[i % len(dates)], tagId=tag_ids[i % len(tag_ids)],
                          isCompleted=(i % done_every == 0), estimatedTime=10 + i)
           for i in range(n)]
    out = []
    for start in range(0, n, 500):
        res = push(api, ops[start:start + 500])
        assert all(r["status"] == "applied" for r in res), res
        out += [r["record"] for r in res]
    return out


def server_sets(store: ClientStore):
    return {k: {i: r["version"] for i, r in store.data[k].items()} for k in KINDS}


def empty_page(body):
    return all(body["changes"][k] == {"upserted": [], "deleted": []} for k in KINDS)


# --------------------------------------------------------------------------- first pull

def test_first_pull_live_only_and_equal_to_rest(client):
    cid = uid().upper()
    keep = client.create_tag(name="keep", clientId=cid)
    gone = client.create_tag(name="gone")
    a = client.create_todo("a", deadline="2031-06-01", tagId=keep["id"], isCompleted=True, estimatedTime=30)
    b = client.create_todo("b", deadline="2031-06-02", clientId=uid())
    c = client.create_todo("c", deadline="2031-06-03")
    assert client.delete(f"/todos/{c['id']}").status_code == 204
    assert client.delete(f"/tags/{gone['id']}").status_code == 204
    body = pull(client)
    assert body["hasMore"] is False
    ch = body["changes"]
    assert ch["tags"]["upserted"] == [client.get_tag(keep["id"])]
    assert ch["tags"]["upserted"][0]["clientId"] == cid, "clientId kept as first given"
    assert ch["todos"]["upserted"] == sorted([client.get_todo(a["id"]), client.get_todo(b["id"])],
                                             key=lambda t: t["version"])
    stats = [synclib.get_stat(client, d) for d in ("2031-06-01", "2031-06-02")]
    assert ch["dailyStats"]["upserted"] == sorted(stats, key=lambda s: s["version"])
    assert all(ch[k]["deleted"] == [] for k in KINDS)


def test_empty_cursor_is_no_cursor(client):
    t = client.create_todo("x")
    client.create_todo("y")
    assert client.delete(f"/todos/{t['id']}").status_code == 204
    r = client.get("/sync/pull", params={"cursor": ""})
    assert r.status_code == 200, short(r)
    body = assert_json(r)
    synclib.check_page_shape(body, 500, first_pull=True)
    assert [x["title"] for x in body["changes"]["todos"]["upserted"]] == ["y"]


def test_first_pull_later_pages_have_no_old_tombstones(client):
    recs = bulk_todos(client, 12, dates=("2031-06-01", "2031-06-02", "2031-06-03"))
    for rec in recs[::2]:
        assert client.delete(f"/todos/{rec['id']}").status_code == 204
    store = ClientStore()
    run = pull_all(client, store, limit=2)  # pull_all asserts no tombstones on any first-pull page
    assert sorted(store.todos) == sorted(r["id"] for r in recs[1::2])
    assert len(run.pages) == math.ceil((6 + 3) / 2)
    assert server_sets(store) == server_sets(fresh_state(client))


def test_deletions_while_first_pull_pages_are_delivered(client):
    recs = bulk_todos(client, 10)
    store = ClientStore()
    deleted = {}

    def between(n_pages):
        if n_pages == 1:
            delivered = next(iter(store.todos))
            undelivered = [r["id"] for r in recs if r["id"] not in store.todos][-1]
            for tid in (delivered, undelivered):
                assert client.delete(f"/todos/{tid}").status_code == 204
                deleted[tid] = True

    run = pull_all(client, store, limit=3, between_pages=between, writes_during_pull=True)
    later = [rec for body in run.pages[1:] for kind, rec, is_del in page_records(body) if is_del and kind == "todos"]
    assert sorted(t["id"] for t in later) == sorted(deleted), "deletions made while paging must be delivered"
    assert not (set(deleted) & set(store.todos))
    assert server_sets(store) == server_sets(fresh_state(client))


# --------------------------------------------------------------------------- incremental pulls

def test_incremental_changes_and_tombstones(client):
    old_tag = client.create_tag(name="old", clientId=uid())
    a = client.create_todo("a", deadline="2031-06-10")
    b = client.create_todo("b", deadline="2031-06-11", clientId=uid())
    c = client.create_todo("c", deadline="2031-06-10", tagId=old_tag["id"])
    untouched = client.create_todo("u", deadline="2031-06-12")
    store = ClientStore()
    pull_all(client, store)

    assert client.patch(f"/todos/{a['id']}", {"isCompleted": True, "estimatedTime": 20}).status_code == 200
    new_tag = client.create_tag(name="new")
    assert client.delete(f"/todos/{b['id']}").status_code == 204
    assert client.delete(f"/tags/{old_tag['id']}").status_code == 204

    body = pull(client, store.cursor)
    assert body["hasMore"] is False
    ch = body["changes"]
    assert [t["id"] for t in ch["tags"]["upserted"]] == [new_tag["id"]]
    assert ch["tags"]["deleted"] == [{"id": old_tag["id"], "clientId": old_tag["clientId"],
                                      "version": ch["tags"]["deleted"][0]["version"],
                                      "deletedAt": ch["tags"]["deleted"][0]["deletedAt"]}]
    up = {t["id"]: t for t in ch["todos"]["upserted"]}
    assert set(up) == {a["id"], c["id"]}, "a (edited) and c (lost its tag) only; u untouched"
    assert up[a["id"]]["isCompleted"] is True and up[c["id"]]["tagId"] is None
    assert [(t["id"], t["clientId"]) for t in ch["todos"]["deleted"]] == [(b["id"], b["clientId"])]
    assert {s["date"] for s in ch["dailyStats"]["upserted"]} == {"2031-06-10"}
    b_stat = [s["id"] for s in store.stats.values() if s["date"] == "2031-06-11"]
    assert [s["id"] for s in ch["dailyStats"]["deleted"]] == b_stat, "b's date lost its last todo"
    store.apply_page(body)
    assert untouched["id"] in store.todos
    assert server_sets(store) == server_sets(fresh_state(client))
    # nothing changed since: an empty page, and again
    for _ in range(2):
        body = pull(client, body["cursor"])
        assert empty_page(body) and body["hasMore"] is False


def test_create_update_delete_between_pulls_only_in_deleted(client):
    client.create_todo("anchor")
    store = ClientStore()
    pull_all(client, store)
    cid = uid()
    x = client.create_todo("x", clientId=cid)
    assert client.patch(f"/todos/{x['id']}", {"title": "x2"}).status_code == 200
    assert client.delete(f"/todos/{x['id']}").status_code == 204
    y = client.create_todo("y")
    for title in ("y1", "y2", "y3"):
        r = client.patch(f"/todos/{y['id']}", {"title": title})
        assert r.status_code == 200
    y_last = assert_json(r)
    body = pull(client, store.cursor)
    todos = body["changes"]["todos"]
    assert [t["id"] for t in todos["upserted"]] == [y["id"]], "x must not be upserted, y only once"
    assert todos["upserted"][0] == y_last, "the record in its latest state"
    assert [(t["id"], t["clientId"]) for t in todos["deleted"]] == [(x["id"], cid)]
    assert todos["deleted"][0]["version"] > x["version"]


def test_hasmore_exact_and_final_cursor_empty(client):
    client.create_todo("one", deadline="2031-06-20")  # todo + stat
    client.create_tag(name="t")                     # + tag = 3 records
    body = pull(client, limit=3)
    assert body["hasMore"] is False and sum(1 for _ in page_records(body)) == 3
    p1 = pull(client, limit=2)
    assert p1["hasMore"] is True and sum(1 for _ in page_records(p1)) == 2
    p2 = pull(client, p1["cursor"], limit=2)
    assert p2["hasMore"] is False and sum(1 for _ in page_records(p2)) == 1
    p3 = pull(client, p2["cursor"], limit=2)
    assert empty_page(p3) and p3["hasMore"] is False


def test_kinds_listed_parents_first_each_by_version(client):
    # versions: todo, stat, then tag, then a todo referencing it: tags must still come first
    t1 = client.create_todo("first", deadline="2031-06-21")
    tag = client.create_tag(name="late")
    t2 = client.create_todo("second", deadline="2031-06-22", tagId=tag["id"], isCompleted=True)
    assert client.patch(f"/todos/{t1['id']}", {"isCompleted": True, "tagId": tag["id"]}).status_code == 200
    r = client.get("/sync/pull")
    text = r.text
    assert text.index('"tags"') < text.index('"todos"') < text.index('"dailyStats"'), text[:300]
    body = assert_json(r)
    synclib.check_page_shape(body, 500, first_pull=True)
    assert [t["id"] for t in body["changes"]["todos"]["upserted"]] == [t2["id"], t1["id"]]
    assert len(body["changes"]["dailyStats"]["upserted"]) == 2


def test_versions_unique_and_increasing_across_kinds(client):
    seen = []
    seen.append(client.create_tag(name="a")["version"])
    t = client.create_todo("t", deadline="2031-06-23")
    seen.append(t["version"])
    seen.append(synclib.get_stat(client, "2031-06-23")["version"])
    r = client.patch(f"/todos/{t['id']}", {"isCompleted": True})
    seen.append(assert_json(r)["version"])
    seen.append(synclib.get_stat(client, "2031-06-23")["version"])
    res = push(client, [create_tag_op("b"), create_todo_op("p", deadline="2031-06-23")])
    seen += [x["version"] for x in res]
    assert all(x < y for x, y in zip(seen, seen[1:])), f"versions must strictly increase across kinds: {seen}"
    body = pull(client)
    versions = [rec["version"] for _, rec, _ in page_records(body)]
    assert len(versions) == len(set(versions)), "versions come from one per-user sequence"


# --------------------------------------------------------------------------- paging

def test_paging_120_records_limit_7_each_once_in_version_order(client):
    tags = push(client, [create_tag_op(f"tag{i}") for i in range(10)])
    tag_ids = [r["id"] for r in tags]
    bulk_todos(client, 105, dates=[f"2031-07-{d:02d}" for d in range(1, 6)], tag_ids=[None] + tag_ids)
    truth = fresh_state(client)
    n = sum(len(v) for v in truth.data.values())
    assert n == 120, n
    store = ClientStore()
    run = pull_all(client, store, limit=7)
    assert run.pages[-1]["hasMore"] is False
    assert all(p["hasMore"] for p in run.pages[:-1])
    core = list(run.core_records())
    keys = [(k, r["id"]) for k, r, _ in core]
    assert len(keys) == len(set(keys)) == n, "every record exactly once over the pages"
    assert [r["version"] for _, r, _ in core] == sorted(r["version"] for _, r, _ in core)
    assert len(run.pages) == math.ceil(n / 7)
    assert server_sets(store) == server_sets(truth)
    # extra parent tags, if any, are repeated in their own version order with the same content
    for kind, rec, _ in run.all_records():
        assert store.data[kind][rec["id"]]["version"] >= rec["version"]
    assert empty_page(pull(client, run.pages[-1]["cursor"], limit=7))


def test_writes_between_pages_are_never_skipped(client):
    tag = client.create_tag(name="t0")
    recs = bulk_todos(client, 30, dates=("2031-08-01", "2031-08-02"), tag_ids=(None, tag["id"]))
    store = ClientStore()
    written: list[tuple[str, int, int]] = []  # (kind, id, version) written while paging
    gone: set[int] = set()

    def delivered_live():
        return next(i for i in store.todos if i not in gone)

    def between(n_pages):
        step = n_pages % 5
        if step == 1:
            t = client.create_todo(f"new{n_pages}", deadline="2031-08-03")
            written.append(("todos", t["id"], t["version"]))
        elif step == 2:
            tid = delivered_live()  # already delivered
            r = client.patch(f"/todos/{tid}", {"title": f"edited{n_pages}"})
            written.append(("todos", tid, assert_json(r)["version"]))
        elif step == 3:
            pending = [r["id"] for r in recs if r["id"] not in store.todos and r["id"] not in gone]
            if pending:  # not yet delivered
                r = client.patch(f"/todos/{pending[-1]}", {"isCompleted": True})
                written.append(("todos", pending[-1], assert_json(r)["version"]))
        elif step == 4:
            r = client.patch(f"/tags/{tag['id']}", {"name": f"t{n_pages}"})
            written.append(("tags", tag["id"], assert_json(r)["version"]))
        else:
            tid = delivered_live()
            assert client.delete(f"/todos/{tid}").status_code == 204
            gone.add(tid)

    run = pull_all(client, store, limit=4, between_pages=between, writes_during_pull=True)
    assert written
    after = pull_all(client, store, limit=4)
    delivered = {(k, r["id"], r["version"]) for k, r, _ in list(run.all_records()) + list(after.all_records())}
    for w in written:
        kind, rid, version = w
        later = [v for (k, i, v) in delivered if k == kind and i == rid and v >= version]
        assert later, f"write {w} committed while paging was never delivered"
    assert server_sets(store) == server_sets(fresh_state(client))


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5])
def test_many_rows_in_one_millisecond_no_loops_no_duplicates(client, limit):
    """SYNC-NOTES pitfall 2: 50 todos created in one push share one timestamp."""
    recs = bulk_todos(client, 50, dates=("2031-09-09",))
    stamps = [r["updatedAt"] for r in recs]
    busiest = max(stamps.count(s) for s in set(stamps))
    assert busiest >= 10, f"expected many rows in one millisecond, busiest stamp has {busiest}"
    n = 51  # 50 todos + 1 stat
    store = ClientStore()
    run = pull_all(client, store, limit=limit, max_pages=math.ceil(n / limit) + 1)
    keys = [(k, r["id"]) for k, r, _ in run.core_records()]
    assert len(keys) == len(set(keys)) == n
    assert len(run.pages) == math.ceil(n / limit)
    assert len(store.todos) == 50 and len(store.stats) == 1


# --------------------------------------------------------------------------- referential completeness

def strict_completeness(run, pre_tags: dict):
    """Every tag a page refers to is in that page, an earlier page, or (held before the pull and)
    unchanged since the pull started (it is not delivered anywhere in this pull)."""
    delivered_later = {rec["id"] for body in run.pages for k, rec, _ in page_records(body) if k == "tags"}
    have: set[int] = set()
    for i, body in enumerate(run.pages):
        have |= {t["id"] for t in body["changes"]["tags"]["upserted"]}
        refs = {t["tagId"] for t in body["changes"]["todos"]["upserted"] if t["tagId"] is not None}
        refs |= {ts["tagId"] for s in body["changes"]["dailyStats"]["upserted"] for ts in s["tagStats"]}
        for ref in refs:
            assert ref in have or (ref in pre_tags and ref not in delivered_later), (
                f"page {i} refers to tag {ref} the client does not have in its current state")


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_first_pull_pages_carry_renamed_parent_tags(client, limit):
    tags = push(client, [create_tag_op(f"p{i}") for i in range(3)])
    tag_ids = [r["id"] for r in tags]
    bulk_todos(client, 12, dates=("2031-10-01", "2031-10-02"), tag_ids=tag_ids, done_every=2)
    for tid in tag_ids:  # tags now have higher versions than every todo and stat referring to them
        assert client.patch(f"/tags/{tid}", {"name": f"renamed{tid}"}).status_code == 200
    store = ClientStore()
    run = pull_all(client, store, limit=limit)
    strict_completeness(run, {})
    first_todo_page = next(b for b in run.pages if b["changes"]["todos"]["upserted"])
    assert first_todo_page["changes"]["tags"]["upserted"], "parent tag must travel with the first todo"
    assert len(store.tags) == 3 and all(t["name"].startswith("renamed") for t in store.tags.values())
    assert server_sets(store) == server_sets(fresh_state(client))


def test_page_carries_more_parent_tags_than_one_lookup_batch(client):
    # 70 tags, one todo on each, then every tag renamed: a first page of the 70 todos refers to 70
    # tags that all changed after it and are all outside it, more than one parent-tag query
    # (64 ids) covers, so the page must gather them over two lookups.
    tags = push(client, [create_tag_op(f"many{i}") for i in range(70)])
    tag_ids = [r["id"] for r in tags]
    assert all(r["status"] == "applied" for r in tags)
    todos = bulk_todos(client, 70, dates=("2031-11-01",), tag_ids=tag_ids)
    renamed = push(client, [synclib.op("tag", "update", id=t, data={"name": f"renamed{t}"}) for t in tag_ids])
    assert all(r["status"] == "applied" for r in renamed), renamed
    body = pull(client, limit=70)
    page_todos = body["changes"]["todos"]["upserted"]
    assert sorted(t["id"] for t in page_todos) == sorted(t["id"] for t in todos)
    page_tags = {t["id"]: t for t in body["changes"]["tags"]["upserted"]}
    assert set(page_tags) == set(tag_ids), "every referenced tag travels with the page"
    assert all(page_tags[t]["name"] == f"renamed{t}" for t in tag_ids)
    versions = [t["version"] for t in body["changes"]["tags"]["upserted"]]
    assert versions == sorted(versions), "parent tags are listed by version"


def test_incremental_page_carries_changed_parent_tag(client):
    tag = client.create_tag(name="before")
    other = client.create_tag(name="other")
    todo = client.create_todo("x", deadline="2031-10-05", tagId=other["id"], isCompleted=True)
    store = ClientStore()
    pull_all(client, store)
    pre_tags = dict(store.tags)
    # after the cursor: the todo moves to `tag`, then `tag` is renamed (tag version > todo version)
    r = client.patch(f"/todos/{todo['id']}", {"tagId": tag["id"]})
    assert r.status_code == 200
    r2 = client.patch(f"/tags/{tag['id']}", {"name": "after"})
    assert r2.status_code == 200
    run = pull_all(client, store, limit=1)
    strict_completeness(run, pre_tags)
    first = run.pages[0]
    assert [t["id"] for t in first["changes"]["todos"]["upserted"]] == [todo["id"]]
    assert [(t["id"], t["name"]) for t in first["changes"]["tags"]["upserted"]] == [(tag["id"], "after")]
    assert store.todos[todo["id"]]["tagId"] == tag["id"]
    assert store.stats and all(ts["name"] == "after" for s in store.stats.values() for ts in s["tagStats"])
    assert server_sets(store) == server_sets(fresh_state(client))


def test_deleted_tag_never_dangles_between_pages(client):
    """SYNC-NOTES pitfall 6: deleting a tag un-tags its todos before the tag's tombstone, so after
    every page (even with limit 1) no todo in the device's store points at a deleted tag."""
    tag = client.create_tag(name="doomed")
    todos = [client.create_todo(f"t{i}", deadline="2031-10-07", tagId=tag["id"]) for i in range(3)]
    store = ClientStore()
    pull_all(client, store)
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    cursor, seen_tombstone = store.cursor, False
    while True:
        body = pull(client, cursor, limit=1)
        store.apply_page(body)
        if any(t["id"] == tag["id"] for t in body["changes"]["tags"]["deleted"]):
            seen_tombstone = True
            assert all(store.todos[t["id"]]["tagId"] is None for t in todos), \
                "the tag's tombstone arrived before its todos were un-tagged"
        dangling = [t["id"] for t in store.todos.values() if t["tagId"] is not None and t["tagId"] not in store.tags]
        assert not dangling, f"todos point at a tag the device no longer has: {dangling}"
        cursor = body["cursor"]
        if not body["hasMore"]:
            break
    assert seen_tombstone


def test_every_tag_write_path_keeps_parent_tags_in_pages_the_lookup_skip_spares(client, db):
    """A page whose start is at or above `users.tag_seq` skips its parent-tag lookup (Sql/024), so
    every write of a tag must raise it to the tag's version. A mixed history of tag creates,
    renames, deletes (un-tagging todos) and a restore, through REST and push, each step ending in
    a change of a tag after a todo that names it: after each step `tag_seq` is at least every
    tag's version (deleted tags included), and a device that had pulled everything before the
    step, pulling one record a page, gets the changed tag with the page of that todo."""
    user = int(client.user["id"])
    store = ClientStore()
    pull_all(client, store)

    def step(name: str, write) -> None:
        pre_tags = dict(store.tags)
        write()
        run = pull_all(client, store, limit=1)
        strict_completeness(run, pre_tags)
        assert server_sets(store) == server_sets(fresh_state(client)), f"after {name}"
        seq, latest = (int(x) for x in db(
            f"SELECT u.tag_seq, (SELECT MAX(version) FROM tags t WHERE t.user_id = u.id) FROM users u WHERE u.id = {user}"
        ).split())
        assert seq >= latest, f"after {name}: tag_seq {seq} is below a tag's version {latest}"

    def rename_rest(tag_id: int, name: str) -> None:
        assert client.patch(f"/tags/{tag_id}", {"name": name}).status_code == 200

    def rename_push(tag_id: int, name: str, **kw) -> None:
        res = push(client, [synclib.op("tag", "update", id=tag_id, data={"name": name})], device="phone", **kw)
        assert res[0]["status"] == "applied", res

    def tagged_todo(tag_id: int, title: str) -> None:
        client.create_todo(title, deadline="2031-10-08", tagId=tag_id, isCompleted=True)

    rest_tag = {}
    pushed_tag = {}

    def rest_create_and_rename():
        rest_tag.update(client.create_tag(name="rest"))
        tagged_todo(rest_tag["id"], "a")
        rename_rest(rest_tag["id"], "rest renamed")

    def push_create_and_rename():
        pushed_tag.update(push(client, [create_tag_op("pushed")], device="phone")[0]["record"])
        tagged_todo(pushed_tag["id"], "b")
        rename_push(pushed_tag["id"], "pushed renamed")

    def push_rename_of_rest_tag():
        tagged_todo(rest_tag["id"], "c")
        rename_push(rest_tag["id"], "rest renamed by push")

    def deletes():
        tagged_todo(pushed_tag["id"], "d")
        assert client.delete(f"/tags/{rest_tag['id']}").status_code == 204
        res = push(client, [synclib.op("tag", "delete", id=pushed_tag["id"])], device="phone")
        assert res[0]["status"] == "applied", res

    def push_restore():
        other = client.create_tag(name="other")
        tagged_todo(other["id"], "e")
        rename_push(pushed_tag["id"], "restored", policy="client-wins")
        tagged_todo(pushed_tag["id"], "f")
        rename_rest(other["id"], "other renamed")

    for name, write in [("REST create and rename", rest_create_and_rename),
                        ("push create and rename", push_create_and_rename),
                        ("push rename of a REST tag", push_rename_of_rest_tag),
                        ("REST and push deletes", deletes),
                        ("push restore", push_restore)]:
        step(name, write)


def test_unchanged_parent_tag_not_resent(client):
    tag = client.create_tag(name="stable")
    todo = client.create_todo("x", deadline="2031-10-06", tagId=tag["id"])
    store = ClientStore()
    pull_all(client, store)
    assert client.patch(f"/todos/{todo['id']}", {"title": "y"}).status_code == 200
    body = pull(client, store.cursor, limit=1)
    assert body["changes"]["tags"]["upserted"] == [], "the client already has the unchanged tag"
    store.apply_page(body)


# --------------------------------------------------------------------------- expiry and errors

def test_cursor_expired_after_purge(client, other_client):
    a = client.create_todo("a", deadline="2031-11-01")
    client.create_todo("b", deadline="2031-11-02")
    other_client.create_todo("other")
    c0 = pull_all(client).pages[-1]["cursor"]
    oc = pull_all(other_client).pages[-1]["cursor"]
    assert client.delete(f"/todos/{a['id']}").status_code == 204  # todo + stat tombstones
    c1 = pull_all(client, cursor=c0).pages[-1]["cursor"]
    time.sleep(0.05)
    how = synclib.purge_all_tombstones()
    assert how in ("stack", "binary")
    assert_error(client.get("/sync/pull", params={"cursor": c0}), 410, "cursor_expired")
    # a cursor that already saw every purged deletion, and another user's own cursor, still work
    assert empty_page(pull(client, c1))
    assert empty_page(pull(other_client, oc))
    # starting again without a cursor works, and incremental pulls continue from there
    store = ClientStore()
    pull_all(client, store)
    assert [t["title"] for t in store.todos.values()] == ["b"]
    client.create_todo("c")
    body = pull(client, store.cursor)
    assert [t["title"] for t in body["changes"]["todos"]["upserted"]] == ["c"]


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "abc", "1.5", "", "1e2", "99999999999999999999"])
def test_bad_limit_400(shared_client, limit):
    assert_error(shared_client.get("/sync/pull", params={"limit": limit}), 400)


@pytest.mark.parametrize("limit", ["1", "1000", "500"])
def test_limit_bounds_ok(shared_client, limit):
    r = shared_client.get("/sync/pull", params={"limit": limit})
    assert r.status_code == 200, short(r)


def test_bad_cursor_400(client, other_client):
    client.create_todo("x")
    good = pull(client)["cursor"]
    mid = len(good) // 2
    swapped = good[:mid] + ("A" if good[mid] != "A" else "B") + good[mid + 1:]
    for bad in ("abc", "!!!!", "x" * 300, good[:-3], swapped, good + "AAAA", "MTox", "%00"):
        assert_error(client.get("/sync/pull", params={"cursor": bad}), 400)
    other_cursor = pull(other_client)["cursor"]
    assert_error(client.get("/sync/pull", params={"cursor": other_cursor}), 400)
    assert pull(client, good)["hasMore"] is False


def test_pull_needs_auth():
    anon = synclib.tsapi.Api(None)
    assert_error(anon.get("/sync/pull"), 401, "unauthorized")


def test_other_users_changes_invisible(client, other_client):
    bulk_todos(client, 5)
    client.create_tag(name="mine")
    oc = pull_all(other_client).pages[-1]["cursor"]
    bulk_todos(client, 3)
    body = pull(other_client, oc)
    assert empty_page(body)
    assert empty_page(pull(other_client))


def test_first_pull_pages_after_purge(client):
    """After tombstones were purged, a pull without cursor must still be able to page to the end
    (the client is told to start again without a cursor; it must not get 410 on page 2)."""
    recs = bulk_todos(client, 8, dates=("2031-11-05", "2031-11-06"))
    for rec in recs[:3]:
        assert client.delete(f"/todos/{rec['id']}").status_code == 204
    time.sleep(0.05)
    synclib.purge_all_tombstones()
    store = ClientStore()
    run = pull_all(client, store, limit=2)
    assert len(store.todos) == 5 and len(store.stats) == 2
    assert len(run.pages) == math.ceil(7 / 2)


def test_concurrent_writer_never_skipped(client):
    """A writer pushes batches (tag, todo pointing at it, edits, deletes) while a reader pulls with
    small pages; afterwards the reader's store equals the server and saw every write."""
    import threading

    stop = threading.Event()
    written: list[tuple[str, int, int]] = []
    errors: list[str] = []

    def writer():
        api = synclib.tsapi.Api(client.token)
        i = 0
        try:
            while not stop.is_set() and i < 400:
                i += 1
                tcid = uid()
                ops = [create_tag_op(f"w{i}", client_id=tcid),
                       create_todo_op(f"w{i}", deadline=f"2031-12-{i % 3 + 1:02d}", tagClientId=tcid,
                                      isCompleted=i % 2 == 0, estimatedTime=i % 60)]
                if written and i % 3 == 0:
                    ops.append(synclib.op("todo", "update", id=written[-1][1], data={"title": f"e{i}"}))
                if i % 5 == 0:
                    ops.append(synclib.op("tag", "delete", clientId=tcid))
                for res, o in zip(push(api, ops), ops):
                    if res["status"] != "applied":
                        errors.append(f"{o} -> {res}")
                    elif res["record"]["deletedAt"] is None:
                        written.append(("tags" if o["entity"] == "tag" else "todos", res["id"],
                                        res["version"]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            api.session.close()

    store = ClientStore()
    seen: dict[tuple[str, int], int] = {}
    t = threading.Thread(target=writer)
    t.start()
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            run = pull_all(client, store, limit=3, writes_during_pull=True)
            for k, rec, _ in run.all_records():
                seen[(k, rec["id"])] = max(seen.get((k, rec["id"]), 0), rec["version"])
    finally:
        stop.set()
        t.join(timeout=30)
    assert not errors, errors[:3]
    run = pull_all(client, store, limit=3)
    for k, rec, _ in run.all_records():
        seen[(k, rec["id"])] = max(seen.get((k, rec["id"]), 0), rec["version"])
    assert len(written) > 20
    for kind, rid, version in written:
        assert seen.get((kind, rid), 0) >= version, f"{kind} {rid} v{version} was never delivered"
    assert server_sets(store) == server_sets(fresh_state(client))
    assert store.data == fresh_state(client).data


def test_offset_shift_while_paging_skips_nothing(client):
    """SYNC-NOTES pitfall 3: deleting already-delivered rows while paging must not make the
    server skip rows (as offset paging would)."""
    recs = bulk_todos(client, 30, dates=("2031-11-20",))
    store = ClientStore()
    gone: set[int] = set()
    delivered: set[int] = set()

    def between(_):
        delivered.update(store.todos)
        for tid in [i for i in store.todos if i not in gone][:2]:
            assert client.delete(f"/todos/{tid}").status_code == 204
            gone.add(tid)

    run = pull_all(client, store, limit=5, between_pages=between, writes_during_pull=True)
    upserted = {rec["id"] for k, rec, d in run.all_records() if k == "todos" and not d}
    assert upserted == {r["id"] for r in recs}, "every todo delivered despite deletions in earlier pages"
    assert set(store.todos) == {r["id"] for r in recs} - gone
    assert server_sets(store) == server_sets(fresh_state(client))


def test_big_first_sync_bounded_pages_and_gzip(client):
    """SYNC-NOTES pitfall 7: pages are bounded (default 500), compressed when the client accepts
    gzip, and the first pull carries no tombstones."""
    recs = bulk_todos(client, 620, dates=("2031-11-21", "2031-11-22"))
    for rec in recs[:20]:
        assert client.delete(f"/todos/{rec['id']}").status_code == 204
    r = client.get("/sync/pull", headers={"Accept-Encoding": "gzip"}, stream=True)
    assert r.status_code == 200, short(r)
    assert r.headers.get("Content-Encoding") == "gzip", dict(r.headers)
    wire = r.raw.read(decode_content=False)
    body = json.loads(gzip.decompress(wire))
    synclib.check_page_shape(body, 500, first_pull=True)
    assert body["hasMore"] is True
    assert sum(1 for _ in page_records(body)) == 500, "default limit is 500"
    assert len(wire) * 4 < len(json.dumps(body)), "JSON pages compress well"
    store = ClientStore()
    store.apply_page(body)
    pull_all(client, store, limit=1000)
    assert len(store.todos) == 600 and len(store.stats) == 2
    # 1000 is the largest page
    big = pull(client, limit=1000)
    assert sum(1 for _ in page_records(big)) == 602 and big["hasMore"] is False
