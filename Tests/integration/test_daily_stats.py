"""Daily stats: every formula against hand-computed values, recomputation on todo and tag
changes, version behaviour, tombstone lifecycle, month listing, 400s and isolation.

Assumptions where API.md is silent:
- Decimals are JSON numbers with at most two fraction digits (0.02, -0.13, 1 or 1.0 for one).
- A malformed month/date in the URL is 400 `bad_request` (it is a query/path parameter).
- A todo edit that leaves the date's stat content equal (title, an open todo's tag, ...) does not
  change the stat's version; renaming/recoloring a tag that only open todos use does not either.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import tsapi
from synclib import (assert_stat, dec, expected_stat, get_stat, pull, pull_all, stat_content)
from tsapi import assert_error, assert_json, short

WORK = ("Work-heavy", "Make some room for life today.")
BAL = ("Balanced", "A good balance between work and life.")
LIFE = ("Life-heavy", "Plenty of life today; remember your goals.")


def mk(api, date, done=False, life=False, diff=0, mins=0, tag=None, title=None):
    return api.create_todo(title=title or tsapi.unique("t"), deadline=date, isCompleted=done, isLife=life,
                           difficulty=diff, estimatedTime=mins, tagId=tag)


def check_formulas(api, date, expected):
    """expected: dict with todoCount, completedCount, prod, num, text, x, y (Fractions/ints)."""
    stat = get_stat(api, date)
    assert stat is not None, f"no stat for {date}"
    got = {
        "todoCount": stat["todoCount"], "completedCount": stat["completedCount"],
        "prod": dec(stat["productivityNum"]), "num": stat["balance"]["num"],
        "text": (stat["balance"]["title"], stat["balance"]["message"]),
        "x": dec(stat["center"]["x"]), "y": dec(stat["center"]["y"]),
    }
    assert got == expected, f"{date}: got {got}, expected {expected}; stat {stat}"
    return stat


# (label, [(done, life, difficulty, minutes)], expected hand-computed values)
FORMULA_CASES = [
    ("difficulty 1 x 1 min rounds up to 0.02",
     [(True, False, 1, 1)],
     dict(todoCount=1, completedCount=1, prod=F("0.02"), num=0, text=WORK, x=F(-1), y=F(1))),
    ("productivity sums then rounds (2/60 = 0.03, not 0.04)",
     [(True, False, 1, 1), (True, False, 1, 1)],
     dict(todoCount=2, completedCount=2, prod=F("0.03"), num=0, text=WORK, x=F(-1), y=F(1))),
    ("sum 28/60 + 21/60 = 49/60 = 0.8167 -> 0.82",
     [(True, True, 4, 7), (True, True, 3, 7)],
     dict(todoCount=2, completedCount=2, prod=F("0.82"), num=100, text=LIFE, x=F(1), y=F(1))),
    ("maximum productivity 5 x 1440 min = 120",
     [(True, False, 5, 1440)],
     dict(todoCount=1, completedCount=1, prod=F(120), num=0, text=WORK, x=F(-1), y=F(1))),
    ("open todos count only in todoCount",
     [(True, False, 2, 30), (False, True, 5, 600), (False, False, 5, 600)],
     dict(todoCount=3, completedCount=1, prod=F(1), num=0, text=WORK, x=F(-1), y=F("0.33"))),
    ("nothing completed: empty balance",
     [(False, True, 3, 60), (False, False, 2, 45)],
     dict(todoCount=2, completedCount=0, prod=F(0), num=50, text=BAL, x=F(0), y=F(0))),
    ("completed but zero minutes: total 0 -> 50, x 0",
     [(True, True, 5, 0), (True, False, 4, 0)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=50, text=BAL, x=F(0), y=F(1))),
    ("balance 12.5 rounds half up to 13; x -0.75",
     [(True, True, 0, 1), (True, False, 0, 7)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=13, text=WORK, x=F("-0.75"), y=F(1))),
    ("balance 87.5 -> 88",
     [(True, True, 0, 7), (True, False, 0, 1)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=88, text=LIFE, x=F("0.75"), y=F(1))),
    ("x = -0.125 rounds away from zero to -0.13; num 43.75 -> 44",
     [(True, True, 0, 7), (True, False, 0, 9)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=44, text=BAL, x=F("-0.13"), y=F(1))),
    ("x = 0.125 -> 0.13; num 56.25 -> 56",
     [(True, True, 0, 9), (True, False, 0, 7)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=56, text=BAL, x=F("0.13"), y=F(1))),
    ("x = -1/3 -> -0.33; num 33.3 -> 33",
     [(True, True, 0, 10), (True, False, 0, 20)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=33, text=BAL, x=F("-0.33"), y=F(1))),
    ("x = -2/3 -> -0.67; y = 2/3 -> 0.67",
     [(True, True, 0, 10), (True, False, 0, 50), (False, False, 0, 10)],
     dict(todoCount=3, completedCount=2, prod=F(0), num=17, text=WORK, x=F("-0.67"), y=F("0.67"))),
    ("y = 1/8 = 0.125 -> 0.13",
     [(True, True, 1, 60)] + [(False, False, 1, 60)] * 7,
     dict(todoCount=8, completedCount=1, prod=F(1), num=100, text=LIFE, x=F(1), y=F("0.13"))),
    ("balance 29 is Work-heavy",
     [(True, True, 0, 29), (True, False, 0, 71)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=29, text=WORK, x=F("-0.42"), y=F(1))),
    ("balance 30 is Balanced",
     [(True, True, 0, 30), (True, False, 0, 70)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=30, text=BAL, x=F("-0.4"), y=F(1))),
    ("balance 70 is Balanced",
     [(True, True, 0, 70), (True, False, 0, 30)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=70, text=BAL, x=F("0.4"), y=F(1))),
    ("balance 71 is Life-heavy",
     [(True, True, 0, 71), (True, False, 0, 29)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=71, text=LIFE, x=F("0.42"), y=F(1))),
    ("balance 29.5 rounds to 30: Balanced",
     [(True, True, 0, 59), (True, False, 0, 141)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=30, text=BAL, x=F("-0.41"), y=F(1))),
    ("balance 70.5 rounds to 71: Life-heavy",
     [(True, True, 0, 141), (True, False, 0, 59)],
     dict(todoCount=2, completedCount=2, prod=F(0), num=71, text=LIFE, x=F("0.41"), y=F(1))),
    ("mixed: difficulty-weighted productivity with life and work",
     [(True, True, 3, 45), (True, False, 2, 90), (False, True, 5, 1440)],
     dict(todoCount=3, completedCount=2, prod=F("5.25"), num=33, text=BAL, x=F("-0.33"), y=F("0.67"))),
]


@pytest.mark.parametrize("label,todos,expected", FORMULA_CASES, ids=[c[0][:40] for c in FORMULA_CASES])
def test_formulas_hand_computed(client, label, todos, expected):
    date = "2031-07-14"
    made = [mk(client, date, *t) for t in todos]
    stat = check_formulas(client, date, expected)
    assert stat["tagStats"] == []
    # the independent oracle agrees with the hand-computed table (guards the table itself)
    assert stat_content(stat) == expected_stat(made, {}), label


def test_stat_shape_etag_and_recompute_on_update(client):
    date = "2031-08-01"
    a = mk(client, date, done=False, diff=2, mins=30)
    s1 = get_stat(client, date)
    assert s1["todoCount"] == 1 and s1["completedCount"] == 0 and s1["deletedAt"] is None
    assert s1["version"] > a["version"], "stat recomputed in the todo's transaction gets a later version"
    r = client.patch(f"/todos/{a['id']}", {"isCompleted": True})
    assert r.status_code == 200, short(r)
    todo = assert_json(r)
    s2 = get_stat(client, date)
    assert s2["id"] == s1["id"] and s2["createdAt"] == s1["createdAt"]
    assert s2["version"] > todo["version"] > s1["version"]
    assert (s2["completedCount"], dec(s2["productivityNum"]), dec(s2["center"]["y"])) == (1, F(1), F(1))
    assert tsapi.parse_ts(s2["updatedAt"]) >= tsapi.parse_ts(s1["updatedAt"])
    # the month listing shows the same record
    r = client.get("/daily-stats", params={"month": "2031-08"})
    assert r.status_code == 200, short(r)
    assert assert_json(r) == {"items": [s2]}


def test_content_equal_changes_keep_stat_version(client):
    date = "2031-08-02"
    tag = client.create_tag(name="Side", color="#112233")
    done = mk(client, date, done=True, diff=3, mins=40)
    open_ = mk(client, date, done=False, diff=1, mins=10)
    s1 = get_stat(client, date)
    # renaming a todo, changing an open todo's tag, difficulty and time: the stat content is equal
    for todo_id, patch in ((done["id"], {"title": "renamed", "raw": "renamed raw"}),
                           (open_["id"], {"tagId": tag["id"], "difficulty": 5, "estimatedTime": 600,
                                          "isImportant": True, "isLife": True})):
        r = client.patch(f"/todos/{todo_id}", patch)
        assert r.status_code == 200, short(r)
    # renaming / recoloring a tag only an open todo uses: content equal too
    r = client.patch(f"/tags/{tag['id']}", {"name": "Side2", "color": "#445566"})
    assert r.status_code == 200, short(r)
    s2 = get_stat(client, date)
    assert s2 == s1, "a change that leaves the stat's content equal must not touch the stat"


def test_tag_rename_and_recolor_show_in_tag_stats(client):
    date = "2031-08-03"
    tag = client.create_tag(name="Work", color="#112233")
    mk(client, date, done=True, tag=tag["id"], mins=10)
    s1 = get_stat(client, date)
    assert s1["tagStats"] == [{"tagId": tag["id"], "name": "Work", "color": "#112233", "count": 1}]

    r = client.patch(f"/tags/{tag['id']}", {"name": "Job"})
    assert r.status_code == 200, short(r)
    renamed = assert_json(r)
    s2 = get_stat(client, date)
    assert s2["tagStats"] == [{"tagId": tag["id"], "name": "Job", "color": "#112233", "count": 1}]
    assert s2["version"] > renamed["version"] > s1["version"], (s1, renamed, s2)

    r = client.patch(f"/tags/{tag['id']}", {"color": "#abcdef"})
    assert r.status_code == 200, short(r)
    recolored = assert_json(r)
    s3 = get_stat(client, date)
    assert s3["tagStats"] == [{"tagId": tag["id"], "name": "Job", "color": "#ABCDEF", "count": 1}]
    assert s3["version"] > s2["version"]

    # recoloring to the same color in lower case changes nothing: neither tag nor stat version
    r = client.patch(f"/tags/{tag['id']}", {"color": "#ABCDEF".lower(), "name": "Job"})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["version"] == recolored["version"]
    assert get_stat(client, date) == s3


def test_tag_stats_order_and_only_completed(client):
    date = "2031-08-04"
    zeta = client.create_tag(name="zeta", color="#000001")   # lowest id
    alpha = client.create_tag(name="alpha", color="#000002")
    mid = client.create_tag(name="mid", color="#000003")
    solo = client.create_tag(name="solo", color="#000004")
    plan = [(zeta, True)] * 2 + [(alpha, True)] * 2 + [(mid, True)] * 3 + [(solo, True)] + \
           [(solo, False)] * 5 + [(None, True)] * 2 + [(zeta, False)] * 4
    made = [mk(client, date, done=d, tag=t["id"] if t else None, mins=5) for t, d in plan]
    stat = get_stat(client, date)
    expect = [
        {"tagId": mid["id"], "name": "mid", "color": "#000003", "count": 3},
        {"tagId": zeta["id"], "name": "zeta", "color": "#000001", "count": 2},
        {"tagId": alpha["id"], "name": "alpha", "color": "#000002", "count": 2},
        {"tagId": solo["id"], "name": "solo", "color": "#000004", "count": 1},
    ]
    assert stat["tagStats"] == expect, "count descending, then tagId ascending (not name), completed only"
    tags = {t["id"]: t for t in (zeta, alpha, mid, solo)}
    assert stat_content(stat) == expected_stat(made, tags)


def test_deleting_tag_removes_it_from_tag_stats(client):
    date = "2031-08-05"
    keep = client.create_tag(name="keep")
    gone = client.create_tag(name="gone")
    mk(client, date, done=True, tag=gone["id"])
    mk(client, date, done=True, tag=gone["id"])
    mk(client, date, done=True, tag=keep["id"])
    s1 = get_stat(client, date)
    assert [t["tagId"] for t in s1["tagStats"]] == [gone["id"], keep["id"]]
    assert client.delete(f"/tags/{gone['id']}").status_code == 204
    s2 = get_stat(client, date)
    assert s2["tagStats"] == [{"tagId": keep["id"], "name": "keep", "color": keep["color"], "count": 1}]
    assert s2["version"] > s1["version"]
    assert s2["todoCount"] == 3 and s2["completedCount"] == 3
    assert all(t["tagId"] in (None, keep["id"]) for t in client.list_todos(date=date))


def test_moving_deadline_recomputes_both_dates(client):
    d1, d2 = "2031-09-01", "2031-09-02"
    stay = mk(client, d1, done=True, life=True, mins=30)
    move = mk(client, d1, done=True, life=False, diff=4, mins=90)
    s1 = get_stat(client, d1)
    assert (s1["todoCount"], s1["balance"]["num"], dec(s1["productivityNum"])) == (2, 25, F(6))
    assert get_stat(client, d2) is None
    r = client.patch(f"/todos/{move['id']}", {"deadline": d2})
    assert r.status_code == 200, short(r)
    a = get_stat(client, d1)
    b = get_stat(client, d2)
    assert a["id"] == s1["id"] and a["version"] > s1["version"]
    assert (a["todoCount"], a["completedCount"], a["balance"]["num"], dec(a["center"]["x"])) == (1, 1, 100, F(1))
    assert (b["todoCount"], b["completedCount"], dec(b["productivityNum"]), b["balance"]["num"]) == (1, 1, F(6), 0)
    assert b["id"] != a["id"]
    # moving the last todo away turns d1's stat into a tombstone
    r = client.patch(f"/todos/{stay['id']}", {"deadline": d2})
    assert r.status_code == 200, short(r)
    assert get_stat(client, d1) is None
    b2 = get_stat(client, d2)
    assert b2["todoCount"] == 2 and b2["version"] > b["version"]


def test_tombstone_lifecycle_same_id_comes_back(client):
    date = "2031-10-10"
    t = mk(client, date, done=True, mins=20)
    s1 = get_stat(client, date)
    store_cursor = pull_all(client).pages[-1]["cursor"]

    assert client.delete(f"/todos/{t['id']}").status_code == 204
    assert get_stat(client, date) is None
    r = client.get("/daily-stats", params={"month": "2031-10"})
    assert r.status_code == 200 and assert_json(r) == {"items": []}, short(r)

    page = pull(client, store_cursor)
    tombs = page["changes"]["dailyStats"]["deleted"]
    assert len(tombs) == 1, page
    tomb = tombs[0]
    assert tomb["id"] == s1["id"] and tomb["clientId"] is None and tomb["version"] > s1["version"], tomb
    assert page["changes"]["dailyStats"]["upserted"] == []
    # the first pull never shows the stat's tombstone
    first = pull(client)
    assert first["changes"]["dailyStats"] == {"upserted": [], "deleted": []}

    mk(client, date, done=False)
    s2 = get_stat(client, date)
    assert s2["id"] == s1["id"], "the same stat (same id) comes back"
    assert s2["version"] > tomb["version"] and s2["deletedAt"] is None
    assert (s2["todoCount"], s2["completedCount"], s2["balance"]["num"]) == (1, 0, 50)
    page2 = pull(client, page["cursor"])
    assert [s["id"] for s in page2["changes"]["dailyStats"]["upserted"]] == [s1["id"]]
    assert page2["changes"]["dailyStats"]["deleted"] == []


def test_month_listing_by_date_only_that_month(client):
    dates = ["2032-03-31", "2032-02-29", "2032-03-01", "2032-03-15", "2032-04-01", "2031-03-10"]
    for d in dates:
        mk(client, d)
    r = client.get("/daily-stats", params={"month": "2032-03"})
    assert r.status_code == 200, short(r)
    items = assert_json(r)["items"]
    for s in items:
        assert_stat(s)
    assert [s["date"] for s in items] == ["2032-03-01", "2032-03-15", "2032-03-31"]
    r = client.get("/daily-stats", params={"month": "2032-02"})
    assert [s["date"] for s in assert_json(r)["items"]] == ["2032-02-29"]
    r = client.get("/daily-stats", params={"month": "2032-05"})
    assert r.status_code == 200 and assert_json(r) == {"items": []}


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "2026-00", "26-01", "2026/01", "2026-01-01", "",
                                   "abcd-ef", "2026-1a", "1999-12", "3000-01"])
def test_month_malformed_400(shared_client, month):
    assert_error(shared_client.get("/daily-stats", params={"month": month}), 400)


def test_month_missing_400(shared_client):
    assert_error(shared_client.get("/daily-stats"), 400)


@pytest.mark.parametrize("date", ["2026-02-30", "2026-13-01", "2026-1-05", "2026-01-32", "20260105", "2027-02-29",
                                  "2026-00-10", "tomorrow", "1999-12-31", "3000-01-01"])
def test_date_malformed_400(shared_client, date):
    assert_error(shared_client.get(f"/daily-stats/{date}"), 400)


def test_stat_404_for_date_without_todos(client):
    assert_error(client.get("/daily-stats/2031-01-01"), 404, "not_found")


def test_other_users_never_see_your_stats(client, other_client):
    date = "2031-11-11"
    mk(client, date, done=True, mins=30, tag=client.create_tag(name="private")["id"])
    assert get_stat(client, date) is not None
    assert_error(other_client.get(f"/daily-stats/{date}"), 404, "not_found")
    r = other_client.get("/daily-stats", params={"month": "2031-11"})
    assert r.status_code == 200 and assert_json(r) == {"items": []}, short(r)
    body = pull(other_client)
    assert all(body["changes"][k] == {"upserted": [], "deleted": []} for k in body["changes"]), body
    # and the other user's own stat for the same date is independent
    mk(other_client, date, done=False)
    mine, theirs = get_stat(client, date), get_stat(other_client, date)
    assert mine["id"] != theirs["id"]
    assert (mine["completedCount"], theirs["completedCount"]) == (1, 0)
    assert theirs["tagStats"] == []


def test_stats_need_auth(base_url):
    anon = tsapi.Api(None)
    assert_error(anon.get("/daily-stats/2031-01-01"), 401, "unauthorized")
    assert_error(anon.get("/daily-stats", params={"month": "2031-01"}), 401, "unauthorized")


def test_stats_follow_random_edits(client):
    """Stats stay equal to the formulas after a mixed series of REST edits on two dates."""
    import random
    rnd = random.Random(4242)
    dates = ["2031-12-01", "2031-12-02"]
    tags = [client.create_tag(name=f"g{i}", color=f"#0000{i:02d}") for i in range(3)]
    todos = {}
    for i in range(14):
        t = mk(client, rnd.choice(dates), done=rnd.random() < 0.6, life=rnd.random() < 0.5,
               diff=rnd.randint(0, 5), mins=rnd.randint(0, 200), tag=rnd.choice([None] + [g["id"] for g in tags]))
        todos[t["id"]] = t
    for _ in range(12):
        tid = rnd.choice(list(todos))
        patch = rnd.choice([{"isCompleted": rnd.random() < 0.5}, {"estimatedTime": rnd.randint(0, 300)},
                            {"deadline": rnd.choice(dates)}, {"isLife": rnd.random() < 0.5},
                            {"tagId": rnd.choice([None] + [g["id"] for g in tags])}])
        r = client.patch(f"/todos/{tid}", patch)
        assert r.status_code == 200, short(r)
        todos[tid] = assert_json(r)
    gone = rnd.choice(list(todos))
    assert client.delete(f"/todos/{gone}").status_code == 204
    del todos[gone]
    r = client.patch(f"/tags/{tags[0]['id']}", {"name": "renamed"})
    assert r.status_code == 200
    assert client.delete(f"/tags/{tags[1]['id']}").status_code == 204
    live_tags = {t["id"]: t for t in client.list_tags()}
    for d in dates:
        day_todos = client.list_todos(date=d)
        exp = expected_stat(day_todos, live_tags)
        stat = get_stat(client, d)
        if exp is None:
            assert stat is None
        else:
            assert stat_content(stat) == exp, (d, stat)


def test_concurrent_writers_keep_stat_exact(client):
    """Concurrent creates and completions on one date (one user, many connections): the stat is
    recomputed inside each write's transaction, so no update is lost."""
    import concurrent.futures as cf
    date = "2031-12-20"

    def worker(i):
        api = tsapi.Api(client.token)
        try:
            for j in range(4):
                t = api.create_todo(f"w{i}-{j}", deadline=date, isLife=(i + j) % 2 == 0, difficulty=j + 1,
                                    estimatedTime=5 * (i + 1))
                if j % 2 == 0:
                    r = api.patch(f"/todos/{t['id']}", {"isCompleted": True})
                    assert r.status_code == 200, short(r)
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(worker, range(8)))
    todos = client.list_todos(date=date)
    assert len(todos) == 32
    assert stat_content(get_stat(client, date)) == expected_stat(todos, {})


def test_tag_recolor_updates_every_date_using_it(client):
    tag = client.create_tag(name="multi", color="#101010")
    dates = ["2031-12-10", "2031-12-11", "2031-12-12"]
    mk(client, dates[0], done=True, tag=tag["id"])
    mk(client, dates[1], done=True, tag=tag["id"])
    mk(client, dates[2], done=False, tag=tag["id"])  # open: not in tagStats
    before = {d: get_stat(client, d) for d in dates}
    assert client.patch(f"/tags/{tag['id']}", {"color": "#202020"}).status_code == 200
    after = {d: get_stat(client, d) for d in dates}
    for d in dates[:2]:
        assert after[d]["tagStats"][0]["color"] == "#202020" and after[d]["version"] > before[d]["version"]
    assert after[dates[2]] == before[dates[2]]
