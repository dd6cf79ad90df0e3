"""openapi.yaml is a valid OpenAPI 3.1 document that code generators read whole.

Needs no stack. The generated Swift client (Tests/OpenAPIClientTests) proves the document
against real responses; these checks keep the shapes that made generators drop fields from
coming back:
- a nullable value is a type array (`type: [integer, "null"]`), never a `oneOf`/`anyOf` with a
  bare `{type: "null"}` branch (swift-openapi-generator 1.14.3 silently drops such
  properties);
- response objects are open to new fields (no `additionalProperties: false`), so a client
  built today still decodes tomorrow's records;
- every route of docs/API.md is in the document, with this round's headers and statuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "openapi.yaml"

ROUTES = {
    "/healthz": {"get"},
    "/api/v1/auth/register": {"post"},
    "/api/v1/auth/login": {"post"},
    "/api/v1/auth/logout": {"post"},
    "/api/v1/account/password": {"post"},
    "/api/v1/account/sessions": {"get"},
    "/api/v1/account/sessions/{id}": {"delete"},
    "/api/v1/account/export": {"get"},
    "/api/v1/account/delete": {"post"},
    "/api/v1/tags": {"get", "post"},
    "/api/v1/tags/{id}": {"get", "patch", "delete"},
    "/api/v1/todos": {"get", "post"},
    "/api/v1/todos/quick-add": {"post"},
    "/api/v1/todos/{id}": {"get", "patch", "delete"},
    "/api/v1/daily-stats": {"get"},
    "/api/v1/daily-stats/{date}": {"get"},
    "/api/v1/sync/pull": {"get"},
    "/api/v1/sync/push": {"post"},
    "/api/v1/sync/live": {"get"},
}
# Authenticated POSTs that ignore Idempotency-Key (docs/API.md, Account): a wrong password there
# must count toward the lockout, which a keyed request's rolled-back transaction would undo.
IGNORE_IDEMPOTENCY_KEY = {"/api/v1/account/password", "/api/v1/account/delete"}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def spec() -> dict:
    return yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))


def walk(node, path=()):
    """Yields (path, mapping) for every mapping in the document."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, path + (str(k),))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (str(i),))


def deref(spec: dict, node):
    while isinstance(node, dict) and set(node) == {"$ref"}:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def test_document_is_valid_openapi_3_1(spec):
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation import OpenAPIV31SpecValidator

    assert spec["openapi"].startswith("3.1.")
    validate(spec, cls=OpenAPIV31SpecValidator)


def test_nullables_are_type_arrays_not_null_branches(spec):
    bad = []
    for path, node in walk(spec):
        for key in ("oneOf", "anyOf"):
            for branch in node.get(key, []) if isinstance(node.get(key), list) else []:
                if isinstance(branch, dict) and branch.get("type") == "null":
                    bad.append("/".join(path + (key,)))
    assert not bad, f"nullable written as a {{type: null}} branch (generators drop it): {bad}"


def test_response_objects_are_open_to_new_fields(spec):
    closed = ["/".join(p) for p, node in walk(spec) if node.get("additionalProperties") is False]
    assert not closed, f"additionalProperties: false makes generated clients reject new fields: {closed}"


def test_every_route_of_the_contract_is_described(spec):
    have = {p: {m for m in ops if m in METHODS} for p, ops in spec["paths"].items()}
    missing = {p: sorted(ms - have.get(p, set())) for p, ms in ROUTES.items() if ms - have.get(p, set())}
    assert not missing, f"routes of docs/API.md missing from openapi.yaml: {missing}"


def test_this_rounds_headers_and_statuses(spec):
    problems = []
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if method not in METHODS:
                continue
            authed = op.get("security", spec.get("security")) != []
            codes = set(op["responses"])
            params = {deref(spec, p)["name"] for p in op.get("parameters", []) + ops.get("parameters", [])}
            where = f"{method.upper()} {path}"
            if authed and "429" not in codes:
                problems.append(f"{where}: no 429 (per-account limits)")
            if "503" not in codes:
                problems.append(f"{where}: no 503")
            if authed and method == "post" and path in IGNORE_IDEMPOTENCY_KEY:
                if "Idempotency-Key" in params:
                    problems.append(f"{where}: ignores Idempotency-Key, but lists it")
                for code in ("422", "504"):
                    if code not in codes:
                        problems.append(f"{where}: no {code}")
            elif authed and method == "post":
                if "Idempotency-Key" not in params:
                    problems.append(f"{where}: no Idempotency-Key")
                for code in ("409", "422", "504"):
                    if code not in codes:
                        problems.append(f"{where}: no {code}")
            if authed and method in ("patch", "delete") and "504" not in codes:
                problems.append(f"{where}: no 504 outcome_unknown")
            for code in ("429", "503"):
                if code in codes:
                    headers = deref(spec, op["responses"][code]).get("headers", {})
                    if "Retry-After" not in headers:
                        problems.append(f"{where}: {code} without Retry-After")
    pull = spec["paths"]["/api/v1/sync/pull"]["get"]
    if "deviceId" not in {deref(spec, p)["name"] for p in pull["parameters"]}:
        problems.append("GET /api/v1/sync/pull: no deviceId")
    if "410" not in pull["responses"]:
        problems.append("GET /api/v1/sync/pull: no 410")
    assert not problems, "\n".join(problems)
