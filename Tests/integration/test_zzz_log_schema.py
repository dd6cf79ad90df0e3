"""One schema for every log line (issue 34, item 10), checked over every line the integration run
wrote: it runs last (pytest takes modules alphabetically), after the lifecycle tests have stopped
and restarted the database and the responders.

Before (main): the 5xx warning named `request.id` with a string `status` where every other line
had `request_id` and a number; a fatal start-up error was a plain `todosync: ...` line inside the
JSON file, as were runsv's `[runsv ...] starting` lines; nginx logged internal paths
(`/__errors/upstream`, `/__live/subscribe/<id>`) as the request's `uri`, and `"status":000` for a
request that ended before any status, which is not JSON.

The files: the responders' (responder-N.log, their stderr with runsv's lines) and nginx's access
log. nginx's error log, MariaDB's and openssl's are those programs' own formats, outside this
schema (docs/OPERATIONS.md, "Logs").
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest

STATE_DIR = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")
pytestmark = pytest.mark.skipif(not STATE_DIR, reason="TODOSYNC_TEST_STATE_DIR is not set")

KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")  # snake_case, or one namespace (db.error)
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}Z|[+-]\d\d:\d\d)$")
LEVELS = {"trace", "debug", "info", "notice", "warning", "error", "critical"}


def check_common(entry: dict, where: str) -> None:
    assert isinstance(entry, dict), where
    assert isinstance(entry.get("ts"), str) and TS.match(entry["ts"]), where
    for key, value in entry.items():
        assert KEY.match(key), f"{where}: key {key!r}"
    if "request_id" in entry:
        assert isinstance(entry["request_id"], str), where
    if "status" in entry:
        assert isinstance(entry["status"], int), f"{where}: status {entry['status']!r} is not a number"
    if "user_id" in entry:
        assert isinstance(entry["user_id"], int), where


def json_lines(path: str):
    """(where, entry) for each line of `path`, failing on one that is not JSON."""
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, start=1):
            where = f"{os.path.basename(path)}:{number}: {line[:200]!r}"
            try:
                yield where, json.loads(line)
            except ValueError:
                raise AssertionError(f"{where}: not JSON") from None


def test_every_responder_line_is_one_json_object_of_the_schema():
    paths = sorted(glob.glob(os.path.join(STATE_DIR, "log", "responder-*.log")))
    assert paths
    seen = 0
    for path in paths:
        for where, entry in json_lines(path):
            check_common(entry, where)
            assert entry.get("level") in LEVELS, where
            assert isinstance(entry.get("logger"), str) and isinstance(entry.get("msg"), str), where
            seen += 1
    assert seen > 100, seen


def test_every_access_log_line_is_one_json_object_naming_the_clients_path():
    path = os.path.join(STATE_DIR, "log", "nginx-access.log")
    internal_seen = 0
    with open(path, "rb") as raw:
        for number, line in enumerate(raw, start=1):
            # nginx's escape=json leaves bytes over 0x7f alone: a raw one (a hostile request line)
            # is not UTF-8, and mtail stopped reading the line at it (its unparsed-lines alert).
            assert max(line, default=0) < 0x80, f"nginx-access.log:{number}: a byte outside ASCII: {line[:200]!r}"
    for where, entry in json_lines(path):
        check_common(entry, where)
        assert isinstance(entry.get("uri"), str) and isinstance(entry.get("internal_uri"), str), where
        # An error page or a handover is internal_uri; the client's path stays uri.
        if entry["internal_uri"]:
            internal_seen += 1
            assert entry["internal_uri"].startswith("/__"), where
            if entry["internal_uri"].startswith(("/__errors/", "/__live/subscribe/")):
                assert entry["uri"] != entry["internal_uri"] or entry["uri"].startswith("/__"), where
    assert internal_seen > 0, "no error page or handover was logged: the check saw nothing to check"
