"""Snapshot bootstrap, the server half (issue 23; contract "Sync: snapshot"; docs/SNAPSHOT.md).

GET /api/v1/sync/snapshot answers one SQLite file of the user's live records and a cursor taken
in the same consistent read, built once per (user, newest version, schema version, epoch), kept
in the responders' cache directory and sent by nginx from disk (X-Accel-Redirect).

- A snapshot plus the pull from its cursor equals a full paged pull, record for record, for
  random histories of creates, edits, deletes and tag deletes, and when writes commit while the
  snapshot is being built (the test hook `__test_hold_ms` holds the build open inside its read).
- ETag / If-None-Match 304, Range 206, Content-Length and Repr-Digest (SHA-256 of the bytes).
- Twenty requests at once build the file once (`todosync_snapshot_builds_total`).
- The file is compact: written in one pass when the records come in id order, compacted by
  `VACUUM INTO` when edits brought them out of order (`todosync_snapshot_builds_compacted_total`).
- A new write or a new database epoch is a new file; a deleted account's files are gone.
- An account whose build does not fit the request budget: 503 with Retry-After, not retried
  within the cache's age limit; its pull still works.
- With `Accept-Encoding: gzip` (q-values honoured) the file's gzip companion: its own ETag and
  Repr-Digest, Content-Length, 206/416 and 304 of the encoded bytes, `Vary` on both variants;
  it decodes to the identity file byte for byte, is made once, and goes with its file (a new
  write, a new epoch, the age sweep, an account delete).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import random
import sqlite3
import tempfile
import threading
import time

import pytest
import requests

import synclib
import tsapi
from synclib import KINDS, ClientStore
from test_metrics import scrape, total

SNAPSHOT = "/sync/snapshot"
TABLES = {"tags": "tags", "todos": "todos", "dailyStats": "daily_stats"}


def get_snapshot(api: tsapi.Api, schema: int | None = tsapi.CURRENT_SCHEMA, headers: dict | None = None,
                 **params) -> requests.Response:
    """The snapshot, identity-encoded unless `headers` say otherwise (requests offers gzip by default)."""
    if schema is not None:
        params["schemaVersion"] = str(schema)
    return api.get(SNAPSHOT, params=params, headers={"Accept-Encoding": "identity", **(headers or {})}, timeout=60)


def fetch(api: tsapi.Api, schema: int | None = tsapi.CURRENT_SCHEMA, **params) -> requests.Response:
    r = get_snapshot(api, schema, **params)
    assert r.status_code == 200, tsapi.short(r)
    return r


def repr_digest(content: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(content).digest()).decode() + ":"


def read_file(content: bytes):
    """(meta, {kind: {id: record}}, user_version) of a snapshot file's bytes."""
    with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as f:
        f.write(content)
        path = f.name
    try:
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        meta = {row["key"]: row["value"] for row in db.execute("SELECT key, value FROM snapshot_meta")}
        user_version = db.execute("PRAGMA user_version").fetchone()[0]
        journal = db.execute("PRAGMA journal_mode").fetchone()[0]
        assert journal == "delete", f"journal mode {journal}, want rollback journal (delete)"
        records = {}
        for kind, table in TABLES.items():
            records[kind] = {row["id"]: dict(row) for row in db.execute(f"SELECT * FROM {table}")}
        db.close()
        return meta, records, user_version
    finally:
        os.unlink(path)


def as_record(row: dict, like: dict) -> dict:
    """A snapshot row as the JSON record `like` is shaped (booleans, nested JSON, deletedAt)."""
    out = {}
    for key, value in row.items():
        if key == "json":
            continue
        want = like.get(key)
        if isinstance(want, bool):
            value = bool(value)
        elif isinstance(want, (dict, list)) and isinstance(value, str):
            value = json.loads(value)
        out[key] = value
    out["deletedAt"] = None
    return out


def snapshot_store(api: tsapi.Api, reference: ClientStore, schema: int = tsapi.CURRENT_SCHEMA,
                   **params) -> tuple[ClientStore, dict]:
    """A device's store installed from the snapshot, then brought up to date by pull; checks the
    file's shape against the records the reference (a full pull) holds."""
    r = fetch(api, schema, **params)
    meta, records, user_version = read_file(r.content)
    assert meta["format"] == "todosync-snapshot"
    assert meta["userId"] == str(api.user["id"])
    assert meta["schemaVersion"] == str(schema) and user_version == schema
    assert int(meta["recordCount"]) == sum(len(v) for v in records.values())
    tsapi.parse_ts(meta["createdAt"])
    store = ClientStore()
    for kind in KINDS:
        for rid, row in records[kind].items():
            like = reference.data[kind].get(rid) or next(iter(reference.data[kind].values()), {})
            rec = as_record(row, like)
            if kind == "dailyStats":
                assert json.loads(row["json"]) == {**rec}, "daily_stats.json is the record as pull renders it"
            store.data[kind][rid] = rec
    store.cursor = meta["cursor"]
    follow(api, store, schema)
    return store, meta


def follow(api: tsapi.Api, store: ClientStore, schema: int = tsapi.CURRENT_SCHEMA) -> None:
    """Pulls from the store's cursor until hasMore is false, at `schema`."""
    while True:
        body = synclib.pull(api, store.cursor, 1000, schema=schema)
        store.apply_page(body)
        if not body["hasMore"]:
            return


def full_pull(api: tsapi.Api, schema: int = tsapi.CURRENT_SCHEMA) -> ClientStore:
    store = ClientStore()
    cursor = None
    while True:
        body = synclib.pull(api, cursor, 1000, schema=schema)
        store.apply_page(body)
        cursor = body["cursor"]
        if not body["hasMore"]:
            return store


def assert_same(got: ClientStore, want: ClientStore) -> None:
    for kind in KINDS:
        assert set(got.data[kind]) == set(want.data[kind]), f"{kind}: ids differ"
        for rid, rec in want.data[kind].items():
            assert got.data[kind][rid] == rec, f"{kind} {rid}: snapshot+pull {got.data[kind][rid]} != pull {rec}"


def random_history(api: tsapi.Api, rng: random.Random, steps: int) -> None:
    tags, todos = [], []
    days = ["2031-03-01", "2031-03-02", "2031-03-03", "2031-03-04"]
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.15 or not tags:
            tags.append(api.create_tag(name=f"tag {rng.randrange(1000)} 🏷")["id"])
        elif roll < 0.55 or not todos:
            extra = {"tagId": rng.choice(tags + [None]), "isCompleted": rng.random() < 0.5,
                     "isLife": rng.random() < 0.5, "estimatedTime": rng.randrange(0, 240),
                     "difficulty": rng.randrange(0, 6), "notes": rng.choice([None, "n\nline 두"])}
            todos.append(api.create_todo(title=f"todo {rng.randrange(10**6)} é", deadline=rng.choice(days),
                                         **extra)["id"])
        elif roll < 0.8:
            tid = rng.choice(todos)
            r = api.patch(f"/todos/{tid}", {"isCompleted": rng.random() < 0.5, "deadline": rng.choice(days),
                                            "title": f"edited {rng.randrange(1000)}"})
            assert r.status_code == 200, tsapi.short(r)
        elif roll < 0.93:
            tid = todos.pop(rng.randrange(len(todos)))
            assert api.delete(f"/todos/{tid}").status_code == 204
        else:
            tag = tags.pop(rng.randrange(len(tags)))
            assert api.delete(f"/tags/{tag}").status_code == 204


def snapshot_dir() -> str:
    env = tsapi.stack_env()
    return env.get("TODOSYNC_SNAPSHOT_DIR") or os.path.join(env["TODOSYNC_STATE_DIR"], "snapshots")


def builds() -> float:
    return total(scrape(), "todosync_snapshot_builds_total")


@pytest.mark.parametrize("seed,schema", [(1, 2), (2, 2), (3, 1)])
def test_snapshot_plus_pull_equals_a_full_pull(make_client, seed, schema):
    api = make_client()
    random_history(api, random.Random(seed), 70)
    reference = full_pull(api, schema)
    got, _ = snapshot_store(api, reference, schema)
    assert_same(got, reference)
    # Changes after the snapshot arrive by the pull from its cursor.
    random_history(api, random.Random(seed + 100), 25)
    reference = full_pull(api, schema)
    follow(api, got, schema)
    assert_same(got, reference)
    if schema == 1:
        r = fetch(api, 1)
        _, records, _ = read_file(r.content)
        assert all("notes" not in row for row in records["todos"].values()), "schema 1 has no notes column"


def test_writes_committed_while_the_snapshot_is_built_follow_its_cursor(client):
    rng = random.Random(7)
    random_history(client, rng, 40)
    result = {}

    def take():
        result["r"] = get_snapshot(client, __test_hold_ms="2500")

    thread = threading.Thread(target=take)
    thread.start()
    time.sleep(0.8)  # the build's read has begun and is held open
    written = client.create_todo(title="written during the build")
    random_history(client, random.Random(8), 15)
    thread.join(60)
    r = result["r"]
    assert r.status_code == 200, tsapi.short(r)
    meta, records, _ = read_file(r.content)
    assert written["id"] not in records["todos"], "a write committed during the build is after its cursor"
    reference = full_pull(client)
    store = ClientStore()
    for kind in KINDS:
        for rid, row in records[kind].items():
            like = reference.data[kind].get(rid) or next(iter(reference.data[kind].values()), {})
            store.data[kind][rid] = as_record(row, like)
    store.cursor = meta["cursor"]
    follow(client, store)
    assert written["id"] in store.data["todos"]
    assert_same(store, reference)


def test_headers_etag_304_range_and_digest(client):
    client.create_tag(name="Work")
    for i in range(30):
        client.create_todo(title=f"todo {i}")
    r = fetch(client)
    assert tsapi.media_type(r) == "application/vnd.sqlite3"
    assert "Content-Encoding" not in r.headers
    assert int(r.headers["Content-Length"]) == len(r.content)
    assert r.content.startswith(b"SQLite format 3\x00")
    assert r.headers["Repr-Digest"] == repr_digest(r.content)
    etag = r.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    before = builds()
    # A repeat is the same file, from the cache.
    again = fetch(client)
    assert again.content == r.content and again.headers["ETag"] == etag
    assert builds() == before, "a repeat was built again"
    # If-None-Match: 304, no body.
    r304 = get_snapshot(client, headers={"If-None-Match": etag})
    assert r304.status_code == 304, tsapi.short(r304)
    assert r304.headers["ETag"] == etag and r304.content == b""
    assert get_snapshot(client, headers={"If-None-Match": '"other", W/' + etag}).status_code == 304
    assert get_snapshot(client, headers={"If-None-Match": '"other"'}).status_code == 200
    # Range: a resumed download.
    size = len(r.content)
    part = get_snapshot(client, headers={"Range": f"bytes=100-{size - 1}"})
    assert part.status_code == 206, tsapi.short(part)
    assert part.content == r.content[100:]
    assert part.headers["Content-Range"] == f"bytes 100-{size - 1}/{size}"
    assert part.headers["ETag"] == etag and part.headers["Repr-Digest"] == repr_digest(r.content)
    assert get_snapshot(client, headers={"Range": f"bytes={size + 10}-"}).status_code == 416
    # HEAD: the headers only.
    head = client.request("HEAD", SNAPSHOT, params={"schemaVersion": "2"}, headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and int(head.headers["Content-Length"]) == size
    # The internal location is not reachable from outside.
    assert requests.get(f"{tsapi.BASE_URL}/__snapshot/{client.user['id']}/x.sqlite",
                        timeout=tsapi.TIMEOUT).status_code == 404


def test_twenty_concurrent_requests_build_it_once(client):
    for i in range(50):
        client.create_todo(title=f"todo {i}")
    before = builds()
    results = []

    def take(hold: bool):
        deadline = time.monotonic() + 60
        while True:
            params = {"__test_hold_ms": "1500"} if hold else {}
            r = get_snapshot(client, **params)
            if r.status_code in (429, 503) and time.monotonic() < deadline:
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            results.append(r)
            return

    threads = [threading.Thread(target=take, args=(i == 0,)) for i in range(20)]
    for t in threads:
        t.start()
        if t is threads[0]:
            time.sleep(0.3)  # the first holds the build open while the nineteen others arrive
    for t in threads:
        t.join(90)
    assert len(results) == 20
    assert all(r.status_code == 200 for r in results), [tsapi.short(r) for r in results if r.status_code != 200]
    assert len({r.headers["Repr-Digest"] for r in results}) == 1
    assert all(r.headers["Repr-Digest"] == repr_digest(r.content) for r in results)
    assert builds() - before == 1, "twenty requests of one account built the snapshot more than once"
    text = requests.get(f"{tsapi.BASE_URL}/metrics", timeout=tsapi.TIMEOUT).text
    for name in ("todosync_snapshot_builds_total", "todosync_snapshot_build_records_total",
                 "todosync_snapshot_build_seconds_total"):
        assert f"# HELP {name} " in text, f"{name} has no HELP line"


def test_a_new_write_or_a_new_epoch_is_a_new_file(client, stack_cmd):
    todo = client.create_todo(title="first")
    first = fetch(client)
    client.patch(f"/todos/{todo['id']}", {"title": "second"})
    before = builds()
    second = fetch(client)
    assert second.headers["ETag"] != first.headers["ETag"]
    assert builds() - before == 1
    _, records, _ = read_file(second.content)
    assert records["todos"][todo["id"]]["title"] == "second"
    # A restore's new epoch: the old file is never served again (its cursor is of the old history).
    old_meta, _, _ = read_file(second.content)
    stack_cmd("new-epoch")
    third = fetch(client)
    meta, _, _ = read_file(third.content)
    assert third.headers["ETag"] != second.headers["ETag"]
    assert meta["cursor"] != old_meta["cursor"]
    r = client.get("/sync/pull", params={"cursor": meta["cursor"]})
    assert r.status_code == 200, tsapi.short(r)


def compactness(content: bytes) -> dict:
    """A file's pages: how many, how many free, whether they are all the file holds, and SQLite's
    own check of it."""
    with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as f:
        f.write(content)
        path = f.name
    try:
        db = sqlite3.connect(path)
        pages, page_size = db.execute("PRAGMA page_count").fetchone()[0], db.execute("PRAGMA page_size").fetchone()[0]
        out = {"free_pages": db.execute("PRAGMA freelist_count").fetchone()[0],
               "all_pages": pages * page_size == len(content),
               "integrity": db.execute("PRAGMA integrity_check").fetchone()[0]}
        db.close()
        return out
    finally:
        os.unlink(path)


def test_a_file_is_compact_in_one_pass_or_compacted_after_edits(client):
    """Records read in id order are written compact in one pass (no VACUUM INTO copy); once an
    edit brings an older record after newer ones, the build compacts the file as before. Either
    way the file has no free page and SQLite finds it sound."""
    compacted = lambda: total(scrape(), "todosync_snapshot_builds_compacted_total")
    todos = [client.create_todo(title=f"in order {i}") for i in range(3)]
    before = compacted()
    first = fetch(client)
    assert compacted() - before == 0, "a build of records in id order made a second copy"
    assert compactness(first.content) == {"free_pages": 0, "all_pages": True, "integrity": "ok"}
    client.patch(f"/todos/{todos[0]['id']}", {"title": "edited, so now after the others"})
    second = fetch(client)
    assert compacted() - before == 1
    assert compactness(second.content) == {"free_pages": 0, "all_pages": True, "integrity": "ok"}
    _, records, _ = read_file(second.content)
    assert [records["todos"][t["id"]]["title"] for t in todos] == [
        "edited, so now after the others", "in order 1", "in order 2"]
    assert "# HELP todosync_snapshot_builds_compacted_total " in requests.get(
        f"{tsapi.BASE_URL}/metrics", timeout=tsapi.TIMEOUT).text


def test_a_deleted_accounts_files_are_gone(make_client):
    api = make_client()
    password = api.password
    api.create_todo(title="mine")
    fetch(api)
    user_dir = os.path.join(snapshot_dir(), str(api.user["id"]))
    assert any(name.endswith(".sqlite") for name in os.listdir(user_dir)), os.listdir(user_dir)
    r = api.post("/account/delete", {"password": password})
    assert r.status_code == 204, tsapi.short(r)
    assert not os.path.exists(user_dir), os.listdir(user_dir)
    assert get_snapshot(api).status_code == 401
    # A build that finished after the delete left a file: `todosync purge` erases it with the
    # account's rows.
    os.makedirs(user_dir)
    with open(os.path.join(user_dir, "1-1-2-" + "0" * 64 + ".sqlite"), "wb") as f:
        f.write(b"late")
    synclib.purge_all_tombstones()
    assert not os.path.exists(user_dir), os.listdir(user_dir)


def test_auth_and_parameters(client):
    r = requests.get(f"{tsapi.API_URL}{SNAPSHOT}", timeout=tsapi.TIMEOUT)
    tsapi.assert_error(r, 401, "unauthorized")
    tsapi.assert_error(get_snapshot(client, schema=None, schemaVersion="two"), 400, "bad_request")
    # Absent is schema version 1; above the current one is the current one.
    _, _, version = read_file(fetch(client, schema=None).content)
    assert version == 1
    _, _, version = read_file(fetch(client, schema=99).content)
    assert version == tsapi.CURRENT_SCHEMA
    assert client.request("POST", SNAPSHOT).status_code == 405


def test_an_account_too_large_for_the_budget_gets_503_and_pulls(client):
    """The hook holds the build past the request budget (20 s in the test stack): abandoned, 503
    with Retry-After, and not tried again within the cache's age limit; paged pull still works."""
    client.create_todo(title="big enough")
    before = total(scrape(), "todosync_snapshot_builds_too_slow_total")
    budget_ms = int(tsapi.stack_env().get("TODOSYNC_REQUEST_BUDGET_MS", "20000"))
    r = get_snapshot(client, __test_hold_ms=str(budget_ms + 500))
    tsapi.assert_error(r, 503, "unavailable")
    assert int(r.headers["Retry-After"]) > 60
    again = get_snapshot(client)
    tsapi.assert_error(again, 503, "unavailable")
    assert int(again.headers["Retry-After"]) > 60
    assert total(scrape(), "todosync_snapshot_builds_too_slow_total") - before == 1
    assert "# HELP todosync_snapshot_builds_too_slow_total " in requests.get(
        f"{tsapi.BASE_URL}/metrics", timeout=tsapi.TIMEOUT).text
    assert full_pull(client).data["todos"]


# --------------------------------------------------------------------------- the gzip variant

def get_encoded(api: tsapi.Api, accept: str | None = "gzip", headers: dict | None = None,
                method: str = "GET") -> tuple[requests.Response, bytes]:
    """(response, the body's bytes as sent: not decoded). `accept` None sends no Accept-Encoding."""
    r = api.request(method, SNAPSHOT, params={"schemaVersion": str(tsapi.CURRENT_SCHEMA)},
                    headers={"Accept-Encoding": accept, **(headers or {})}, stream=True, timeout=60)
    raw = r.raw.read(decode_content=False)
    r.close()
    return r, raw


def vary(r: requests.Response) -> list[str]:
    return [v.strip().lower() for v in r.headers.get("Vary", "").split(",") if v.strip()]


def seeded(api: tsapi.Api, todos: int = 120) -> requests.Response:
    """Records enough for a file of some pages, and the identity answer."""
    api.create_tag(name="Work")
    for i in range(todos):
        api.create_todo(title=f"todo {i} with a title long enough to compress", deadline="2031-05-01")
    return fetch(api)


def test_gzip_variant_headers_digest_and_body_decode_to_the_file(client):
    plain = seeded(client)
    assert "accept-encoding" in vary(plain), plain.headers
    r, raw = get_encoded(client)
    assert r.status_code == 200, tsapi.short(r)
    assert r.headers.get("Content-Encoding") == "gzip", dict(r.headers)
    assert tsapi.media_type(r) == "application/vnd.sqlite3"
    assert int(r.headers["Content-Length"]) == len(raw)
    assert len(raw) < len(plain.content) / 2, (len(raw), len(plain.content))
    # Byte for byte the identity file once decoded; the digest and the tag are of the gzip bytes.
    assert gzip.decompress(raw) == plain.content
    assert r.headers["Repr-Digest"] == repr_digest(raw) != plain.headers["Repr-Digest"]
    assert r.headers["ETag"] == plain.headers["ETag"][:-1] + '-gz"'
    assert "accept-encoding" in vary(r), r.headers
    # Other ways of accepting gzip, the same bytes; HEAD has the gzip variant's headers.
    for accept in ("br, gzip;q=0.5", "*", "x-gzip", "GZIP;Q=1.0, identity;q=0.1"):
        again, body = get_encoded(client, accept)
        assert again.headers.get("Content-Encoding") == "gzip" and body == raw, accept
    head, _ = get_encoded(client, method="HEAD")
    assert head.status_code == 200
    assert int(head.headers["Content-Length"]) == len(raw) and head.headers["Content-Encoding"] == "gzip"
    assert head.headers["ETag"] == r.headers["ETag"]


def test_gzip_refused_by_quality_zero_or_not_offered_is_the_file(client):
    plain = seeded(client, 30)
    answers = [(accept, *get_encoded(client, accept))
               for accept in ("gzip;q=0, identity", "gzip;q=0.0, *", "*;q=0, identity", "identity", "br")]
    # No Accept-Encoding at all (requests always sends one).
    bare = tsapi.raw_request("GET", f"{tsapi.API_PREFIX}{SNAPSHOT}?schemaVersion={tsapi.CURRENT_SCHEMA}",
                             {"Authorization": f"Bearer {client.token}"})
    answers.append((None, bare, bare.raw_content))
    for accept, r, raw in answers:
        assert r.status_code == 200, (accept, tsapi.short(r))
        assert "Content-Encoding" not in r.headers, (accept, dict(r.headers))
        assert raw == plain.content and r.headers["ETag"] == plain.headers["ETag"], accept
        assert r.headers["Repr-Digest"] == repr_digest(raw), accept
        assert "accept-encoding" in vary(r), (accept, r.headers)
    # Its 304 is the identity tag's, and says Vary too (a cache must not answer gzip requests with it).
    r304, _ = get_encoded(client, "gzip;q=0, identity", headers={"If-None-Match": plain.headers["ETag"]})
    assert r304.status_code == 304 and r304.headers["ETag"] == plain.headers["ETag"]
    assert "accept-encoding" in vary(r304), r304.headers


def test_gzip_if_none_match_compares_the_variant_sent(client):
    plain = seeded(client, 30)
    r, raw = get_encoded(client)
    gz_tag, id_tag = r.headers["ETag"], plain.headers["ETag"]
    assert gz_tag != id_tag
    r304, body = get_encoded(client, headers={"If-None-Match": gz_tag})
    assert r304.status_code == 304 and body == b""
    assert r304.headers["ETag"] == gz_tag and "accept-encoding" in vary(r304), r304.headers
    assert get_encoded(client, headers={"If-None-Match": f'"x", W/{gz_tag}'})[0].status_code == 304
    # The other variant's tag names other bytes: the whole variant asked for, not a 304.
    other, body = get_encoded(client, headers={"If-None-Match": id_tag})
    assert other.status_code == 200 and body == raw and other.headers["ETag"] == gz_tag
    other, body = get_encoded(client, "identity", headers={"If-None-Match": gz_tag})
    assert other.status_code == 200 and body == plain.content and "Content-Encoding" not in other.headers
    r304, _ = get_encoded(client, "identity", headers={"If-None-Match": id_tag})
    assert r304.status_code == 304 and r304.headers["ETag"] == id_tag and "accept-encoding" in vary(r304)


def test_gzip_ranges_are_of_the_encoded_bytes(client):
    plain = seeded(client)
    _, raw = get_encoded(client)
    size = len(raw)
    part, body = get_encoded(client, headers={"Range": f"bytes=100-{size - 1}"})
    assert part.status_code == 206, tsapi.short(part)
    assert body == raw[100:]
    assert part.headers["Content-Range"] == f"bytes 100-{size - 1}/{size}"
    assert part.headers["Content-Encoding"] == "gzip" and part.headers["Repr-Digest"] == repr_digest(raw)
    # A resumed download: the two parts are the gzip bytes, which decode to the file.
    head, first = get_encoded(client, headers={"Range": "bytes=0-99"})
    assert head.status_code == 206 and gzip.decompress(first + body) == plain.content
    # Past the end of the gzip bytes (though inside the file's): 416.
    assert size + 10 < len(plain.content)
    r416, body = get_encoded(client, headers={"Range": f"bytes={size + 10}-"})
    assert r416.status_code == 416
    # Its body is not gzip, so it must not say it is.
    assert "Content-Encoding" not in r416.headers, (dict(r416.headers), body[:100])
    assert r416.headers["Content-Range"] == f"bytes */{size}" and r416.headers["ETag"] == head.headers["ETag"]
    r416, _ = get_encoded(client, headers={"Range": "bytes=-0"})
    assert r416.status_code == 416 and "Content-Encoding" not in r416.headers
    # The file's own 416 names the file's size.
    plain416 = get_snapshot(client, headers={"Range": f"bytes={len(plain.content)}-"})
    assert plain416.status_code == 416 and plain416.headers["Content-Range"] == f"bytes */{len(plain.content)}"
    # If-Range with this variant's tag resumes; with the other variant's, the whole gzip body.
    resumed, body = get_encoded(client, headers={"Range": "bytes=100-", "If-Range": head.headers["ETag"]})
    assert resumed.status_code == 206 and body == raw[100:]
    whole, body = get_encoded(client, headers={"Range": "bytes=100-", "If-Range": plain.headers["ETag"]})
    assert whole.status_code == 200 and body == raw


def test_concurrent_gzip_requests_compress_once(client):
    seeded(client, 200)
    before = total(scrape(), "todosync_snapshot_gzip_total")
    results = []

    def take():
        results.append(get_encoded(client))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 8 and all(r.status_code == 200 for r, _ in results), [tsapi.short(r) for r, _ in results]
    assert len({raw for _, raw in results}) == 1
    assert all(r.headers.get("Content-Encoding") == "gzip" for r, _ in results)
    assert total(scrape(), "todosync_snapshot_gzip_total") - before == 1, "the companion was compressed more than once"
    assert "# HELP todosync_snapshot_gzip_total " in requests.get(f"{tsapi.BASE_URL}/metrics", timeout=tsapi.TIMEOUT).text


def companions(api: tsapi.Api) -> list[str]:
    user_dir = os.path.join(snapshot_dir(), str(api.user["id"]))
    return sorted(name for name in os.listdir(user_dir) if name.endswith(".gz")) if os.path.isdir(user_dir) else []


def test_the_gzip_companion_goes_with_its_file(make_client, stack_cmd):
    api = make_client()
    todo = api.create_todo(title="first")
    fetch(api)
    get_encoded(api)
    first = companions(api)
    assert len(first) == 1, first
    # A new write: a new file, and the old one's companion is gone with it.
    api.patch(f"/todos/{todo['id']}", {"title": "second"})
    r, raw = get_encoded(api)
    assert gzip.decompress(raw) == fetch(api).content
    second = companions(api)
    assert len(second) == 1 and second != first, (first, second)
    # A new epoch: the next build drops the old history's file and its companion.
    stack_cmd("new-epoch")
    fetch(api)
    assert companions(api) == [], "a companion of the old epoch's file is left"
    get_encoded(api)
    assert len(companions(api)) == 1
    # The age sweep (`todosync purge`): the companion goes with its aged file; an orphan goes too.
    user_dir = os.path.join(snapshot_dir(), str(api.user["id"]))
    [sqlite] = [name for name in os.listdir(user_dir) if name.endswith(".sqlite")]
    old = time.time() - 2 * 3600
    os.utime(os.path.join(user_dir, sqlite), (old, old))
    orphan = "1-1-2-" + "0" * 64 + ".sqlite." + "1" * 64 + ".gz"
    with open(os.path.join(user_dir, orphan), "wb") as f:
        f.write(b"orphan")
    synclib.purge_all_tombstones()
    assert companions(api) == [], os.listdir(user_dir)
    # An account delete: every file goes.
    get_encoded(api)
    assert len(companions(api)) == 1
    assert api.post("/account/delete", {"password": api.password}).status_code == 204
    assert not os.path.exists(user_dir)
