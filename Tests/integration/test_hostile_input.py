"""Hostile input on every route: a bounded schemathesis run against openapi.yaml, then
hand-written cases — invalid UTF-8, deeply nested JSON, huge / degenerate numbers and ids,
10 MB bodies, slow clients, header and path tricks, SQL metacharacters in every string and
query parameter.

Every hostile request is checked the same way (reliabilitylib.check_reply): never a 5xx, and
an error is the contract's JSON error shape without internals.  Around every test: the
responder processes are the same afterwards (none crashed and was silently restarted by its
supervisor), /healthz answers, and a seeded "victim" user's data is unchanged — proven by a pull
from the cursor taken before (no change at all, tombstones included) and by a full first pull.
Requests that may legitimately write go to a separate scratch user and are checked there.

Figures (`[figures] ...` lines): inputs tried per test.

Assumptions where API.md / the README are silent (beyond those of test_errors.py, whose
hostile-body cases on POST /todos this extends to every route):
- Invalid UTF-8 anywhere in a JSON body (inside strings or keys, overlong forms, encoded
  surrogates, truncated sequences, UTF-16, Latin-1) is "not parseable JSON": 400
  `malformed_json`.  In a query parameter it is a malformed parameter (400); in a path id, no
  such record (404).
- Numbers: an integer field given a value outside its range or a non-integer (1e400, 2^63,
  2.5, -1) is 422; a path id that is zero, negative, beyond 64 bits or not an integer is 404;
  a malformed query number (limit) is 400.  Leading zeros or a plus sign on one's own id may
  address that record (200) — never another user's.
- 10 MB bodies on every body route are 413 `payload_too_large` (nginx), with Content-Length or
  chunked; on the auth routes nginx's per-address limit may answer 429 first (retried).
- Slow clients: nginx drops a connection whose header or body stalls for its 10 s timeouts
  (closed, reset or 408) within 13 s, and meanwhile serves everyone else normally.
- nginx answers a Transfer-Encoding it does not implement with 501 `not_implemented` (the one
  5xx accepted here: RFC 9112 prescribes it).
- SQL metacharacters are data: stored and returned literally where the field accepts free text
  (titles, names, raw, deviceId, opId, passwords, e-mail local parts), a clean 4xx elsewhere,
  and never slow (no `SLEEP()` runs: every answer within 2 s).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import reliabilitylib as rl
import synclib
import tsapi
from reliabilitylib import check_reply
from tsapi import assert_error, raw_request, short

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "openapi.yaml"
MB = 1024 * 1024


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def victim():
    api = tsapi.new_user()
    seed = rl.seed_user(api)
    yield api, seed
    api.session.close()


@pytest.fixture
def guarded(victim):
    """The victim, a baseline of its data and a pid guard; checks all three afterwards."""
    api, seed = victim
    base = rl.Baseline(api)
    with rl.PidGuard("hostile input") as guard:
        yield api, seed
        guard.check()
    tsapi.wait_healthy(10)
    assert api.get("/tags").status_code == 200, "the victim's token stopped working"
    base.assert_unchanged()


def body_routes(seed) -> dict[str, tuple[str, str, bool]]:
    """name -> (method, path, needs the victim's token)."""
    return {
        "register": ("POST", "/api/v1/auth/register", False),
        "login": ("POST", "/api/v1/auth/login", False),
        "create tag": ("POST", "/api/v1/tags", True),
        "patch tag": ("PATCH", f"/api/v1/tags/{seed['tag']['id']}", True),
        "create todo": ("POST", "/api/v1/todos", True),
        "patch todo": ("PATCH", f"/api/v1/todos/{seed['todo']['id']}", True),
        "quick-add": ("POST", "/api/v1/todos/quick-add", True),
        "push": ("POST", "/api/v1/sync/push", True),
    }


def read_routes(seed) -> list[str]:
    return ["/healthz", "/api/v1/tags", f"/api/v1/tags/{seed['tag']['id']}", "/api/v1/todos?date=2033-04-05",
            "/api/v1/todos?from=2033-04-01&to=2033-04-30", f"/api/v1/todos/{seed['todo']['id']}",
            "/api/v1/daily-stats?month=2033-04", "/api/v1/daily-stats/2033-04-05", "/api/v1/sync/pull"]


def send(api: tsapi.Api, method: str, path: str, body: bytes | None = None, *, auth: bool = True,
         headers: dict | None = None, ctype: str | None = "application/json", **kw):
    """One request with a raw body through `requests` (auth routes: nginx 429 retried)."""
    hdrs = dict(headers or {})
    if body is not None and ctype is not None:
        hdrs.setdefault("Content-Type", ctype)
    return api.request(method, path, data=body, headers=hdrs, auth=auth, **kw)


def raw_send(method: str, path: str, headers=None, body: bytes = b"", *, retry_429: bool = False, **kw):
    """A hand-built request; optionally rides out nginx's per-address auth limit."""
    for attempt in range(8):
        r = raw_request(method, path, headers, body, **kw)
        if not (retry_429 and r.status_code == 429):
            return r
        time.sleep(0.5 + 0.5 * attempt)
    return r


def is_account_throttle(r) -> bool:
    """429 from the per-account failed-login throttle (the responder), not nginx's per-address
    limit: they share the code `rate_limited` and differ in their message."""
    return r.status_code == 429 and "account" in r.json()["error"]["message"].lower()


def login_probe(email, password):
    """A login attempt that rides out nginx's per-address limit but not the account throttle."""
    for attempt in range(10):
        r = tsapi.login(email, password, retry_429=False)
        if r.status_code != 429 or is_account_throttle(r):
            return r
        time.sleep(0.3 + 0.3 * attempt)
    return r


def bearer(api: tsapi.Api) -> dict:
    return {"Authorization": f"Bearer {api.token}"}


# --------------------------------------------------------------------------- schemathesis

FUZZ_EXAMPLES = int(os.environ.get("TODOSYNC_TEST_FUZZ_EXAMPLES", "40"))
FUZZ_TIMEOUT_S = int(os.environ.get("TODOSYNC_TEST_FUZZ_TIMEOUT", "300"))  # a bound for a run that hangs, not a speed target: ~80 s on a loaded box
# Checks left out, each because it flags behaviour the contract prescribes:
# - positive_data_acceptance: schema-valid data is still rejected by rules a schema cannot say
#   (tagId must be one of the user's live tags, ids must exist, to - from <= 365 days, ...).
# - ensure_resource_availability: a create whose clientId names a record deleted since answers
#   200 with that tombstone (API.md), so "created, then GET is 404" is correct; schemathesis'
#   deterministic generation reuses clientIds, so this happens within one run.
FUZZ_EXCLUDED_CHECKS = ["positive_data_acceptance", "ensure_resource_availability"]


def _schemathesis_available() -> bool:
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        return False
    return True


def test_schemathesis_bounded_run_no_5xx_and_schema_conformant(tmp_path, capsys):
    """`st run` over every operation but logout: examples, coverage, fuzzing and stateful phases,
    at most TODOSYNC_TEST_FUZZ_EXAMPLES (40) cases per operation, deterministic generation, one
    worker (Python 3.11.7's parser is not thread-safe for schemathesis' worker threads)."""
    if not _schemathesis_available():
        pytest.skip("schemathesis is not installed (add schemathesis==4.32.5 to requirements.txt)")
    api = tsapi.new_user()
    rl.seed_user(api)
    with rl.PidGuard("schemathesis run"):
        cmd = [sys.executable, "-m", "schemathesis.cli", "run", str(OPENAPI),
               "--url", tsapi.BASE_URL,
               "--header", f"Authorization: Bearer {api.token}",
               # Identity: the snapshot's gzip variant answers a fuzzed `Range` with a range of the
               # gzip bytes (contract), which the HTTP library then fails to decode on its own.
               # gzip of the JSON routes is tested in test_edge_http.py.
               "--header", "Accept-Encoding: identity",
               "--exclude-operation-id", "logout",
               "--exclude-checks", ",".join(FUZZ_EXCLUDED_CHECKS),
               "--phases", "examples,coverage,fuzzing,stateful",
               "--max-examples", str(FUZZ_EXAMPLES),
               "--generation-deterministic",
               "--request-timeout", "10",
               "--workers", "1",
               "--no-color",
               "--warnings", "off"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=FUZZ_TIMEOUT_S)
        took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    m = re.search(r"(\d+) generated", out)
    generated = int(m.group(1)) if m else -1
    failures = re.findall(r"^- (ST\d+ [^\n]+)", out, flags=re.M)
    rl.report(capsys, "schemathesis", cases=generated, seconds=round(took, 1), max_examples=FUZZ_EXAMPLES,
              failures=len(failures), kinds=sorted(set(failures)) or "none", exit=proc.returncode)
    tsapi.wait_healthy(10)
    assert proc.returncode == 0, (
        f"schemathesis found problems (exit {proc.returncode}):\n" + _fuzz_excerpt(out))


def _fuzz_excerpt(out: str, limit: int = 4000) -> str:
    """Failures grouped by check (which operations, one reproduction), then the first block."""
    blocks = re.split(r"^_{3,} (.+?) _{3,}$", out, flags=re.M)
    groups: dict[str, list[str]] = {}
    first = ""
    for title, body in zip(blocks[1::2], blocks[2::2]):
        for code in re.findall(r"^- (ST\d+ [^\n]+)", body, flags=re.M) or ["error"]:
            groups.setdefault(code, []).append(title.strip())
        first = first or f"{title.strip()}\n{body.strip()}"
    lines = [f"{code}: {len(ops)} operation(s): {', '.join(ops)}" for code, ops in groups.items()]
    summary = out[out.find("=== SUMMARY"):] if "=== SUMMARY" in out else out[-1500:]
    return ("\n".join(lines) + "\n\nfirst failure:\n" + first[:2500] + "\n\n" + summary[:1500])[:limit]


# --------------------------------------------------------------------------- invalid UTF-8

BAD_UTF8 = {
    "ff-fe": b"\xff\xfe",
    "lone-continuation": b"\x80",
    "overlong-slash": b"\xc0\xaf",
    "overlong-nul": b"\xc0\x80",
    "encoded-surrogate": b"\xed\xa0\x80",
    "truncated-3-byte": b"\xe2\x82",
    "5-byte-form": b"\xf8\x88\x80\x80\x80",
    "above-10ffff": b"\xf4\x90\x80\x80",
    "latin1-e-acute": b"caf\xe9",
}

BODY_TEMPLATES = {
    "register": b'{"email": "x@@-%s@example.test", "password": "pass@@word-123"}',
    "login": b'{"email": "x@@@example.test", "password": "pass@@word-123"}',
    "create tag": b'{"name": "n@@", "color": "#112233"}',
    "patch tag": b'{"name": "n@@"}',
    "create todo": b'{"title": "t@@", "deadline": "2030-01-01"}',
    "patch todo": b'{"title": "t@@"}',
    "quick-add": b'{"date": "2030-01-01", "text": "a@@ #x"}',
    "push": (b'{"deviceId": "d@@", "operations": [{"opId": "o@@", "entity": "todo", "action": "create", '
             b'"data": {"title": "t@@", "deadline": "2030-01-01"}}]}'),
}


def test_invalid_utf8_in_bodies_queries_paths_and_headers(guarded, capsys):
    api, seed = guarded
    routes = body_routes(seed)
    tried = 0
    for name, (method, path, authed) in routes.items():
        for label, bad in BAD_UTF8.items():
            tmpl = BODY_TEMPLATES[name]
            if b"%s" in tmpl:
                tmpl = tmpl.replace(b"%s", uuid.uuid4().hex[:8].encode())
            for body in (tmpl.replace(b"@@", bad), b'{"' + bad + b'": 1, ' + tmpl[1:]):
                r = send(api, method, path, body, auth=authed)
                tried += 1
                check_reply(r, f"{name} {label}", allowed=(400,))
                assert_error(r, 400, "malformed_json")
        for enc in ("utf-16", "utf-32", "latin-1"):
            text = BODY_TEMPLATES[name].replace(b"@@", b"\xc3\xa9").replace(b"%s", b"abc").decode("utf-8")
            r = send(api, method, path, text.encode(enc), auth=authed)
            tried += 1
            check_reply(r, f"{name} body in {enc}", allowed=(400,))
    # logout ignores its body; it must still not fall over (a throwaway session of the victim)
    throwaway = tsapi.Api(tsapi.login(api.email, api.password).json()["token"])
    r = send(throwaway, "POST", "/api/v1/auth/logout", b'{"x": "\xff\xfe"}')
    tried += 1
    check_reply(r, "logout with invalid UTF-8 body", allowed=(204, 400))

    # queries and paths, percent-encoded and as raw bytes on the request line
    h = bearer(api)
    cases = []
    for enc in ("%FF%FE", "%C0%AF", "%ED%A0%80", "%E2%82", "\xff", "\xc0\xaf"):
        cases += [
            (f"/api/v1/todos?date={enc}", (400,)),
            (f"/api/v1/todos?from={enc}&to=2033-04-30", (400,)),
            (f"/api/v1/todos?from=2033-04-01&to={enc}", (400,)),
            (f"/api/v1/daily-stats?month={enc}", (400,)),
            (f"/api/v1/sync/pull?cursor={enc}", (400,)),
            (f"/api/v1/sync/pull?limit={enc}", (400,)),
            (f"/api/v1/tags/{enc}", (400, 404)),
            (f"/api/v1/todos/{enc}", (400, 404)),
            (f"/api/v1/daily-stats/{enc}", (400, 404)),
            (f"/healthz?delay_ms={enc}", (200,)),
        ]
    for path, allowed in cases:
        r = raw_send("GET", path, h)
        tried += 1
        check_reply(r, f"GET {path!r}", allowed=allowed, json_required=False)
    for path in (f"/api/v1/tags/{seed['tag']['id']}", f"/api/v1/todos/{seed['todo']['id']}"):
        for enc in ("%FF", "\xff"):
            r = raw_send("DELETE", path + enc, h)
            tried += 1
            check_reply(r, f"DELETE {path}{enc!r}", allowed=(400, 404), json_required=False)
    # headers with bytes that are not UTF-8
    hdr_cases = [
        ("GET", "/api/v1/tags", {"Authorization": "Bearer \xff\xfe\xfd"}, b"", (401, 400)),
        ("GET", "/api/v1/tags", {"Authorization": "\xff " + api.token}, b"", (401, 400)),
        ("PATCH", f"/api/v1/todos/{seed['todo']['id']}", {**h, "If-Match": "\xff\xfe",
                                                         "Content-Type": "application/json"},
         b'{"title": "if-match probe"}', (400, 412)),
        ("DELETE", f"/api/v1/todos/{seed['todo']['id']}", {**h, "If-Match": '"\xc0\xaf"'}, b"", (400, 412)),
        ("POST", "/api/v1/todos", {**h, "Content-Type": "application/json; charset=\xff"},
         b'{"title": "ct probe", "deadline": "2030-01-01"}', (400, 415)),
        ("GET", "/api/v1/tags", {**h, "X-Request-Id": "\xff\xfe", "User-Agent": "\xc0\xaf"}, b"", (200,)),
    ]
    for method, path, hdrs, body, allowed in hdr_cases:
        r = raw_send(method, path, hdrs, body)
        tried += 1
        check_reply(r, f"{method} {path} headers {hdrs}", allowed=allowed)
    rl.report(capsys, "invalid UTF-8", inputs=tried, routes=len(routes) + 1 + len(read_routes(seed)),
              server_errors=0, data_changed=False)


# --------------------------------------------------------------------------- deep nesting

def _deep(kind: str, depth: int) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    if kind == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'[{"a":' * (depth // 2) + b"1" + b"}]" * (depth // 2)


FIELD_OF = {"register": "email", "login": "email", "create tag": "name", "patch tag": "name",
            "create todo": "title", "patch todo": "title", "quick-add": "text", "push": "operations"}


def test_deeply_nested_json_on_every_body_route(guarded, capsys, make_client):
    api, seed = guarded
    tried = 0
    for name, (method, path, authed) in body_routes(seed).items():
        for kind in ("array", "object", "mixed"):
            for depth in (1_000, 100_000):
                nest = _deep(kind, depth)
                bodies = [
                    nest,  # the whole body
                    b'{"' + FIELD_OF[name].encode() + b'": ' + nest + b', "password": "x-password-1", '
                    b'"color": "#000000", "deadline": "2030-01-01", "date": "2030-01-01", "deviceId": "d"}',
                ]
                for body in bodies:
                    r = send(api, method, path, body, auth=authed, timeout=30)
                    tried += 1
                    check_reply(r, f"{name} {kind} depth {depth}", allowed=(400, 413, 422))
    # deep nesting in fields the server ignores: a scratch user, where acceptance is fine
    scratch = make_client()
    for kind in ("array", "object", "mixed"):
        nest = _deep(kind, 100_000)
        r = send(scratch, "POST", "/api/v1/todos",
                 b'{"title": "deep junk", "deadline": "2030-01-01", "junk": ' + nest + b"}", timeout=30)
        tried += 1
        check_reply(r, f"ignored field {kind}", allowed=(201, 400, 413, 422))
        r = send(scratch, "POST", "/api/v1/sync/push",
                 b'{"deviceId": "d", "operations": [{"opId": "' + uuid.uuid4().hex.encode() + b'", "entity": "todo", '
                 b'"action": "create", "data": {"title": "deep op", "deadline": "2030-01-01", "x": ' + nest + b"}}]}",
                 timeout=30)
        tried += 1
        check_reply(r, f"push ignored field {kind}", allowed=(200, 400, 413, 422))
    titles = [t["title"] for t in synclib.fresh_state(scratch).todos.values()]
    assert set(titles) <= {"deep junk", "deep op"}, titles
    rl.report(capsys, "deep nesting", inputs=tried, max_depth=100_000, server_errors=0, data_changed=False)


# --------------------------------------------------------------------------- numbers and ids

HUGE_INTS = ["9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
             "123456789012345678901234567890", "-9223372036854775808", "-9223372036854775809"]
BAD_ID_SEGMENTS = ["0", "-1", "-0", "00", *HUGE_INTS, "1e3", "1.5", "1.0", "0x10", "NaN", "Infinity", "-Infinity",
                   "%20", "1%20", "%2B%2B1", "1_000", "%D9%A1%D9%A2%D9%A3", "%EF%BC%91%EF%BC%92", "true", "null", "[1]", "%7B%7D"]
BAD_NUMBERS = ["1e400", "-1e400", "1e308", "9223372036854775808", "-9223372036854775809",
               "123456789012345678901234567890", "2.5", "-1", "0.0000001", '"3"', "[3]", "{}", "true", "null"]


def test_huge_negative_zero_and_malformed_numbers_and_ids(guarded, capsys):
    api, seed = guarded
    h = bearer(api)
    tried = 0
    own_tag, own_todo = seed["tag"]["id"], seed["todo"]["id"]
    # ids in paths: never 5xx, never another record
    for kind in ("tags", "todos"):
        for seg in BAD_ID_SEGMENTS:
            for method, body in (("GET", b""), ("PATCH", b'{"title": "id probe", "name": "id probe"}'),
                                 ("DELETE", b"")):
                hdrs = {**h, "Content-Type": "application/json"} if body else h
                r = raw_send(method, f"/api/v1/{kind}/{seg}", hdrs, body)
                tried += 1
                check_reply(r, f"{method} /{kind}/{seg}", allowed=(400, 404), json_required=False)
        own = own_tag if kind == "tags" else own_todo
        for seg in (f"0{own}", f"00{own}", f"+{own}", f"%2B{own}", f"{own}.0", f"{own}e0", f"{own}%20", f"%20{own}",
                    f"{own}%00", f"{own}abc", f"-{own}", f"{own}{'0' * 30}"):
            r = raw_send("GET", f"/api/v1/{kind}/{seg}", h)
            tried += 1
            check_reply(r, f"GET /{kind}/{seg}", allowed=(200, 400, 404), json_required=False)
            if r.status_code == 200:
                assert r.json()["id"] == own, f"/{kind}/{seg} answered another record: {r.text[:200]}"
    # numbers in bodies
    todo_path = f"/api/v1/todos/{own_todo}"
    for num in BAD_NUMBERS:
        is_string = num.startswith('"')
        for field in ("difficulty", "estimatedTime", "tagId"):
            if field == "tagId" and num == "null":
                continue  # a valid request (no tag), not a hostile one
            for method, path, extra in (("POST", "/api/v1/todos", '"title": "num probe", "deadline": "2030-01-01", '),
                                        ("PATCH", todo_path, "")):
                body = ("{" + extra + f'"{field}": {num}' + "}").encode()
                r = send(api, method, path, body)
                tried += 1
                check_reply(r, f"{method} {path} {field}={num}", allowed=(400, 422))
        for field in ("isCompleted", "deadline", "title"):
            if (field == "title" and is_string) or (field == "isCompleted" and num == "true"):
                continue  # valid values, not hostile ones
            r = send(api, "PATCH", todo_path, ("{" + f'"{field}": {num}' + "}").encode())
            tried += 1
            check_reply(r, f"PATCH todo {field}={num}", allowed=(400, 422))
        r = send(api, "PATCH", f"/api/v1/tags/{own_tag}", ('{"color": ' + num + "}").encode())
        tried += 1
        check_reply(r, f"PATCH tag color={num}", allowed=(400, 422))
        # push: numbers as id / baseVersion of an update of the victim's todo.  The update writes
        # the todo's current title, so even where the server may accept it (a baseVersion above
        # the current version is not stale) nothing changes.
        same = json.dumps(seed["todo"]["title"])
        for op in (f'{{"opId": "{uuid.uuid4()}", "entity": "todo", "action": "update", "id": {num}, '
                   f'"data": {{"title": {same}}}}}',
                   f'{{"opId": "{uuid.uuid4()}", "entity": "todo", "action": "delete", "id": {num}}}',
                   f'{{"opId": "{uuid.uuid4()}", "entity": "todo", "action": "update", "id": {own_todo}, '
                   f'"baseVersion": {num}, "data": {{"title": {same}}}}}'):
            body = ('{"deviceId": "num", "conflictPolicy": "reject", "operations": [' + op + "]}").encode()
            r = send(api, "POST", "/api/v1/sync/push", body)
            tried += 1
            check_reply(r, f"push {op}", allowed=(200, 400, 422))
        for bad_env in ([] if is_string else [f'{{"deviceId": {num}, "operations": []}}']) + [
                f'{{"deviceId": "d", "operations": {num}}}']:
            r = send(api, "POST", "/api/v1/sync/push", bad_env.encode())
            tried += 1
            check_reply(r, f"push envelope {bad_env}", allowed=(200, 400, 422))
            if r.status_code == 200:
                assert all(x["status"] == "rejected" for x in r.json()["results"]), f"push envelope {bad_env}: {r.text}"
        if not is_string:
            r = send(api, "POST", "/api/v1/todos/quick-add", ('{"date": "2030-01-01", "text": ' + num + "}").encode())
            tried += 1
            check_reply(r, f"quick-add text={num}", allowed=(400, 422))
    # numbers in queries
    for q in ["limit=0", "limit=-1", "limit=1001", "limit=1e3", "limit=1.0", "limit=%2B5", "limit= 5",
              *[f"limit={x}" for x in HUGE_INTS], "limit=", "limit=5&limit=6"]:
        r = raw_send("GET", f"/api/v1/sync/pull?{q}", h)
        tried += 1
        check_reply(r, f"pull {q}", allowed=(200, 400))
        if q in ("limit=",):
            continue
        if r.status_code == 200:
            assert q in ("limit=%2B5", "limit=5&limit=6", "limit=1.0", "limit=1e3", "limit= 5"), f"pull {q}: {short(r)}"
    for q in ["month=99999-01", "month=2033-13", "month=0000-01", "month=-2033-01", "month=2033-1",
              "month=203301", "month=1e3"]:
        r = raw_send("GET", f"/api/v1/daily-stats?{q}", h)
        tried += 1
        check_reply(r, f"daily-stats {q}", allowed=(400,))
    for d in ["99999-01-01", "2033-02-30", "0000-00-00", "1999-12-31", "3000-01-01", "2033-4-5", "20330405",
              "-2033-04-05", "2033-04-05T00:00:00Z"]:
        for path in (f"/api/v1/daily-stats/{d}", f"/api/v1/todos?date={d}", f"/api/v1/todos?from={d}&to=2033-04-30"):
            r = raw_send("GET", path, h)
            tried += 1
            check_reply(r, f"GET {path}", allowed=(400, 404))
    for q in [f"delay_ms={x}" for x in (*HUGE_INTS, "-1", "1e9", "0")]:
        t0 = time.monotonic()
        r = raw_send("GET", f"/healthz?{q}", {})
        tried += 1
        check_reply(r, f"healthz {q}", allowed=(200,))
        assert time.monotonic() - t0 < 2, f"/healthz?{q} slept"
    rl.report(capsys, "numbers and ids", inputs=tried, server_errors=0, data_changed=False)


# --------------------------------------------------------------------------- 10 MB bodies

def test_ten_megabyte_bodies_on_every_body_route_413(guarded, capsys):
    api, seed = guarded
    throwaway = tsapi.Api(tsapi.login(api.email, api.password).json()["token"])
    routes = dict(body_routes(seed))
    routes["logout"] = ("POST", "/api/v1/auth/logout", True)
    filler = b'{"title": "' + b"x" * (10 * MB) + b'", "deadline": "2030-01-01"}'
    tried = 0
    t0 = time.monotonic()
    for name, (method, path, authed) in routes.items():
        hdrs = {"Content-Type": "application/json"}
        if authed:
            hdrs.update(bearer(throwaway if name == "logout" else api))
        for chunked in (False, True):
            r = raw_send(method, path, hdrs, filler, chunked=chunked, retry_429=path.startswith("/api/v1/auth/"),
                         timeout=30)
            tried += 1
            check_reply(r, f"{name} 10 MB ({'chunked' if chunked else 'content-length'})", allowed=(413,))
            assert_error(r, 413, "payload_too_large")
    # 10 MB elsewhere in the request: a query string and a header
    r = raw_send("GET", "/api/v1/tags?x=" + "a" * (10 * MB), bearer(api), timeout=30)
    tried += 1
    check_reply(r, "10 MB query string", allowed=(400, 414), json_required=False)
    r = raw_send("GET", "/api/v1/tags", {**bearer(api), "X-Big": "b" * (10 * MB)}, timeout=30)
    tried += 1
    check_reply(r, "10 MB header", allowed=(400, 431), json_required=False)
    assert throwaway.get("/tags").status_code == 200, "a rejected 10 MB logout still revoked the token"
    rl.report(capsys, "10 MB bodies", inputs=tried, megabytes_sent=tried * 10, seconds=round(time.monotonic() - t0, 1),
              all_413=True)


# --------------------------------------------------------------------------- slow clients

SLOW_CONNS = 24
SLOW_DEADLINE_S = 13.0


def _open_slow(kind: str, api: tsapi.Api) -> socket.socket:
    s = tsapi.raw_connect(timeout=SLOW_DEADLINE_S + 2)
    host = tsapi.BASE_URL.split("//", 1)[1]
    if kind == "header":
        s.sendall(f"GET /api/v1/tags HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {api.token}\r\nX-Slow: ".encode())
    elif kind == "body":
        s.sendall((f"POST /api/v1/todos HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {api.token}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode() + b'{"title": "slo')
    elif kind == "request-line":
        s.sendall(b"GET /api/v1/ta")
    else:  # auth body
        s.sendall((f"POST /api/v1/auth/login HTTP/1.1\r\nHost: {host}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n").encode() + b'{"email": "')
    return s


def _wait_closed(s: socket.socket, t_open: float) -> tuple[float, bytes]:
    """Seconds until the server closed the connection (EOF or reset), and what it sent."""
    got = b""
    while True:
        remaining = SLOW_DEADLINE_S - (time.monotonic() - t_open)
        if remaining <= 0:
            return float("inf"), got
        s.settimeout(remaining)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return float("inf"), got
        except (ConnectionResetError, BrokenPipeError, OSError):
            return time.monotonic() - t_open, got
        if not chunk:
            return time.monotonic() - t_open, got
        got += chunk


def test_slow_clients_are_cut_off_and_block_nobody(guarded, capsys):
    api, seed = guarded
    kinds = ["header", "body", "request-line", "auth-body"]
    socks = []
    t_open = time.monotonic()
    for i in range(SLOW_CONNS):
        socks.append((kinds[i % len(kinds)], _open_slow(kinds[i % len(kinds)], api)))
    try:
        # While they stall, everyone else is served at once (nginx buffers; no responder waits).
        served = 0
        slowest = 0.0

        def one(k):
            local = tsapi.Api(api.token)
            t0 = time.monotonic()
            r = local.get("/tags") if k % 2 else local.post("/todos", {"title": "", "deadline": "x"})
            return r, time.monotonic() - t0

        for _ in range(3):
            with cf.ThreadPoolExecutor(16) as ex:
                for r, took in ex.map(one, range(32)):
                    assert r.status_code in (200, 422), short(r)
                    slowest = max(slowest, took)
                    served += 1
            time.sleep(1.0)
        assert slowest < 2.0, f"a normal request took {slowest:.1f}s while slow clients stalled"
        closed = []
        with cf.ThreadPoolExecutor(len(socks)) as ex:
            futs = [(kind, ex.submit(_wait_closed, s, t_open)) for kind, s in socks]
            for kind, fut in futs:
                when, got = fut.result()
                closed.append((kind, when, got[:120]))
    finally:
        for _, s in socks:
            try:
                s.close()
            except OSError:
                pass
    never = [(k, g) for k, w, g in closed if w == float("inf")]
    assert not never, f"{len(never)} stalled connection(s) still open after {SLOW_DEADLINE_S}s: {never[:4]}"
    for kind, when, got in closed:
        if got:
            status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else None
            assert status in (400, 408), f"{kind}: stalled connection answered {got!r}"
    tsapi.wait_healthy(5)
    rl.report(capsys, "slow clients", stalled_connections=len(closed), cut_off_after_s=
              f"{min(w for _, w, _ in closed):.1f}-{max(w for _, w, _ in closed):.1f}",
              normal_requests_meanwhile=served, slowest_normal_s=round(slowest, 2))


# --------------------------------------------------------------------------- header and path tricks

def test_header_and_path_tricks(guarded, capsys, other_client):
    api, seed = guarded
    h = bearer(api)
    jh = {**h, "Content-Type": "application/json"}
    own_todo, own_tag = seed["todo"]["id"], seed["tag"]["id"]
    other_todo = other_client.create_todo(title="other user's todo")
    noop_patch = json.dumps({"title": seed["todo"]["title"], "name": seed["tag"]["name"]}).encode()
    tried = 0

    def go(method, path, headers, body=b"", allowed=None, json_required=True, **kw):
        nonlocal tried
        r = raw_send(method, path, headers, body, **kw)
        tried += 1
        if r.status_code == 501:  # only for transfer codings nginx does not implement
            assert "Transfer-Encoding" in str(headers), f"{method} {path}: unexpected 501"
            assert_error(r, 501)
            return r
        return check_reply(r, f"{method} {path} {headers if isinstance(headers, list) else ''}", allowed=allowed,
                           json_required=json_required)

    # request smuggling / framing
    go("POST", "/api/v1/todos", {**jh, "Content-Length": "5"}, b'{"title": "smuggled", "deadline": "2030-01-01"}',
       allowed=(400,), chunked=True)
    go("POST", "/api/v1/todos", [*jh.items(), ("Content-Length", "2"), ("Content-Length", "40")], b"{}",
       allowed=(400,), content_length=False)
    go("POST", "/api/v1/todos", {**jh, "Content-Length": "-1"}, b"{}", allowed=(400,), content_length=False)
    go("POST", "/api/v1/todos", {**jh, "Transfer-Encoding": "gzip, chunked"}, b"0\r\n\r\n", allowed=(400, 501),
       content_length=False)
    go("POST", "/api/v1/todos", {**jh, "Transfer-Encoding": "chunked, identity"}, b"0\r\n\r\n", allowed=(400, 501),
       content_length=False)
    smuggle = (b'0\r\n\r\nDELETE /api/v1/todos/' + str(own_todo).encode() + b' HTTP/1.1\r\nHost: x\r\n'
               b'Authorization: Bearer ' + api.token.encode() + b'\r\n\r\n')
    go("POST", "/api/v1/todos", {**jh, "Transfer-Encoding": "chunked"}, smuggle, allowed=(400, 422),
       content_length=False)
    # ambiguous or forged identity and method
    go("GET", f"/api/v1/todos/{own_todo}", [("Authorization", f"Bearer {api.token}"),
                                            ("Authorization", f"Bearer {other_client.token}")], allowed=(400, 401))
    go("GET", f"/api/v1/todos/{other_todo['id']}", [("Authorization", f"Bearer {api.token}"),
                                                    ("Authorization", f"Bearer {other_client.token}")],
       allowed=(400, 401))
    for hdr in ("X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"):
        r = go("GET", f"/api/v1/todos/{own_todo}", {**h, hdr: "DELETE"}, allowed=(200,))
        assert r.json()["id"] == own_todo
        go("POST", f"/api/v1/todos/{own_todo}", {**jh, hdr: "PATCH"}, b'{"title": "override"}', allowed=(405,))
    for hdr in ("X-Original-URL", "X-Rewrite-URL", "X-Forwarded-Uri"):
        r = go("GET", "/api/v1/tags", {**h, hdr: f"/api/v1/todos/{other_todo['id']}"}, allowed=(200,))
        assert "other user's todo" not in r.text
    for hdr, val in (("X-Forwarded-For", "127.0.0.1"), ("X-Real-IP", "10.0.0.1"), ("Forwarded", "for=1.2.3.4"),
                     ("X-User-Id", str(other_client.user["id"])), ("X-Forwarded-Host", "evil.example"),
                     ("Host", "evil.example"), ("Host", "127.0.0.1:1")):
        r = go("GET", f"/api/v1/todos/{other_todo['id']}", {**h, hdr: val}, allowed=(404,))
        assert "other user's todo" not in r.text
    # malformed header syntax
    go("GET", "/api/v1/tags", {**h, "X-Fold": "a\r\n Injected: b"}, allowed=(400,))
    go("GET", "/api/v1/tags", {**h, "X-Nul": "a\x00b"}, allowed=(400,))
    go("GET", "/api/v1/tags", {**h, "Bad Name": "x"}, allowed=(200, 400))
    go("GET", "/api/v1/tags", {**h, "X-Big": "b" * 20000}, allowed=(400,))
    go("GET", "/api/v1/tags", [*h.items(), *[(f"X-H{i}", "v") for i in range(300)]], allowed=(200, 400))
    go("GET", "/api/v1/tags", {"Authorization": f"bearer {api.token}"}, allowed=(200, 401))
    go("GET", "/api/v1/tags", {"Authorization": f"Bearer  {api.token}"}, allowed=(200, 401))
    go("GET", "/api/v1/tags", {"Authorization": f"Bearer {api.token}\t"}, allowed=(200, 401))
    go("GET", "/api/v1/tags", {"Authorization": "Bearer " + "A" * 15000}, allowed=(401, 400))
    # content negotiation tricks on writes: never applied
    go("PATCH", f"/api/v1/todos/{own_todo}", {**h, "Content-Type": "application/json; charset=latin1"},
       b'{"title": "charset probe"}', allowed=(415,))
    go("PATCH", f"/api/v1/todos/{own_todo}", {**h, "Content-Type": "application/jsonx"},
       b'{"title": "ctype probe"}', allowed=(415,))
    go("PATCH", f"/api/v1/todos/{own_todo}", {**h, "Content-Type": "text/json"}, b'{"title": "ctype probe"}',
       allowed=(415,))
    import gzip as _gzip
    go("PATCH", f"/api/v1/todos/{own_todo}", {**jh, "Content-Encoding": "gzip"},
       _gzip.compress(b'{"title": "gzip probe"}'), allowed=(400, 415))
    go("PATCH", f"/api/v1/todos/{own_todo}", {**jh, "If-Match": '"1", W/"0", *garbage'}, b'{"title": "im probe"}',
       allowed=(412,))
    go("DELETE", f"/api/v1/todos/{own_todo}", {**h, "If-Match": '"0"'}, allowed=(412,))
    go("DELETE", f"/api/v1/tags/{own_tag}", {**h, "If-Match": "W/\"-1\""}, allowed=(412,))
    # request-line tricks
    go("get", "/api/v1/tags", h, allowed=(400, 405), json_required=False)
    go("GETS", "/api/v1/tags", h, allowed=(400, 405), json_required=False)
    go("TRACE", "/api/v1/tags", h, allowed=(405,), json_required=False)
    go("CONNECT", "/api/v1/tags", h, allowed=(400, 405), json_required=False)
    go("OPTIONS", "/api/v1/tags", h, allowed=(200, 204, 404, 405), json_required=False)
    go("GET", "http://evil.example/api/v1/tags", h, allowed=(200, 400))
    go("GET", "/api/v1/tags /x", h, allowed=(400,), json_required=False)
    go("GET", "*", h, allowed=(400, 404), json_required=False)
    # path tricks: a client error, or the victim's own data — never anything else
    paths = [
        "//api/v1/tags", "/api/v1//tags", "/api/v1/./tags", "/api/v1/x/../tags", "/API/V1/TAGS", "/api/v1/tags;x=1",
        "/api/v1/Tags", f"/api/v1/tags/{own_tag}/", f"/api/v1/tags%2F{own_tag}", f"/api/v1/%74ags/{own_tag}",
        f"/api/v1/tags/{own_tag}#frag", f"/api/v1/tags/{own_tag}?id={other_todo['id']}",
        f"/api/v1/tags\\{own_tag}", "/api/v1/tags/%00", "/api/v1/tags/%2e%2e", "/api/v1/tags/..",
        f"/api/v1/todos/{own_todo}/../{other_todo['id']}", f"/api/v1/todos/{other_todo['id']}%2F..%2F{own_todo}",
        "/api/v1/%2e%2e/%2e%2e/etc/passwd", "/api/v1/..%2f..%2f..%2fetc%2fpasswd", "/api/v1/todos/../../../healthz",
        "/__bench/fastcgi", "/api/../__bench/fastcgi", "/api/v1/..%2F..%2F__bench/fastcgi",
        "/api/v1/%2e%2e/%2e%2e/__bench/fastcgi", "/healthz/../__bench/fastcgi", "/__bench/db", "/__bench/page",
        "/api/../__bench/db", "/api/../__bench/page", "/api/v1/tags/" + "a" * 5000,
        "/api/v1/" + "x/" * 3000, "/api/v1/todos?date=2033-04-05&date=2099-01-01", "/api/v1/todos?date[]=2033-04-05",
        "/api/v1/sync/pull?cursor[$ne]=1", "/api/v1/sync/pull?limit=5&cursor=&cursor=abc",
    ]
    for path in paths:
        r = go("GET", path, h, allowed=(200, 400, 404, 414), json_required=False)
        if r.status_code == 200:
            assert "other user's todo" not in r.text, f"GET {path} answered another user's record"
            assert "__bench" not in path, f"GET {path} reached a benchmark route"
        # Writes through the same paths: a PATCH that writes the current values (a no-op even
        # where a path is an encoding of the victim's own record) and a DELETE whose If-Match
        # cannot match; the baseline then proves nothing changed.
        for method in ("PATCH", "DELETE"):
            if "__bench" in path or "?" in path or path.startswith("*"):
                continue
            if method == "PATCH":
                r = go(method, path, jh, noop_patch, allowed=(200, 400, 404, 405, 414), json_required=False)
            else:
                r = go(method, path, {**h, "If-Match": '"0"'}, allowed=(400, 404, 405, 412, 414), json_required=False)
            if r.status_code == 200:
                assert "other user's todo" not in r.text, f"{method} {path} reached another user's record"
    assert other_client.get_todo(other_todo["id"]) == other_todo, "the other user's todo changed"
    rl.report(capsys, "header and path tricks", inputs=tried, server_errors=0, data_changed=False)


# --------------------------------------------------------------------------- SQL metacharacters

SQL = [
    "'", '"', "`", "\\", "\\'", "';--", "' OR '1'='1", "\" OR \"\"=\"", "1; DROP TABLE users; --",
    "' UNION SELECT password_hash, email FROM users --", "%", "_", "%_%", "$1", "?", ":name", "@@version",
    "/* c */", "#", "-- ", "0x27", "CHAR(39)", "') OR SLEEP(3) -- ", "1' AND SLEEP(3) AND '1'='1",
    "\\0\\n\\r\\Z", "'||(SELECT 1)||'", "x'; SHUTDOWN; --",
]


def test_sql_metacharacters_in_every_string_and_query_parameter(guarded, capsys, make_client, request):
    api, seed = guarded
    h = bearer(api)
    own_todo = seed["todo"]["id"]
    try:
        db = request.getfixturevalue("db")
    except pytest.skip.Exception:
        db = None
    tables_before = db("SHOW TABLES").split() if db else None
    users_before = int(db("SELECT COUNT(*) FROM users").strip()) if db else None
    scratch = make_client()
    target = make_client()  # wrong logins go here: the per-account throttle must not lock the victim
    tried = 0
    slowest = 0.0

    def timed(fn, what, allowed):
        nonlocal tried, slowest
        t0 = time.monotonic()
        r = fn()
        took = time.monotonic() - t0
        slowest = max(slowest, took)
        tried += 1
        assert took < 2.0, f"{what} took {took:.1f}s (an injected SLEEP ran?)"
        return check_reply(r, what, allowed=allowed)

    from urllib.parse import quote
    for p in SQL:
        q = quote(p, safe="")
        # query parameters and path segments of the victim: always a clean 4xx
        for path, allowed in ((f"/api/v1/todos?date={q}", (400,)), (f"/api/v1/todos?from={q}&to=2033-04-30", (400,)),
                              (f"/api/v1/todos?from=2033-04-01&to={q}", (400,)),
                              (f"/api/v1/daily-stats?month={q}", (400,)), (f"/api/v1/sync/pull?cursor={q}", (400,)),
                              (f"/api/v1/sync/pull?limit={q}", (400,)), (f"/api/v1/daily-stats/{q}", (400, 404)),
                              (f"/api/v1/tags/{q}", (400, 404)), (f"/api/v1/todos/{q}", (400, 404)),
                              (f"/healthz?delay_ms={q}", (200,))):
            timed(lambda: raw_send("GET", path, h), f"GET {path}", allowed)
        for method in ("PATCH", "DELETE"):
            timed(lambda: raw_send(method, f"/api/v1/todos/{q}", {**h, "Content-Type": "application/json"},
                                   b'{"title": "x"}' if method == "PATCH" else b""),
                  f"{method} /todos/{p!r}", (400, 404))
        # headers
        timed(lambda: send(api, "PATCH", f"/api/v1/todos/{own_todo}", b'{"title": "if-match probe"}',
                           headers={"If-Match": p.encode("utf-8").decode("latin-1")}),
              f"If-Match {p!r}", (412,))
        timed(lambda: raw_send("GET", "/api/v1/tags", {"Authorization": "Bearer " + p}), f"Bearer {p!r}", (400, 401))
        # the victim's body fields where the value is invalid: nothing applied
        for body in ({"color": p}, {"name": p, "color": p}):
            timed(lambda: api.patch(f"/tags/{seed['tag']['id']}", body), f"PATCH tag {body}", (422,))
        timed(lambda: api.patch(f"/todos/{own_todo}", {"deadline": p}), f"PATCH todo deadline {p!r}", (422,))
        timed(lambda: api.patch(f"/todos/{own_todo}", {"tagId": p}), f"PATCH todo tagId {p!r}", (422,))
        timed(lambda: api.post("/todos", {"title": "x", "deadline": "2030-01-01", "clientId": p}),
              f"create todo clientId {p!r}", (422,))
        timed(lambda: api.post("/todos/quick-add", {"date": p, "text": "x"}), f"quick-add date {p!r}", (422,))
        timed(lambda: api.post("/sync/push", {"deviceId": "d", "conflictPolicy": p, "operations": []}),
              f"push conflictPolicy {p!r}", (422,))
        r = timed(lambda: api.post("/sync/push", {"deviceId": "d", "operations": [
            {"opId": str(uuid.uuid4()), "entity": p, "action": "delete", "id": own_todo},
            {"opId": str(uuid.uuid4()), "entity": "todo", "action": p, "id": own_todo},
            {"opId": str(uuid.uuid4()), "entity": "todo", "action": "delete", "clientId": p},
            {"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
             "data": {"title": "tcid", "deadline": "2030-01-01", "tagClientId": p}}]}),
            f"push ops with {p!r}", (200,))
        assert [x["status"] for x in r.json()["results"]] == ["rejected"] * 4, r.text[:600]
        # a metacharacter-laden e-mail or password is just a wrong login (401; 429 once the
        # account's failure throttle kicks in)
        for email, pw in ((target.email + p, target.password), (target.email, p if len(p) >= 8 else p * 8),
                          (p + target.email, target.password)):
            r = timed(lambda: login_probe(email, pw), f"login {email!r} / {pw!r}", (401, 429))
            if r.status_code == 429:
                assert is_account_throttle(r), short(r)
        # free-text fields of the scratch user: stored and returned literally
        text = f"{p} end"
        rt = timed(lambda: scratch.post("/tags", {"name": text[:50], "color": "#ABCDEF"}), f"tag name {p!r}", (201,))
        assert rt.json()["name"] == text[:50]
        rt2 = timed(lambda: scratch.post("/todos", {"title": text, "raw": p, "deadline": "2030-01-01"}),
                    f"todo title {p!r}", (201,))
        assert rt2.json()["title"] == text and rt2.json()["raw"] == p
        timed(lambda: scratch.post("/todos/quick-add", {"date": "2030-01-02", "text": f"q {p} #{p} @life"}),
              f"quick-add text {p!r}", (201, 422))
        op_id = f"{p} op {uuid.uuid4().hex[:6]}"
        body = {"deviceId": f"{p} device", "operations": [
            {"opId": op_id, "entity": "todo", "action": "create", "data": {"title": f"push {p}", "deadline": "2030-01-03"}}]}
        r1 = timed(lambda: scratch.post("/sync/push", body), f"push opId/deviceId {p!r}", (200,))
        res = r1.json()["results"][0]
        assert res["status"] == "applied" and res["record"]["title"] == f"push {p}", res
        r2 = timed(lambda: scratch.post("/sync/push", body), f"push replay {p!r}", (200,))
        assert r2.json()["results"] == r1.json()["results"], "replay of a metacharacter opId differs"
        upper = {**body, "operations": [{**body["operations"][0], "opId": op_id.upper()}]}
        r3 = timed(lambda: scratch.post("/sync/push", upper), f"push upper-case opId {p!r}", (200,))
        # opIds compare exactly: another case is another operation (a second todo)
        assert r3.json()["results"][0]["id"] != res["id"], "opId not compared exactly"
        # registration with a metacharacter local part / password
        local = re.sub(r"[@\s]", "", p)[:20] or "x"
        email = f"{local}-{uuid.uuid4().hex[:6]}@example.test"
        pw = (p + " password")[:128]
        rr = timed(lambda: tsapi.register(email, pw), f"register {email!r}", (201, 422))
        if rr.status_code == 201:
            rl_ = timed(lambda: tsapi.login(email.upper(), pw), f"login {email!r}", (200,))
            assert rl_.json()["user"]["id"] == rr.json()["user"]["id"]
    # nothing dropped or truncated
    if db:
        assert db("SHOW TABLES").split() == tables_before, "tables changed"
        assert int(db("SELECT COUNT(*) FROM users").strip()) >= users_before, "users disappeared"
    st = synclib.fresh_state(scratch)
    pushed = [t for t in st.todos.values() if t["title"].startswith("push ")]
    assert len(st.tags) == len(SQL) and len(pushed) == 2 * len(SQL)  # each opId, and its upper case
    rl.report(capsys, "SQL metacharacters", payloads=len(SQL), inputs=tried, slowest_s=round(slowest, 2),
              stored_literally=True, tables_intact=True, data_changed=False)
