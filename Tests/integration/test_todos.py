"""Todos: create defaults, validation, lists by date / range with ordering, patch, delete,
If-Match, clientId idempotency, ownership, bad ids.

Assumptions where API.md is silent (a careful REST API's behaviour):
- A response record has exactly the fields the contract lists.
- `raw` defaults to the title only at create; a later PATCH of `title` leaves `raw` alone
  (raw is "the user's original input").  An explicit `raw: ""` is kept (0 characters allowed).
- Titles are stored as given (no trimming asserted either way for padded titles beyond
  "not all whitespace" being accepted).
- Lengths count characters (200 emoji / 200 Hangul syllables are 200 characters); strings
  where grapheme clusters and code points differ are avoided at the limits.
- JSON numbers with a fraction (1.5) are not integers; integers given as strings ("3"),
  booleans given as 0/1/"true", and `null` for non-nullable fields are 422.
- A `clientId` that is not a UUID string is a 422 naming `clientId`.
- Query-parameter problems are 400 with code `bad_request`; `from` without `to` (or the
  reverse) is 400 like "neither given".  Dates out of 2000-01-01..2999-12-31 or impossible
  dates are malformed (400 in a query, 422 in a body).
- The title tie-break "A→Z" is checked only on lowercase ASCII titles (collation-neutral);
  createdAt ordering uses the millisecond timestamps the API returns.
- Ids in the path that are not positive integers the server could have assigned
  (abc, 0, -1, 1.5, 2^63, 10^20) are simply "no such record": 404 `not_found`.
- A PATCH/DELETE of another user's record is 404 even with an `If-Match`.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import uuid

import pytest

import tsapi
from tsapi import assert_error, assert_etag, assert_json, assert_todo, short, without

D = "2031-03-05"  # a date used by most tests (each test has its own user)


def _current(resp) -> dict:
    body = assert_json(resp)
    assert "current" in body, f"412 body needs a top-level 'current': {short(resp)}"
    return body["current"]


def _order_key(t: dict):
    # deadline asc, isImportant first, createdAt newest first, title A->Z
    created = tsapi.parse_ts(t["createdAt"]).timestamp()
    return (t["deadline"], not t["isImportant"], -created, t["title"])


# --------------------------------------------------------------------------- create

def test_create_minimal_todo_has_defaults(client):
    r = client.post("/todos", {"title": "Buy milk", "deadline": D})
    assert r.status_code == 201, short(r)
    todo = assert_todo(assert_json(r))
    assert_etag(r, todo)
    assert without(todo, "id", "version", "createdAt", "updatedAt") == {
        "clientId": None, "title": "Buy milk", "raw": "Buy milk", "notes": None, "remindAt": None, "isImportant": False,
        "isLife": False, "tagId": None, "difficulty": 0, "estimatedTime": 0, "deadline": D, "isCompleted": False,
        "deletedAt": None,
    }


def test_create_full_todo_round_trips(client):
    tag = client.create_tag(name="Work")
    cid = str(uuid.uuid4()).upper()
    body = {"title": "Write report", "raw": "!Write report #work 1h30m *4", "isImportant": True, "isLife": True,
            "tagId": tag["id"], "difficulty": 4, "estimatedTime": 90, "deadline": "2031-12-31",
            "isCompleted": True, "clientId": cid}
    todo = client.create_todo(**body)
    for k, v in body.items():
        assert todo[k] == v, k
    assert client.get_todo(todo["id"]) == todo


@pytest.mark.parametrize("field,value", [
    ("title", "t" * 200), ("title", "😀" * 200), ("title", "한" * 200), ("title", "  padded  "),
    ("raw", "r" * 2000), ("raw", "😀" * 2000), ("raw", ""),
    ("difficulty", 0), ("difficulty", 5), ("estimatedTime", 0), ("estimatedTime", 1440),
    ("deadline", "2000-01-01"), ("deadline", "2999-12-31"), ("deadline", "2024-02-29"), ("deadline", "2000-02-29"),
    ("isImportant", True), ("isLife", True), ("isCompleted", True), ("tagId", None),
], ids=lambda v: repr(v)[:14])
def test_boundary_values_accepted(shared_client, field, value):
    body = {"title": "boundary", "deadline": D, field: value}
    r = shared_client.post("/todos", body)
    assert r.status_code == 201, short(r)
    todo = assert_todo(assert_json(r))
    if field == "title" and value != value.strip():
        assert todo["title"] in (value, value.strip())
    else:
        assert todo[field] == value
        if field == "title":
            assert todo["raw"] == value
    assert shared_client.delete(f"/todos/{todo['id']}").status_code == 204


def test_explicit_empty_raw_is_kept(client):
    todo = client.create_todo(title="Has title", raw="")
    assert todo["raw"] == ""
    assert client.get_todo(todo["id"])["raw"] == ""


def test_read_only_and_unknown_fields_ignored_on_create(client, other_client):
    other_tag = other_client.create_tag()
    r = client.post("/todos", {"title": "ro", "deadline": D, "id": 2_000_000_007, "version": 424242,
                               "createdAt": "2001-02-03T04:05:06.789Z", "updatedAt": "2001-02-03T04:05:06.789Z",
                               "deletedAt": "2001-02-03T04:05:06.789Z", "userId": other_client.user["id"],
                               "extra": {"nested": [1, 2]}, "tagIds": [other_tag["id"]]})
    assert r.status_code == 201, short(r)
    todo = assert_todo(assert_json(r))
    assert todo["id"] != 2_000_000_007 and todo["version"] != 424242
    assert not todo["createdAt"].startswith("2001") and todo["deletedAt"] is None
    assert todo["tagId"] is None
    assert [t["id"] for t in client.list_todos(date=D)] == [todo["id"]]
    assert other_client.list_todos(date=D) == []


# --------------------------------------------------------------------------- validation

BAD_FIELDS = [
    ("title", ""), ("title", " "), ("title", " \t\n "), ("title", "x" * 201), ("title", "😀" * 201),
    ("title", None), ("title", 123), ("title", ["a"]), ("title", True),
    ("raw", "x" * 2001), ("raw", "😀" * 2001), ("raw", 5), ("raw", ["x"]),
    ("deadline", None), ("deadline", ""), ("deadline", "2026-02-30"), ("deadline", "2026-13-01"),
    ("deadline", "2026-00-10"), ("deadline", "2026-01-00"), ("deadline", "2026-04-31"), ("deadline", "2023-02-29"),
    ("deadline", "2100-02-29"), ("deadline", "1999-12-31"), ("deadline", "3000-01-01"), ("deadline", "2026-1-5"),
    ("deadline", "2026/01/05"), ("deadline", "05-01-2026"), ("deadline", "2026-01-05T00:00:00Z"),
    ("deadline", "2026-01-05 "), ("deadline", "tomorrow"), ("deadline", 20260105), ("deadline", "+2026-01-05"),
    ("isImportant", 0), ("isImportant", 1), ("isImportant", "true"), ("isImportant", None),
    ("isLife", 0), ("isLife", "false"), ("isLife", None),
    ("isCompleted", 1), ("isCompleted", "true"), ("isCompleted", None),
    ("difficulty", 6), ("difficulty", -1), ("difficulty", 1.5), ("difficulty", "3"), ("difficulty", True),
    ("difficulty", None), ("difficulty", 10**20),
    ("estimatedTime", 1441), ("estimatedTime", -1), ("estimatedTime", 30.5), ("estimatedTime", "30"),
    ("estimatedTime", None), ("estimatedTime", 2**31), ("estimatedTime", 10**30), ("estimatedTime", False),
    ("tagId", 0), ("tagId", -1), ("tagId", 999_999_999), ("tagId", 2**63), ("tagId", "1"), ("tagId", 1.5),
    ("tagId", True),
    ("clientId", "not-a-uuid"), ("clientId", 42), ("clientId", ""),
]


@pytest.mark.parametrize("field,value", BAD_FIELDS, ids=lambda v: repr(v)[:14])
def test_create_invalid_field_422(shared_client, field, value):
    body = {"title": "valid", "deadline": D, field: value}
    r = shared_client.post("/todos", body)
    assert_error(r, 422, "validation_failed", fields=[field])


@pytest.mark.parametrize("missing", ["title", "deadline"])
def test_create_missing_required_field_422(shared_client, missing):
    body = {"title": "valid", "deadline": D}
    del body[missing]
    assert_error(shared_client.post("/todos", body), 422, "validation_failed", fields=[missing])


def test_create_every_bad_field_is_named(shared_client):
    r = shared_client.post("/todos", {"title": "", "deadline": "2026-02-30", "difficulty": 9,
                                      "estimatedTime": -5, "isLife": "yes"})
    assert_error(r, 422, "validation_failed",
                 fields=["title", "deadline", "difficulty", "estimatedTime", "isLife"])


def test_invalid_create_creates_nothing(client):
    assert_error(client.post("/todos", {"title": "x" * 201, "deadline": D}), 422, "validation_failed")
    assert_error(client.post("/todos", {"title": "ok", "deadline": D, "difficulty": 6}), 422, "validation_failed")
    assert client.list_todos(date=D) == []


def test_tag_id_must_be_own_live_tag(client, other_client):
    theirs = other_client.create_tag()
    assert_error(client.post("/todos", {"title": "x", "deadline": D, "tagId": theirs["id"]}), 422,
                 "validation_failed", fields=["tagId"])
    mine = client.create_tag()
    assert client.delete(f"/tags/{mine['id']}").status_code == 204
    assert_error(client.post("/todos", {"title": "x", "deadline": D, "tagId": mine["id"]}), 422,
                 "validation_failed", fields=["tagId"])
    live = client.create_tag()
    assert client.create_todo(tagId=live["id"])["tagId"] == live["id"]
    assert len(client.list_todos(date="2030-06-15")) == 1


# --------------------------------------------------------------------------- read

def test_get_todo_200_with_etag(client):
    todo = client.create_todo(title="Read me")
    r = client.get(f"/todos/{todo['id']}")
    assert r.status_code == 200, short(r)
    got = assert_todo(assert_json(r))
    assert_etag(r, got)
    assert got == todo


def test_other_users_todos_are_404_and_invisible(client, other_client):
    mine = client.create_todo(title="mine", deadline=D)
    theirs = other_client.create_todo(title="theirs", deadline=D)
    assert [t["id"] for t in client.list_todos(date=D)] == [mine["id"]]
    assert [t["id"] for t in client.list_todos(**{"from": D, "to": D})] == [mine["id"]]
    assert [t["id"] for t in other_client.list_todos(date=D)] == [theirs["id"]]
    assert_error(client.get(f"/todos/{theirs['id']}"), 404, "not_found")
    assert_error(client.patch(f"/todos/{theirs['id']}", {"title": "hijack"}), 404, "not_found")
    assert_error(client.patch(f"/todos/{theirs['id']}", {"title": "hijack"},
                              headers={"If-Match": f'"{theirs["version"]}"'}), 404, "not_found")
    assert_error(client.delete(f"/todos/{theirs['id']}"), 404, "not_found")
    assert_error(client.delete(f"/todos/{theirs['id']}", headers={"If-Match": '"999"'}), 404, "not_found")
    assert other_client.get_todo(theirs["id"]) == theirs


BAD_IDS = ["abc", "0", "-1", "1.5", "1e3", "99999999999999999999", "9223372036854775807",
           "9223372036854775808", "18446744073709551616", "%20", "1%20OR%201=1", "null"]


@pytest.mark.parametrize("kind", ["todos", "tags"])
@pytest.mark.parametrize("bad_id", BAD_IDS)
@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_bad_ids_are_404(shared_client, kind, bad_id, method):
    body = {"title": "x"} if kind == "todos" else {"name": "x"}
    r = shared_client.request(method, f"/api/v1/{kind}/{bad_id}", body if method == "PATCH" else tsapi._MISSING)
    assert_error(r, 404, "not_found")


# --------------------------------------------------------------------------- list by date

def test_list_by_date_order_important_then_newest_then_title(client):
    specs = [("charlie", False), ("alpha", True), ("bravo", False), ("delta", True), ("echo", False)]
    made = {}
    for title, imp in specs:
        made[title] = client.create_todo(title=title, deadline=D, isImportant=imp)
        time.sleep(0.01)
    client.create_todo(title="other day", deadline=tsapi.days_from(D, 1))
    client.create_todo(title="day before", deadline=tsapi.days_from(D, -1))
    items = client.list_todos(date=D)
    created = [made[t]["createdAt"] for t, _ in specs]
    assert created == sorted(created) and len(set(created)) == len(created), created
    assert [t["title"] for t in items] == ["delta", "alpha", "echo", "bravo", "charlie"]
    assert all(t["deadline"] == D for t in items)
    assert items == sorted(items, key=_order_key)


def test_list_by_date_title_breaks_created_ties(client):
    # Concurrent creates are likely to share a millisecond; whatever happens, the list must
    # follow the rule on the returned values.
    titles = ["kilo", "juliet", "india", "hotel", "golf", "foxtrot", "echo", "delta", "charlie", "bravo"]

    def go(title):
        api = tsapi.Api(client.token)
        try:
            r = api.post("/todos", {"title": title, "deadline": D})
            assert r.status_code == 201, short(r)
            return r.json()
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(10) as ex:
        made = list(ex.map(go, titles))
    items = client.list_todos(date=D)
    assert sorted(t["id"] for t in items) == sorted(t["id"] for t in made)
    assert [t["id"] for t in items] == [t["id"] for t in sorted(items, key=_order_key)]


def test_patch_importance_reorders_list(client):
    old = client.create_todo(title="old", deadline=D)
    time.sleep(0.01)
    new = client.create_todo(title="new", deadline=D)
    assert [t["id"] for t in client.list_todos(date=D)] == [new["id"], old["id"]]
    assert client.patch(f"/todos/{old['id']}", {"isImportant": True}).status_code == 200
    assert [t["id"] for t in client.list_todos(date=D)] == [old["id"], new["id"]]
    # editing does not change createdAt, so order among equals stays by creation
    assert client.patch(f"/todos/{old['id']}", {"isImportant": False, "title": "zzz"}).status_code == 200
    assert [t["id"] for t in client.list_todos(date=D)] == [new["id"], old["id"]]


def test_list_by_date_empty(client):
    r = client.get("/todos", params={"date": "2031-01-01"})
    assert r.status_code == 200, short(r)
    assert assert_json(r) == {"items": []}


def test_deleted_todos_absent_from_lists(client):
    a = client.create_todo(title="a", deadline=D)
    b = client.create_todo(title="b", deadline=D)
    assert client.delete(f"/todos/{a['id']}").status_code == 204
    assert [t["id"] for t in client.list_todos(date=D)] == [b["id"]]
    assert [t["id"] for t in client.list_todos(**{"from": D, "to": D})] == [b["id"]]


# --------------------------------------------------------------------------- list by range

def test_range_inclusive_ordered_by_deadline_first(client):
    d0, d1, d2, d3, d4 = (tsapi.days_from(D, i) for i in (-1, 0, 3, 10, 11))
    made = []
    for deadline, title, imp in [(d3, "late-a", False), (d1, "early-plain", False), (d2, "mid", False),
                                 (d1, "early-important", True), (d3, "late-b", True), (d0, "before", True),
                                 (d4, "after", True)]:
        made.append(client.create_todo(title=title, deadline=deadline, isImportant=imp))
        time.sleep(0.01)
    items = client.list_todos(**{"from": d1, "to": d3})
    assert [t["title"] for t in items] == ["early-important", "early-plain", "mid", "late-b", "late-a"]
    assert items == sorted(items, key=_order_key)


def test_range_single_day_equals_date_query(client):
    for i in range(3):
        client.create_todo(title=f"t{i}", deadline=D, isImportant=(i == 1))
    assert client.list_todos(**{"from": D, "to": D}) == client.list_todos(date=D)


@pytest.mark.parametrize("frm,to", [("2026-01-01", "2027-01-01"), ("2024-01-01", "2024-12-31"),
                                    ("2027-03-01", "2028-02-29"), ("2000-01-01", "2000-12-31"),
                                    ("2999-01-01", "2999-12-31"), ("2000-01-01", "2000-01-01")],
                         ids=["365", "leap-365", "365-to-leap-day", "first", "last", "zero"])
def test_range_up_to_365_days_accepted(client, frm, to):
    client.create_todo(title="inside", deadline=to)
    items = client.list_todos(**{"from": frm, "to": to})
    assert [t["title"] for t in items] == ["inside"]


def test_range_covers_a_long_span(client):
    first = client.create_todo(title="first", deadline="2031-01-01")
    last = client.create_todo(title="last", deadline="2031-12-31")
    client.create_todo(title="out", deadline="2032-01-01")
    items = client.list_todos(**{"from": "2031-01-01", "to": "2031-12-31"})
    assert [t["id"] for t in items] == [first["id"], last["id"]]


BAD_QUERIES = [
    "", "from=2026-01-10&to=2026-01-01", "from=2026-01-01&to=2027-01-02", "from=2024-01-01&to=2025-01-01",
    "date=2026-01-01&from=2026-01-01&to=2026-01-02", "date=2026-01-01&from=2026-01-01", "date=2026-01-01&to=2026-01-02",
    "from=2026-01-01", "to=2026-01-01",
    "date=2026-02-30", "date=2026-13-01", "date=2026-00-10", "date=2026-01-00", "date=2023-02-29", "date=2100-02-29",
    "date=1999-12-31", "date=3000-01-01", "date=2026-1-5", "date=20260105", "date=abc", "date=",
    "date=2026-01-05T00:00:00Z", "date=%202026-01-05", "date=2026-01-05'%20OR%20'1'%3D'1",
    "from=2026-02-29&to=2026-03-01", "from=1999-12-31&to=2000-01-01", "from=2999-12-31&to=3000-01-01",
    "from=2026-01-01&to=garbage", "from=&to=",
]


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_bad_list_queries_400(shared_client, query):
    r = shared_client.get("/todos" + ("?" + query if query else ""))
    assert_error(r, 400, "bad_request")


# --------------------------------------------------------------------------- patch

@pytest.mark.parametrize("field,value", [
    ("title", "New title"), ("raw", "new raw"), ("isImportant", True), ("isLife", True), ("isCompleted", True),
    ("difficulty", 5), ("estimatedTime", 1440), ("deadline", "2031-03-06"), ("tagId", "TAG"),
])
def test_patch_single_field_changes_only_that_field(client, field, value):
    tag = client.create_tag()
    todo = client.create_todo(title="Original", deadline=D)
    if value == "TAG":
        value = tag["id"]
    r = client.patch(f"/todos/{todo['id']}", {field: value})
    assert r.status_code == 200, short(r)
    after = assert_todo(assert_json(r))
    assert_etag(r, after)
    assert after[field] == value
    assert after["version"] > todo["version"]
    assert after["createdAt"] == todo["createdAt"]
    assert tsapi.parse_ts(after["updatedAt"]) >= tsapi.parse_ts(todo["updatedAt"])
    assert without(after, field, "version", "updatedAt") == without(todo, field, "version", "updatedAt")
    assert client.get_todo(todo["id"]) == after


def test_patch_title_keeps_raw(client):
    todo = client.create_todo(title="first", raw="first raw")
    after = assert_json(client.patch(f"/todos/{todo['id']}", {"title": "second"}))
    assert after["raw"] == "first raw"
    todo2 = client.create_todo(title="defaulted")
    after2 = assert_json(client.patch(f"/todos/{todo2['id']}", {"title": "changed"}))
    assert after2["raw"] == "defaulted"


def test_patch_tag_to_null_detaches(client):
    tag = client.create_tag()
    todo = client.create_todo(tagId=tag["id"])
    r = client.patch(f"/todos/{todo['id']}", {"tagId": None})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["tagId"] is None


def test_patch_deadline_moves_between_lists(client):
    todo = client.create_todo(title="mover", deadline=D)
    later = tsapi.days_from(D, 7)
    r = client.patch(f"/todos/{todo['id']}", {"deadline": later})
    assert r.status_code == 200, short(r)
    assert client.list_todos(date=D) == []
    assert [t["id"] for t in client.list_todos(date=later)] == [todo["id"]]


def test_patch_several_fields_at_once(client):
    todo = client.create_todo(title="multi")
    r = client.patch(f"/todos/{todo['id']}", {"isCompleted": True, "difficulty": 3, "estimatedTime": 45})
    after = assert_json(r)
    assert (after["isCompleted"], after["difficulty"], after["estimatedTime"]) == (True, 3, 45)
    assert after["title"] == "multi"


@pytest.mark.parametrize("body", [
    {}, {"title": "Same"}, {"isCompleted": False}, {"tagId": None}, {"difficulty": 2, "estimatedTime": 30},
    {"title": "Same", "raw": "Same", "isImportant": False, "isLife": False, "tagId": None, "difficulty": 2,
     "estimatedTime": 30, "deadline": D, "isCompleted": False},
    {"id": 1, "version": 1, "createdAt": "2001-01-01T00:00:00.000Z", "updatedAt": "2001-01-01T00:00:00.000Z",
     "deletedAt": "2001-01-01T00:00:00.000Z", "clientId": "0b6c3d6e-6f57-4e4d-9c34-6c1a4c3f2f10", "foo": 1},
], ids=["empty", "same-title", "same-bool", "same-null", "same-ints", "all-same", "read-only+unknown"])
def test_noop_patch_does_not_bump_version_or_updated_at(client, body):
    todo = client.create_todo(title="Same", deadline=D, difficulty=2, estimatedTime=30)
    time.sleep(0.01)
    r = client.patch(f"/todos/{todo['id']}", body)
    assert r.status_code == 200, short(r)
    after = assert_todo(assert_json(r))
    assert_etag(r, after)
    assert after == todo
    assert client.get_todo(todo["id"]) == todo


@pytest.mark.parametrize("body,field", [
    ({"title": ""}, "title"), ({"title": "   "}, "title"), ({"title": "x" * 201}, "title"), ({"title": None}, "title"),
    ({"raw": "x" * 2001}, "raw"), ({"deadline": None}, "deadline"), ({"deadline": "2026-02-30"}, "deadline"),
    ({"deadline": "1999-12-31"}, "deadline"), ({"difficulty": 6}, "difficulty"), ({"difficulty": "3"}, "difficulty"),
    ({"estimatedTime": 1441}, "estimatedTime"), ({"isCompleted": "true"}, "isCompleted"),
    ({"isImportant": None}, "isImportant"), ({"tagId": 999_999_999}, "tagId"), ({"tagId": "1"}, "tagId"),
], ids=lambda v: repr(v)[:18])
def test_patch_invalid_422_changes_nothing(client, body, field):
    todo = client.create_todo(title="keep", deadline=D)
    r = client.patch(f"/todos/{todo['id']}", body)
    assert_error(r, 422, "validation_failed", fields=[field])
    assert client.get_todo(todo["id"]) == todo


def test_patch_valid_and_invalid_fields_changes_nothing(client):
    todo = client.create_todo(title="keep", deadline=D)
    r = client.patch(f"/todos/{todo['id']}", {"title": "would change", "difficulty": 99})
    assert_error(r, 422, "validation_failed", fields=["difficulty"])
    assert client.get_todo(todo["id"]) == todo


def test_patch_with_other_users_tag_422(client, other_client):
    theirs = other_client.create_tag()
    todo = client.create_todo()
    assert_error(client.patch(f"/todos/{todo['id']}", {"tagId": theirs["id"]}), 422, "validation_failed",
                 fields=["tagId"])
    assert client.get_todo(todo["id"]) == todo


# --------------------------------------------------------------------------- If-Match

@pytest.mark.parametrize("style", ["quoted", "bare"])
def test_patch_if_match_current_succeeds(client, style):
    todo = client.create_todo()
    v = todo["version"]
    r = client.patch(f"/todos/{todo['id']}", {"isCompleted": True},
                     headers={"If-Match": f'"{v}"' if style == "quoted" else str(v)})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["isCompleted"] is True


@pytest.mark.parametrize("style", ["quoted", "bare"])
def test_patch_stale_if_match_412_with_current_unchanged(client, style):
    todo = client.create_todo(title="v1")
    # another device edits first
    r = client.patch(f"/todos/{todo['id']}", {"title": "v2 from other device"})
    assert r.status_code == 200
    current = assert_json(r)
    stale = todo["version"]
    r = client.patch(f"/todos/{todo['id']}", {"title": "v2 from this device", "isCompleted": True},
                     headers={"If-Match": f'"{stale}"' if style == "quoted" else str(stale)})
    assert_error(r, 412, "version_mismatch")
    assert assert_todo(_current(r)) == current
    assert client.get_todo(todo["id"]) == current


def test_delete_stale_if_match_412_then_current_204(client):
    todo = client.create_todo()
    r = client.delete(f"/todos/{todo['id']}", headers={"If-Match": f'"{todo["version"] - 1}"'})
    assert_error(r, 412, "version_mismatch")
    assert assert_todo(_current(r)) == todo
    assert client.get_todo(todo["id"]) == todo
    r = client.delete(f"/todos/{todo['id']}", headers={"If-Match": str(todo["version"])})
    assert r.status_code == 204, short(r)


# --------------------------------------------------------------------------- delete

def test_delete_todo_204_then_404_everywhere(client):
    todo = client.create_todo(deadline=D)
    r = client.delete(f"/todos/{todo['id']}")
    assert r.status_code == 204, short(r)
    assert r.content == b""
    assert_error(client.get(f"/todos/{todo['id']}"), 404, "not_found")
    assert_error(client.patch(f"/todos/{todo['id']}", {"title": "zombie"}), 404, "not_found")
    assert_error(client.delete(f"/todos/{todo['id']}"), 404, "not_found")
    assert client.list_todos(date=D) == []


# --------------------------------------------------------------------------- clientId idempotency

def test_same_client_id_returns_existing_200(client):
    cid = str(uuid.uuid4())
    first = client.create_todo(title="first", deadline=D, clientId=cid)
    r = client.post("/todos", {"title": "second", "deadline": D, "clientId": cid, "isImportant": True})
    assert r.status_code == 200, short(r)
    again = assert_todo(assert_json(r))
    assert_etag(r, again)
    assert again == first
    assert [t["id"] for t in client.list_todos(date=D)] == [first["id"]]


def test_client_id_case_insensitive_kept_as_first_given(client):
    cid = str(uuid.uuid4()).upper()
    first = client.create_todo(clientId=cid)
    r = client.post("/todos", {"title": "again", "deadline": "2030-06-15", "clientId": cid.lower()})
    assert r.status_code == 200, short(r)
    again = assert_json(r)
    assert again["id"] == first["id"] and again["clientId"] == cid
    assert len(client.list_todos(date="2030-06-15")) == 1


def test_retried_create_returns_current_state(client):
    cid = str(uuid.uuid4())
    first = client.create_todo(title="draft", clientId=cid)
    patched = assert_json(client.patch(f"/todos/{first['id']}", {"isCompleted": True}))
    r = client.post("/todos", {"title": "draft", "deadline": "2030-06-15", "clientId": cid})
    assert r.status_code == 200, short(r)
    assert assert_json(r) == patched


def test_retried_create_after_delete_returns_tombstone(client):
    cid = str(uuid.uuid4())
    first = client.create_todo(title="doomed", deadline=D, clientId=cid)
    assert client.delete(f"/todos/{first['id']}").status_code == 204
    r = client.post("/todos", {"title": "doomed", "deadline": D, "clientId": cid})
    assert r.status_code == 200, short(r)
    tomb = assert_todo(assert_json(r), live=False)
    assert_etag(r, tomb)
    assert tomb["id"] == first["id"] and tomb["deletedAt"] is not None
    assert tomb["version"] > first["version"]
    assert client.list_todos(date=D) == []
    assert_error(client.get(f"/todos/{first['id']}"), 404, "not_found")


def test_same_client_id_for_other_user_creates(client, other_client):
    cid = str(uuid.uuid4())
    a = client.create_todo(title="a", clientId=cid)
    b = other_client.create_todo(title="b", clientId=cid)
    assert a["id"] != b["id"] and b["title"] == "b"


def test_idempotent_create_with_invalid_body_still_validates(client):
    # A retry that carries an invalid body is validated like any create (no record yet).
    cid = str(uuid.uuid4())
    assert_error(client.post("/todos", {"title": "", "deadline": D, "clientId": cid}), 422, "validation_failed")
    todo = client.create_todo(title="now valid", deadline=D, clientId=cid)
    assert todo["clientId"] == cid


def test_concurrent_creates_with_same_client_id_make_one_todo(client):
    cid = str(uuid.uuid4())

    def go(i):
        api = tsapi.Api(client.token)
        try:
            return api.post("/todos", {"title": f"race{i}", "deadline": D, "clientId": cid})
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(go, range(8)))
    statuses = sorted(r.status_code for r in results)
    assert all(s in (200, 201) for s in statuses), [short(r) for r in results]
    assert statuses.count(201) == 1, statuses
    assert len({r.json()["id"] for r in results}) == 1
    assert len(client.list_todos(date=D)) == 1


# --------------------------------------------------------------------------- remindAt (schema 3)

@pytest.mark.parametrize("given,stored", [
    ("2031-03-05T09:30:00Z", "2031-03-05T09:30:00.000Z"),
    ("2031-03-05t09:30:00z", "2031-03-05T09:30:00.000Z"),                 # T and Z in either case
    ("2031-03-05T09:30:00.1+01:00", "2031-03-05T08:30:00.100Z"),          # an offset, to UTC
    ("2031-03-05T09:30:00.123999999-00:00", "2031-03-05T09:30:00.123Z"),  # sub-millisecond digits cut
    ("2031-03-05T00:15:00+05:45", "2031-03-04T18:30:00.000Z"),            # the UTC day differs
    ("1999-12-31T23:30:00-01:00", "2000-01-01T00:30:00.000Z"),            # its UTC year counts
    ("2999-12-31T23:59:59.999Z", "2999-12-31T23:59:59.999Z"),
    ("2032-02-29T12:00:00Z", "2032-02-29T12:00:00.000Z"),
])
def test_remind_at_is_normalised_to_utc_milliseconds(client, given, stored):
    todo = client.create_todo("remind", D, remindAt=given)
    assert todo["remindAt"] == stored, todo
    assert client.get_todo(todo["id"])["remindAt"] == stored
    other = client.create_todo("later", D)
    r = client.patch(f"/todos/{other['id']}", {"remindAt": given})
    assert r.status_code == 200 and assert_json(r)["remindAt"] == stored, short(r)
    [listed] = [t for t in assert_json(client.get("/todos", params={"date": D}))["items"] if t["id"] == other["id"]]
    assert listed["remindAt"] == stored


@pytest.mark.parametrize("bad", [
    "2031-03-05T09:30:60Z",         # second 60
    "2031-03-05T09:30:00",          # no offset
    "2031-03-05 09:30:00Z",         # not RFC 3339's T
    "2031-03-05",                   # a date
    "2031-02-29T09:30:00Z",         # no such day
    "2031-03-05T24:00:00Z",
    "2031-03-05T09:30:00+24:00",
    "2031-03-05T09:30:00.Z",
    "1999-12-31T23:59:59.999Z",     # UTC year 1999
    "2999-12-31T23:30:00-01:00",    # UTC year 3000
    "3000-01-01T00:00:00Z",
    " 2031-03-05T09:30:00Z",
    5, True, ["2031-03-05T09:30:00Z"],
])
def test_bad_remind_at_is_422_and_changes_nothing(client, bad):
    r = client.post("/todos", {"title": "never", "deadline": D, "remindAt": bad})
    assert_error(r, 422, "validation_failed", fields=["remindAt"])
    todo = client.create_todo("kept", D, remindAt="2031-03-05T09:30:00Z")
    r = client.patch(f"/todos/{todo['id']}", {"remindAt": bad, "title": "changed"})
    assert_error(r, 422, "validation_failed", fields=["remindAt"])
    now = client.get_todo(todo["id"])
    assert (now["remindAt"], now["title"], now["version"]) == ("2031-03-05T09:30:00.000Z", "kept", todo["version"]), now


def test_remind_at_defaults_to_null_and_null_clears_it(client):
    todo = client.create_todo("plain", D)
    assert todo["remindAt"] is None
    r = client.patch(f"/todos/{todo['id']}", {"remindAt": "2031-03-05T09:30:00Z"})
    assert r.status_code == 200 and assert_json(r)["remindAt"] == "2031-03-05T09:30:00.000Z", short(r)
    r = client.patch(f"/todos/{todo['id']}", {"title": "renamed"})  # absent: unchanged
    assert assert_json(r)["remindAt"] == "2031-03-05T09:30:00.000Z"
    r = client.patch(f"/todos/{todo['id']}", {"remindAt": None})
    assert r.status_code == 200 and assert_json(r)["remindAt"] is None, short(r)
    assert client.get_todo(todo["id"])["remindAt"] is None
