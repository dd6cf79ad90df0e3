"""The contract's Account section: change password, sessions, export, delete (issue 24, server).

Each test makes its own users.  The erase test reads the schema (information_schema) and checks
every table with a `user_id` column, so a table added later without a delete path fails it.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid

import pytest

import synclib
import tsapi
from tsapi import assert_error, assert_json, login, register, short

MAX_FAILURES = 10  # TODOSYNC_LOGIN_MAX_FAILURES default


def second_token(user: tsapi.Api) -> tsapi.Api:
    """Another device of `user`: a new login, its own token."""
    r = login(user.email, user.password)
    assert r.status_code == 200, short(r)
    other = tsapi.Api(r.json()["token"])
    other.user, other.email, other.password = user.user, user.email, user.password
    return other


def change_password(api: tsapi.Api, current: str, new: str, **kw):
    return api.post("/account/password", {"currentPassword": current, "newPassword": new}, **kw)


def sessions(api: tsapi.Api) -> list[dict]:
    r = api.get("/account/sessions")
    assert r.status_code == 200, short(r)
    body = assert_json(r)
    assert set(body) == {"items"}, body
    return body["items"]


def assert_wrong_password(r, field: str) -> None:
    err = assert_error(r, 401, "unauthorized")
    assert [d["field"] for d in err.get("details", [])] == [field], err


def assert_signed_out(api: tsapi.Api) -> None:
    assert_error(api.get("/tags"), 401, "unauthorized")
    assert_error(api.get("/todos", params={"date": "2030-06-15"}), 401, "unauthorized")


# --------------------------------------------------------------------------- password

def test_password_change_signs_out_other_devices_and_keeps_the_current_one():
    phone = tsapi.new_user()
    laptop = second_token(phone)
    new = tsapi.new_password()
    r = change_password(phone, phone.password, new)
    assert r.status_code == 204, short(r)
    assert_signed_out(laptop)
    assert phone.get("/tags").status_code == 200
    assert phone.create_tag()["id"] > 0
    assert_error(login(phone.email, phone.password), 401, "unauthorized")
    assert login(phone.email, new).status_code == 200


def test_password_change_with_a_wrong_current_password_is_401_and_changes_nothing():
    phone = tsapi.new_user()
    laptop = second_token(phone)
    r = change_password(phone, "not-the-password", tsapi.new_password())
    assert_wrong_password(r, "currentPassword")
    assert laptop.get("/tags").status_code == 200
    assert phone.get("/tags").status_code == 200
    assert login(phone.email, phone.password).status_code == 200


@pytest.mark.parametrize("new", ["short77", "x" * 129, None, 12345678])
def test_password_change_to_an_invalid_new_password_is_422(new):
    user = tsapi.new_user()
    other = second_token(user)
    r = change_password(user, user.password, new)
    assert_error(r, 422, "validation_failed", fields=["newPassword"])
    assert other.get("/tags").status_code == 200
    assert login(user.email, user.password).status_code == 200


def test_password_change_needs_a_token():
    r = tsapi.Api().post("/account/password", {"currentPassword": "a" * 10, "newPassword": "b" * 10})
    assert_error(r, 401, "unauthorized")


def test_wrong_passwords_on_account_routes_count_toward_the_login_lockout():
    user = tsapi.new_user()
    for i in range(MAX_FAILURES):
        if i % 2:
            r = change_password(user, f"wrong-{i}-" + uuid.uuid4().hex, tsapi.new_password())
            assert_wrong_password(r, "currentPassword")
        else:
            r = user.post("/account/delete", {"password": f"wrong-{i}-" + uuid.uuid4().hex})
            assert_wrong_password(r, "password")
    # The account is locked now: login with the right password, and the account routes too.
    assert_error(login(user.email, user.password, retry_429=False), 429, "rate_limited")
    r = change_password(user, user.password, tsapi.new_password())
    assert_error(r, 429, "rate_limited")
    assert r.headers.get("Retry-After", "").isdigit(), short(r)
    assert_error(user.post("/account/delete", {"password": user.password}), 429, "rate_limited")
    # Nothing was changed or deleted by the throttled attempts.
    assert user.get("/tags").status_code == 200


def test_idempotency_key_does_not_make_wrong_passwords_free():
    user = tsapi.new_user()
    for i in range(MAX_FAILURES):
        r = change_password(user, f"wrong-{i}", tsapi.new_password(), headers={"Idempotency-Key": f"k-{i}"})
        assert_wrong_password(r, "currentPassword")
    assert_error(login(user.email, user.password, retry_429=False), 429, "rate_limited")


# --------------------------------------------------------------------------- sessions

def test_sessions_list_every_valid_token_newest_first_without_revealing_it():
    first = tsapi.new_user()
    time.sleep(0.01)
    second = second_token(first)
    items = sessions(second)
    assert len(items) == 2, items
    for item in items:
        assert set(item) == {"id", "createdAt", "lastUsedAt", "current"}, item
        assert isinstance(item["id"], str) and item["id"], item
        assert tsapi.TIMESTAMP_RE.match(item["createdAt"]) and tsapi.TIMESTAMP_RE.match(item["lastUsedAt"]), item
        assert item["lastUsedAt"] >= item["createdAt"], item
        for token in (first.token, second.token):
            assert token not in item["id"] and item["id"] not in token
            assert item["id"] not in hashlib.sha256(token.encode()).hexdigest()
    assert items[0]["createdAt"] >= items[1]["createdAt"], items
    assert [i["current"] for i in items] == [True, False], items
    assert [i["current"] for i in sessions(first)] == [False, True]
    assert [i["id"] for i in sessions(first)] == [i["id"] for i in items]


def test_revoking_a_session_signs_that_token_out_at_once():
    phone = tsapi.new_user()
    lost = second_token(phone)
    assert lost.get("/tags").status_code == 200
    lost_id = next(i["id"] for i in sessions(lost) if i["current"])
    r = phone.delete(f"/account/sessions/{lost_id}")
    assert r.status_code == 204, short(r)
    assert_signed_out(lost)
    assert [i["current"] for i in sessions(phone)] == [True]
    assert_error(phone.delete(f"/account/sessions/{lost_id}"), 404, "not_found")


def test_another_users_session_id_is_404_and_stays_valid():
    owner = tsapi.new_user()
    stranger = tsapi.new_user()
    owner_id = sessions(owner)[0]["id"]
    assert_error(stranger.delete(f"/account/sessions/{owner_id}"), 404, "not_found")
    for bogus in ("nope", "0" * 32, owner.token, "A" * 32):
        assert_error(stranger.delete(f"/account/sessions/{bogus}"), 404, "not_found")
    assert owner.get("/tags").status_code == 200
    assert len(sessions(owner)) == 1


def test_revoking_the_current_session_is_a_logout():
    user = tsapi.new_user()
    other = second_token(user)
    own = next(i["id"] for i in sessions(user) if i["current"])
    assert user.delete(f"/account/sessions/{own}").status_code == 204
    assert_signed_out(user)
    assert other.get("/tags").status_code == 200


def set_last_used(db, session_id: str, seconds_ago: int) -> None:
    db(f"UPDATE auth_tokens SET last_used_at = UTC_TIMESTAMP(3) - INTERVAL {int(seconds_ago)} SECOND "
       f"WHERE public_id = '{session_id}'")


def stored_last_used(db, session_id: str) -> str:
    return db(f"SELECT last_used_at FROM auth_tokens WHERE public_id = '{session_id}'").decode().strip()


@pytest.mark.parametrize("route", ["/todos?date=2030-06-15", "/daily-stats?month=2030-06", "/tags"])
def test_last_used_is_recorded_by_any_route_at_most_once_a_minute(db, route):
    user = tsapi.new_user()
    user.create_todo(deadline="2030-06-15", isCompleted=True)
    device = second_token(user)
    device_id = next(i["id"] for i in sessions(device) if i["current"])
    # Over a minute stale: the next use records itself, on the hot reads too.
    set_last_used(db, device_id, 3600)
    before = time.time()
    assert device.get(route).status_code == 200
    listed = next(i for i in sessions(user) if i["id"] == device_id)
    assert tsapi.parse_ts(listed["lastUsedAt"]).timestamp() >= before - 5, listed
    # Used again within the minute: no write.
    set_last_used(db, device_id, 30)
    stored = stored_last_used(db, device_id)
    for _ in range(3):
        assert device.get(route).status_code == 200
    assert stored_last_used(db, device_id) == stored


# --------------------------------------------------------------------------- export

def test_export_holds_every_live_record_as_a_full_pull_does():
    user = tsapi.new_user()
    stranger = tsapi.new_user()
    stranger.create_todo(title="not mine")
    work = user.create_tag(name="Work")
    gone_tag = user.create_tag(name="Gone")
    user.create_todo(title="한국어 ✓ emoji 🎉", deadline="2030-06-15", tagId=work["id"], isCompleted=True,
                     difficulty=3, estimatedTime=90)
    user.create_todo(title="second", deadline="2030-06-16", isLife=True, isCompleted=True)
    doomed = user.create_todo(title="doomed", deadline="2030-06-17")
    assert user.delete(f"/todos/{doomed['id']}").status_code == 204
    assert user.delete(f"/tags/{gone_tag['id']}").status_code == 204

    r = user.get("/account/export")
    assert r.status_code == 200, short(r)
    assert tsapi.media_type(r) == "application/json"
    export = assert_json(r)
    assert set(export) == {"user", "friends", "friendRequests", "tags", "todos", "dailyStats"}, export.keys()
    assert export["user"]["id"] == user.user["id"]
    assert export["user"]["email"] == user.email
    assert set(export["user"]) == {"id", "email", "createdAt", "nickname"}
    assert export["friends"] == [] and export["friendRequests"] == {"incoming": [], "outgoing": []}
    assert tsapi.TIMESTAMP_RE.match(export["user"]["createdAt"])

    full = synclib.fresh_state(user)
    by_id = lambda records: {rec["id"]: rec for rec in records}  # noqa: E731
    assert by_id(export["tags"]) == full.tags
    assert by_id(export["todos"]) == full.todos
    assert by_id(export["dailyStats"]) == full.stats
    assert len(export["tags"]) == 1 and len(export["todos"]) == 2 and len(export["dailyStats"]) == 2
    assert all(rec["deletedAt"] is None for kind in ("tags", "todos", "dailyStats") for rec in export[kind])
    assert "not mine" not in r.text


EXPORT_PAGE_ROWS = 1000  # SQL.Export.pageRows: the export reads records a page at a time


def test_export_larger_than_a_page_is_streamed_and_equals_a_full_pull():
    """More records of each paged kind than one page holds, with ties on every part of the list
    order (deadline, importance, creation time, title), streamed: no Content-Length, the body
    framed as it goes.  Gzip (as URLSession and requests ask) and identity carry the same JSON."""
    import datetime

    user = tsapi.new_user()
    for k in range(3):
        user.create_tag(name=f"tag {k}")
    start = datetime.date(2031, 1, 1)
    # 1,200 todos a day apart (completed: one daily stat each, past a page of stats) ...
    spread = [synclib.create_todo_op(f"spread {i % 5}", deadline=(start + datetime.timedelta(days=i)).isoformat(),
                                     isCompleted=True, isImportant=i % 2 == 0) for i in range(1200)]
    # ... and 1,500 on one day, the same title, in pushes of 500 (one creation time each): only
    # the id tells them apart in the list order.
    same = [synclib.create_todo_op("same", deadline="2034-06-01") for _ in range(1500)]
    ops = spread + same
    for i in range(0, len(ops), 500):
        results = synclib.push(user, ops[i:i + 500])
        assert all(res["status"] == "applied" for res in results), results[:3]

    gz = user.get("/account/export", timeout=120)
    assert gz.status_code == 200, short(gz)
    assert gz.headers.get("Content-Encoding") == "gzip", gz.headers
    assert "Content-Length" not in gz.headers, gz.headers
    assert gz.headers.get("Transfer-Encoding") == "chunked", gz.headers
    plain = user.get("/account/export", headers={"Accept-Encoding": "identity"}, timeout=120)
    assert plain.status_code == 200, short(plain)
    assert "Content-Encoding" not in plain.headers, plain.headers
    assert "Content-Length" not in plain.headers, plain.headers
    assert plain.content == gz.content, "the same JSON, byte for byte, either way"

    export = assert_json(plain)
    assert list(export) == ["user", "tags", "todos", "dailyStats", "friends", "friendRequests"]
    todo_ids = [rec["id"] for rec in export["todos"]]
    assert len(todo_ids) == len(set(todo_ids)) == 2700 > 2 * EXPORT_PAGE_ROWS
    assert len(export["dailyStats"]) == 1201 > EXPORT_PAGE_ROWS
    assert [s["date"] for s in export["dailyStats"]] == sorted(s["date"] for s in export["dailyStats"])
    full = synclib.fresh_state(user)
    by_id = lambda records: {rec["id"]: rec for rec in records}  # noqa: E731
    assert by_id(export["tags"]) == full.tags and len(export["tags"]) == 3
    assert by_id(export["todos"]) == full.todos
    assert by_id(export["dailyStats"]) == full.stats
    # The list order, as GET /todos gives it for a day (ties: newest push first, then by id).
    day = [rec["id"] for rec in export["todos"] if rec["deadline"] == "2034-06-01"]
    assert day == [rec["id"] for rec in user.list_todos(date="2034-06-01")]


def test_export_needs_a_token():
    assert_error(tsapi.Api().get("/account/export"), 401, "unauthorized")


# --------------------------------------------------------------------------- delete

def user_tables(db) -> list[str]:
    """Every table of the schema with a user_id column."""
    out = db("SELECT table_name FROM information_schema.columns "
             "WHERE table_schema = DATABASE() AND column_name = 'user_id' ORDER BY table_name")
    return out.decode().split()


def rows_of_user(db, user_id: int) -> dict[str, int]:
    counts = {}
    for table in user_tables(db):
        counts[table] = int(db(f"SELECT COUNT(*) FROM `{table}` WHERE user_id = {int(user_id)}").decode().strip())
    counts["users"] = int(db(f"SELECT COUNT(*) FROM users WHERE id = {int(user_id)}").decode().strip())
    return counts


def fill_account(api: tsapi.Api) -> None:
    """Rows in every table a user can reach: records, tombstones, feed, list, push results,
    devices, idempotency answers, operation counters, a second token, a friend request."""
    tag = api.create_tag()
    api.create_todo(tagId=tag["id"], isCompleted=True)
    gone = api.create_todo(title="gone")
    assert api.delete(f"/todos/{gone['id']}").status_code == 204
    r = api.post("/tags", {"name": "keyed", "color": "#112233"}, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert r.status_code == 201, short(r)
    results = synclib.push(api, [synclib.create_todo_op("pushed")], device="phone-1")
    assert results[0]["status"] == "applied", results
    second_token(api)
    # A friend request (Sql/032: the request and the count of the sender's requests).
    assert api.post("/friends/requests", {"email": tsapi.unique_email()}).status_code == 202


def test_delete_makes_the_account_unreachable_at_once_and_frees_its_email():
    user = tsapi.new_user()
    fill_account(user)
    laptop = second_token(user)
    bystander = tsapi.new_user()
    bystander.create_todo(title="keep me")
    assert_wrong_password(user.post("/account/delete", {"password": "wrong-password"}), "password")
    assert user.get("/tags").status_code == 200

    r = user.post("/account/delete", {"password": user.password})
    assert r.status_code == 204, short(r)
    for api in (user, laptop):
        assert_signed_out(api)
        assert_error(api.get("/sync/pull"), 401, "unauthorized")
        assert_error(api.get("/account/export"), 401, "unauthorized")
        assert_error(api.post("/tags", {"name": "x", "color": "#000000"}), 401, "unauthorized")
    assert_error(login(user.email, user.password), 401, "unauthorized")

    again = register(user.email.upper(), tsapi.new_password())
    assert again.status_code == 201, short(again)
    fresh = tsapi.Api(again.json()["token"])
    assert again.json()["user"]["id"] != user.user["id"]
    assert fresh.list_tags() == [] and fresh.list_todos(date="2030-06-15") == []
    assert synclib.fresh_state(fresh).todos == {}
    assert [t["title"] for t in bystander.list_todos(date="2030-06-15")] == ["keep me"]


def test_delete_needs_the_password_field():
    user = tsapi.new_user()
    assert_error(user.post("/account/delete", {}), 422, "validation_failed", fields=["password"])
    assert user.get("/tags").status_code == 200


def test_purge_erases_every_row_of_a_deleted_account_in_every_table(db):
    user = tsapi.new_user()
    fill_account(user)
    bystander = tsapi.new_user()
    fill_account(bystander)
    user_id, bystander_id = user.user["id"], bystander.user["id"]
    before = rows_of_user(db, user_id)
    # The fixture reaches most tables; the check below covers every table whatever it reached.
    assert sum(1 for n in before.values() if n) >= 8, before
    assert user.post("/account/delete", {"password": user.password}).status_code == 204

    synclib.purge_all_tombstones()
    after = rows_of_user(db, user_id)
    assert after == {table: 0 for table in after}, f"rows of the erased account remain: {after}"
    kept = rows_of_user(db, bystander_id)
    assert kept["users"] == 1 and kept["todos"] >= 1 and kept["auth_tokens"] == 2, kept
    assert bystander.get("/tags").status_code == 200


def test_maintenance_commands_skip_a_deleted_account_until_it_is_erased(stack_cmd, db):
    """recompute-stats, rebuild-feed and store-days run over every account; one deleted but not yet
    erased (its writes refused) must not make them fail for everyone. Its day list is marked not
    stored, so that store-days meets it (and leaves it to the erase)."""
    user = tsapi.new_user()
    user.create_todo(isCompleted=True)
    user_id = int(user.user["id"])
    db(f"UPDATE todo_days SET body = NULL, unstored = 1 WHERE user_id = {user_id}")
    assert user.post("/account/delete", {"password": user.password}).status_code == 204
    stack_cmd("recompute-stats", timeout=300)
    stack_cmd("rebuild-feed", timeout=300)
    out = stack_cmd("store-days", timeout=300)
    assert not re.search(r" 0 skipped", out), out
    assert int(db(f"SELECT COUNT(*) FROM todo_days WHERE user_id = {user_id} AND unstored = 1")) == 1
