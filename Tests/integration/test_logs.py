"""Logs (issue 14 item 4): the responder writes one JSON object per line, with a line per request
carrying nginx's request id, the user id, the route pattern, status and duration; nginx's access
log is JSON with the same request id. No token, e-mail address or password is ever written.

Reads the test stack's log files ($TODOSYNC_TEST_STATE_DIR/log): responder-N.log (the responder's
stderr, and runsv's run and finish scripts' JSON lines, logger "runsv") and nginx-access.log
(flushed every second). test_zzz_log_schema.py checks every line the whole run wrote.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from datetime import datetime, timezone

import pytest

import synclib
import tsapi

STATE_DIR = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")
pytestmark = pytest.mark.skipif(not STATE_DIR, reason="TODOSYNC_TEST_STATE_DIR is not set")


def responder_lines() -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(STATE_DIR, "log", "responder-*.log"))):
        with open(path, errors="replace") as f:
            for line in f:
                out.append(json.loads(line))  # every line is one JSON object
    return out


def access_lines() -> list[dict]:
    with open(os.path.join(STATE_DIR, "log", "nginx-access.log"), errors="replace") as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_for(find, what: str, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        found = find()
        if found or time.monotonic() > deadline:
            assert found, f"{what} not found within {timeout}s"
            return found
        time.sleep(0.2)


def test_one_request_is_in_both_logs_with_the_same_id():
    api = tsapi.new_user()
    tag = api.create_tag()
    r = api.get(f"/tags/{tag['id']}")
    assert r.status_code == 200
    request_id = r.headers["X-Request-Id"]

    lines = wait_for(lambda: [e for e in responder_lines() if e.get("request_id") == request_id],
                     "the responder's request line")
    assert len(lines) == 1, lines
    entry = lines[0]
    assert entry["msg"] == "request served" and entry["level"] == "info", entry
    assert entry["user_id"] == api.user["id"], entry
    assert entry["route"] == "/api/v1/tags/:id", entry
    assert entry["method"] == "GET" and entry["status"] == 200, entry
    assert isinstance(entry["duration_ms"], (int, float)) and 0 <= entry["duration_ms"] < 10_000, entry
    assert isinstance(entry["ts"], str) and entry["ts"].endswith("Z"), entry

    access = wait_for(lambda: [e for e in access_lines() if e.get("request_id") == request_id],
                      "nginx's access log line")
    assert len(access) == 1, access
    assert access[0]["status"] == 200 and access[0]["method"] == "GET", access
    assert access[0]["uri"] == f"/api/v1/tags/{tag['id']}", access
    assert access[0]["upstream"].startswith("unix:"), access
    # Both clocks name the same moment (the responder writes UTC with milliseconds itself).
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["ts"]), entry
    logged = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00"))
    assert abs((logged - datetime.fromisoformat(access[0]["ts"])).total_seconds()) < 5, (entry, access)
    assert abs((logged - datetime.now(timezone.utc)).total_seconds()) < 60, entry


def test_hot_list_reads_name_their_user_though_the_read_checks_the_token():
    api = tsapi.new_user()
    api.create_todo(deadline="2030-02-03")
    for path, params, route in (("/todos", {"date": "2030-02-03"}, "/api/v1/todos"),
                                ("/todos", {"date": "2030-02-04"}, "/api/v1/todos"),  # an empty list
                                ("/daily-stats", {"month": "2030-02"}, "/api/v1/daily-stats")):
        r = api.get(path, params=params)
        assert r.status_code == 200, r.text
        request_id = r.headers["X-Request-Id"]
        entry = wait_for(lambda: [e for e in responder_lines() if e.get("request_id") == request_id],
                         "the responder's request line")[0]
        assert entry["route"] == route and entry.get("user_id") == api.user["id"], entry


def test_a_refused_token_logs_no_user_and_the_status():
    r = tsapi.Api("not-a-real-token-0123456789abcdef").get("/tags")
    assert r.status_code == 401
    request_id = r.headers["X-Request-Id"]
    entry = wait_for(lambda: [e for e in responder_lines() if e.get("request_id") == request_id],
                     "the responder's request line")[0]
    assert entry["status"] == 401 and entry["route"] == "/api/v1/tags" and "user_id" not in entry, entry


def test_no_secret_or_email_is_ever_written():
    email = tsapi.unique_email("logcheck")
    password = tsapi.new_password()
    api = tsapi.new_user(email, password)
    login = tsapi.assert_auth_body(tsapi.login(email, password), 200)
    synclib.push(api, [synclib.create_tag_op("secret check")])
    synclib.pull(api)
    bad = tsapi.login(email, password + "-wrong")
    assert bad.status_code == 401
    time.sleep(1.5)  # nginx flushes its access log every second
    texts = []
    for path in glob.glob(os.path.join(STATE_DIR, "log", "responder-*.log")) + [
            os.path.join(STATE_DIR, "log", "nginx-access.log")]:
        with open(path, errors="replace") as f:
            texts.append((path, f.read()))
    for secret in (api.token, login["token"], password, email, email.split("@")[0]):
        for path, text in texts:
            assert secret not in text, f"{path} contains a secret or e-mail address ({secret[:6]}...)"
    # The requests were logged at all (the check above is not vacuous).
    assert any(bad.headers["X-Request-Id"] in text for _, text in texts)
