"""Helpers for the daily-stats, quick-add and sync (pull / push / convergence) tests.

Black-box only: everything goes through tsapi.Api (HTTP) or, for cursor expiry, the stack's
`purge` command.  Nothing here imports project code.

What lives here
  assert_stat / assert_tombstone      record shapes from API.md
  expected_stat(todos, tags)           the contract's daily-stat formulas, computed independently
                                       (exact fractions, rounding half away from zero)
  pull / pull_all / PullChecker        GET /sync/pull with per-page invariants (shape, kind order,
                                       version order, page size, referential completeness)
  ClientStore                          a device's local copy of tags / todos / stats built from pulls
  push / op helpers                    POST /sync/push with result-shape checks
  purge_all_tombstones                 `$TODOSYNC_TEST_STACK purge --retention-seconds 0` (with a
                                       fallback to the binary when stack.sh lacks `purge`)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import uuid
from fractions import Fraction
from typing import Any, Iterable

import tsapi
from tsapi import assert_json, assert_tag, assert_todo, is_int, short

STAT_KEYS = {"id", "date", "todoCount", "completedCount", "productivityNum", "balance", "tagStats", "center",
             "version", "createdAt", "updatedAt", "deletedAt"}
TOMBSTONE_KEYS = {"id", "clientId", "version", "deletedAt"}
KINDS = ("tags", "todos", "dailyStats")
RESULT_KEYS = {"opId", "status", "id", "clientId", "version", "record"}
STATUSES = {"applied", "merged", "conflict", "rejected"}
BALANCE_TEXT = {
    "Work-heavy": "Make some room for life today.",
    "Balanced": "A good balance between work and life.",
    "Life-heavy": "Plenty of life today; remember your goals.",
}
TODO_FIELDS = ("title", "raw", "isImportant", "isLife", "tagId", "difficulty", "estimatedTime", "deadline",
               "isCompleted")
TAG_FIELDS = ("name", "color")


def uid() -> str:
    return str(uuid.uuid4())


# --------------------------------------------------------------------------- shapes

def assert_stat(rec: Any, live: bool = True) -> dict:
    assert isinstance(rec, dict), rec
    assert set(rec) == STAT_KEYS, f"daily stat keys {sorted(rec)} != {sorted(STAT_KEYS)}"
    assert is_int(rec["id"]) and rec["id"] > 0, rec
    assert is_int(rec["version"]) and rec["version"] > 0, rec
    assert isinstance(rec["date"], str) and tsapi.DATE_RE.match(rec["date"]), rec
    assert is_int(rec["todoCount"]) and rec["todoCount"] >= 1, rec
    assert is_int(rec["completedCount"]) and 0 <= rec["completedCount"] <= rec["todoCount"], rec
    assert isinstance(rec["productivityNum"], (int, float)) and not isinstance(rec["productivityNum"], bool), rec
    bal = rec["balance"]
    assert isinstance(bal, dict) and set(bal) == {"num", "title", "message"}, rec
    assert is_int(bal["num"]) and 0 <= bal["num"] <= 100, rec
    assert BALANCE_TEXT.get(bal["title"]) == bal["message"], rec
    assert isinstance(rec["tagStats"], list), rec
    for ts in rec["tagStats"]:
        assert isinstance(ts, dict) and set(ts) == {"tagId", "name", "color", "count"}, rec
        assert is_int(ts["tagId"]) and is_int(ts["count"]) and ts["count"] >= 1, rec
    center = rec["center"]
    assert isinstance(center, dict) and set(center) == {"x", "y"}, rec
    for k in ("x", "y"):
        assert isinstance(center[k], (int, float)) and not isinstance(center[k], bool), rec
    tsapi.assert_timestamps(rec)
    if live:
        assert rec["deletedAt"] is None, rec
    return rec


def assert_tombstone(rec: Any, kind: str) -> dict:
    assert isinstance(rec, dict) and set(rec) == TOMBSTONE_KEYS, f"tombstone keys: {rec}"
    assert is_int(rec["id"]) and is_int(rec["version"]), rec
    assert isinstance(rec["deletedAt"], str) and tsapi.TIMESTAMP_RE.match(rec["deletedAt"]), rec
    if kind == "dailyStats":
        assert rec["clientId"] is None, rec
    else:
        assert rec["clientId"] is None or isinstance(rec["clientId"], str), rec
    return rec


ASSERT_LIVE = {"tags": assert_tag, "todos": assert_todo, "dailyStats": assert_stat}


# --------------------------------------------------------------------------- daily-stat oracle

def round_half_away(value: Fraction, digits: int = 2) -> Fraction:
    scale = 10 ** digits
    scaled = abs(value) * scale
    q, r = divmod(scaled.numerator, scaled.denominator)
    if 2 * r >= scaled.denominator:
        q += 1
    out = Fraction(q, scale)
    return -out if value < 0 else out


def balance_text(num: int) -> tuple[str, str]:
    if num < 30:
        title = "Work-heavy"
    elif num <= 70:
        title = "Balanced"
    else:
        title = "Life-heavy"
    return title, BALANCE_TEXT[title]


def expected_stat(todos: Iterable[dict], tags: dict[int, dict]) -> dict | None:
    """The contract's stat content for one date's live todos (None: no stat)."""
    todos = [t for t in todos if t.get("deletedAt") is None]
    if not todos:
        return None
    done = [t for t in todos if t["isCompleted"]]
    prod = round_half_away(Fraction(sum(t["difficulty"] * t["estimatedTime"] for t in done), 60))
    life = sum(t["estimatedTime"] for t in done if t["isLife"])
    work = sum(t["estimatedTime"] for t in done if not t["isLife"])
    total = life + work
    num = 50 if total == 0 else int(round_half_away(Fraction(100 * life, total), 0))
    title, message = balance_text(num)
    counts: dict[int, int] = {}
    for t in done:
        if t["tagId"] is not None:
            counts[t["tagId"]] = counts.get(t["tagId"], 0) + 1
    tag_stats = [{"tagId": tid, "name": tags[tid]["name"], "color": tags[tid]["color"], "count": n}
                 for tid, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    x = Fraction(0) if total == 0 else round_half_away(Fraction(life - work, total))
    y = round_half_away(Fraction(len(done), len(todos)))
    return {
        "todoCount": len(todos), "completedCount": len(done), "productivityNum": prod,
        "balance": {"num": num, "title": title, "message": message},
        "tagStats": tag_stats, "center": {"x": x, "y": y},
    }


def stat_content(stat: dict) -> dict:
    """The derived part of a stat, with decimals as exact Fractions for comparison."""
    return {
        "todoCount": stat["todoCount"], "completedCount": stat["completedCount"],
        "productivityNum": dec(stat["productivityNum"]),
        "balance": dict(stat["balance"]), "tagStats": [dict(t) for t in stat["tagStats"]],
        "center": {"x": dec(stat["center"]["x"]), "y": dec(stat["center"]["y"])},
    }


def dec(number: int | float) -> Fraction:
    """A JSON decimal with at most 2 fraction digits, exactly (repr keeps the shortest digits)."""
    return Fraction(repr(number)) if isinstance(number, float) else Fraction(number)


def get_stat(api: tsapi.Api, date: str) -> dict | None:
    r = api.get(f"/daily-stats/{date}")
    if r.status_code == 404:
        tsapi.assert_error(r, 404, "not_found")
        return None
    assert r.status_code == 200, short(r)
    stat = assert_stat(assert_json(r))
    tsapi.assert_etag(r, stat)
    assert stat["date"] == date, stat
    return stat


# --------------------------------------------------------------------------- pull

def pull(api: tsapi.Api, cursor: str | None = None, limit: int | None = None, device: str | None = None,
         schema: int | None = tsapi.CURRENT_SCHEMA, window: dict | None = None) -> dict:
    """One page; with `device`, as that device pulls (`deviceId`: its own pushed changes left out);
    at schema version `schema` (`schemaVersion`; the current one, as REST, unless told: None
    sends none, which is version 1). `window`: `from`/`to` parameters of a window pull, whose
    page shape the caller checks (test_sync_windows.py)."""
    params = dict(window or {})
    if schema is not None:
        params["schemaVersion"] = str(schema)
    if cursor is not None:
        params["cursor"] = cursor
    if limit is not None:
        params["limit"] = str(limit)
    if device is not None:
        params["deviceId"] = device
    r = api.get("/sync/pull", params=params)
    assert r.status_code == 200, f"pull {params}: {short(r)}"
    body = assert_json(r)
    if window is None:
        check_page_shape(body, limit if limit is not None else 500, first_pull=cursor in (None, ""))
    assert body["schemaVersion"] == min(schema or 1, tsapi.CURRENT_SCHEMA), body
    return body


def page_records(body: dict):
    """(kind, record, is_deleted) in page order."""
    for kind in KINDS:
        for rec in body["changes"][kind]["upserted"]:
            yield kind, rec, False
        for rec in body["changes"][kind]["deleted"]:
            yield kind, rec, True


def check_page_shape(body: dict, limit: int, first_pull: bool = False) -> None:
    assert isinstance(body, dict) and set(body) == {"changes", "cursor", "hasMore", "schemaVersion"}, body
    schema = body["schemaVersion"]
    assert is_int(schema) and 1 <= schema <= tsapi.CURRENT_SCHEMA, body
    assert isinstance(body["cursor"], str) and body["cursor"], body
    assert isinstance(body["hasMore"], bool), body
    changes = body["changes"]
    assert isinstance(changes, dict) and list(changes) == list(KINDS), (
        f"kinds must be listed parents first {list(KINDS)}: {list(changes)}")
    seen: set[tuple[str, int]] = set()
    for kind in KINDS:
        part = changes[kind]
        assert isinstance(part, dict) and set(part) == {"upserted", "deleted"}, part
        for sub in ("upserted", "deleted"):
            recs = part[sub]
            assert isinstance(recs, list), part
            versions = [r["version"] for r in recs]
            assert versions == sorted(versions) and len(set(versions)) == len(versions), (
                f"{kind}.{sub} not ordered by version: {versions}")
        for rec in part["upserted"]:
            if kind == "todos":
                assert_todo(rec, schema=schema)  # exactly that version's fields
            else:
                ASSERT_LIVE[kind](rec)
            assert (kind, rec["id"]) not in seen, f"{kind} {rec['id']} twice in one page"
            seen.add((kind, rec["id"]))
        for rec in part["deleted"]:
            assert_tombstone(rec, kind)
            assert (kind, rec["id"]) not in seen, f"{kind} {rec['id']} twice in one page"
            seen.add((kind, rec["id"]))
        if first_pull:
            assert part["deleted"] == [], f"a first pull has no tombstones: {kind} {part['deleted']}"
    all_versions = [rec["version"] for _, rec, _ in page_records(body)]
    assert len(set(all_versions)) == len(all_versions), f"versions repeat across kinds in one page: {all_versions}"
    core, extras = split_core(body, limit)
    assert len(core) <= limit, f"page holds {len(core)} > limit {limit} records"
    if not body["hasMore"]:
        assert not extras
    refs = {t["tagId"] for t in changes["todos"]["upserted"]} | {
        ts["tagId"] for st in changes["dailyStats"]["upserted"] for ts in st["tagStats"]}
    for kind, rec, deleted in extras:
        assert kind == "tags" and not deleted, f"only parent tags may exceed the limit: {kind} {rec}"
        assert rec["id"] in refs, f"extra tag {rec['id']} is not a parent of anything in the page"


def split_core(body: dict, limit: int):
    """Split a page into its `limit` lowest-version records and the extra parent tags."""
    recs = sorted(page_records(body), key=lambda t: t[1]["version"])
    if body["hasMore"] and len(recs) > limit:
        return recs[:limit], recs[limit:]
    return recs, []


class ClientStore:
    """A device's local database, filled from pull pages; checks each page's completeness."""

    def __init__(self):
        self.data: dict[str, dict[int, dict]] = {k: {} for k in KINDS}
        self.cursor: str | None = None

    @property
    def tags(self):
        return self.data["tags"]

    @property
    def todos(self):
        return self.data["todos"]

    @property
    def stats(self):
        return self.data["dailyStats"]

    def missing_refs(self, body: dict | None = None) -> list[tuple[str, int, int]]:
        """References that do not resolve locally: from the records of `body` (a page), or from
        the whole store when `body` is None."""
        if body is None:
            todos, stats = self.todos.values(), self.stats.values()
        else:
            todos = body["changes"]["todos"]["upserted"]
            stats = body["changes"]["dailyStats"]["upserted"]
        out = []
        for todo in todos:
            if todo["tagId"] is not None and todo["tagId"] not in self.tags:
                out.append(("todo", todo["id"], todo["tagId"]))
        for stat in stats:
            for ts in stat["tagStats"]:
                if ts["tagId"] not in self.tags:
                    out.append(("stat", stat["id"], ts["tagId"]))
        return out

    def apply_page(self, body: dict, check_refs: bool = True) -> None:
        for kind in KINDS:
            for rec in body["changes"][kind]["upserted"]:
                old = self.data[kind].get(rec["id"])
                assert old is None or old["version"] <= rec["version"], (
                    f"{kind} {rec['id']} went back from version {old['version']} to {rec['version']}")
                self.data[kind][rec["id"]] = rec
            for rec in body["changes"][kind]["deleted"]:
                self.data[kind].pop(rec["id"], None)
        # referential completeness (API.md): every tag a todo or stat of this page refers to is in
        # this page, an earlier one, or was already held (unchanged); so it resolves locally now.
        if check_refs:
            missing = self.missing_refs(body)
            assert not missing, f"page not referentially complete, unresolved (kind, id, tagId): {missing}"
        self.cursor = body["cursor"]

    def snapshot(self) -> dict:
        return {k: dict(v) for k, v in self.data.items()}


class PullRun:
    """The pages of one pull (from a cursor until hasMore is false), with their invariants."""

    def __init__(self, pages: list[dict], limit: int):
        self.pages = pages
        self.limit = limit

    def core_records(self):
        for body in self.pages:
            core, _ = split_core(body, self.limit)
            yield from core

    def all_records(self):
        for body in self.pages:
            yield from page_records(body)


def pull_all(api: tsapi.Api, store: ClientStore | None = None, cursor: str | None = None,
             limit: int | None = None, max_pages: int = 10_000, between_pages=None,
             writes_during_pull: bool = False, mirror: ClientStore | None = None,
             device: str | None = None) -> PullRun:
    """Follow pages until hasMore is false; checks version order of the pages' core records.

    With `device` the pull leaves out that device's own pushed changes, so a page may be empty
    while hasMore is true (and the store need not resolve references to records the device
    holds from its pushes: referential checks are left to the caller)."""
    store = store if store is not None else ClientStore()
    cursor = cursor if cursor is not None else store.cursor
    pages = []
    eff_limit = limit if limit is not None else 500
    last_core_version = 0
    first = cursor in (None, "")
    for _ in range(max_pages):
        previous_cursor = cursor
        body = pull(api, cursor, limit, device)
        if first and not writes_during_pull:
            for kind in KINDS:
                assert body["changes"][kind]["deleted"] == [], "a first pull (all its pages) has no tombstones"
        core, _ = split_core(body, eff_limit)
        if core:
            assert core[0][1]["version"] > last_core_version, (
                f"pages must advance in version order: {core[0][1]['version']} after {last_core_version}")
            last_core_version = core[-1][1]["version"]
        store.apply_page(body, check_refs=device is None)
        if mirror is not None:
            mirror.apply_page(body, check_refs=False)
        pages.append(body)
        cursor = body["cursor"]
        if not body["hasMore"]:
            if not writes_during_pull and device is None:
                missing = store.missing_refs()
                assert not missing, f"after a complete pull, references still dangle: {missing}"
            return PullRun(pages, eff_limit)
        assert core or device is not None, "hasMore true but the page delivered nothing: a loop"
        assert cursor != previous_cursor, "hasMore true but the cursor did not move: a loop"
        if between_pages is not None:
            between_pages(len(pages))
    raise AssertionError(f"pull did not finish within {max_pages} pages")


def fresh_state(api: tsapi.Api) -> ClientStore:
    store = ClientStore()
    pull_all(api, store, limit=1000)
    return store


# --------------------------------------------------------------------------- push

def push_raw(api: tsapi.Api, body: Any, **kw):
    return api.post("/sync/push", body, **kw)


def push(api: tsapi.Api, operations: list[dict], policy: str | None = None, device: str = "dev-1",
         return_response: bool = False, schema: int | None = tsapi.CURRENT_SCHEMA):
    """A push at schema version `schema` (`schemaVersion`; the current one unless told: None
    sends none, which is version 1)."""
    body: dict[str, Any] = {"deviceId": device, "operations": operations}
    if policy is not None:
        body["conflictPolicy"] = policy
    if schema is not None:
        body["schemaVersion"] = schema
    r = push_raw(api, body)
    assert r.status_code == 200, f"push: {short(r)}"
    out = assert_json(r)
    assert isinstance(out, dict) and set(out) == {"results"}, out
    results = out["results"]
    assert isinstance(results, list) and len(results) == len(operations), out
    for op_, res in zip(operations, results):
        check_result(res, op_, schema=min(schema or 1, tsapi.CURRENT_SCHEMA))
    return (results, r) if return_response else results


def check_result(res: dict, op_: dict | None = None, schema: int = 1) -> dict:
    assert isinstance(res, dict), res
    keys = set(res)
    assert RESULT_KEYS <= keys, f"result keys {sorted(keys)}"
    extra = keys - RESULT_KEYS
    assert extra <= {"conflictingFields", "error"}, f"unexpected result keys {sorted(extra)}"
    assert res["status"] in STATUSES, res
    if op_ is not None and isinstance(op_.get("opId"), str):
        assert res["opId"] == op_["opId"], (res["opId"], op_["opId"])
    if res["status"] == "merged":
        cf = res.get("conflictingFields")
        assert isinstance(cf, list) and cf and cf == sorted(cf), f"merged needs sorted conflictingFields: {res}"
    else:
        assert "conflictingFields" not in res, f"conflictingFields only when merged: {res}"
    if res["status"] == "rejected":
        err = res.get("error")
        assert isinstance(err, dict) and isinstance(err.get("code"), str) and isinstance(err.get("message"), str), res
        assert res["record"] is None and res["id"] is None and res["version"] is None, (
            f"a rejected result has null id/version/record: {res}")
        tsapi.assert_no_leak(json.dumps(res))
    else:
        assert "error" not in res, res
        rec = res["record"]
        assert isinstance(rec, dict), res
        assert res["id"] == rec["id"] and res["version"] == rec["version"], f"id/version must match record: {res}"
        assert res["clientId"] == rec["clientId"], res
        entity = op_.get("entity") if op_ else None
        if entity == "tag":
            assert_tag(rec, live=False)
        elif entity == "todo":
            assert_todo(rec, live=False, schema=schema)
    return res


def rejected(res: dict, code: str = "validation_failed", field: str | None = None) -> None:
    """Asserts a `rejected` result with this error code (and a `details` entry naming `field`)."""
    assert res["status"] == "rejected", res
    assert res["error"]["code"] == code, res
    if field is not None:
        named = {d["field"] for d in res["error"].get("details") or []}
        assert field in named, f"details must name {field}: {res}"


def op(entity: str, action: str, *, op_id: str | None = None, **fields) -> dict:
    out = {"opId": op_id or uid(), "entity": entity, "action": action}
    out.update({k: v for k, v in fields.items()})
    return out


def create_tag_op(name: str, color: str = "#3366CC", client_id: str | None = None, **kw) -> dict:
    return op("tag", "create", clientId=client_id or uid(), data={"name": name, "color": color}, **kw)


def create_todo_op(title: str, deadline: str = "2031-05-05", client_id: str | None = None,
                   op_id: str | None = None, **data) -> dict:
    return op("todo", "create", op_id=op_id, clientId=client_id or uid(),
              data={"title": title, "deadline": deadline, **data})


# --------------------------------------------------------------------------- stack: purge

def purge_all_tombstones() -> str:
    """Purge every tombstone now.  Returns which way it ran ("stack" or "binary")."""
    stack = os.environ.get("TODOSYNC_TEST_STACK", "").strip()
    if not stack:
        import pytest
        pytest.skip("TODOSYNC_TEST_STACK not set: cannot purge")
    cmd = shlex.split(stack) + ["purge", "--retention-seconds", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return "stack"
    if "unknown command" not in (proc.stdout + proc.stderr):
        raise AssertionError(f"{cmd} failed ({proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    # stack.sh without `purge` yet: run the responder binary's purge with the stack's settings.
    env_out = subprocess.run(shlex.split(stack) + ["env"], capture_output=True, text=True, timeout=30)
    assert env_out.returncode == 0, env_out.stderr
    conf = dict(line.split("=", 1) for line in env_out.stdout.splitlines() if "=" in line)
    env = dict(os.environ)
    for key in ("TODOSYNC_DB_SOCKET", "TODOSYNC_DB_USER", "TODOSYNC_DB_PASSWORD", "TODOSYNC_DB_NAME"):
        env[key] = conf[key]
    proc = subprocess.run([conf["TODOSYNC_BIN"], "purge", "--retention-seconds", "0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"todosync purge failed: {proc.stdout[-1500:]} {proc.stderr[-1500:]}"
    return "binary"
