"""openapi.yaml is a valid OpenAPI 3.1 document that code generators read whole.

Needs no stack. The generated Swift client (Tests/OpenAPIClientTests) proves the document
against real responses; these checks keep the shapes that made generators drop fields from
coming back:
- a nullable value is a type array (`type: [integer, "null"]`), never a `oneOf`/`anyOf` with a
  bare `{type: "null"}` branch (swift-openapi-generator 1.14.3 silently drops such
  properties);
- response objects are open to new fields (no `additionalProperties: false`), so a client
  built today still decodes tomorrow's records;
- every route of docs/API.md is in the document, with this round's headers and statuses;
- openapi-python-client (a second generator, Python) generates every response of every route
  but the four noted in `PYTHON_CLIENT_KNOWN_DROPS`: record schemas narrowed with `allOf` must
  stay in the forms it can merge (`const: null` for "this field is null", an `enum` for a
  narrowed error code, and an array narrowed by `minItems` alone, without `type: array` or
  `items`: ErrorBody already says what it is; `prefixItems` instead breaks schemathesis).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
    "/api/v1/account": {"get", "patch"},
    "/api/v1/friends/requests": {"get", "post"},
    "/api/v1/friends/requests/{id}/accept": {"post"},
    "/api/v1/friends/requests/{id}/decline": {"post"},
    "/api/v1/friends/requests/{id}": {"delete"},
    "/api/v1/friends": {"get"},
    "/api/v1/friends/{id}": {"delete"},
    "/api/v1/friends/{id}/todos": {"get"},
    "/api/v1/friends/{id}/daily-stats": {"get"},
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


# openapi-python-client merges an `allOf` into one class and cannot merge a `oneOf` property
# (VersionMismatch's `current`: a tag or a todo) with the narrower `$ref` the 412 bodies put
# beside it (`current` is a LiveTag / LiveTodo). Writing those bodies without the allOf would
# change the committed Swift client, which must stay byte-identical; so these four 412s stay
# out of the Python client until that trade is made (issue 34, item 12).
PYTHON_CLIENT_KNOWN_DROPS = {
    ("patch", "/api/v1/tags/{id}", "412"),
    ("delete", "/api/v1/tags/{id}", "412"),
    ("patch", "/api/v1/todos/{id}", "412"),
    ("delete", "/api/v1/todos/{id}", "412"),
}
# The generator's own settings, not the document's: the snapshot file is bytes to it, and the
# ruff formatting pass is not needed to read the result.
PYTHON_CLIENT_CONFIG = """\
post_hooks: []
content_type_overrides:
  application/vnd.sqlite3: application/octet-stream
"""


def _python_client_generator() -> str:
    exe = Path(sys.executable).parent / "openapi-python-client"
    if not exe.exists():
        pytest.fail(f"openapi-python-client is not installed next to {sys.executable} "
                    "(Tests/integration/requirements.txt; scripts/test.sh installs it)")
    return str(exe)


def test_python_generator_keeps_every_response(spec, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(PYTHON_CLIENT_CONFIG, encoding="utf-8")
    out = tmp_path / "client"
    run = subprocess.run(
        [_python_client_generator(), "generate", "--path", str(OPENAPI), "--output-path", str(out),
         "--meta", "none", "--config", str(config)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    # Schemas it gave up on take every response that uses them along (25 responses before).
    assert "Unable to process schema" not in log, log[-4000:]

    # What it generated: each operation's module names its method and URL and parses each status.
    generated = {}
    for module in (out / "api").rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        m = re.search(r'"method": "(\w+)",\s*"url": f?"([^"]+)"', text)
        if m:
            codes = set(re.findall(r"response\.status_code == (\d{3})", text))
            generated[(m.group(1), m.group(2))] = codes
    dropped = set()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if method not in METHODS:
                continue
            have = generated.get((method, path))
            assert have is not None, f"no operation generated for {method.upper()} {path}"
            dropped |= {(method, path, code) for code in op["responses"] if code not in have}
    assert dropped == PYTHON_CLIENT_KNOWN_DROPS, (
        f"responses openapi-python-client drops: {sorted(dropped - PYTHON_CLIENT_KNOWN_DROPS)}; "
        f"no longer dropped (shrink the list): {sorted(PYTHON_CLIENT_KNOWN_DROPS - dropped)}\n{log[-4000:]}")
    omitted = log.count("response will be omitted")
    assert omitted == len(PYTHON_CLIENT_KNOWN_DROPS), log[-4000:]
