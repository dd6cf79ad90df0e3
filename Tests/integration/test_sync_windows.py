"""Window pulls and windowed snapshots (API.md "Windows (partial sync)", issue 36), through the real
stack.

A seeded random history of one account (creates, edits moving deadlines across both edges of the
windows, completions, deletes, tag renames and tag deletes, some committed while a pull pages).
For several random windows:
  follower  a device that pulled the window from scratch at the start and then followed every
            change with its cursor (upserted: keep, deleted and left: forget);
  fresh     a device that pulls the window from scratch at the end;
and both must equal the whole account (a fresh whole pull) filtered by the window. Every page is
checked as it comes: its shape (each kind has `left`, tags' always empty), no todo or stat outside
the window in `upserted`, `limit` counting `left`, version order within each list, referential
completeness.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

import synclib
import tsapi
from synclib import KINDS, ClientStore, fresh_state
from tsapi import assert_error, short

BASE = dt.date(2031, 1, 1)
SPAN = 120  # the history's deadlines lie in BASE .. BASE + SPAN


def day(offset: int) -> str:
    return (BASE + dt.timedelta(days=offset)).isoformat()


def record_day(kind: str, rec: dict) -> str | None:
    return {"todos": rec.get("deadline"), "dailyStats": rec.get("date")}.get(kind)


def inside(window: tuple[str | None, str | None], date: str) -> bool:
    lo, hi = window
    return (lo is None or lo <= date) and (hi is None or date <= hi)


def window_params(window) -> dict:
    lo, hi = window
    params = {}
    if lo is not None:
        params["from"] = lo
    if hi is not None:
        params["to"] = hi
    return params


def window_pull(api: tsapi.Api, window, cursor: str | None = None, limit: int | None = None,
                device: str | None = None) -> dict:
    body = synclib.pull(api, cursor, limit, device, window=window_params(window))
    check_window_page(body, window, limit or 500)
    return body


def check_window_page(body: dict, window, limit: int) -> None:
    assert set(body) == {"changes", "cursor", "hasMore", "schemaVersion"}, body
    assert list(body["changes"]) == list(KINDS), body
    records = 0
    for kind in KINDS:
        part = body["changes"][kind]
        assert set(part) == {"upserted", "deleted", "left"}, f"{kind}: {sorted(part)}"
        for sub in ("upserted", "deleted", "left"):
            versions = [r["version"] for r in part[sub]]
            assert versions == sorted(versions), f"{kind}.{sub} not in version order: {versions}"
            records += len(versions)
        if kind == "tags":
            assert part["left"] == [], f"tags never leave a window: {part['left']}"
        for rec in part["upserted"]:
            if kind == "todos":
                tsapi.assert_todo(rec)
            elif kind == "tags":
                tsapi.assert_tag(rec)
            else:
                synclib.assert_stat(rec)
            date = record_day(kind, rec)
            assert date is None or inside(window, date), f"{kind} {rec['id']} of {date} outside {window} upserted"
        for rec in part["deleted"]:
            synclib.assert_tombstone(rec, kind)
        for rec in part["left"]:
            assert set(rec) == {"id", "clientId", "version"}, rec
            assert tsapi.is_int(rec["id"]) and tsapi.is_int(rec["version"]), rec
            if kind == "dailyStats":
                assert rec["clientId"] is None, rec
    refs = {t["tagId"] for t in body["changes"]["todos"]["upserted"] if t["tagId"] is not None} | {
        ts["tagId"] for st in body["changes"]["dailyStats"]["upserted"] for ts in st["tagStats"]}
    # `limit` counts every list but the parent tags a page adds for completeness.
    extra_tags = [t for t in body["changes"]["tags"]["upserted"] if t["id"] in refs]
    assert records - len(extra_tags) <= limit, f"{records} records in a page of limit {limit}"


class Device:
    """A device that holds one window: every tag, and the window's todos and stats."""

    def __init__(self, api: tsapi.Api, window):
        self.api = api
        self.window = window
        self.data: dict[str, dict[int, dict]] = {k: {} for k in KINDS}
        self.cursor: str | None = None

    def apply(self, body: dict) -> None:
        for kind in KINDS:
            part = body["changes"][kind]
            for rec in part["upserted"]:
                old = self.data[kind].get(rec["id"])
                assert old is None or old["version"] <= rec["version"], (kind, old, rec)
                self.data[kind][rec["id"]] = rec
            for rec in part["deleted"] + part["left"]:
                self.data[kind].pop(rec["id"], None)
        # Referentially complete: every tag a todo or stat of the page refers to is held now.
        self.check_refs(body["changes"]["todos"]["upserted"], body["changes"]["dailyStats"]["upserted"])
        self.cursor = body["cursor"]

    def check_refs(self, todos, stats) -> None:
        for todo in todos:
            assert todo["tagId"] is None or todo["tagId"] in self.data["tags"], ("dangling", todo)
        for stat in stats:
            for ts in stat["tagStats"]:
                assert ts["tagId"] in self.data["tags"], ("dangling", stat)

    def sync(self, limit: int | None = None, between_pages=None) -> list[dict]:
        pages = []
        while True:
            body = window_pull(self.api, self.window, self.cursor, limit)
            first = self.cursor is None
            if first and between_pages is None:
                for kind in KINDS:
                    assert body["changes"][kind]["deleted"] == [] and body["changes"][kind]["left"] == [], (
                        "a first window pull has no tombstones and no left", body["changes"][kind])
            self.apply(body)
            pages.append(body)
            if not body["hasMore"]:
                if between_pages is None:  # a consistent point: nothing dangles
                    self.check_refs(self.data["todos"].values(), self.data["dailyStats"].values())
                return pages
            if between_pages is not None:
                between_pages(len(pages))


def filtered(whole: ClientStore, window) -> dict:
    return {
        "tags": dict(whole.tags),
        "todos": {i: t for i, t in whole.todos.items() if inside(window, t["deadline"])},
        "dailyStats": {i: s for i, s in whole.stats.items() if inside(window, s["date"])},
    }


class History:
    """Random changes to one account through REST."""

    def __init__(self, api: tsapi.Api, rng: random.Random):
        self.api = api
        self.rng = rng
        self.tags: list[int] = []
        self.todos: list[int] = []

    def create_todo(self) -> None:
        extra = {"isCompleted": self.rng.random() < 0.4, "estimatedTime": self.rng.choice([0, 30, 60]),
                 "difficulty": self.rng.randint(0, 5), "clientId": synclib.uid()}
        if self.tags and self.rng.random() < 0.6:
            extra["tagId"] = self.rng.choice(self.tags)
        self.todos.append(self.api.create_todo(deadline=day(self.rng.randint(0, SPAN)), **extra)["id"])

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.08 or not self.tags:
            self.tags.append(self.api.create_tag(color=rng.choice(["#FF8800", "#00AA00"]))["id"])
        elif roll < 0.30 or len(self.todos) < 5:
            self.create_todo()
        elif roll < 0.60:  # move a deadline, often across a window's edge
            r = self.api.patch(f"/todos/{rng.choice(self.todos)}", {"deadline": day(rng.randint(0, SPAN))})
            assert r.status_code == 200, short(r)
        elif roll < 0.75:
            r = self.api.patch(f"/todos/{rng.choice(self.todos)}", {"isCompleted": rng.random() < 0.5})
            assert r.status_code == 200, short(r)
        elif roll < 0.88:
            victim = self.todos.pop(rng.randrange(len(self.todos)))
            assert self.api.delete(f"/todos/{victim}").status_code == 204
        elif roll < 0.94:
            r = self.api.patch(f"/tags/{rng.choice(self.tags)}", {"name": tsapi.unique("t-")[:20]})
            assert r.status_code == 200, short(r)
        else:  # a tag delete un-tags its todos and changes their dates' stats
            victim = self.tags.pop(rng.randrange(len(self.tags)))
            assert self.api.delete(f"/tags/{victim}").status_code == 204


def random_window(rng: random.Random):
    a, b = sorted(rng.sample(range(-5, SPAN + 5), 2))
    lo, hi = day(a), day(b)
    shape = rng.random()
    if shape < 0.15:
        return (lo, None)
    if shape < 0.3:
        return (None, hi)
    if shape < 0.4:
        return (lo, lo)
    return (lo, hi)


@pytest.mark.parametrize("seed", [3601, 3602])
def test_window_followers_and_fresh_pulls_equal_the_filtered_account(seed):
    rng = random.Random(seed)
    api = tsapi.new_user()
    history = History(api, rng)
    for _ in range(40):
        history.step()
    windows = [random_window(rng) for _ in range(3)]
    followers = [Device(api, w) for w in windows]
    for device in followers:
        device.sync(limit=rng.choice([3, 7, 50]))
    for round_ in range(5):
        for _ in range(rng.randint(5, 20)):
            history.step()
        for device in followers:
            if rng.random() < 0.7:
                # Some rounds commit writes while the follower pages.
                paging_writes = (lambda n: history.step()) if rng.random() < 0.4 else None
                device.sync(limit=rng.choice([3, 5, 1000]), between_pages=paging_writes)
    # A fresh device whose first pull pages while writes commit, then catches up.
    busy = Device(api, windows[0])
    busy.sync(limit=4, between_pages=lambda n: history.step() if n < 6 else None)
    whole = fresh_state(api)
    busy.sync()
    for device in followers:
        device.sync(limit=rng.choice([5, 1000]))
        fresh = Device(api, device.window)
        fresh.sync(limit=rng.choice([2, 6, 1000]))
        want = filtered(whole, device.window)
        for kind in KINDS:
            assert fresh.data[kind] == want[kind], f"fresh pull of {device.window}: {kind} differs"
            assert device.data[kind] == want[kind], f"follower of {device.window}: {kind} differs"
    for kind in KINDS:
        assert busy.data[kind] == filtered(whole, windows[0])[kind], f"paged-under-writes pull: {kind}"


def test_left_names_records_that_moved_out_and_echo_suppression_covers_it():
    api = tsapi.new_user()
    inside_todo = api.create_todo(deadline="2031-03-10", clientId=synclib.uid())
    window = ("2031-03-01", "2031-03-31")
    device = Device(api, window)
    device.sync()
    assert set(device.data["todos"]) == {inside_todo["id"]}
    (stat_id,) = device.data["dailyStats"]
    # Another device moves it out: a cheap pull names it in `left` (the todo and its day's stat,
    # which has no live todo any more, is a tombstone).
    synclib.push(api, [synclib.op("todo", "update", id=inside_todo["id"], data={"deadline": "2031-05-01"})],
                 device="other-phone")
    body = window_pull(api, window, device.cursor)
    left = body["changes"]["todos"]["left"]
    assert [(e["id"], e["clientId"]) for e in left] == [(inside_todo["id"], inside_todo["clientId"])], body
    assert [s["id"] for s in body["changes"]["dailyStats"]["deleted"]] == [stat_id], body
    assert body["changes"]["todos"]["upserted"] == [] and body["changes"]["todos"]["deleted"] == []
    # The device that moved it out is not told about its own change, in `left` either.
    cursor = body["cursor"]
    synclib.push(api, [synclib.op("todo", "update", id=inside_todo["id"], data={"deadline": "2031-06-01"})],
                 device="this-phone")
    mine = window_pull(api, window, cursor, device="this-phone")
    assert mine["changes"]["todos"]["left"] == [], mine
    theirs = window_pull(api, window, cursor, device="other-phone")
    assert [e["id"] for e in theirs["changes"]["todos"]["left"]] == [inside_todo["id"]], theirs
    # A whole pull has no `left`.
    whole = synclib.pull(api, limit=10)
    assert all(set(whole["changes"][k]) == {"upserted", "deleted"} for k in KINDS)
    # `limit` counts `left`: one entry per page.
    api.create_todo(deadline="2031-03-11")
    first = window_pull(api, window, cursor, limit=1)
    assert first["hasMore"] is True
    assert len(first["changes"]["todos"]["left"]) == 1 and first["changes"]["todos"]["upserted"] == []


@pytest.mark.parametrize("params", [
    {"from": ""}, {"to": ""}, {"from": "2031-1-01"}, {"from": "2031-02-30"}, {"to": "1999-12-31"},
    {"from": "3000-01-01"}, {"from": "2031-03-02", "to": "2031-03-01"}, {"from": "20310301"},
    {"to": "2031-03-01T00:00:00Z"},
])
def test_a_bad_window_is_400_and_names_its_parameter(params):
    api = tsapi.new_user()
    r = api.get("/sync/pull", params=params)
    field = "from" if "from" in params else "to"
    assert_error(r, 400, "bad_request", fields=[field])
    r = api.get("/sync/snapshot", params=params)
    assert_error(r, 400, "bad_request", fields=[field])


def test_a_cursor_belongs_to_its_window():
    api = tsapi.new_user()
    api.create_todo(deadline="2031-03-10")
    whole_cursor = synclib.pull(api)["cursor"]
    window = ("2031-03-01", "2031-03-31")
    window_cursor = window_pull(api, window)["cursor"]
    for params in [
        {"cursor": whole_cursor, "from": "2031-03-01"},
        {"cursor": window_cursor},
        {"cursor": window_cursor, "from": "2031-03-01"},
        {"cursor": window_cursor, "from": "2031-03-01", "to": "2031-04-01"},
        {"cursor": window_cursor, "from": "2031-02-28", "to": "2031-03-31"},
    ]:
        r = api.get("/sync/pull", params=params)
        assert_error(r, 400, "bad_request", fields=["cursor"])
    # Any schema version may continue it; the same window continues it.
    for schema in ("1", "2"):
        r = api.get("/sync/pull", params={"cursor": window_cursor, "from": window[0], "to": window[1],
                                          "schemaVersion": schema})
        assert r.status_code == 200, short(r)


def test_a_window_snapshot_plus_its_cursor_pull_equals_a_window_pull():
    from test_sync_snapshot import as_record, fetch, read_file

    rng = random.Random(3603)
    api = tsapi.new_user()
    history = History(api, rng)
    for _ in range(60):
        history.step()
    window = (day(30), day(70))
    r = fetch(api, **window_params(window))
    meta, records, _ = read_file(r.content)
    assert (meta["windowFrom"], meta["windowTo"]) == window, meta
    assert int(meta["recordCount"]) == sum(len(v) for v in records.values()), meta
    whole = fresh_state(api)
    want = filtered(whole, window)
    assert {k: set(v) for k, v in records.items()} == {k: set(v) for k, v in want.items()}, "the file holds the window"
    # Another window, and the whole account, are other files; the same window is the same file.
    other = fetch(api, **window_params((day(30), None)))
    assert other.headers["ETag"] != r.headers["ETag"]
    assert fetch(api).headers["ETag"] not in (r.headers["ETag"], other.headers["ETag"])
    assert fetch(api, **window_params(window)).headers["ETag"] == r.headers["ETag"]
    meta_open, _, _ = read_file(other.content)
    assert (meta_open["windowFrom"], meta_open["windowTo"]) == (day(30), ""), meta_open
    # Installed, then followed by its cursor (a window cursor: the whole pull refuses it).
    device = Device(api, window)
    for kind in KINDS:
        for rid, row in records[kind].items():
            device.data[kind][rid] = as_record(row, want[kind][rid])
    device.cursor = meta["cursor"]
    assert_error(api.get("/sync/pull", params={"cursor": meta["cursor"]}), 400, "bad_request", fields=["cursor"])
    for _ in range(25):
        history.step()
    device.sync(limit=7)
    fresh = Device(api, window)
    fresh.sync()
    want = filtered(fresh_state(api), window)
    for kind in KINDS:
        assert device.data[kind] == want[kind] == fresh.data[kind], kind
