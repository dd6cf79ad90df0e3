"""Hardening round 4 (issue 34), item 7: the live stream's and the snapshot's edges, through the
real stack (nginx with nchan, responders, MariaDB).

Before, each seen on main:
- logout left that token's live stream open, receiving pokes for up to 10 minutes;
- `HEAD /api/v1/sync/live` was never answered (nginx logged `"status":000`);
- a malformed `Last-Event-ID` got nchan's bare `text/plain` 400 ("Message ID invalid");
- a malformed `Range` on the snapshot got nginx's HTML 416, labelled `Content-Encoding: gzip` on
  the gzip variant.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import requests

import tsapi
from test_live_sync import Stream, streams  # noqa: F401  (the fixture)

STATE_DIR = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")


def test_logout_ends_that_tokens_live_stream(streams):  # noqa: F811
    api = tsapi.new_user()
    stream = streams(api.token)
    assert stream.status == 200
    r = api.post("/auth/logout")
    assert r.status_code == 204, tsapi.short(r)
    assert stream.ended.wait(2), "the stream of a logged-out token stayed open"
    assert streams(api.token).status == 401


def test_head_on_the_live_route_is_answered_at_once():
    api = tsapi.new_user()
    started = time.monotonic()
    r = requests.head(tsapi.API_URL + "/sync/live", timeout=5,
                      headers={"Authorization": f"Bearer {api.token}", "Accept": "text/event-stream"})
    assert r.status_code == 200, r.headers
    assert r.headers["Content-Type"].startswith("text/event-stream")
    assert time.monotonic() - started < 2
    # Without a token it is the 401 a GET gets.
    assert requests.head(tsapi.API_URL + "/sync/live", timeout=5,
                         headers={"Accept": "text/event-stream"}).status_code == 401


@pytest.mark.skipif(not STATE_DIR, reason="TODOSYNC_TEST_STATE_DIR not set")
def test_head_on_the_live_route_logs_a_numeric_status():
    api = tsapi.new_user()
    marker = f"head-{tsapi.unique()}"
    requests.head(tsapi.API_URL + "/sync/live", timeout=5,
                  headers={"Authorization": f"Bearer {api.token}", "Accept": "text/event-stream", "User-Agent": marker})
    log = Path(STATE_DIR) / "log" / "nginx-access.log"
    deadline = time.monotonic() + 5  # flushed every second
    lines: list[dict] = []
    while time.monotonic() < deadline and not lines:
        lines = [json.loads(line) for line in log.read_text().splitlines() if marker in line]
        time.sleep(0.2)
    assert lines and all(line["status"] == 200 for line in lines), lines


@pytest.mark.parametrize("event_id", ["1:[[[", "1:0,1", "99999999999999999999999:0", ":1", "x" * 300])
def test_a_malformed_last_event_id_is_the_contracts_json_400(streams, event_id):  # noqa: F811
    api = tsapi.new_user()
    r = requests.get(tsapi.API_URL + "/sync/live", timeout=5, headers={
        "Authorization": f"Bearer {api.token}", "Accept": "text/event-stream", "Last-Event-ID": event_id})
    tsapi.assert_error(r, 400, "bad_request")


def test_a_well_formed_last_event_id_still_resumes(streams):  # noqa: F811
    """nchan's own ids pass through: a stream reopened with the last id it saw gets the poke
    published while it was away (one is kept a minute)."""
    api = tsapi.new_user()
    first = streams(api.token)
    assert first.status == 200
    api.create_tag(name="one")
    assert first.poke(2) is not None
    # The id nchan wrote before that poke's data line.
    host, port = tsapi.BASE_URL.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"GET /api/v1/sync/live HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                  f"Authorization: Bearer {api.token}\r\n\r\n".encode())
        s.settimeout(0.5)
        seen = b""
        deadline = time.monotonic() + 3
        while b": hi" not in seen and time.monotonic() < deadline:  # subscribed: nchan's greeting
            try:
                seen += s.recv(4096)
            except socket.timeout:
                pass
        api.create_tag(name="two")
        while b"\ndata:" not in seen and time.monotonic() < deadline:
            try:
                seen += s.recv(4096)
            except socket.timeout:
                pass
    ids = [line[3:].strip() for line in seen.decode().split("\n") if line.startswith("id:")]
    assert ids, seen
    api.create_tag(name="three")
    # Read from a socket: the stream has no length and no chunks, so a client library reads to its end.
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"GET /api/v1/sync/live HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                  f"Authorization: Bearer {api.token}\r\nLast-Event-ID: {ids[-1]}\r\n\r\n".encode())
        s.settimeout(0.5)
        data = b""
        deadline = time.monotonic() + 3
        while b"\ndata:" not in data and time.monotonic() < deadline:
            try:
                data += s.recv(4096)
            except socket.timeout:
                pass
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert b"\ndata:" in data, data
