"""Tags: create / read / list / patch / delete, If-Match, clientId idempotency, validation.

Assumptions where API.md is silent (a careful REST API's behaviour):
- A response record has exactly the fields the contract lists (no extras such as userId).
- Duplicate tag names are allowed (quick-add's "first by id" implies several tags may share a
  name).
- A `clientId` that is not a UUID string is a 422 naming `clientId`.
- PATCH ignores `clientId` (it is "kept as first given") like any other non-patchable field.
- An empty PATCH body `{}` is a valid no-op (200, nothing bumped).
- 412's `current` is a top-level key beside `error` ("body also has").
- A PATCH or DELETE of another user's record is 404 even with an `If-Match` (never 412, which
  would reveal that the record exists).
- A second DELETE of the same record is 404 (no live record).
- `updatedAt` moves forward (or stays) on a change; it never changes on a no-op.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import uuid

import pytest

import tsapi
from tsapi import assert_error, assert_etag, assert_json, assert_tag, short, without


def _current(resp) -> dict:
    body = assert_json(resp)
    assert "current" in body, f"412 body needs a top-level 'current': {short(resp)}"
    return body["current"]


# --------------------------------------------------------------------------- create

def test_create_tag_201_with_all_fields(client):
    r = client.post("/tags", {"name": "Work", "color": "#ff8800"})
    assert r.status_code == 201, short(r)
    tag = assert_tag(assert_json(r))
    assert_etag(r, tag)
    assert tag["name"] == "Work"
    assert tag["color"] == "#FF8800"
    assert tag["clientId"] is None
    assert tag["deletedAt"] is None


@pytest.mark.parametrize("given,stored", [("#abcdef", "#ABCDEF"), ("#AbCdEf", "#ABCDEF"),
                                          ("#000000", "#000000"), ("#FFFFFF", "#FFFFFF"), ("#1a2B3c", "#1A2B3C")])
def test_color_accepted_in_either_case_and_returned_upper(client, given, stored):
    tag = client.create_tag(color=given)
    assert tag["color"] == stored
    assert client.get_tag(tag["id"])["color"] == stored
    assert [t["color"] for t in client.list_tags()] == [stored]


def test_create_tag_keeps_client_id_as_given(client):
    cid = str(uuid.uuid4()).upper()
    tag = client.create_tag(clientId=cid)
    assert tag["clientId"] == cid
    assert client.get_tag(tag["id"])["clientId"] == cid


@pytest.mark.parametrize("name", ["x", "y" * 50, "😀" * 50, "업무" * 25, " padded name ", "a b"],
                         ids=["1", "50", "50-emoji", "50-korean", "padded", "space"])
def test_tag_name_boundaries_accepted(client, name):
    tag = client.create_tag(name=name)
    assert tag["name"] == name or tag["name"] == name.strip()


def test_duplicate_tag_names_allowed(client):
    a = client.create_tag(name="Same")
    b = client.create_tag(name="Same")
    assert a["id"] != b["id"]
    assert [t["id"] for t in client.list_tags()] == sorted([a["id"], b["id"]])


def test_read_only_and_unknown_fields_ignored_on_create(client):
    r = client.post("/tags", {"name": "RO", "color": "#123456", "id": 987654321, "version": 999999,
                              "createdAt": "2001-01-01T00:00:00.000Z", "updatedAt": "2001-01-01T00:00:00.000Z",
                              "deletedAt": "2001-01-01T00:00:00.000Z", "userId": 1, "owner": "x", "foo": [1]})
    assert r.status_code == 201, short(r)
    tag = assert_tag(assert_json(r))
    assert tag["id"] != 987654321
    assert tag["version"] != 999999
    assert not tag["createdAt"].startswith("2001")
    assert tag["deletedAt"] is None
    assert [t["id"] for t in client.list_tags()] == [tag["id"]]


# --------------------------------------------------------------------------- validation

NAME_BAD = ["", " ", "   \t\n ", "z" * 51, "😀" * 51, None, 5, ["Work"], {"a": 1}, True]
COLOR_BAD = ["#12345", "red", "#1234567", "#GGGGGG", "FF8800", "#FFF", "", None, 123, " #FF8800",
             "#FF8800 ", "##FF880", "#ff88zz", "0xFF8800"]


@pytest.mark.parametrize("name", NAME_BAD, ids=lambda v: repr(v)[:16])
def test_create_tag_invalid_name_422(shared_client, name):
    r = shared_client.post("/tags", {"name": name, "color": "#FF8800"})
    assert_error(r, 422, "validation_failed", fields=["name"])


@pytest.mark.parametrize("color", COLOR_BAD, ids=lambda v: repr(v)[:16])
def test_create_tag_invalid_color_422(shared_client, color):
    r = shared_client.post("/tags", {"name": "Work", "color": color})
    assert_error(r, 422, "validation_failed", fields=["color"])


def test_create_tag_missing_fields_422(shared_client):
    assert_error(shared_client.post("/tags", {"color": "#FF8800"}), 422, "validation_failed", fields=["name"])
    assert_error(shared_client.post("/tags", {"name": "Work"}), 422, "validation_failed", fields=["color"])
    assert_error(shared_client.post("/tags", {}), 422, "validation_failed", fields=["name", "color"])


def test_create_tag_every_bad_field_named(shared_client):
    r = shared_client.post("/tags", {"name": "", "color": "blue"})
    assert_error(r, 422, "validation_failed", fields=["name", "color"])


@pytest.mark.parametrize("cid", ["not-a-uuid", "", 123, "1234567890abcdef1234567890abcdef0", ["x"]],
                         ids=lambda v: repr(v)[:16])
def test_create_tag_invalid_client_id_422(shared_client, cid):
    r = shared_client.post("/tags", {"name": "Work", "color": "#FF8800", "clientId": cid})
    assert_error(r, 422, "validation_failed", fields=["clientId"])


def test_invalid_create_creates_nothing(client):
    assert_error(client.post("/tags", {"name": "z" * 51, "color": "#FF8800"}), 422, "validation_failed")
    assert client.list_tags() == []


# --------------------------------------------------------------------------- read & list

def test_get_tag_200_with_etag(client):
    tag = client.create_tag(name="Read", color="#010203")
    r = client.get(f"/tags/{tag['id']}")
    assert r.status_code == 200, short(r)
    got = assert_tag(assert_json(r))
    assert_etag(r, got)
    assert got == tag


def test_list_tags_empty_for_new_user(client):
    r = client.get("/tags")
    assert r.status_code == 200, short(r)
    assert assert_json(r) == {"items": []}


def test_list_tags_live_only_ordered_by_id(client):
    made = [client.create_tag(name=n) for n in ("zeta", "alpha", "Mid", "beta")]
    assert client.delete(f"/tags/{made[2]['id']}").status_code == 204
    # a rename must not reorder: order is by id
    r = client.patch(f"/tags/{made[0]['id']}", {"name": "aaa"})
    assert r.status_code == 200, short(r)
    items = client.list_tags()
    assert [t["id"] for t in items] == sorted([made[0]["id"], made[1]["id"], made[3]["id"]])
    assert [t["id"] for t in items] == [made[0]["id"], made[1]["id"], made[3]["id"]]
    assert items[0]["name"] == "aaa"


def test_other_users_tags_are_invisible(client, other_client):
    mine = client.create_tag(name="Mine")
    theirs = other_client.create_tag(name="Theirs")
    assert [t["id"] for t in client.list_tags()] == [mine["id"]]
    assert [t["id"] for t in other_client.list_tags()] == [theirs["id"]]
    assert_error(client.get(f"/tags/{theirs['id']}"), 404, "not_found")
    assert_error(client.patch(f"/tags/{theirs['id']}", {"name": "hijack"}), 404, "not_found")
    assert_error(client.patch(f"/tags/{theirs['id']}", {"name": "hijack"},
                              headers={"If-Match": '"1"'}), 404, "not_found")
    assert_error(client.delete(f"/tags/{theirs['id']}"), 404, "not_found")
    assert_error(client.delete(f"/tags/{theirs['id']}", headers={"If-Match": '"1"'}), 404, "not_found")
    assert other_client.get_tag(theirs["id"]) == theirs  # untouched


# --------------------------------------------------------------------------- patch

def test_patch_name_only(client):
    tag = client.create_tag(name="Old", color="#AA0000")
    r = client.patch(f"/tags/{tag['id']}", {"name": "New"})
    assert r.status_code == 200, short(r)
    new = assert_tag(assert_json(r))
    assert_etag(r, new)
    assert new["name"] == "New" and new["color"] == "#AA0000"
    assert new["version"] > tag["version"]
    assert new["createdAt"] == tag["createdAt"]
    assert tsapi.parse_ts(new["updatedAt"]) >= tsapi.parse_ts(tag["updatedAt"])
    assert new["id"] == tag["id"] and new["clientId"] == tag["clientId"]
    assert client.get_tag(tag["id"]) == new


def test_patch_color_only_upper_cased(client):
    tag = client.create_tag(name="Keep", color="#AA0000")
    r = client.patch(f"/tags/{tag['id']}", {"color": "#00bb00"})
    assert r.status_code == 200, short(r)
    new = assert_tag(assert_json(r))
    assert new["color"] == "#00BB00" and new["name"] == "Keep"
    assert new["version"] > tag["version"]


def test_each_change_bumps_version(client):
    tag = client.create_tag(name="v")
    versions = [tag["version"]]
    for i in range(3):
        r = client.patch(f"/tags/{tag['id']}", {"name": f"v{i}"})
        assert r.status_code == 200, short(r)
        versions.append(assert_json(r)["version"])
    assert versions == sorted(set(versions)), versions


@pytest.mark.parametrize("body", [{}, {"name": "Same"}, {"color": "#abcdef"}, {"name": "Same", "color": "#ABCDEF"},
                                  {"id": 1, "version": 1, "createdAt": "2001-01-01T00:00:00.000Z"}],
                         ids=["empty", "same-name", "same-color-lowercase", "same-both", "read-only-only"])
def test_noop_patch_does_not_bump(client, body):
    tag = client.create_tag(name="Same", color="#ABCDEF")
    time.sleep(0.01)
    r = client.patch(f"/tags/{tag['id']}", body)
    assert r.status_code == 200, short(r)
    after = assert_tag(assert_json(r))
    assert_etag(r, after)
    assert after == tag, "a write that changes nothing must not bump version or updatedAt"
    assert client.get_tag(tag["id"]) == tag


def test_patch_ignores_client_id(client):
    cid = str(uuid.uuid4())
    tag = client.create_tag(clientId=cid)
    r = client.patch(f"/tags/{tag['id']}", {"clientId": str(uuid.uuid4())})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["clientId"] == cid
    assert client.get_tag(tag["id"])["clientId"] == cid


@pytest.mark.parametrize("body,field", [({"name": ""}, "name"), ({"name": "   "}, "name"), ({"name": "q" * 51}, "name"),
                                        ({"name": None}, "name"), ({"color": "red"}, "color"),
                                        ({"color": None}, "color"), ({"color": "#12345"}, "color")],
                         ids=lambda v: repr(v)[:20])
def test_patch_invalid_422_changes_nothing(client, body, field):
    tag = client.create_tag(name="Stay", color="#112233")
    r = client.patch(f"/tags/{tag['id']}", body)
    assert_error(r, 422, "validation_failed", fields=[field])
    assert client.get_tag(tag["id"]) == tag


def test_patch_partial_invalid_changes_nothing(client):
    tag = client.create_tag(name="Stay", color="#112233")
    r = client.patch(f"/tags/{tag['id']}", {"name": "Valid new", "color": "bad"})
    assert_error(r, 422, "validation_failed", fields=["color"])
    assert client.get_tag(tag["id"]) == tag


# --------------------------------------------------------------------------- If-Match

@pytest.mark.parametrize("style", ["quoted", "bare"])
def test_patch_if_match_current_version_succeeds(client, style):
    tag = client.create_tag(name="IfMatch")
    v = tag["version"]
    header = f'"{v}"' if style == "quoted" else str(v)
    r = client.patch(f"/tags/{tag['id']}", {"name": "Changed"}, headers={"If-Match": header})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["name"] == "Changed"


@pytest.mark.parametrize("style", ["quoted", "bare"])
def test_patch_if_match_mismatch_412_with_current(client, style):
    tag = client.create_tag(name="Orig")
    r1 = client.patch(f"/tags/{tag['id']}", {"name": "Second"})
    assert r1.status_code == 200
    current = assert_json(r1)
    stale = tag["version"]
    header = f'"{stale}"' if style == "quoted" else str(stale)
    r = client.patch(f"/tags/{tag['id']}", {"name": "Lost update"}, headers={"If-Match": header})
    assert_error(r, 412, "version_mismatch")
    cur = assert_tag(_current(r))
    assert cur == current
    assert client.get_tag(tag["id"]) == current


def test_patch_if_match_future_version_412(client):
    tag = client.create_tag(name="Future")
    r = client.patch(f"/tags/{tag['id']}", {"name": "x"}, headers={"If-Match": f'"{tag["version"] + 1000}"'})
    assert_error(r, 412, "version_mismatch")
    assert assert_tag(_current(r)) == tag
    assert client.get_tag(tag["id"]) == tag


def test_delete_if_match_mismatch_412_then_match_204(client):
    tag = client.create_tag(name="DelIfMatch")
    r = client.delete(f"/tags/{tag['id']}", headers={"If-Match": f'"{tag["version"] + 1}"'})
    assert_error(r, 412, "version_mismatch")
    assert assert_tag(_current(r)) == tag
    assert client.get_tag(tag["id"]) == tag
    r = client.delete(f"/tags/{tag['id']}", headers={"If-Match": f'"{tag["version"]}"'})
    assert r.status_code == 204, short(r)
    assert_error(client.get(f"/tags/{tag['id']}"), 404, "not_found")


def test_delete_if_match_bare_version(client):
    tag = client.create_tag(name="DelBare")
    r = client.delete(f"/tags/{tag['id']}", headers={"If-Match": str(tag["version"])})
    assert r.status_code == 204, short(r)


# --------------------------------------------------------------------------- delete

def test_delete_tag_204_then_404_and_absent(client):
    keep = client.create_tag(name="Keep")
    tag = client.create_tag(name="Gone")
    r = client.delete(f"/tags/{tag['id']}")
    assert r.status_code == 204, short(r)
    assert r.content == b""
    assert_error(client.get(f"/tags/{tag['id']}"), 404, "not_found")
    assert [t["id"] for t in client.list_tags()] == [keep["id"]]
    assert_error(client.patch(f"/tags/{tag['id']}", {"name": "zombie"}), 404, "not_found")
    assert_error(client.delete(f"/tags/{tag['id']}"), 404, "not_found")


def test_delete_tag_nulls_tag_id_on_its_todos_and_bumps_them(client):
    tag = client.create_tag(name="Doomed")
    other = client.create_tag(name="Other")
    t1 = client.create_todo(title="tagged one", tagId=tag["id"])
    t2 = client.create_todo(title="tagged two", tagId=tag["id"], deadline="2030-07-01")
    t3 = client.create_todo(title="other tag", tagId=other["id"])
    t4 = client.create_todo(title="no tag")
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    for before in (t1, t2):
        after = client.get_todo(before["id"])
        assert after["tagId"] is None
        assert after["version"] > before["version"]
        assert without(after, "tagId", "version", "updatedAt") == without(before, "tagId", "version", "updatedAt")
    assert client.get_todo(t3["id"]) == t3
    assert client.get_todo(t4["id"]) == t4
    listed = {t["id"]: t for t in client.list_todos(date="2030-06-15")}
    assert listed[t1["id"]]["tagId"] is None
    # the deleted tag can no longer be used
    assert_error(client.post("/todos", {"title": "x", "deadline": "2030-06-15", "tagId": tag["id"]}),
                 422, "validation_failed", fields=["tagId"])
    assert_error(client.patch(f"/todos/{t4['id']}", {"tagId": tag["id"]}), 422, "validation_failed",
                 fields=["tagId"])


def test_versions_increase_across_a_users_records(client):
    a = client.create_tag(name="a")
    b = client.create_todo()
    r = client.patch(f"/tags/{a['id']}", {"name": "a2"})
    c = assert_json(r)
    d = client.create_tag(name="d")
    assert a["version"] < b["version"] < c["version"] < d["version"]


# --------------------------------------------------------------------------- clientId idempotency

def test_same_client_id_returns_existing_200_no_duplicate(client):
    cid = str(uuid.uuid4())
    first = client.create_tag(name="First", color="#111111", clientId=cid)
    r = client.post("/tags", {"name": "Second", "color": "#222222", "clientId": cid})
    assert r.status_code == 200, short(r)
    again = assert_tag(assert_json(r))
    assert_etag(r, again)
    assert again == first
    assert [t["id"] for t in client.list_tags()] == [first["id"]]


def test_client_id_compared_case_insensitively_and_kept_as_first_given(client):
    cid = str(uuid.uuid4()).lower()
    first = client.create_tag(name="Case", clientId=cid)
    r = client.post("/tags", {"name": "Case2", "color": "#222222", "clientId": cid.upper()})
    assert r.status_code == 200, short(r)
    again = assert_json(r)
    assert again["id"] == first["id"]
    assert again["clientId"] == cid
    assert len(client.list_tags()) == 1


def test_retried_create_returns_tag_as_it_is_now(client):
    cid = str(uuid.uuid4())
    first = client.create_tag(name="Before", clientId=cid)
    patched = assert_json(client.patch(f"/tags/{first['id']}", {"name": "After"}))
    r = client.post("/tags", {"name": "Before", "color": "#3366CC", "clientId": cid})
    assert r.status_code == 200, short(r)
    assert assert_json(r) == patched


def test_retried_create_after_delete_returns_tombstone(client):
    cid = str(uuid.uuid4())
    first = client.create_tag(name="Tomb", clientId=cid)
    assert client.delete(f"/tags/{first['id']}").status_code == 204
    r = client.post("/tags", {"name": "Tomb", "color": "#3366CC", "clientId": cid})
    assert r.status_code == 200, short(r)
    tomb = assert_tag(assert_json(r), live=False)
    assert_etag(r, tomb)
    assert tomb["id"] == first["id"]
    assert tomb["deletedAt"] is not None
    assert tomb["version"] > first["version"]
    assert tomb["name"] == "Tomb"
    assert client.list_tags() == []
    assert_error(client.get(f"/tags/{first['id']}"), 404, "not_found")


def test_client_id_unique_per_user(client, other_client):
    cid = str(uuid.uuid4())
    mine = client.create_tag(name="Mine", clientId=cid)
    theirs = other_client.create_tag(name="Theirs", clientId=cid)  # 201: other user
    assert mine["id"] != theirs["id"]
    assert theirs["name"] == "Theirs"


def test_client_id_unique_per_entity_kind(client):
    cid = str(uuid.uuid4())
    tag = client.create_tag(clientId=cid)
    todo = client.create_todo(clientId=cid)  # 201: different kind
    assert tag["clientId"] == todo["clientId"] == cid


def test_concurrent_creates_with_same_client_id_make_one_tag(client):
    cid = str(uuid.uuid4())

    def go(i):
        api = tsapi.Api(client.token)  # one session per thread
        try:
            return api.post("/tags", {"name": f"race{i}", "color": "#3366CC", "clientId": cid})
        finally:
            api.session.close()

    with cf.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(go, range(8)))
    statuses = sorted(r.status_code for r in results)
    assert all(s in (200, 201) for s in statuses), [short(r) for r in results]
    assert statuses.count(201) == 1, statuses
    ids = {r.json()["id"] for r in results}
    assert len(ids) == 1
    assert [t["id"] for t in client.list_tags()] == list(ids)
