"""Errors: body shape, malformed JSON (400), wrong JSON types (422), media types (415),
unknown routes (404), wrong methods (405), robustness against hostile bodies, no leaks.

Every assertion of an error goes through tsapi.assert_error, which checks the shape
`{"error": {"code", "message", "details"?}}`, `Content-Type: application/json`, and that the body
mentions no SQL / MariaDB / stack trace / file path.

Assumptions where API.md is silent (a careful REST API's behaviour):
- An empty body, a body that is not UTF-8, or JSON with trailing garbage is "not parseable
  JSON": 400 `malformed_json`.
- A well-formed JSON value that is not an object (array, string, number, null, boolean) where
  an object is expected is "wrong types": 422 `validation_failed` (login excluded: the contract
  makes every login mismatch a 401, so its answer to such a body is left open).
- A body with no Content-Type at all is "a body that is not application/json": 415.
  `application/json` with parameters (charset) or in another letter case is JSON (RFC 9110
  media types are case-insensitive).
- 405 answers carry an `Allow` header listing the route's methods (RFC 9110 requires it).
- Hostile inputs (deep nesting, NUL characters, lone surrogates, 1e400, duplicate keys) get a
  4xx in the error shape or are accepted; never a 5xx.
"""

from __future__ import annotations

import pytest

import tsapi
from tsapi import Api, assert_error, assert_json, short


@pytest.fixture(scope="module")
def shared_records(shared_client):
    tag = shared_client.create_tag(name="errors-tag")
    todo = shared_client.create_todo(title="errors-todo")
    return {"tag": tag["id"], "todo": todo["id"]}


def _target(shared_records, name):
    return {
        "POST tags": ("POST", "/api/v1/tags", True),
        "POST todos": ("POST", "/api/v1/todos", True),
        "PATCH tag": ("PATCH", f"/api/v1/tags/{shared_records['tag']}", True),
        "PATCH todo": ("PATCH", f"/api/v1/todos/{shared_records['todo']}", True),
        "register": ("POST", "/api/v1/auth/register", False),
        "login": ("POST", "/api/v1/auth/login", False),
    }[name]


TARGETS = ["POST tags", "POST todos", "PATCH tag", "PATCH todo", "register", "login"]

MALFORMED = [
    b"{", b'{"title": }', b"{'title': 'x'}", b'{"title": "x",}', b"nul", b"", b'{"title": "x"} trailing',
    b'{"title": "\xff\xfe"}', b"\xef\xbb\xbf\xff{}", b'{"difficulty": NaN}', b'{"title": "x" "deadline": "y"}',
    b"[1, 2", b'{"title": "unterminated}',
]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b)[:24])
@pytest.mark.parametrize("target", TARGETS)
def test_malformed_json_400(shared_client, shared_records, target, body):
    method, path, authed = _target(shared_records, target)
    api = shared_client if authed else Api(None)
    r = api.request(method, path, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "malformed_json")


WRONG_TYPES = [b"[]", b'[{"title": "x", "deadline": "2030-01-01"}]', b'"a string"', b"42", b"null", b"true"]


@pytest.mark.parametrize("body", WRONG_TYPES, ids=lambda b: b.decode()[:20])
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "login"])
def test_json_that_is_not_an_object_422(shared_client, shared_records, target, body):
    method, path, authed = _target(shared_records, target)
    api = shared_client if authed else Api(None)
    r = api.request(method, path, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 422, "validation_failed")


def test_login_with_non_object_json_is_a_client_error():
    r = tsapi.auth_post("login", [])
    assert r.status_code in (400, 401, 422), short(r)
    assert_error(r, r.status_code)


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "application/xml",
                                   "multipart/form-data; boundary=x", None],
                         ids=["text", "form", "xml", "multipart", "missing"])
@pytest.mark.parametrize("target", TARGETS)
def test_body_that_is_not_application_json_415(shared_client, shared_records, target, ctype):
    method, path, authed = _target(shared_records, target)
    api = shared_client if authed else Api(None)
    body = b'{"title": "x", "deadline": "2030-01-01", "name": "n", "color": "#000000"}'
    r = api.request(method, path, data=body, headers={"Content-Type": ctype})
    if ctype is None:
        assert "Content-Type" not in r.request.headers
    assert_error(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("ctype", ["application/json; charset=utf-8", "application/json;charset=UTF-8",
                                   "Application/JSON", "application/json ; charset=utf-8"])
def test_json_content_type_variants_accepted(client, ctype):
    r = client.request("POST", "/todos", data=b'{"title": "ct", "deadline": "2030-01-01"}',
                       headers={"Content-Type": ctype})
    assert r.status_code == 201, short(r)
    tsapi.assert_todo(assert_json(r))


# --------------------------------------------------------------------------- routing

@pytest.mark.parametrize("method,path", [
    ("GET", "/api/v1/nope"), ("POST", "/api/v1/nope"), ("GET", "/api/v1/todo"), ("GET", "/api/v1/tag"),
    ("GET", "/api/v1/todos/1/extra"), ("GET", "/api/v1/tags/1/2"), ("GET", "/api/v2/todos"),
    ("GET", "/api/v1/auth/nope"), ("POST", "/api/v1/auth/delete-account"), ("GET", "/api/v1/users"),
])
def test_unknown_route_404_json(shared_client, method, path):
    r = shared_client.request(method, path)
    assert_error(r, 404, "not_found")


METHOD_CASES = [
    ("PUT", "/api/v1/todos/{todo}", {"GET", "PATCH", "DELETE"}),
    ("POST", "/api/v1/todos/{todo}", {"GET", "PATCH", "DELETE"}),
    ("PUT", "/api/v1/tags/{tag}", {"GET", "PATCH", "DELETE"}),
    ("POST", "/api/v1/tags/{tag}", {"GET", "PATCH", "DELETE"}),
    ("DELETE", "/api/v1/todos", {"GET", "POST"}),
    ("PUT", "/api/v1/todos", {"GET", "POST"}),
    ("PATCH", "/api/v1/tags", {"GET", "POST"}),
    ("DELETE", "/api/v1/tags", {"GET", "POST"}),
    ("GET", "/api/v1/auth/login", {"POST"}),
    ("GET", "/api/v1/auth/register", {"POST"}),
    ("PUT", "/api/v1/auth/register", {"POST"}),
    ("GET", "/api/v1/auth/logout", {"POST"}),
]


@pytest.mark.parametrize("method,path,allowed", METHOD_CASES, ids=[f"{m} {p}" for m, p, _ in METHOD_CASES])
def test_known_route_wrong_method_405(shared_client, shared_records, method, path, allowed):
    path = path.format(**shared_records)
    r = shared_client.request(method, path, {"title": "x"} if method in ("PUT", "POST", "PATCH") else tsapi._MISSING)
    assert_error(r, 405, "method_not_allowed")


@pytest.mark.parametrize("method,path,allowed", METHOD_CASES, ids=[f"{m} {p}" for m, p, _ in METHOD_CASES])
def test_405_lists_allowed_methods(shared_client, shared_records, method, path, allowed):
    path = path.format(**shared_records)
    r = shared_client.request(method, path, {"title": "x"} if method in ("PUT", "POST", "PATCH") else tsapi._MISSING)
    assert r.status_code == 405, short(r)
    listed = {m.strip().upper() for m in r.headers.get("Allow", "").split(",") if m.strip()}
    assert allowed <= listed, f"Allow header {r.headers.get('Allow')!r} must list {sorted(allowed)}"
    assert method not in listed


def test_nginx_405_says_what_the_responder_says(shared_client):
    """One error, one wording: nginx answers TRACE itself (it never reaches a responder), a
    responder answers DELETE on the same route; a client sees the same message and Allow from both."""
    responder = shared_client.request("DELETE", "/api/v1/tags")
    nginx = tsapi.raw_request("TRACE", "/api/v1/tags", {"Authorization": f"Bearer {shared_client.token}"})
    for r in (responder, nginx):
        assert_error(r, 405, "method_not_allowed")
    assert nginx.json()["error"]["message"] == responder.json()["error"]["message"]
    assert nginx.headers.get("Allow") == responder.headers.get("Allow"), (nginx.headers, responder.headers)


def test_healthz_wrong_method_not_2xx(base_url):
    import requests
    r = requests.post(base_url + "/healthz", timeout=tsapi.TIMEOUT)
    assert r.status_code in (404, 405), short(r)
    assert_error(r, r.status_code)


# --------------------------------------------------------------------------- hostile bodies

HOSTILE = {
    "deep-array": b'{"title": ' + b"[" * 100000 + b"]" * 100000 + b', "deadline": "2030-01-01"}',
    "deep-object": b'{"title": ' + b'{"a":' * 50000 + b"1" + b"}" * 50000 + b', "deadline": "2030-01-01"}',
    "nul-char": b'{"title": "a\\u0000b", "deadline": "2030-01-01"}',
    "lone-surrogate": b'{"title": "a\\ud800b", "deadline": "2030-01-01"}',
    "huge-float": b'{"title": "x", "deadline": "2030-01-01", "difficulty": 1e400}',
    "neg-zero": b'{"title": "x", "deadline": "2030-01-01", "difficulty": -0}',
    "exp-int": b'{"title": "x", "deadline": "2030-01-01", "difficulty": 3e0}',
    "huge-int": b'{"title": "x", "deadline": "2030-01-01", "estimatedTime": 123456789012345678901234567890}',
    "dup-keys": b'{"title": "x", "title": "y", "deadline": "2030-01-01"}',
    "long-key": b'{"' + b"k" * 200000 + b'": 1, "title": "x", "deadline": "2030-01-01"}',
    "many-keys": b"{" + b",".join(b'"k%d": %d' % (i, i) for i in range(20000)) + b', "title": "x", "deadline": "2030-01-01"}',
    "big-array-field": b'{"title": "x", "deadline": "2030-01-01", "junk": [' + b",".join([b"1"] * 100000) + b"]}",
    "control-chars": b'{"title": "a\\u0001\\u001f\\u007f b", "deadline": "2030-01-01"}',
    "raw-control-char": b'{"title": "a\x01b", "deadline": "2030-01-01"}',
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_bodies_never_5xx(client, name):
    r = client.request("POST", "/todos", data=HOSTILE[name], headers={"Content-Type": "application/json"})
    assert r.status_code < 500, short(r)
    if r.status_code >= 400:
        assert r.status_code in (400, 413, 422), short(r)
        assert_error(r, r.status_code)
    else:
        assert r.status_code == 201, short(r)
        todo = tsapi.assert_todo(assert_json(r))
        assert client.get_todo(todo["id"]) == todo
    if name == "nul-char" and r.status_code == 201:
        assert r.json()["title"] == "a\x00b"
    # The server is still healthy and the user still works afterwards.
    assert client.get("/tags").status_code == 200
