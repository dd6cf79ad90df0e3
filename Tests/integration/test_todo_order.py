"""GET /todos order (API.md, "Todos"): isImportant first, createdAt newest first, then "title
A→Z" = the titles after simple lowercasing compared by Unicode code point (no locale, no
collation), then id — so a device's local store lists exactly like the server.

Quick-add creates all its lines in one transaction with one createdAt, so the title rule decides
their order. A collation (MariaDB's utf8mb4_unicode_ci) would put `äpfel` next to `apfel` and
ignore case differently; code point order puts every ASCII letter before `ä`, and `İ` (whose
*simple* lowercase is plain `i`) next to `i`.
"""

from __future__ import annotations

import random

import tsapi
from tsapi import short

DAY = "2031-11-11"
TITLES = ["äpfel", "apfel", "Zebra", "zebra", "İstanbul", "istanbul", "Éclair", "eclair", "Apfel",
          "ß", "ss", "Ω", "ω", "b", "B", "a b", "a", "ǅ", "ǆ", "😀", "ﬃ", "ffi", "Ǆ", "Zürich", "zurich"]


def simple_lower(text: str) -> str:
    """Unicode simple lowercase mapping: one code point for one (str.lower() is the full one)."""
    out = []
    for ch in text:
        low = ch.lower()
        out.append(low if len(low) == 1 else ("i" if ch == "\u0130" else ch))
    return "".join(out)


def expected_order(items: list[dict]) -> list[int]:
    def key(t):
        return (t["deadline"], not t["isImportant"], -tsapi.parse_ts(t["createdAt"]).timestamp(),
                simple_lower(t["title"]), t["id"])
    return [t["id"] for t in sorted(items, key=key)]


def test_title_ties_are_broken_by_simple_lowercase_code_points_then_id(client):
    titles = TITLES[:]
    random.Random(7).shuffle(titles)
    r = client.post("/todos/quick-add", {"date": DAY, "text": "\n".join(titles)})
    assert r.status_code == 201, short(r)
    created = r.json()["items"]
    assert len({t["createdAt"] for t in created}) == 1, "quick-add gives every line one createdAt"
    items = client.list_todos(date=DAY)
    assert [t["id"] for t in items] == expected_order(created)
    # The rule, spelled out for the cases a collation gets wrong:
    order = [t["title"] for t in items]
    assert order.index("Zebra") < order.index("äpfel"), "code points: every ASCII letter before ä"
    assert order.index("zurich") < order.index("Zürich")
    assert abs(order.index("İstanbul") - order.index("istanbul")) == 1, "İ lowercases (simply) to i"
    # Equal keys ("Apfel"/"apfel", "Zebra"/"zebra") fall to the id, i.e. line order here.
    for a, b in (("apfel", "Apfel"), ("Zebra", "zebra")):
        ia, ib = next(t for t in items if t["title"] == a), next(t for t in items if t["title"] == b)
        assert (order.index(a) < order.index(b)) == (ia["id"] < ib["id"])


def test_order_follows_edits_of_title_importance_and_date(client):
    r = client.post("/todos/quick-add", {"date": DAY, "text": "m\nc\nx"})
    assert r.status_code == 201, short(r)
    m, c, x = r.json()["items"]
    assert [t["title"] for t in client.list_todos(date=DAY)] == ["c", "m", "x"]
    assert client.patch(f"/todos/{x['id']}", {"title": "A"}).status_code == 200
    assert [t["title"] for t in client.list_todos(date=DAY)] == ["A", "c", "m"]
    assert client.patch(f"/todos/{m['id']}", {"isImportant": True}).status_code == 200
    assert [t["title"] for t in client.list_todos(date=DAY)] == ["m", "A", "c"]
    assert client.patch(f"/todos/{c['id']}", {"deadline": "2031-11-12"}).status_code == 200
    assert [t["title"] for t in client.list_todos(date=DAY)] == ["m", "A"]
    assert [t["title"] for t in client.list_todos(**{"from": DAY, "to": "2031-11-12"})] == ["m", "A", "c"]
    assert client.delete(f"/todos/{m['id']}").status_code == 204
    listed = client.list_todos(date=DAY)
    assert [t["title"] for t in listed] == ["A"]
    # What is listed is the record itself, as GET /todos/{id} returns it after the edits.
    assert listed[0] == client.get_todo(x["id"])
