"""POST /todos/quick-add: token parsing, tags, limits, atomicity, response shape, stats.

Assumptions where API.md is silent:
- Lines are separated by LF; a CRLF line end is trimmed away with the line's whitespace.
- `!` after leading whitespace still counts as "the very start of the line" (raw is trimmed first).
- Tokens are whole whitespace-separated words; `#work,` (punctuation attached) is a word, not a tag.
- `24h` (1440 minutes, the maximum) is in range; `1441m` and `25h` are out of range.
- An empty title, too many lines, a missing/invalid `date` or `text` are 422 `validation_failed`.
"""

from __future__ import annotations

import pytest

import tsapi
from synclib import get_stat
from tsapi import assert_error, assert_json, assert_todo, short

D = "2031-04-20"


def qa(api, text, date=D, status=201):
    r = api.post("/todos/quick-add", {"text": text, "date": date})
    assert r.status_code == status, short(r)
    body = assert_json(r)
    if status == 201:
        assert isinstance(body, dict) and set(body) == {"items"} and isinstance(body["items"], list), body
        for t in body["items"]:
            assert_todo(t)
            assert t["deadline"] == date and t["isCompleted"] is False and t["clientId"] is None, t
        return body["items"]
    return body


def one(api, line, **kw):
    items = qa(api, line, **kw)
    assert len(items) == 1, items
    return items[0]


def fields(t):
    return {k: t[k] for k in ("title", "raw", "isImportant", "isLife", "tagId", "difficulty", "estimatedTime")}


def test_mixed_tokens_one_line(client):
    work = client.create_tag(name="Work")
    t = one(client, "!Write report #work 1h30m *4 @life")
    assert fields(t) == {"title": "Write report", "raw": "!Write report #work 1h30m *4 @life", "isImportant": True,
                         "isLife": True, "tagId": work["id"], "difficulty": 4, "estimatedTime": 90}
    assert client.get_todo(t["id"]) == t


def test_plain_line_defaults(client):
    t = one(client, "Buy milk")
    assert fields(t) == {"title": "Buy milk", "raw": "Buy milk", "isImportant": False, "isLife": False,
                         "tagId": None, "difficulty": 0, "estimatedTime": 0}


@pytest.mark.parametrize("line,title,important", [
    ("!call mom", "call mom", True),
    ("! call mom", "call mom", True),
    ("   !call mom  ", "call mom", True),
    ("call ! mom", "call ! mom", False),
    ("call mom!", "call mom!", False),
    ("!!call", "!call", True),
])
def test_important_marker(client, line, title, important):
    t = one(client, line)
    assert (t["title"], t["isImportant"], t["raw"]) == (title, important, line.strip())


@pytest.mark.parametrize("token,minutes", [("30m", 30), ("2h", 120), ("1h30m", 90), ("24h", 1440), ("1440m", 1440),
                                           ("90m", 90), ("1h", 60), ("0h45m", 45)])
def test_durations(client, token, minutes):
    t = one(client, f"task {token}")
    assert (t["title"], t["estimatedTime"]) == ("task", minutes)


@pytest.mark.parametrize("token", ["25h", "1441m", "24h1m", "*0", "*6", "*10", "m", "h", "30", "30min", "1.5h",
                                   "@lifestyle", "@", "#"])
def test_out_of_range_or_unknown_tokens_are_words(client, token):
    t = one(client, f"task {token} end")
    assert t["title"] == f"task {token} end", t
    assert (t["estimatedTime"], t["difficulty"], t["isLife"], t["tagId"]) == (0, 0, False, None)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_difficulty_tokens(client, n):
    t = one(client, f"*{n} hard thing")
    assert (t["title"], t["difficulty"]) == ("hard thing", n)


def test_last_token_of_a_kind_wins(client):
    a = client.create_tag(name="alpha")
    b = client.create_tag(name="beta")
    t = one(client, "x 30m *1 #beta 2h *3 #alpha y")
    assert (t["title"], t["estimatedTime"], t["difficulty"], t["tagId"]) == ("x y", 120, 3, a["id"])
    t = one(client, "x #alpha #beta *5 *2 1h 15m")
    assert (t["title"], t["estimatedTime"], t["difficulty"], t["tagId"]) == ("x", 15, 2, b["id"])


def test_tag_case_insensitive_first_live_by_id(client):
    first = client.create_tag(name="Errands")
    second = client.create_tag(name="ERRANDS")
    t = one(client, "post office #errands")
    assert (t["title"], t["tagId"]) == ("post office", first["id"])
    t = one(client, "bank #ErRaNdS")
    assert t["tagId"] == first["id"]
    # the first one deleted: the next live one by id is picked
    assert client.delete(f"/tags/{first['id']}").status_code == 204
    t = one(client, "pharmacy #errands")
    assert (t["title"], t["tagId"]) == ("pharmacy", second["id"])
    # none live: the token stays in the title
    assert client.delete(f"/tags/{second['id']}").status_code == 204
    t = one(client, "shoes #errands")
    assert (t["title"], t["tagId"]) == ("shoes #errands", None)


def test_unknown_tags_stay_in_title(client):
    client.create_tag(name="home")
    t = one(client, "buy #milk #home #eggs")
    assert t["title"] == "buy #milk #eggs"
    assert t["tagId"] is not None


def test_renamed_tag_matches_by_new_name_only(client):
    tag = client.create_tag(name="old")
    assert client.patch(f"/tags/{tag['id']}", {"name": "new"}).status_code == 200
    assert one(client, "a #old")["tagId"] is None
    assert one(client, "b #new")["tagId"] == tag["id"]


def test_other_users_tags_not_matched(client, other_client):
    other_client.create_tag(name="secret")
    t = one(client, "x #secret")
    assert (t["title"], t["tagId"]) == ("x #secret", None)


def test_whitespace_collapses_and_raw_is_trimmed_line(client):
    t = one(client, " \t  read   the\tbook  30m   ")
    assert (t["title"], t["raw"], t["estimatedTime"]) == ("read the book", "read   the\tbook  30m", 30)


def test_unicode_lines(client):
    tag = client.create_tag(name="가족")
    items = qa(client, "!엄마 생신 🎂 #가족 *3\nمرحبا بالعالم 45m\n😀 @life")
    assert [fields(t) for t in items] == [
        {"title": "엄마 생신 🎂", "raw": "!엄마 생신 🎂 #가족 *3", "isImportant": True, "isLife": False,
         "tagId": tag["id"], "difficulty": 3, "estimatedTime": 0},
        {"title": "مرحبا بالعالم", "raw": "مرحبا بالعالم 45m", "isImportant": False, "isLife": False,
         "tagId": None, "difficulty": 0, "estimatedTime": 45},
        {"title": "😀", "raw": "😀 @life", "isImportant": False, "isLife": True, "tagId": None, "difficulty": 0,
         "estimatedTime": 0},
    ]
    for t in items:
        assert client.get_todo(t["id"]) == t


def test_blank_lines_skipped_line_order_kept(client):
    items = qa(client, "\n  first\n\n   \n\t\nsecond 10m\r\nthird\n\n")
    assert [t["title"] for t in items] == ["first", "second", "third"]
    assert [t["raw"] for t in items] == ["first", "second 10m", "third"]
    ids = [t["id"] for t in items]
    versions = [t["version"] for t in items]
    assert ids == sorted(ids) and versions == sorted(versions) and len(set(versions)) == 3


def test_fifty_lines_ok(client):
    text = "\n\n".join(f"line {i} *{i % 5 + 1}" for i in range(50)) + "\n   \n"
    items = qa(client, text)
    assert [t["title"] for t in items] == [f"line {i}" for i in range(50)]
    assert [t["difficulty"] for t in items] == [i % 5 + 1 for i in range(50)]
    assert len(client.list_todos(date=D)) == 50
    assert get_stat(client, D)["todoCount"] == 50


def test_fifty_one_lines_422_nothing_created(client):
    text = "\n".join(f"line {i}" for i in range(51))
    assert_error(client.post("/todos/quick-add", {"text": text, "date": D}), 422, "validation_failed")
    assert client.list_todos(date=D) == []
    assert get_stat(client, D) is None


@pytest.mark.parametrize("bad_line", ["!", "#work", "30m *2 @life", "! #work 1h", "*5"])
def test_line_with_empty_title_422_nothing_created(client, bad_line):
    client.create_tag(name="work")
    text = f"fine line\n{bad_line}\nanother fine line"
    assert_error(client.post("/todos/quick-add", {"text": text, "date": D}), 422, "validation_failed")
    assert client.list_todos(date=D) == []
    assert get_stat(client, D) is None


@pytest.mark.parametrize("body", [
    {"text": "x"},
    {"text": "x", "date": None},
    {"text": "x", "date": "2026-02-30"},
    {"text": "x", "date": "2026/01/01"},
    {"text": "x", "date": "2026-1-01"},
    {"text": "x", "date": 20260101},
    {"text": "x", "date": ""},
    {"text": "x", "date": "1999-12-31"},
    {"text": "x", "date": "3000-01-01"},
    {"date": D},
    {"text": None, "date": D},
    {"text": 5, "date": D},
    {"text": ["x"], "date": D},
], ids=lambda b: repr(b)[:40])
def test_bad_body_422(client, body):
    assert_error(client.post("/todos/quick-add", body), 422, "validation_failed")
    r = client.get("/sync/pull")
    assert r.status_code == 200 and assert_json(r)["changes"]["todos"]["upserted"] == [], short(r)


@pytest.mark.parametrize("text", ["", "  \n \n\t"])
def test_text_without_lines_creates_nothing(client, text):
    # API.md does not say whether this is 422 or 201 {"items": []}; either way nothing is created.
    r = client.post("/todos/quick-add", {"text": text, "date": D})
    if r.status_code == 201:
        assert assert_json(r) == {"items": []}
    else:
        assert_error(r, 422, "validation_failed")
    assert client.list_todos(date=D) == []


def test_response_201_items_in_line_order_and_stats_updated(client):
    tag = client.create_tag(name="gym")
    items = qa(client, "c *2 30m\na #gym 1h\nb @life 15m")
    assert [t["title"] for t in items] == ["c", "a", "b"]
    assert sorted(client.list_todos(date=D), key=lambda t: t["id"]) == items
    stat = get_stat(client, D)
    assert (stat["todoCount"], stat["completedCount"], stat["balance"]["num"]) == (3, 0, 50)
    assert stat["version"] > max(t["version"] for t in items)
    # completing them updates the stat like any todo
    for t in items:
        assert client.patch(f"/todos/{t['id']}", {"isCompleted": True}).status_code == 200
    stat = get_stat(client, D)
    assert stat["completedCount"] == 3
    assert stat["tagStats"] == [{"tagId": tag["id"], "name": "gym", "color": tag["color"], "count": 1}]
    assert stat["productivityNum"] == 1  # 2 x 30 / 60
    assert stat["balance"]["num"] == 14  # 15 / 105 = 14.29 %


def test_quick_add_needs_auth():
    anon = tsapi.Api(None)
    assert_error(anon.post("/todos/quick-add", {"text": "x", "date": D}), 401, "unauthorized")


def test_title_over_200_characters_422_nothing_created(client):
    ok = one(client, "a" * 200 + " 30m")
    assert len(ok["title"]) == 200
    assert_error(client.post("/todos/quick-add", {"text": "fine\n" + "b" * 201, "date": "2031-04-21"}), 422,
                 "validation_failed")
    assert client.list_todos(date="2031-04-21") == []


def test_raw_limit_2000_characters(client):
    line = "x" + " 30m" * 499 + " *2"  # 2000 characters, title "x"
    t = one(client, line)
    assert (t["title"], t["raw"], t["difficulty"], t["estimatedTime"]) == ("x", line, 2, 30)
    too_long = "y" + " 30m" * 499 + " *22"  # 2001 characters
    assert_error(client.post("/todos/quick-add", {"text": too_long, "date": "2031-04-22"}), 422, "validation_failed")
    assert client.list_todos(date="2031-04-22") == []
